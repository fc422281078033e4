"""rqueue itself, through the same runner as the peers: ``rqueue work --concurrency N``.

Settings: the defaults (``--prefetch 100``), ``--log-level WARNING`` as the peers run quiet.
Runs in the project's own environment, not a separate virtualenv.

The io workload has two variants: ``sync`` (``bench_tasks.wait_then_incr``, a blocking
wait, one task at a time per child: process mode) and ``async``
(``bench_tasks.wait_then_incr_async`` under ``--slots``, up to that many at once per
child). compare.py runs ``async`` only where ``rqueue work`` has ``--slots``.
"""

from __future__ import annotations

import sys
from typing import Any

from peers._runner import arguments, run, version


def main() -> None:
    args = arguments(("default", "sync", "async"))
    slots = args.workload == "io" and args.variant == "async"
    import bench_tasks

    from rqueue.config import Config
    from rqueue.store.default import use
    from rqueue.store.queue import RedisQueue

    use(RedisQueue(Config(redis_url=args.redis_url)))

    job: Any = bench_tasks.incr
    if args.workload == "io":
        job = bench_tasks.wait_then_incr_async if slots else bench_tasks.wait_then_incr

    def enqueue(count: int) -> None:
        for start in range(0, count, 1000):
            job.dispatch_many([()] * min(1000, count - start))

    command = [
        sys.executable,
        "-m",
        "rqueue",
        "work",
        "default",
        "--concurrency",
        str(args.concurrency),
        "--log-level",
        "WARNING",
        *(["--slots", str(args.per_process)] if slots else []),
    ]
    name = "rqueue"
    if args.workload == "io":
        name = (
            f"rqueue (async, --slots {args.per_process})"
            if slots
            else "rqueue (sync, process mode)"
        )
    run(
        name,
        version("rqueue", "redis", "hiredis"),
        f"`rqueue work --concurrency {args.concurrency}"
        + (f" --slots {args.per_process}`" if slots else "`"),
        enqueue,
        [command],
        args,
        in_flight=args.concurrency * (args.per_process if slots else 1),
    )


if __name__ == "__main__":
    main()
