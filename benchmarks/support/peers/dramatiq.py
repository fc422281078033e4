"""Dramatiq with its Redis broker: ``dramatiq`` CLI, one process per unit of concurrency.

Settings: the CLI's defaults (8 worker threads per process), retries off for the actor.
The io workload raises ``--threads`` (worker threads per process), Dramatiq's knob for
actors that wait on I/O.
"""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from peers._runner import (
    COUNTER,
    arguments,
    client,
    python_bin,
    run,
    version,
    wait_then_incr_sync,
)

broker = RedisBroker(url=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
dramatiq.set_broker(broker)


@dramatiq.actor(max_retries=0)
def incr() -> None:
    client().incr(COUNTER)


@dramatiq.actor(max_retries=0)
def wait_then_incr() -> None:
    wait_then_incr_sync()


def main() -> None:
    args = arguments()

    io = args.workload == "io"
    actor = wait_then_incr if io else incr

    def enqueue(count: int) -> None:
        for _ in range(count):
            actor.send()

    command = [python_bin("dramatiq"), "peers.dramatiq", "--processes", str(args.concurrency)]
    threads = args.per_process if io else 8
    if io:
        command += ["--threads", str(threads)]
    run(
        "Dramatiq",
        version("dramatiq", "redis"),
        f"--processes {args.concurrency} --threads {threads}"
        if io
        else f"--processes {args.concurrency} (8 threads each, the default)",
        enqueue,
        [command],
        args,
        in_flight=args.concurrency * threads,
    )


if __name__ == "__main__":
    # Run as the importable module, so task names match what the workers import.
    from peers import dramatiq as this

    this.main()
