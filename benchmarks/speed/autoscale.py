"""``rqueue supervise``'s autoscaling against fixed pools (issue 33).

- ``burst``: 20,000 ``bench_tasks.one_ms`` tasks (a millisecond's work each) pushed at
  once onto an idle pool: ``rqueue supervise`` with min 1, max 8 processes, against a
  fixed ``rqueue work -c 8`` and ``-c 1``, taking turns round by round. From the end of
  the push: the time until 8 children run (scaled pool), until the queue is drained,
  and until it is back to 1 child. Children are counted from the process table (their
  ``rqueue: worker`` titles), every 10 ms.
- ``skew``: two queues, ``hot`` taking ``--hot`` tasks at once and ``cold`` a trickle
  (``--trickle`` a second, for as long as the hot burst lasts), on a pool of 8
  processes with ``balance`` auto, simple and off (one parent, hot first): each
  queue's wait (dispatch to start) p99, from the metrics' wait histograms.

The scaled pool's settings are printed with its figures (``--cooldown``, ``--shift``,
``--clear``: ``balance_cooldown``, ``balance_max_shift``, ``time_to_clear``).

    python benchmarks/speed/autoscale.py                      # both, 2 rounds
    python benchmarks/speed/autoscale.py burst --rounds 1 --tasks 5000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import psutil
from common import SUPPORT_DIR, machine_summary, median, rqueue_work, table, wait_until

from rqueue.metrics.read import totals
from rqueue.metrics.schema import TaskCounts
from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue

BULK = 5_000


def children(root: int) -> int:
    """Worker children under ``root`` (a supervisor or a worker parent) now."""
    try:
        found = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    count = 0
    for process in found:
        try:
            count += " ".join(process.cmdline()).startswith("rqueue: worker")
        except psutil.Error:
            continue
    return count


def supervise(url: str, pools: str) -> subprocess.Popen[bytes]:
    """``rqueue supervise`` on ``pools`` (TOML), importing the benchmark's tasks."""
    path = Path(tempfile.mkdtemp()) / "rqueue.toml"
    path.write_text(pools)
    inherited = os.environ.get("PYTHONPATH", "")
    env = {
        **os.environ,
        "REDIS_URL": url,
        "PYTHONPATH": os.pathsep.join(filter(None, (inherited, str(SUPPORT_DIR)))),
    }
    command = [sys.executable, "-m", "rqueue", "supervise", "--config", str(path)]
    return subprocess.Popen([*command, "--log-level", "WARNING"], env=env, cwd=SUPPORT_DIR)


def push(queue_name: str, count: int) -> None:
    task = bench_tasks.one_ms.using(queue=queue_name)
    for start in range(0, count, BULK):
        task.dispatch_many([() for _ in range(min(BULK, count - start))])


def drained(queue: RedisQueue, names: list[str]) -> bool:
    return all(s.ready == s.reserved == 0 for s in queue.sizes(names))


def burst_round(
    url: str, queue: RedisQueue, kind: str, tasks: int, args: argparse.Namespace
) -> tuple[float | None, float, float | None]:
    """One pool through one burst: seconds to max, to drained, back to min."""
    if kind == "scaled":
        process = supervise(
            url,
            f"""[pools.burst]
queues = ["burst"]
min_processes = 1
max_processes = 8
balance_cooldown = {args.cooldown}
balance_max_shift = {args.shift}
time_to_clear = {args.clear}
log_level = "WARNING"
""",
        )
    else:
        process = rqueue_work(url, 8 if kind == "fixed 8" else 1, queue="burst")
    try:
        first = 8 if kind == "fixed 8" else 1
        wait_until(lambda: children(process.pid) == first, 60)
        push("burst", tasks)
        pushed = time.perf_counter()
        at_max = None
        while not drained(queue, ["burst"]):
            if at_max is None and children(process.pid) >= 8:
                at_max = time.perf_counter() - pushed
            time.sleep(0.01)
        drain = time.perf_counter() - pushed
        back = None
        if kind == "scaled":
            back = wait_until(lambda: children(process.pid) == 1, 120) - pushed
        return at_max, drain, back
    finally:
        stop_process(process, 30)


def burst(url: str, queue: RedisQueue, args: argparse.Namespace) -> None:
    kinds = ("scaled", "fixed 8", "fixed 1")
    found: dict[str, list[tuple[float | None, float, float | None]]] = {k: [] for k in kinds}
    for _ in range(args.rounds):
        for kind in kinds:
            found[kind].append(burst_round(url, queue, kind, args.tasks, args))

    def shown(values: list[float | None]) -> str:
        known = [v for v in values if v is not None]
        return f"{median(known):.1f}" if known else "-"

    table(
        ("pool", "to 8 processes (s)", "drained (s)", "back to 1 (s)"),
        [
            (
                kind if kind != "scaled" else "supervise 1-8",
                shown([r[0] for r in rows]),
                shown([r[1] for r in rows]),
                shown([r[2] for r in rows]),
            )
            for kind, rows in found.items()
        ],
        title=f"burst of {args.tasks:,} one_ms tasks, median of {args.rounds} "
        f"(supervise: balance_cooldown {args.cooldown}, balance_max_shift {args.shift}, "
        f"time_to_clear {args.clear})",
    )


def skew_round(url: str, queue: RedisQueue, balance: str, args: argparse.Namespace) -> list[float]:
    """One pool through the skewed load: each queue's wait p99 (ms)."""
    queue.client.flushall()
    process = supervise(
        url,
        f"""[pools.skew]
queues = ["hot", "cold"]
min_processes = 8
max_processes = 8
balance = "{balance}"
balance_cooldown = {args.cooldown}
balance_max_shift = {args.shift}
time_to_clear = {args.clear}
log_level = "WARNING"
""",
    )
    try:
        wait_until(lambda: children(process.pid) == 8, 60)
        push("hot", args.hot)
        while not drained(queue, ["hot"]):
            push("cold", 1)
            time.sleep(1 / args.trickle)
        wait_until(lambda: drained(queue, ["hot", "cold"]), 120)
    finally:
        stop_process(process, 30)  # a warm stop: every child flushes its metrics
    waits = []
    for name in ("hot", "cold"):
        counts = sum(totals(queue, name).values(), TaskCounts())
        p99 = counts.wait.quantile(0.99)
        waits.append(float("nan") if p99 is None else p99 * 1000)
    return waits


def skew(url: str, queue: RedisQueue, args: argparse.Namespace) -> None:
    balances = ("auto", "simple", "off")
    found: dict[str, list[list[float]]] = {b: [] for b in balances}
    for _ in range(args.rounds):
        for balance in balances:
            found[balance].append(skew_round(url, queue, balance, args))
    table(
        ("balance", "hot wait p99 (ms)", "cold wait p99 (ms)"),
        [
            (b, median([r[0] for r in rows]), median([r[1] for r in rows]))
            for b, rows in found.items()
        ],
        title=f"skew: {args.hot:,} hot tasks at once, cold {args.trickle}/s meanwhile, "
        f"8 processes, median of {args.rounds} (p99 from the wait histograms' buckets)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenario", nargs="?", choices=("burst", "skew", "all"), default="all")
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--hot", type=int, default=10_000)
    parser.add_argument("--trickle", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cooldown", type=float, default=1.0)
    parser.add_argument("--shift", type=int, default=2)
    parser.add_argument("--clear", type=float, default=2.0)
    args = parser.parse_args()
    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url))
        use(queue)
        print(machine_summary(queue.client))
        if args.scenario in ("burst", "all"):
            burst(server.url, queue, args)
        if args.scenario in ("skew", "all"):
            skew(server.url, queue, args)


if __name__ == "__main__":
    main()
