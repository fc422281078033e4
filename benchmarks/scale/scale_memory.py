"""Redis memory per task: rqueue's pending, delayed, reserved and failed tasks, the
peers' pending ones, and where each byte of one rqueue pending task goes.

Every figure is ``INFO memory`` ``used_memory`` (less the Lua script cache) after
minus before, divided by the count, on a Redis flushed before each measurement and with
no other client holding a connection at either reading (a connection's buffers count in
``used_memory``):

- pending: ``bench_tasks.incr`` (compare.py's task) queued with ``dispatch_many``;
- delayed: the same, due in an hour;
- reserved: queued, then reserved with ``RedisQueue.reserve`` (1,000 per call, as a
  worker with ``--prefetch 1000`` would) and never acked;
- failed: ``bench_tasks.fail_at_once`` (raises, ``tries=1``) run by a real
  ``rqueue work``, so each record holds a real traceback.

The peers (compare.py's, each from its own virtualenv under ``benchmarks/.venvs``)
enqueue their ``incr`` task through their own API (``peers/<name>.py --enqueue-only``),
and so does rqueue through its runner, for a like-for-like row.

The breakdown then reads one pending rqueue task field by field (the payload's msgpack
entries), and each key with ``MEMORY USAGE`` and ``OBJECT ENCODING``, and prints what
the goal of 150 bytes per pending task would need to drop.

    python benchmarks/scale/scale_memory.py                      # 50,000 tasks per figure
    python benchmarks/scale/scale_memory.py --tasks 5000 --only rqueue,huey
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import msgpack
import redis
from common import SUPPORT_DIR, machine_summary, rqueue_work, table, wait_until
from peer_envs import PEERS, install, peer_pythonpath, python_of

from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.keys import QueueKeys
from rqueue.store.queue import RedisQueue

QUEUE = "default"
CHUNK = 1000
"""Calls per ``dispatch_many`` and tasks per reserve call."""
KEYS = QueueKeys.for_queue(QUEUE)
GOAL = 150
"""Bytes per pending task: issue #16's goal, about the smallest peer's (Huey's)."""


@dataclass(frozen=True)
class Row:
    system: str
    state: str
    tasks: int
    bytes_per_task: float


def used_memory(client: redis.Redis) -> int:
    """``used_memory`` less the Lua script cache: each system loads its scripts once per
    server (FLUSHALL keeps them), a cost that is not per task."""
    memory = client.info("memory")
    return int(memory["used_memory"]) - int(memory.get("used_memory_scripts", 0))


def after(client: redis.Redis) -> int:
    """``used_memory`` once Redis has dropped every other connection: it may read this
    request before it notices that a process which just exited closed its sockets."""
    wait_until(lambda: len(client.client_list()) == 1, timeout=30)
    return used_memory(client)


def fresh(client: redis.Redis) -> int:
    """Flush synchronously (no lazy free still running) and read the base."""
    client.flushall(asynchronous=False)
    return after(client)


def dispatch(count: int, delay: float = 0.0) -> None:
    call = bench_tasks.incr.pending()
    if delay:
        call = call.delayed(delay)
    for start in range(0, count, CHUNK):
        bench_tasks.incr.dispatch_many([call] * min(CHUNK, count - start))


def pending(url: str, count: int) -> None:
    dispatch(count)


def delayed(url: str, count: int) -> None:
    dispatch(count, delay=3600)


def reserved(url: str, count: int) -> None:
    """Queue ``count`` tasks, then reserve them all and ack none."""
    dispatch(count)
    queue = RedisQueue(Config(redis_url=url))
    taken = 0
    while taken < count:
        reservation = queue.reserve(QUEUE, CHUNK, 3_600_000, 10_000, 5_000)
        if not reservation.payloads:
            raise RuntimeError(f"only {taken:,} of {count:,} tasks were there to reserve")
        taken += len(reservation.payloads)


def failed(url: str, count: int) -> None:
    """Queue ``count`` tasks that raise on their one try and let a real worker run them."""
    calls = [bench_tasks.fail_at_once.pending()] * CHUNK
    for start in range(0, count, CHUNK):
        bench_tasks.fail_at_once.dispatch_many(calls[: min(CHUNK, count - start)])
    client = redis.Redis.from_url(url)
    # The worker logs each failure as an ERROR line: not wanted count times over. This
    # runs in its own process (in_child), so only the worker inherits the silence.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    worker = rqueue_work(url, 2, "--stop-when-empty")
    try:
        wait_until(lambda: client.llen(KEYS.failed) >= count, timeout=600, interval=0.1)
        worker.wait(60)
    finally:
        stop_process(worker)


STATES: tuple[tuple[str, Callable[[str, int], None]], ...] = (
    ("pending", pending),
    ("delayed (due in 1 h)", delayed),
    ("reserved, not acked", reserved),
    ("failed (real traceback)", failed),
)


def in_child(step: Callable[[str, int], None], url: str, count: int) -> None:
    """Run ``step`` in a forked process: every connection it opened (a connection's
    buffers count in ``used_memory``) is closed once it exits, before the reading."""
    process = multiprocessing.get_context("fork").Process(target=_step, args=(step, url, count))
    process.start()
    process.join()
    if process.exitcode != 0:
        raise RuntimeError(f"{step.__name__} failed (exit code {process.exitcode})")


def _step(step: Callable[[str, int], None], url: str, count: int) -> None:
    use(RedisQueue(Config(redis_url=url)))
    step(url, count)


def warm_up(url: str) -> None:
    """Dispatch one chunk and flush it, before the first figure: a fresh Redis 7.0's
    first dispatch allocates ~150 KB that no later one does (its own buffers and caches,
    whatever the tasks: one task grew ``used_memory`` 150,048 bytes, the next 704), which
    whichever figure came first counted as 3 bytes more per task at 50,000 tasks."""
    in_child(pending, url, CHUNK)
    fresh(redis.Redis.from_url(url))


def rqueue_states(url: str, count: int) -> list[Row]:
    client = redis.Redis.from_url(url)
    rows = []
    for state, step in STATES:
        base = fresh(client)
        in_child(step, url, count)
        per_task = (after(client) - base) / count
        rows.append(Row("rqueue", state, count, per_task))
        print(f"  rqueue {state}: {per_task:,.1f} bytes per task", flush=True)
    return rows


def enqueue_only(python: str, module: str, url: str, count: int) -> dict[str, Any] | None:
    """``peers/<module>.py --enqueue-only``: the system's own API in its own virtualenv."""
    command = [python, "-m", f"peers.{module}", "--enqueue-only", "--tasks", str(count)]
    finished = subprocess.run(
        [*command, "--redis-url", url],
        cwd=SUPPORT_DIR,
        env={**os.environ, "REDIS_URL": url, "PYTHONPATH": peer_pythonpath()},
        capture_output=True,
        text=True,
        timeout=900,
    )
    for line in finished.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
            return result
    print(f"  ! {module} failed:\n{finished.stderr[-2000:]}", flush=True)
    return None


def peer_rows(url: str, count: int, only: set[str]) -> list[Row]:
    """Each system enqueues ``count`` tasks from its runner's process, which then exits."""
    client = redis.Redis.from_url(url)
    runs = [(sys.executable, "rqueue")] if not only or "rqueue" in only else []
    peers = [p for p in PEERS if not only or p.name in only]
    for peer in peers:
        install(peer)
    runs += [(str(python_of(p)), p.name) for p in peers]
    rows = []
    for python, module in runs:
        base = fresh(client)
        result = enqueue_only(python, module, url, count)
        if result is None:
            continue
        per_task = (after(client) - base) / count
        rows.append(Row(f"{result['system']} ({result['versions']})", "pending", count, per_task))
        print(f"  {result['system']}: {per_task:,.1f} bytes per pending task", flush=True)
    return rows


# -- where the bytes of one pending task go ------------------------------------------------


ELEMENTS = ("attempts", "timeout_ms", "id", "task", "queue", "dispatched_at", "args")
ELEMENTS += ("kwargs", "options", "signature")
"""A payload array's elements by position (rqueue/encoding/payload.py)."""


def payload_fields(payload: bytes) -> list[tuple[str, int]]:
    """Each msgpack element's name and bytes, in order, the container's own header first:
    a payload (an array) by position, a failed record (a map) by key plus value."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(payload)
    is_map = 0x80 <= payload[0] <= 0x8F or payload[0] in (0xDE, 0xDF)
    count = unpacker.read_map_header() if is_map else unpacker.read_array_header()
    fields = [("(map header)" if is_map else "(array header)", unpacker.tell())]
    for index in range(count):
        start = unpacker.tell()
        name = str(unpacker.unpack()) if is_map else ELEMENTS[min(index, len(ELEMENTS) - 1)]
        unpacker.skip()
        fields.append((name, unpacker.tell() - start))
    return fields


@dataclass(frozen=True)
class KeyUsage:
    name: str
    encoding: str
    elements: int
    usage: int
    """``MEMORY USAGE ... SAMPLES 0``: every element counted, none estimated."""


def key_usage(client: redis.Redis) -> dict[str, KeyUsage]:
    keys = {}
    raw: bytes
    for raw in sorted(client.scan_iter(count=1000)):
        kind: str = client.type(raw).decode()  # type: ignore[union-attr]
        size = {"list": client.llen, "set": client.scard, "zset": client.zcard}.get(kind)
        encoding = client.object("encoding", raw).decode()
        name = raw.decode()
        usage = client.memory_usage(raw, samples=0) or 0
        keys[name] = KeyUsage(name, f"{kind}, {encoding}", int(size(raw)) if size else 1, usage)
    return keys


@dataclass(frozen=True)
class Breakdown:
    count: int
    grown: float
    """``used_memory`` growth per task."""
    fields: list[tuple[str, int]]
    payload: int
    keys: dict[str, KeyUsage]
    record: list[tuple[str, int]]
    """One failed record's entries (rqueue/failed.py), its payload's among them."""

    def per_task(self, key: str) -> float:
        usage = self.keys.get(key)
        return usage.usage / self.count if usage else 0.0


def breakdown(url: str, count: int) -> Breakdown:
    """``count`` pending tasks: one's payload field by field, each key's bytes."""
    client = redis.Redis.from_url(url)
    base = fresh(client)
    in_child(pending, url, count)
    grown = (after(client) - base) / count
    payload: bytes = client.lindex(KEYS.ready, 0)  # type: ignore[assignment]
    fields, keys = payload_fields(payload), key_usage(client)
    fresh(client)
    in_child(failed, url, 1)
    record: bytes = client.lindex(KEYS.failed, 0)  # type: ignore[assignment]
    return Breakdown(count, grown, fields, len(payload), keys, payload_fields(record))


def print_breakdown(found: Breakdown) -> None:
    payload = found.payload
    shares = [(name, size, f"{size / payload:.0%}") for name, size in found.fields]
    table(
        ("payload element", "bytes", "share"),
        [*shares, ("payload, all", payload, "100%")],
        "One pending task's payload (bench_tasks.incr, no arguments)",
    )
    rows: list[tuple[str, str, int | str, float]] = [
        (key.name, key.encoding, key.elements, key.usage / found.count)
        for key in found.keys.values()
    ]
    counted = sum(key.usage for key in found.keys.values()) / found.count
    rows.append(
        ("(allocator, keyspace: used_memory not in MEMORY USAGE)", "", "", found.grown - counted)
    )
    rows.append(("used_memory growth", "", "", found.grown))
    table(
        ("key", "type, encoding", "elements", "bytes per task"),
        rows,
        f"Where a pending task's bytes go ({found.count:,} pending; MEMORY USAGE of each key "
        "with SAMPLES 0, divided by the count)",
    )
    size = sum(entry for _, entry in found.record)
    table(
        ("failed record entry (key and value)", "bytes", "share"),
        [(name, entry, f"{entry / size:.0%}") for name, entry in found.record]
        + [("record, all", size, "100%")],
        "One failed record (bench_tasks.fail_at_once, run by `rqueue work`)",
    )
    budget(found)


def budget(found: Breakdown) -> None:
    """The goal beside what is left to save, were it not met."""
    sizes = dict(found.fields)
    candidates = [
        (
            "the pending-ids set entry (what lets cancel find a task by id)",
            found.per_task(KEYS.pending_ids),
        ),
        (
            "the ready list's bytes per entry beyond the payload",
            found.per_task(KEYS.ready) - found.payload,
        ),
        ("the task's and queue's names, stored in every payload", sizes["task"] + sizes["queue"]),
    ]
    table(
        ("what is left", "bytes per task"),
        [(what, f"{saves:,.0f}") for what, saves in candidates],
        f"The goal: {GOAL} bytes per pending task. Measured {found.grown:,.0f}: "
        + ("met" if found.grown <= GOAL else f"{found.grown - GOAL:,.0f} over"),
    )


def run(count: int, only: set[str]) -> tuple[list[Row], Breakdown | None]:
    """Every state's and every system's bytes per task, and the breakdown (if rqueue
    is among ``only``); printed as it goes."""
    ours = not only or "rqueue" in only
    with RedisServer() as server:
        print(machine_summary(redis.Redis.from_url(server.url)), flush=True)
        warm_up(server.url)
        rows = rqueue_states(server.url, count) if ours else []
        rows += peer_rows(server.url, count, only)
        found = breakdown(server.url, count) if ours else None
    return rows, found


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50_000, help="tasks per figure")
    parser.add_argument("--only", default="", help="comma-separated: rqueue,huey,rq,...")
    args = parser.parse_args(argv)
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    rows, found = run(args.tasks, only)
    rows.sort(key=lambda row: (row.state != "pending", row.bytes_per_task))
    table(
        ("system", "state", "tasks", "bytes per task"),
        [(r.system, r.state, r.tasks, r.bytes_per_task) for r in rows],
        f"Redis used_memory growth per task ({args.tasks:,} tasks each; goal: {GOAL} bytes "
        "per pending task)",
    )
    if found is not None:
        print_breakdown(found)


if __name__ == "__main__":
    main()
