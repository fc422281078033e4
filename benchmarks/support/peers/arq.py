"""arq: asyncio jobs, one ``arq`` worker process per unit of concurrency.

Settings: arq's defaults (max_jobs 10 per process, poll_delay 0.5 s); the io workload
raises ``max_jobs``, arq's limit on jobs run at once per worker, to ``--per-process``.
The io task awaits ``asyncio.sleep`` and INCRs through ``ctx["redis"]``, the async
pool arq hands every job (as arq's docs do).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from arq import create_pool
from arq.connections import RedisSettings

from peers._runner import COUNTER, IO_WAIT, arguments, per_process, python_bin, run, version

REDIS = RedisSettings.from_dsn(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))


async def incr(ctx: dict[str, Any]) -> None:
    await ctx["redis"].incr(COUNTER)


async def wait_then_incr(ctx: dict[str, Any]) -> None:
    await asyncio.sleep(IO_WAIT)
    await ctx["redis"].incr(COUNTER)


class WorkerSettings:
    functions = [incr, wait_then_incr]  # noqa: RUF012
    redis_settings = REDIS
    max_jobs = per_process(10)


def main() -> None:
    args = arguments()
    io = args.workload == "io"
    jobs = args.per_process if io else 10

    async def enqueue_all(count: int) -> None:
        pool = await create_pool(RedisSettings.from_dsn(args.redis_url))
        for start in range(0, count, 100):
            await asyncio.gather(
                *(
                    pool.enqueue_job("wait_then_incr" if io else "incr")
                    for _ in range(min(100, count - start))
                )
            )
        await pool.aclose()

    command = [python_bin("arq"), "peers.arq.WorkerSettings"]
    run(
        "arq",
        version("arq", "redis"),
        f"{args.concurrency} x `arq` (max_jobs {jobs} each)",
        lambda count: asyncio.run(enqueue_all(count)),
        [command for _ in range(args.concurrency)],
        args,
        in_flight=args.concurrency * jobs,
    )


if __name__ == "__main__":
    # Run as the importable module, so task names match what the workers import.
    from peers import arq as this

    this.main()
