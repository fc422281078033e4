"""Huey with ``RedisHuey``: ``huey_consumer -k process`` (process workers).

Settings: blocking reads (the RedisHuey default), periodic tasks off (``-n``), quiet.
"""

from __future__ import annotations

import os

from huey import RedisHuey

from peers._runner import COUNTER, arguments, client, python_bin, run, version

huey = RedisHuey("bench", url=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))


@huey.task()
def incr() -> None:
    client().incr(COUNTER)


def main() -> None:
    args = arguments()

    def enqueue(count: int) -> None:
        for _ in range(count):
            incr()

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
    )


if __name__ == "__main__":
    # Run as the importable module, so task names match what the workers import.
    from peers import huey as this

    this.main()
