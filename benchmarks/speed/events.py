"""What ``rqueue work --events`` costs per task: the scripts' time in Redis and the
worker child's, with the event stream off and on.

One worker child in this process (as ``hot_path.py``) drains empty tasks, events off
and on in alternating rounds, each child with its own store (``Config.events`` 0 or
10,000). Redis's own time in EVALSHA (``INFO commandstats``) is the scripts' share: with
events on, reserve.lua adds a ``started`` and a ``succeeded`` entry per task. The
producer's side is measured too: push.lua with and without the queue's events marker
(a ``dispatched`` entry per task while a worker records events).

    python benchmarks/speed/events.py                # 20,000 tasks, 3 rounds
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import redis
from common import machine_summary, median, table
from in_process import drain, fill, in_process_child

from rqueue.server import RedisServer

CAP = 10_000


def script_usec(client: redis.Redis) -> tuple[int, int]:
    """(EVALSHA calls, microseconds Redis spent in them) so far."""
    stats = client.info("commandstats").get("cmdstat_evalsha", {"calls": 0, "usec": 0})
    return int(stats["calls"]), int(stats["usec"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.getLogger("rqueue").setLevel(logging.WARNING)
    with RedisServer() as server:
        os.environ["REDIS_URL"] = server.url
        children = {on: in_process_child(server.url, 100, False) for on in (False, True)}
        store = children[True].store
        store.config = replace(store.config, events=CAP)
        client, marker = store.client, store.keys("default").events_on
        print(machine_summary(client))
        rows = []
        figures: dict[str, dict[bool, list[float]]] = {
            k: {False: [], True: []} for k in ("push", "work", "cpu", "rate")
        }
        for round_number in range(1, args.rounds + 1):
            order = (False, True) if round_number % 2 else (True, False)
            for on in order:
                client.delete(marker)
                if on:
                    client.set(marker, CAP, px=600_000)  # what a recording worker's parent sets
                before = script_usec(client)
                fill(lambda count: bench_tasks.empty.dispatch_many([()] * count), args.tasks)
                after_push = script_usec(client)
                cpu, wall = drain(children[on], args.tasks)
                after_work = script_usec(client)
                push_us = (after_push[1] - before[1]) / args.tasks
                work_us = (after_work[1] - after_push[1]) / args.tasks
                for key, value in (
                    ("push", push_us),
                    ("work", work_us),
                    ("cpu", cpu / args.tasks * 1e6),
                    ("rate", args.tasks / wall),
                ):
                    figures[key][on].append(value)
                label = "on" if on else "off"
                rows.append(
                    (
                        round_number,
                        label,
                        push_us,
                        work_us,
                        cpu / args.tasks * 1e6,
                        args.tasks / wall,
                    )
                )
                time.sleep(0.1)
        stream_length = client.xlen(store.keys("default").events)
    table(
        (
            "round",
            "events",
            "push.lua us/task",
            "worker scripts us/task",
            "child CPU us/task",
            "tasks/s",
        ),
        rows,
        f"One worker child in-process, empty tasks, --prefetch 100, stream cap {CAP:,}",
    )
    for key, label in (
        ("push", "push.lua (Redis) us/task"),
        ("work", "reserve+ack (Redis) us/task"),
        ("cpu", "child CPU us/task"),
        ("rate", "tasks/s"),
    ):
        off, on = median(figures[key][False]), median(figures[key][True])
        print(f"median {label}: events off {off:,.2f}, on {on:,.2f} ({(on / off - 1) * 100:+.1f}%)")
    print(f"stream length at the end: {stream_length:,} (capped at about {CAP:,})")


if __name__ == "__main__":
    main()
