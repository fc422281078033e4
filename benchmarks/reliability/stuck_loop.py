"""A stuck event loop: how soon the child is killed and replaced, and what became of
every task it held.

One ``rqueue work --concurrency 1 --slots S --timeout T --kill-grace G`` child gets,
in one push, well-behaved ``async def`` tasks (each waits, then reports) around one
that calls ``time.sleep(60)`` in an ``async def`` (``bench_tasks.block_loop``): no
coroutine of that child can run again, and the watchdog that cancels overrunning
coroutines cannot either, so only the parent's SIGKILL at the slot's deadline plus
``--kill-grace`` ends it. More tasks than slots are pushed, so some are still in Redis
when the loop blocks.

Times are from the blocker's own start (reported by the task, before it blocks): the
child's pid no longer running (killed; a zombie counts as gone), then a new child of
the worker seen running, then the first task started on it. The blocker has
``tries=1`` and the worker's ``--timeout``; the others ``tries=3`` and a 60 s timeout
of their own, so the slot's deadline is the blocker's. Every task is then accounted
for: done (on which attempt, in which child), failed (with what), or missing.

    python benchmarks/reliability/stuck_loop.py
    python benchmarks/reliability/stuck_loop.py --timeout 5 --kill-grace 5
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import psutil
import redis
from common import machine_summary, rqueue_work, table

from rqueue.failed import FailedTask, FailedTasks
from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import dispatch_many

POLL = 0.002
"""Seconds between looks at the worker's processes: the precision of the times below."""


@dataclass
class Record:
    """What one task reported, by label: (attempt, pid, time) of each start and end."""

    starts: list[tuple[int, int, float]] = field(default_factory=list)
    ends: list[tuple[int, int, float]] = field(default_factory=list)


def records(client: redis.Redis) -> dict[str, Record]:
    found: dict[str, Record] = {}
    for line in client.lrange(bench_tasks.STUCK_EVENTS, 0, -1):
        event, label, attempt, pid, at = line.decode().split()
        record = found.setdefault(label, Record())
        (record.starts if event == "start" else record.ends).append(
            (int(attempt), int(pid), float(at))
        )
    return found


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def children(worker_pid: int) -> set[int]:
    return {p.pid for p in psutil.Process(worker_pid).children() if running(p.pid)}


def poll(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Wait for ``condition``; the epoch time it first held."""
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(POLL)
    return time.time()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=2.0, help="rqueue work --timeout")
    parser.add_argument("--kill-grace", type=float, default=1.0, help="rqueue work --kill-grace")
    parser.add_argument("--slots", type=int, default=8, help="rqueue work --slots")
    parser.add_argument("--before", type=int, default=4, help="well-behaved tasks pushed first")
    parser.add_argument("--after", type=int, default=7, help="well-behaved tasks pushed after")
    parser.add_argument("--wait", type=float, default=0.5, help="each well-behaved task's wait")
    args = parser.parse_args()

    labels = [f"before-{i}" for i in range(args.before)]
    labels += [f"after-{i}" for i in range(args.after)]
    calls = [bench_tasks.sleep_then_report.pending(label, args.wait) for label in labels]
    calls.insert(args.before, bench_tasks.block_loop.pending(60.0))
    bound = args.timeout + args.kill_grace + 30
    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url))
        use(queue)
        client = redis.Redis.from_url(server.url)
        failed = FailedTasks(queue)
        print(machine_summary(client))
        worker = rqueue_work(
            server.url,
            1,
            "--slots",
            str(args.slots),
            "--timeout",
            str(args.timeout),
            "--kill-grace",
            str(args.kill_grace),
        )
        try:
            bench_tasks.sleep_then_report.dispatch("warm-up", 0.0)  # child forked, loop made
            poll(lambda: "warm-up" in records(client), 30, "the warm-up task")
            client.delete(bench_tasks.STUCK_EVENTS)
            time.sleep(0.5)
            dispatch_many(calls)  # one push: the child's first reserve takes a slotful
            poll(lambda: "blocker" in records(client), bound, "the blocker's start")
            _, child, started = records(client)["blocker"].starts[0]
            gone = poll(lambda: not running(child), bound, "the blocked child's kill")
            replaced = poll(lambda: bool(children(worker.pid) - {child}), bound, "a new child")
            (new_child,) = children(worker.pid) - {child}
            resumed = poll(
                lambda: any(
                    pid == new_child for r in records(client).values() for _, pid, _ in r.starts
                ),
                bound,
                "a task on the new child",
            )

            def settled() -> bool:
                ended = {label for label, r in records(client).items() if r.ends}
                return ended | failed_labels(failed) >= {"blocker", *labels}

            try:
                poll(settled, bound, "every task done or failed")
            except TimeoutError as exc:  # the table below shows which are missing
                print(f"  ! {exc}")
        finally:
            stop_process(worker)
        reported = records(client)
        failures = {failed_label(f): f for f in failed.list(["default"])}

    limit = args.timeout + args.kill_grace
    events = [
        ("blocker started (time.sleep(60) in async def)", started),
        (f"child {child} gone (killed)", gone),
        (f"new child {new_child} running", replaced),
        ("first task started on the new child", resumed),
    ]
    table(
        ("event", "s after the blocker started", "beside timeout + kill-grace"),
        [(event, f"{at - started:.3f}", f"{(at - started) / limit:.2f}") for event, at in events],
        f"A stuck event loop: `rqueue work --concurrency 1 --slots {args.slots} "
        f"--timeout {args.timeout:g} --kill-grace {args.kill_grace:g}` "
        f"(timeout + kill-grace: {limit:g} s)",
    )
    rows = []
    for label in ["blocker", *labels]:
        record = reported.get(label, Record())
        starts = ", ".join(
            f"#{attempt} in {'old' if pid == child else 'new' if pid == new_child else pid}"
            for attempt, pid, _ in record.starts
        )
        if label in failures:
            outcome = (
                f"failed: {failures[label].exception} after {failures[label].attempts} attempt(s)"
            )
        elif record.ends:
            attempt, pid, _ = record.ends[-1]
            outcome = f"done on attempt {attempt} in the {'old' if pid == child else 'new'} child"
        else:
            outcome = "missing"
        rows.append((label, starts or "-", outcome))
    table(
        ("task", "starts (attempt, child)", "outcome"),
        rows,
        f"Every task: {args.before} pushed before the blocker, {args.after} after, "
        f"each waiting {args.wait:g} s (tries=3); the blocker tries=1",
    )


def failed_label(failed: FailedTask) -> str:
    """The label a failed record's task was dispatched with ("blocker" for block_loop)."""
    job = failed.job()
    if failed.task == bench_tasks.block_loop.name or job is None:
        return "blocker"
    return str(job.args[0])


def failed_labels(failed: FailedTasks) -> set[str]:
    return {failed_label(f) for f in failed.list(["default"])}


if __name__ == "__main__":
    main()
