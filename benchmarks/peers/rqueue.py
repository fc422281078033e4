"""rqueue itself, through the same runner as the peers: ``rqueue work --concurrency N``.

Settings: the defaults (``--prefetch 100``), ``--log-level WARNING`` as the peers run quiet.
Runs in the project's own environment, not a separate virtualenv.
"""

from __future__ import annotations

import sys

from peers._runner import arguments, run, version


def main() -> None:
    args = arguments()
    import bench_tasks

    from rqueue.config import Config
    from rqueue.store.default import use
    from rqueue.store.queue import RedisQueue

    use(RedisQueue(Config(redis_url=args.redis_url)))

    def enqueue(count: int) -> None:
        for start in range(0, count, 1000):
            bench_tasks.incr.dispatch_many([()] * min(1000, count - start))

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
    ]
    run(
        "rqueue",
        version("rqueue", "redis", "hiredis"),
        f"`rqueue work --concurrency {args.concurrency}`",
        enqueue,
        [command],
        args,
    )


if __name__ == "__main__":
    main()
