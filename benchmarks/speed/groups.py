"""Fair groups (``using(group=...)``, #32): what a noisy group does to quiet ones, and
what groups cost the reserve script and the worker.

1. Fairness. One ``rqueue work`` (process mode, ``--children`` children, default
   options otherwise) starts idle; ``--noisy`` empty tasks of one group are queued
   (10,000 a call, the queue paused meanwhile: ``rqueue pause``), the queue is
   resumed, and at once 10 quiet groups of ``--quiet`` tasks are queued, interleaved
   in one ``dispatch_many`` so all ten arrive together, behind the whole backlog.
   Each task appends its start time, its group and its dispatch time to a file (one
   local write, no round trip). Run until every task has started, then the same run
   with the same calls dispatched without ``group=`` (all FIFO on the plain list).
   Printed: the tasks queued when the quiet ones were (``rqueue size``); the longest
   wait of a quiet group's first task (the "one turn" bound, plus the batches the
   children hold: ``--prefetch``); the quiet tasks' wait (dispatch to start) p50/p99
   and the worst quiet group's p99; how long after their dispatch the last quiet task
   started; the noisy group's drain time; and Jain's index J = (sum x)^2 / (n * sum
   x^2) over the 11 groups, x_i being group i's starts in the window while all of
   them had work: from the moment the quiet dispatch returned (every group queued) to
   the last start of the group that ran out first (1: equal shares; 1/11: one group
   took it all); and J again from the moment every quiet group had a task started
   (what leaves out the batches the children held before; with groups only: without,
   the quiet groups start at the very end, in a window of a few tasks or none, nan).
   Per quiet group, for the last round of each kind: its first task's wait, p50, p99.
2. Reserve cost. ``--tasks`` empty tasks spread evenly over 0 (no group), 1, 100 and
   10,000 groups, drained in this process by ``RedisQueue.reserve`` calls of 100
   (each acking the batch before, as a worker does): tasks/s of the calls alone, and
   microseconds in the script per call and per task (Redis's ``INFO commandstats``
   for EVALSHA: the time inside Redis, the round trip left out). Then the same tasks
   drained by one ``rqueue work --stop-when-empty`` child: tasks/s end to end. After
   each run, the keys the groups left behind (an empty group should leave none).
Kinds take turns within each round, the order rotating round to round, so the
machine's drift falls on all alike.

The plain path's worker child loop against the code from before groups is
``hot_path.py`` and ``per_task.py``, alternated with a baseline worktree.

    python benchmarks/speed/groups.py                 # 100,000 noisy, 50,000 tasks, 3 rounds
    python benchmarks/speed/groups.py --quick         # a check in about a minute
    python benchmarks/speed/groups.py --only cost --groups 0,10000 --rounds 7

``--only cost --groups 0`` runs no group, so it runs on the code from before groups
too: ``PYTHONPATH=<baseline tree> python benchmarks/speed/groups.py --only cost
--groups 0``, alternated with the current tree, gives the plain path's reserve script
time and worker throughput before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import redis
from common import machine_summary, median, percentile, rqueue_work, table, wait_until

import rqueue
from rqueue import task
from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import PendingDispatch, dispatch_many

QUIET_GROUPS = 10
GROUP_COUNTS = (0, 1, 100, 10_000)
"""How many groups the reserve cost's tasks are spread over (0: none, the plain list)."""

_log: list[int] = []


@task
def log_group(label: str, sent: float) -> None:
    """Append when this task started, its group and when it was dispatched to the file
    in ``START_LOG``: a local write, so recording a start holds up no task behind it."""
    if not _log:
        _log.append(os.open(os.environ["START_LOG"], os.O_WRONLY | os.O_APPEND))
    os.write(_log[0], f"{time.time()!r} {label} {sent!r}\n".encode())


# -- 1. fairness ----------------------------------------------------------------------


def _call(label: str, grouped: bool) -> Callable[[float], PendingDispatch]:
    variant = log_group.using(group=label) if grouped else log_group
    return lambda sent: variant.pending(label, sent)


def fairness_run(
    url: str,
    queue: RedisQueue,
    extra: list[str],
    children: int,
    noisy: int,
    quiet: int,
    grouped: bool,
) -> dict[str, object]:
    """One run: the noisy group, then the quiet groups, with or without ``group=``;
    ``extra``: more options of ``rqueue work``."""
    with tempfile.NamedTemporaryFile(prefix="rqueue-groups-", delete=False) as handle:
        path = handle.name
    worker = rqueue_work(url, children, *extra, env={"START_LOG": path})
    total = noisy + QUIET_GROUPS * quiet + 1
    try:
        log_group.dispatch("warm", time.time())  # children forked and connected
        wait_until(lambda: _lines(path) >= 1, timeout=60)
        loud = _call("noisy", grouped)
        queue.pause("default")  # the whole noisy backlog is there when the quiet ones come
        for start in range(0, noisy, 10_000):
            sent = time.time()
            dispatch_many([loud(sent) for _ in range(min(10_000, noisy - start))])
        queue.resume("default")
        quiet_calls = [_call(f"quiet-{g}", grouped) for g in range(QUIET_GROUPS)]
        sent = time.time()
        dispatch_many([quiet_calls[i % QUIET_GROUPS](sent) for i in range(QUIET_GROUPS * quiet)])
        window_start = time.time()
        backlog = queue.sizes(["default"])[0].ready
        wait_until(lambda: _lines(path) >= total, timeout=600 + noisy / 100, interval=0.2)
    finally:
        stop_process(worker)
    starts: dict[str, list[tuple[float, float]]] = defaultdict(list)
    with open(path) as lines:
        for line in lines:
            started, label, dispatched = line.split()
            starts[label].append((float(started), float(dispatched)))
    os.unlink(path)
    del starts["warm"]
    return {**summarize(starts, window_start, sent), "backlog": backlog}


def _lines(path: str) -> int:
    with open(path, "rb") as handle:
        return handle.read().count(b"\n")


def jain(shares: list[float]) -> float:
    """Jain's fairness index: 1 when all shares are equal, 1/n when one has them all."""
    return sum(shares) ** 2 / (len(shares) * sum(x * x for x in shares))


def jain_between(starts: dict[str, list[tuple[float, float]]], begin: float, end: float) -> float:
    """Jain's index of the groups' starts between ``begin`` and ``end`` (epoch seconds)."""
    counts = [float(sum(begin <= a <= end for a, _ in s)) for s in starts.values()]
    return jain(counts) if end > begin else float("nan")


def summarize(
    starts: dict[str, list[tuple[float, float]]], window_start: float, quiet_sent: float
) -> dict[str, object]:
    """The figures of one fairness run (see the module's docstring)."""
    quiet = {label: s for label, s in starts.items() if label.startswith("quiet")}
    waits = {label: [a - b for a, b in s] for label, s in quiet.items()}
    everyone = [w for group in waits.values() for w in group]
    window_end = min(max(a for a, _ in s) for s in starts.values())
    served = max(min(a for a, _ in s) for s in quiet.values())  # every group started
    noisy = starts["noisy"]
    return {
        "p50": percentile(everyone, 0.5),
        "p99": percentile(everyone, 0.99),
        "worst p99": max(percentile(w, 0.99) for w in waits.values()),
        "quiet done": max(a for s in quiet.values() for a, _ in s) - quiet_sent,
        "noisy drained": max(a for a, _ in noisy) - min(b for _, b in noisy),
        "jain": jain_between(starts, window_start, window_end),
        "jain served": jain_between(starts, served, window_end),
        "window": window_end - window_start,
        "first": max(min(w) for w in waits.values()),
        "per group": {
            label: (min(w), percentile(w, 0.5), percentile(w, 0.99)) for label, w in waits.items()
        },
    }


def report_fairness(runs: dict[bool, list[dict[str, object]]], noisy: int, quiet: int) -> None:
    def ms(value: object) -> str:
        return f"{float(value) * 1000:,.1f}"  # type: ignore[arg-type]

    rows = []
    for grouped in (True, False):
        kind = "groups" if grouped else "no groups (FIFO)"
        for number, run in enumerate(runs[grouped], 1):
            rows.append(
                (
                    kind,
                    number,
                    run["backlog"],
                    *(ms(run[key]) for key in ("first", "p50", "p99", "worst p99", "quiet done")),
                    f"{float(run['noisy drained']):.2f}",  # type: ignore[arg-type]
                    f"{float(run['jain']):.3f}",  # type: ignore[arg-type]
                    f"{float(run['jain served']):.3f}",  # type: ignore[arg-type]
                    ms(run["window"]),
                )
            )
    table(
        (
            "dispatch",
            "round",
            "queued then",
            "first start ms",
            "quiet wait p50 ms",
            "p99 ms",
            "worst group p99 ms",
            "last quiet start ms",
            "noisy drained s",
            "Jain J",
            "J once served",
            "window ms",
        ),
        rows,
        title=f"Fairness: {noisy:,} noisy tasks, then {QUIET_GROUPS} quiet groups x {quiet}",
    )
    for grouped in (True, False):
        per_group = runs[grouped][-1]["per group"]
        table(
            ("quiet group", "first start ms", "wait p50 ms", "wait p99 ms"),
            [(label, *map(ms, waits)) for label, waits in sorted(per_group.items())],  # type: ignore[attr-defined]
            title=f"Per quiet group, last round, {'groups' if grouped else 'no groups'}",
        )


# -- 2. reserve cost ---------------------------------------------------------------------


def fill(tasks: int, groups: int) -> None:
    """Queue ``tasks`` empty tasks spread evenly over ``groups`` (0: no group)."""
    if groups == 0:
        calls = [bench_tasks.empty.pending() for _ in range(tasks)]
    else:
        variants = [bench_tasks.empty.using(group=f"g{i}") for i in range(groups)]
        calls = [variants[i % groups].pending() for i in range(tasks)]
    for start in range(0, tasks, 10_000):
        dispatch_many(calls[start : start + 10_000])


def script_time(client: redis.Redis) -> tuple[int, int]:
    """EVALSHA calls and microseconds so far (INFO commandstats)."""
    stats = client.info("commandstats").get("cmdstat_evalsha", {"calls": 0, "usec": 0})
    return int(stats["calls"]), int(stats["usec"])


def leftovers(client: redis.Redis) -> int:
    """Keys of the queue's groups still in Redis (the turns set, a group's list)."""
    return sum(1 for _ in client.scan_iter(match="*groups*", count=10_000))


def reserve_run(
    queue: RedisQueue, client: redis.Redis, tasks: int, groups: int
) -> tuple[float, float, float, int]:
    """Drain ``tasks`` over ``groups`` groups with reserve calls of 100: (tasks/s,
    script us per call, script us per task, keys left)."""
    fill(tasks, groups)
    before = script_time(client)
    taken, held = 0, []
    began = time.perf_counter()
    while taken < tasks:
        held = queue.reserve("default", 100, 60_000, 1_000, 1_000, ack=held).payloads
        if not held:
            raise RuntimeError(f"reserve came back empty with {tasks - taken} tasks left")
        taken += len(held)
    elapsed = time.perf_counter() - began
    queue.reserve("default", 100, 60_000, 1_000, 1_000, ack=held)
    calls, usec = (a - b for a, b in zip(script_time(client), before, strict=True))
    return tasks / elapsed, usec / calls, usec / tasks, leftovers(client)


def worker_run(url: str, tasks: int, groups: int) -> float:
    """Tasks per second one ``rqueue work --stop-when-empty`` child drains."""
    fill(tasks, groups)
    began = time.perf_counter()
    worker = rqueue_work(url, 1, "--stop-when-empty", "--no-metrics")
    if worker.wait(600) != 0:
        raise RuntimeError("the worker failed")
    return tasks / (time.perf_counter() - began)


def report_cost(
    calls: dict[int, list[tuple[float, float, float, int]]],
    drains: dict[int, list[float]],
    tasks: int,
) -> None:
    rows = []
    for groups, runs in sorted(calls.items()):
        rows.append(
            (
                f"{groups:,} groups" if groups else "no groups",
                len(runs),
                f"{median([r[0] for r in runs]):,.0f}",
                f"{median([r[1] for r in runs]):,.0f}",
                f"{median([r[2] for r in runs]):.2f}",
                max(r[3] for r in runs),
                f"{median(drains[groups]):,.0f}",
                [round(x) for x in drains[groups]],
            )
        )
    table(
        (
            "tasks",
            "rounds",
            "reserve tasks/s",
            "script us/call",
            "script us/task",
            "keys left",
            "worker tasks/s",
            "each round",
        ),
        rows,
        title=f"Reserve cost: {tasks:,} empty tasks, reserve calls of 100; medians",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--noisy", type=int, default=100_000, help="the noisy group's tasks")
    parser.add_argument("--quiet", type=int, default=100, help="tasks of each quiet group")
    parser.add_argument("--children", type=int, default=2, help="rqueue work --concurrency")
    parser.add_argument("--tasks", type=int, default=50_000, help="tasks per reserve-cost run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="10,000 noisy, 20,000 tasks, 1 round")
    parser.add_argument("--prefetch", type=int, help="rqueue work --prefetch (default: its own)")
    parser.add_argument("--only", choices=("fairness", "cost"), help="run one part alone")
    parser.add_argument(
        "--groups",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=GROUP_COUNTS,
        help="the reserve cost's group counts, comma-separated (0: no group)",
    )
    args = parser.parse_args()
    extra = [] if args.prefetch is None else ["--prefetch", str(args.prefetch)]
    if args.quick:
        args.noisy, args.tasks, args.rounds = 10_000, 20_000, 1

    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url))
        use(queue)
        client = redis.Redis.from_url(server.url)
        print(machine_summary(client))
        print(f"rqueue from {Path(rqueue.__file__).resolve().parents[1]}")
        runs: dict[bool, list[dict[str, object]]] = {True: [], False: []}
        calls: dict[int, list[tuple[float, float, float, int]]] = defaultdict(list)
        drains: dict[int, list[float]] = defaultdict(list)
        for number in range(args.rounds):
            for grouped in (True, False) if number % 2 == 0 else (False, True):
                if args.only == "cost":
                    break
                queue.clear("default")
                runs[grouped].append(
                    fairness_run(
                        server.url, queue, extra, args.children, args.noisy, args.quiet, grouped
                    )
                )
            shift = number % len(args.groups)
            for groups in args.groups[shift:] + args.groups[:shift]:
                if args.only == "fairness":
                    break
                queue.clear("default")
                calls[groups].append(reserve_run(queue, client, args.tasks, groups))
                drains[groups].append(worker_run(server.url, args.tasks, groups))
        print(machine_summary(client))
    if args.only != "cost":
        report_fairness(runs, args.noisy, args.quiet)
    if args.only != "fairness":
        report_cost(calls, drains, args.tasks)


if __name__ == "__main__":
    main()
