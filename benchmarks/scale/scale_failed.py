"""Failed tasks and queue sizes at scale (#16, #25): each command's wall time and the
longest single Redis call it made, with a million failed records on one queue and 10^4
queues, and the memory one failed record takes.

The records are real (a real payload each, by make_record) and filed as fail.lua files
them, in bulk: pushed onto the queue's failed list and entered in its lookup. Records
are picked by age: the newest, the 10,000th newest, the middle one and the oldest. The
flush at the end runs on a million records filled again.

Each command is the real CLI (``python -m rqueue ...``, so its start-up is in the wall
time: the ``size ONE-QUEUE`` row is that floor). Before each, ``SLOWLOG RESET``: every
call over 0.1 ms the command makes is logged with the time Redis spent on it, and the
longest is what every other client waited behind at worst. "Redis commands" is
``total_commands_processed`` over the run: the calls, and on Redis 6 also the commands
scripts ran.

    python benchmarks/scale/scale_failed.py --records 1000000 --queues 10000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import redis
from common import machine_summary, table

import rqueue
from rqueue.encoding.payload import Job, encode, new_id
from rqueue.failed import make_record
from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.queue import Push, RedisQueue

QUEUE = "default"
PER_CALL = 1000
"""Records per RPUSH and queues per pipeline while filling."""
RECENT = 10_000
"""The newest records every single-record command must find fast: the 10,000th newest
is the one measured."""
LOGGED_OVER_US = 100
"""The slow log keeps calls over this (0 would log every command, and Redis 6 then
logs each command a script runs too, which slows the script it measures)."""
SLOWLOG_LEN = 100_000
OURS = (b"SLOWLOG", b"CONFIG", b"INFO")
RQUEUE_TREE = Path(rqueue.__file__).resolve().parents[1]
"""Where the CLI runs: ``python -m`` puts its working directory first on the path, so
from another checkout it would run that one's code, not the rqueue imported here (the
one ``PYTHONPATH`` chose)."""


class Measured(NamedTuple):
    command: str
    wall_s: float
    calls: int
    over_1ms: int
    """Calls Redis spent over 1 ms on: on a busy 2-core machine some O(1) ones too,
    when the scheduler ran something else in the middle of them."""
    longest_ms: float
    longest_call: str


def fill_failed(queue: RedisQueue, count: int, name: str = QUEUE) -> list[str]:
    """``count`` real failed records, ``PER_CALL`` per LPUSH onto the failed list (so
    the newest ends at its head) with their members in the lookup, as fail.lua files
    each; their ids, oldest first."""
    ids = []
    keys = queue.keys(name)
    pipe = queue.client.pipeline(transaction=False)
    for start in range(0, count, PER_CALL):
        records, members = [], {}
        for i in range(start, min(count, start + PER_CALL)):
            job = Job(new_id(), "tasks:charge", (i, "card"), {}, name, attempts=3, tries=3)
            error = f"card declined for order {i}"
            records.append(make_record(name, encode(job), "ValueError", error, job=job))
            members[f"{job.id}#1"] = i + 1
            ids.append(job.id)
        pipe.lpush(keys.failed, *records)
        pipe.zadd(keys.failed_lookup, members)
        if len(pipe) >= 20:
            pipe.execute()
    pipe.execute()
    queue.remember_queues([name])
    return ids


def add_queues(queue: RedisQueue, count: int) -> list[str]:
    """``count`` queues ``tenant-NNNNN`` with one ready task each, through push_many."""
    names = [f"tenant-{i:05d}" for i in range(count)]
    for start in range(0, count, PER_CALL):
        groups = [
            Push(name, 0, [encode(Job(new_id(), "tasks:charge", (1,), {}, name))])
            for name in names[start : start + PER_CALL]
        ]
        queue.push_many(groups)
    queue.remember_queues(names)
    return names


def measure(client: redis.Redis, url: str, label: str, args: Sequence[str]) -> Measured:
    """Run ``rqueue ARGS``; count the commands Redis ran meanwhile and read the longest
    back from the slow log."""
    env = {**os.environ, "REDIS_URL": url}
    client.slowlog_reset()
    before = _processed(client)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "rqueue", *args],
        cwd=RQUEUE_TREE,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall = time.perf_counter() - started
    commands = _processed(client) - before - 1  # less the INFO that read it
    if done.returncode != 0:
        raise RuntimeError(f"rqueue {' '.join(args)} exited {done.returncode}: {done.stderr}")
    logged = [e for e in client.slowlog_get(SLOWLOG_LEN) if not e["command"].startswith(OURS)]
    if not logged:
        return Measured(label, wall, commands, 0, 0.0, f"none over {LOGGED_OVER_US} us")
    longest = max(logged, key=lambda e: e["duration"])
    words = longest["command"].split()
    name = words[0].decode()
    if name == "EVALSHA":  # name the script by its first key instead of its digest
        name = f"EVALSHA ({words[3].decode()})"
    over = sum(1 for e in logged if e["duration"] > 1000)
    return Measured(label, wall, commands, over, longest["duration"] / 1000, name)


def _processed(client: redis.Redis) -> int:
    return int(client.info("stats")["total_commands_processed"])


def run(records: int, queues: int) -> tuple[list[Measured], float]:
    """Fill a fresh Redis and measure each command; rows in the order they ran, and the
    bytes of memory one failed record took (``used_memory`` grown over the fill)."""
    rows = []
    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url))
        client = queue.client
        client.config_set("slowlog-max-len", SLOWLOG_LEN)
        print(machine_summary(client), flush=True)
        started = time.perf_counter()
        empty = _used_memory(client)
        ids = fill_failed(queue, records)
        per_record = (_used_memory(client) - empty) / records
        names = add_queues(queue, queues)
        print(
            f"filled {records:,} failed records ({per_record:.0f} bytes each) and "
            f"{queues:,} queues in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        client.config_set("slowlog-log-slower-than", LOGGED_OVER_US)

        def row(label: str, *args: str) -> None:
            rows.append(measure(client, server.url, label, args))
            print(f"  {rows[-1]}", flush=True)

        recent, middle = ids[-RECENT], ids[records // 2 - 2]
        row("size ONE-QUEUE (start-up floor)", "size", names[0])
        row("failed list (first page)", "failed", "list")
        last_page = str(records - 50)
        row("failed list --offset N-50 (last page)", "failed", "list", "--offset", last_page)
        for label, task_id in (("NEWEST", ids[-1]), (f"{RECENT:,}th NEWEST", recent)):
            row(f"failed show {label}", "failed", "show", task_id)
        row("failed show MIDDLE", "failed", "show", middle)
        row("failed show OLDEST", "failed", "show", ids[0])
        row(f"failed retry {RECENT:,}th NEWEST", "failed", "retry", recent)
        row(f"failed forget {RECENT - 1:,}th NEWEST", "failed", "forget", ids[-RECENT + 1])
        row("failed forget NEWEST", "failed", "forget", ids[-1])
        row("failed retry OLDEST", "failed", "retry", ids[0])
        row("failed forget OLDEST", "failed", "forget", ids[1])
        row("failed forget MIDDLE", "failed", "forget", middle)
        row("failed retry MIDDLE", "failed", "retry", ids[records // 2 - 3])
        row(f"size ({queues + 1:,} queues)", "size")
        row("size --match 'tenant-000*'", "size", "--match", "tenant-000*")
        row(f"failed retry --all ({records - 8:,})", "failed", "retry", "--all")
        client.delete(queue.keys(QUEUE).ready)
        fill_failed(queue, records)
        row(f"failed flush ({records:,})", "failed", "flush")
    return rows, per_record


def _used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=10_000)
    options = parser.parse_args(argv)
    rows, per_record = run(options.records, options.queues)
    table(
        ("command", "wall s", "Redis commands", "calls > 1 ms", "longest ms", "longest call"),
        [tuple(r) for r in rows],
        f"{options.records:,} failed records ({per_record:.0f} bytes each), "
        f"{options.queues:,} queues",
    )


if __name__ == "__main__":
    main()
