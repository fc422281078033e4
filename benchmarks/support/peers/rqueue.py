"""rqueue itself, through the same runner as the peers: ``rqueue work --concurrency N``.

Settings: the defaults (``--prefetch 100``), ``--log-level WARNING`` as the peers run quiet.
Runs in the project's own environment, not a separate virtualenv.

The io workload has three variants: ``sync`` (``bench_tasks.wait_then_incr``, a blocking
wait, one task at a time per child: process mode), ``threads`` (the same task under
``--threads``, up to that many at once per child) and ``async``
(``bench_tasks.wait_then_incr_async`` under ``--slots``, up to that many at once per
child). compare.py runs the last two only where ``rqueue work`` has the option. Each
variant ending in ``-unpinned`` runs the same with ``--no-pin-cpus``: by default
``rqueue work -c 2`` on 2 CPUs pins its children one to a CPU (worker/cpus.py).
"""

from __future__ import annotations

import sys
from typing import Any

from peers._runner import arguments, run, version


def main() -> None:
    plain = ("default", "sync", "threads", "async")
    args = arguments((*plain, *(f"{variant}-unpinned" for variant in plain)))
    io = args.workload == "io"
    variant = args.variant.removesuffix("-unpinned")
    unpinned = ["--no-pin-cpus"] if variant != args.variant else []
    import bench_tasks

    from rqueue.settings.config import Config
    from rqueue.store.default import use
    from rqueue.store.queue import RedisQueue

    use(RedisQueue(Config(redis_url=args.redis_url)))

    job: Any = bench_tasks.incr
    if io:
        async_ = variant == "async"
        job = bench_tasks.wait_then_incr_async if async_ else bench_tasks.wait_then_incr

    def enqueue(count: int) -> None:
        for start in range(0, count, 1000):
            job.dispatch_many([()] * min(1000, count - start))

    at_once = {"threads": "--threads", "async": "--slots"}.get(variant) if io else None
    mode = [at_once, str(args.per_process)] if at_once else []
    mode += unpinned
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
        *mode,
    ]
    modes = {
        "async": f"async, --slots {args.per_process}",
        "threads": f"sync, --threads {args.per_process}",
    }
    parts = [modes.get(variant, "sync, process mode")] if io else []
    parts += unpinned
    name = f"rqueue ({', '.join(parts)})" if parts else "rqueue"
    run(
        name,
        version("rqueue", "redis", "hiredis"),
        f"`{' '.join(['rqueue work --concurrency', str(args.concurrency), *mode])}`",
        enqueue,
        [command],
        args,
        in_flight=args.concurrency * (args.per_process if at_once else 1),
    )


if __name__ == "__main__":
    main()
