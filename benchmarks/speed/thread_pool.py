"""Thread mode's threads alone (rqueue/worker/threads.py) beside the standard library's
way: an event loop keeps ``--at-once`` calls in flight, each sleeping ``--wait-ms`` in a
thread, through ``TaskThreads`` and through a ``ThreadPoolExecutor`` awaited with
``asyncio.wrap_future``. Prints calls/s and the process's CPU microseconds per call
(all threads), alternating the two, ``--rounds`` times each: no Redis, no task, only
the way to a thread and back, which a busy machine blurs less than a worker's run.

    python benchmarks/speed/thread_pool.py
    python benchmarks/speed/thread_pool.py --at-once 10 --wait-ms 0
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import os
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rqueue.worker.threads import TaskThreads

Start = Callable[[], Awaitable[Any]]


async def _keep_in_flight(start: Start, calls: int, at_once: int) -> None:
    left = calls

    async def one_at_a_time() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await start()

    await asyncio.gather(*(one_at_a_time() for _ in range(at_once)))


def _stdlib(loop: asyncio.AbstractEventLoop, at_once: int, call: Callable[[Any], Any]) -> Start:
    pool = ThreadPoolExecutor(at_once, "stdlib")

    def start() -> Awaitable[Any]:
        context = contextvars.copy_context()  # as thread mode runs a task: in its context
        return asyncio.wrap_future(pool.submit(context.run, call, None), loop=loop)

    return start


def _rqueue(loop: asyncio.AbstractEventLoop, at_once: int, call: Callable[[Any], Any]) -> Start:
    """Each call's end resolves its own future here: the coroutines above await one
    (thread mode settles the call itself, with no future: worker/threaded.py)."""
    threads = TaskThreads(loop, at_once, "rqueue", lambda ended: ended.arg.set_result(None))

    def start() -> Awaitable[Any]:
        waiter = loop.create_future()
        threads.run(call, waiter, contextvars.copy_context())
        return waiter

    return start


def measure(name: str, args: argparse.Namespace) -> None:
    wait = args.wait_ms / 1000

    def call(_: Any) -> None:
        time.sleep(wait)

    loop = asyncio.new_event_loop()
    make = _stdlib if name == "ThreadPoolExecutor + wrap_future" else _rqueue
    start = make(loop, args.at_once, call)
    loop.run_until_complete(_keep_in_flight(start, args.at_once * 2, args.at_once))  # warm
    cpu, wall = time.process_time(), time.perf_counter()
    loop.run_until_complete(_keep_in_flight(start, args.calls, args.at_once))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    loop.close()
    print(
        f"  {name}: {args.calls / wall:,.0f} calls/s, {cpu / args.calls * 1e6:.1f} us CPU "
        f"per call (load {os.getloadavg()[0]:.1f})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--at-once", type=int, default=100, help="calls in flight, threads")
    parser.add_argument("--wait-ms", type=float, default=20.0, help="each call sleeps this")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.calls < 1 or args.at_once < 1 or args.wait_ms < 0 or args.rounds < 1:
        parser.error("--calls, --at-once and --rounds must be positive, --wait-ms not negative")
    print(f"{args.calls:,} calls, {args.at_once} at once, each sleeping {args.wait_ms:g} ms")
    for _ in range(args.rounds):
        for name in ("ThreadPoolExecutor + wrap_future", "TaskThreads"):
            measure(name, args)


if __name__ == "__main__":
    main()
