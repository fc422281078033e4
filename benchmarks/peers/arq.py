"""arq: asyncio jobs, one ``arq`` worker process per unit of concurrency.

Settings: arq's defaults (max_jobs 10 per process, poll_delay 0.5 s).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from arq import create_pool
from arq.connections import RedisSettings

from peers._runner import COUNTER, arguments, python_bin, run, version

REDIS = RedisSettings.from_dsn(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))


async def incr(ctx: dict[str, Any]) -> None:
    await ctx["redis"].incr(COUNTER)


class WorkerSettings:
    functions = [incr]  # noqa: RUF012
    redis_settings = REDIS


def main() -> None:
    args = arguments()

    async def enqueue_all(count: int) -> None:
        pool = await create_pool(RedisSettings.from_dsn(args.redis_url))
        for start in range(0, count, 100):
            await asyncio.gather(
                *(pool.enqueue_job("incr") for _ in range(min(100, count - start)))
            )
        await pool.aclose()

    command = [python_bin("arq"), "peers.arq.WorkerSettings"]
    run(
        "arq",
        version("arq", "redis"),
        f"{args.concurrency} x `arq` (max_jobs 10 each)",
        lambda count: asyncio.run(enqueue_all(count)),
        [command for _ in range(args.concurrency)],
        args,
    )


if __name__ == "__main__":
    # Run as the importable module, so task names match what the workers import.
    from peers import arq as this

    this.main()
