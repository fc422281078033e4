"""Each script call of ``failed retry --all`` and ``failed flush`` on its own (#25): the
slow log's time for every call over 0.2 ms, over the first chunks on a queue of 10^6
failed records, as p99, longest, and how many went over 1, 5 and 10 ms.

It drives the same ``FailedTasks.retry_chunks`` and ``flush_chunks`` the CLI runs, from
Python, so no CLI start-up or 10^4 queues' counts are in the figures. ``--tree`` runs
another checkout (its ``scale_failed.fill_failed`` files the records its own way; put
it first on ``PYTHONPATH`` too):

    python benchmarks/scale/scale_failed_steps.py
    PYTHONPATH=/tmp/before python benchmarks/scale/scale_failed_steps.py --tree /tmp/before
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

from common import BENCH_DIR, machine_summary, percentile, table

import rqueue.failed as failed_module
from rqueue.failed import FailedTasks
from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

LOGGED_OVER_US = 200
SLOWLOG_LEN = 100_000


def run(records: int, chunks: int, step: int, tree: Path) -> list[tuple[object, ...]]:
    # A checkout from before #27 keeps every benchmark in benchmarks/ itself.
    folders = (tree / "benchmarks" / "scale", tree / "benchmarks")
    sys.path.insert(0, str(next(f for f in folders if (f / "scale_failed.py").exists())))
    fill_failed = importlib.import_module("scale_failed").fill_failed
    failed_module.STEP = step  # type: ignore[misc]
    rows: list[tuple[object, ...]] = []
    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url))
        client = queue.client
        print(machine_summary(client), flush=True)
        fill_failed(queue, records)
        failed = FailedTasks(queue)
        failed.page(limit=1)  # an old tree converts its list here, outside the figures
        client.config_set("slowlog-max-len", SLOWLOG_LEN)
        steps: tuple[tuple[str, Callable[[], Iterator[object]], int], ...] = (
            ("retry --all", failed.retry_chunks, 2),  # a window's read, then the retry
            ("flush", failed.flush_chunks, 1),
        )
        for label, chunked, calls_a_chunk in steps:
            client.config_set("slowlog-log-slower-than", LOGGED_OVER_US)
            client.slowlog_reset()
            walk = chunked()
            for _ in range(chunks):
                next(walk)
            walk.close()  # type: ignore[attr-defined]
            logged = [
                entry["duration"] / 1000
                for entry in client.slowlog_get(SLOWLOG_LEN)
                if entry["command"].startswith(b"EVALSHA")
            ]
            calls = chunks * calls_a_chunk
            every = sorted(logged + [0.0] * max(0, calls - len(logged)))
            over = " / ".join(str(sum(ms > limit for ms in logged)) for limit in (1, 5, 10))
            longest = max(logged, default=0.0)
            rows.append((label, step, calls, percentile(every, 0.99), longest, over))
            print(f"  {rows[-1]}", flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--chunks", type=int, default=1_000, help="chunks measured of each")
    parser.add_argument("--step", type=int, default=failed_module.STEP, help="records a call")
    parser.add_argument("--tree", type=Path, default=BENCH_DIR.parent, help="a checkout")
    options = parser.parse_args(argv)
    rows = run(options.records, options.chunks, options.step, options.tree)
    table(
        ("command", "step", "script calls", "p99 ms", "longest ms", "over 1 / 5 / 10 ms"),
        rows,
        f"{options.records:,} failed records, {options.tree}",
    )


if __name__ == "__main__":
    main()
