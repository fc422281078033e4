"""Huey with ``RedisHuey``: ``huey_consumer -k process`` (process workers).

Settings: blocking reads (the RedisHuey default), periodic tasks off (``-n``), quiet.
The io workload runs one consumer per process with thread workers (``-k thread -w N``),
which Huey's docs name for I/O-bound tasks.
"""

from __future__ import annotations

import os

from huey import RedisHuey

from peers._runner import (
    COUNTER,
    arguments,
    client,
    python_bin,
    run,
    version,
    wait_then_incr_sync,
)

huey = RedisHuey("bench", url=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))


@huey.task()
def incr() -> None:
    client().incr(COUNTER)


@huey.task()
def wait_then_incr() -> None:
    wait_then_incr_sync()


def main() -> None:
    args = arguments()

    io = args.workload == "io"
    job = wait_then_incr if io else incr

    def enqueue(count: int) -> None:
        for _ in range(count):
            job()

    if io:
        threads = ["-k", "thread", "-w", str(args.per_process), "-n", "-q"]
        run(
            "Huey",
            version("huey", "redis"),
            f"{args.concurrency} consumers, -k thread -w {args.per_process} each",
            enqueue,
            [[python_bin("huey_consumer"), "peers.huey.huey", *threads]] * args.concurrency,
            args,
            in_flight=args.concurrency * args.per_process,
        )
        return

    command = [
        python_bin("huey_consumer"),
        "peers.huey.huey",
        "-k",
        "process",
        "-w",
        str(args.concurrency),
        "-n",
        "-q",
    ]
    run(
        "Huey",
        version("huey", "redis"),
        f"-k process -w {args.concurrency}",
        enqueue,
        [command],
        args,
        in_flight=args.concurrency,
    )


if __name__ == "__main__":
    # Run as the importable module, so task names match what the workers import.
    from peers import huey as this

    this.main()
