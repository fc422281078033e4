"""saq: asyncio jobs, ``saq --workers N`` (one process each).

Settings: saq's defaults (concurrency 10 per process); the io workload raises the
worker's ``concurrency`` (jobs at once per process) to ``--per-process``. The io task
awaits ``asyncio.sleep`` and INCRs through the queue's own async Redis client.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from saq import Queue

from peers._runner import COUNTER, IO_WAIT, arguments, per_process, python_bin, run, version

queue = Queue.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))


async def incr(ctx: dict[str, Any]) -> None:
    await ctx["job"].queue.redis.incr(COUNTER)


async def wait_then_incr(ctx: dict[str, Any]) -> None:
    await asyncio.sleep(IO_WAIT)
    await ctx["job"].queue.redis.incr(COUNTER)


settings = {"queue": queue, "functions": [incr, wait_then_incr], "concurrency": per_process(10)}


def main() -> None:
    args = arguments()
    io = args.workload == "io"
    concurrency = args.per_process if io else 10

    async def enqueue_all(count: int) -> None:
        producer = Queue.from_url(args.redis_url)
        await producer.connect()
        for start in range(0, count, 100):
            batch = min(100, count - start)
            await asyncio.gather(
                *(producer.enqueue("wait_then_incr" if io else "incr") for _ in range(batch))
            )
        await producer.disconnect()

    command = [python_bin("saq"), "peers.saq.settings", "--workers", str(args.concurrency)]
    run(
        "saq",
        version("saq", "redis"),
        f"--workers {args.concurrency} (concurrency {concurrency} each)",
        lambda count: asyncio.run(enqueue_all(count)),
        [command],
        args,
        in_flight=args.concurrency * concurrency,
    )


if __name__ == "__main__":
    # Run as the importable module, so task names match what the workers import.
    from peers import saq as this

    this.main()
