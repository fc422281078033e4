"""Dramatiq with its Redis broker: ``dramatiq`` CLI, one process per unit of concurrency.

Settings: the CLI's defaults (8 worker threads per process), retries off for the actor.
"""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from peers._runner import COUNTER, arguments, client, python_bin, run, version

broker = RedisBroker(url=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
dramatiq.set_broker(broker)


@dramatiq.actor(max_retries=0)
def incr() -> None:
    client().incr(COUNTER)


def main() -> None:
    args = arguments()

    def enqueue(count: int) -> None:
        for _ in range(count):
            incr.send()

    command = [python_bin("dramatiq"), "peers.dramatiq", "--processes", str(args.concurrency)]
    run(
        "Dramatiq",
        version("dramatiq", "redis"),
        f"--processes {args.concurrency} (8 threads each, the default)",
        enqueue,
        [command],
        args,
    )


if __name__ == "__main__":
    # Run as the importable module, so task names match what the workers import.
    from peers import dramatiq as this

    this.main()
