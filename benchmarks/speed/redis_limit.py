"""The raw ceiling: how fast one Python client can run rqueue's scripts on this Redis.

Every rqueue figure can be quoted as a fraction of these: EVALSHA of push.lua and
reserve.lua, one call per round trip and pipelined, from a single redis-py client
(hiredis when installed), plus PING as the bare round-trip rate.

    python benchmarks/speed/redis_limit.py --calls 20000
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import msgpack
import redis
from common import machine_summary, table

from rqueue.encoding.payload import encode
from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import Task
from rqueue.tasks.options import TaskOptions

PIPELINE = 100
BATCH = 100
"""Tasks per reserve call in the batched row: a busy worker's default --prefetch."""


def _payloads(count: int) -> list[bytes]:
    def noop() -> None: ...

    task = Task(noop, TaskOptions(), name="bench_tasks:empty")
    return [encode(task.make_job((), {})) for _ in range(count)]


def _rate(count: int, run: Callable[[], None]) -> float:
    started = time.perf_counter()
    run()
    return count / (time.perf_counter() - started)


class _Recorder:
    """Stands in for a script to learn the KEYS and ARGV that RedisQueue sends it."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.keys: tuple[Any, ...] = ()
        self.args: tuple[Any, ...] = ()

    def __call__(self, client: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        self.keys, self.args = tuple(keys), tuple(args)
        return self.reply

    def queue(self, pipe: Any, keys: Sequence[Any], args: Sequence[Any]) -> None:
        self(pipe, keys, args)

    def send(
        self, wire: Any, keys: Sequence[Any], args: Sequence[Any], reuse: bool = False
    ) -> Callable[[], Any]:
        reply = self(wire, keys, args)
        return lambda: reply


def _script_calls(queue: RedisQueue, payload: bytes) -> tuple[_Recorder, _Recorder]:
    """The exact push and reserve calls rqueue makes, so the ceiling follows the code."""
    scripts = queue.scripts
    real_push, real_reserve = scripts.push, scripts.reserve
    push, reserve = _Recorder(1), _Recorder(msgpack.packb([0, 0]))  # as reserve.lua replies
    try:
        scripts.push, scripts.reserve = push, reserve  # type: ignore[assignment]
        queue.push("limit", [payload])
        queue.reserve("limit", 1, 60_000, 5_000, 15_000, 1)
    finally:
        scripts.push, scripts.reserve = real_push, real_reserve
    return push, reserve


def measure(url: str, calls: int) -> list[tuple[str, float, float]]:
    """Rows of (operation, calls/s, tasks/s)."""
    queue = RedisQueue(Config(redis_url=url))
    client, scripts = queue.client, queue.scripts
    for script in scripts.all():
        client.script_load(script.source)
    payloads = _payloads(calls)
    push, reserve_call = _script_calls(queue, payloads[0])
    push_keys, push_args = push.keys, push.args[:-1]
    reserve_keys = reserve_call.keys
    rows: list[tuple[str, float, float]] = []

    def clear() -> None:
        client.delete(*push_keys, *reserve_keys)

    def ping() -> None:
        for _ in range(calls):
            client.ping()

    ping()  # warm up: connection, scripts cache, CPU frequency
    rate = _rate(calls, ping)
    rows.append(("PING, one per round trip", rate, rate))

    def push_one() -> None:
        for payload in payloads:
            client.evalsha(scripts.push.sha, len(push_keys), *push_keys, *push_args, payload)

    clear()
    rate = _rate(calls, push_one)
    rows.append(("EVALSHA push.lua, 1 task per call", rate, rate))

    def push_pipelined() -> None:
        for start in range(0, calls, PIPELINE):
            pipe = client.pipeline(transaction=False)
            for payload in payloads[start : start + PIPELINE]:
                pipe.evalsha(scripts.push.sha, len(push_keys), *push_keys, *push_args, payload)
            pipe.execute()

    clear()
    rate = _rate(calls, push_pipelined)
    rows.append((f"EVALSHA push.lua, pipelined x{PIPELINE}", rate, rate))

    def reserve(batch: int, pipelined: bool) -> Callable[[], None]:
        args = (batch, *reserve_call.args[1:])
        numkeys = len(reserve_keys)

        def run() -> None:
            if not pipelined:
                for _ in range(calls // batch):
                    client.evalsha(scripts.reserve.sha, numkeys, *reserve_keys, *args)
                return
            for _ in range(0, calls // batch, PIPELINE):
                pipe = client.pipeline(transaction=False)
                for _ in range(PIPELINE):
                    pipe.evalsha(scripts.reserve.sha, numkeys, *reserve_keys, *args)
                pipe.execute()

        return run

    for batch, pipelined in ((1, False), (1, True), (BATCH, False)):
        clear()
        client.rpush(reserve_keys[0], *payloads)
        rate = _rate(calls, reserve(batch, pipelined))
        label = f"EVALSHA reserve.lua, {batch} task{'s' if batch > 1 else ''} per call"
        label += f", pipelined x{PIPELINE}" if pipelined else ""
        rows.append((label, rate / batch, rate))
    clear()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls per measurement")
    args = parser.parse_args()
    with RedisServer() as server:
        print(machine_summary(redis.Redis.from_url(server.url)))
        rows = measure(server.url, args.calls)
    table(("operation", "calls/s", "tasks/s"), rows, "Raw ceiling, single Python client")


if __name__ == "__main__":
    main()
