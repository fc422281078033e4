"""Workflows: what a kept result and batch membership cost per task, and a big batch.

Two measurements, each on a redis-server of its own:

1. Per task, in one run: one worker child in this process (as ``hot_path.py`` runs
   it: no parent, no fork) works through plain empty tasks, the same task with
   ``keep_result``, the members of a batch of empty tasks, the members of a batch
   whose callback gets their results (each returns a 31-character string), and the
   nested forms, each in turn within each round. For each: child CPU and wall time
   per task, the requests the child sent to Redis per task, and Redis's commands per
   task by command (``INFO commandstats`` after ``CONFIG RESETSTAT``). Redis counts
   the commands a script runs as well as the script call, so the requests (round
   trips) are counted on the client's side too.
2. One batch of ``--members`` empty tasks with a ``then`` callback: how fast
   ``batch([...]).dispatch()`` sends it (no worker running yet), how fast a pool of
   ``rqueue work --concurrency N`` completes it, how long until ``then`` has run, and
   the batch's counts once the pool has stopped.

    python benchmarks/speed/workflows.py          # 30,000 tasks per kind, 100,000 members, 3 rounds
    python benchmarks/speed/workflows.py --quick  # a check in well under a minute

A worker of the pool imports this module (``workflows:record_then``) to run ``then``.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import redis
from common import (
    Requests,
    command_calls,
    machine_summary,
    median,
    rqueue_work,
    script_usec,
    table,
)
from in_process import in_process_child

from rqueue import Batch, BatchStatus, batch, chain, task
from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue

KINDS = (
    "plain",
    "keep_result",
    "batch member",
    "member, results=True",
    "chain of 2",
    "chain of 2 as member",
    "batch in a chain",
)
KEEP_SECONDS = 3600
OWN_COMMANDS = frozenset({"info", "config", "config|resetstat"})
"""What the benchmark itself sends between RESETSTAT and INFO: left out of the counts."""
CHAINED_BATCH = 5000
"""Tasks per chain of "batch in a chain": its batch's members ride in the chain's first
payload, and 30,000 of them (2.9 MB) are over the default payload limit of 1 MiB."""
THEN_KEY = "bench:then:"
"""A hash per batch id: how often its ``then`` ran, and when it last did."""


@task
def record_then(finished: Batch) -> None:
    """The big batch's ``then``: count its runs and stamp the time it ran."""
    pipe = bench_tasks.client().pipeline(transaction=False)
    pipe.hincrby(THEN_KEY + finished.id, "runs", 1)
    pipe.hset(THEN_KEY + finished.id, "at", repr(time.time()))
    pipe.execute()


# -- 1. per task, in one run --------------------------------------------------------------


def fill(kind: str, count: int) -> None:
    """Queue ``count`` empty tasks of one kind (not timed, not counted): a batch's
    members; chains of two, alone or as a batch's members (``count`` tasks in all);
    chains of a task, a batch and a task, 5,000 tasks each."""
    empty = bench_tasks.empty
    if kind == "batch member":
        batch([empty.pending() for _ in range(count)]).dispatch()
        return
    if kind == "member, results=True":  # its callback, on a queue not served, never runs
        value = bench_tasks.small_value
        members = batch([value.pending() for _ in range(count)])
        members.then(bench_tasks.results_seen, results=True).dispatch()
        return
    if kind == "chain of 2":  # the same chains, in no batch
        for _ in range(count // 2):
            chain(empty.pending(), empty.pending()).dispatch()
        return
    if kind == "chain of 2 as member":
        batch([chain(empty.pending(), empty.pending()) for _ in range(count // 2)]).dispatch()
        return
    if kind == "batch in a chain":  # chains of 5,000: a chain's payload carries its batch
        for start in range(0, count, CHAINED_BATCH):
            members = batch([empty.pending() for _ in range(min(CHAINED_BATCH, count - start) - 2)])
            chain(empty.pending(), members, empty.pending()).dispatch()
        return
    dispatched = bench_tasks.empty
    if kind == "keep_result":
        dispatched = dispatched.using(keep_result=KEEP_SECONDS)
    for start in range(0, count, 1000):
        dispatched.dispatch_many([()] * min(1000, count - start))


def per_task(tasks: int, rounds: int) -> None:
    with Requests() as requests, RedisServer() as server:
        os.environ["REDIS_URL"] = server.url
        worker = in_process_child(server.url)
        options = worker.options
        client = redis.Redis.from_url(server.url)
        print(machine_summary(client))
        rows = []
        commands: dict[str, dict[str, int]] = {kind: {} for kind in KINDS}
        sent = dict.fromkeys(KINDS, 0)
        cpu_per_task: dict[str, list[float]] = {kind: [] for kind in KINDS}
        rates: dict[str, list[float]] = {kind: [] for kind in KINDS}
        redis_us: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for number in range(rounds):
            turn = number % len(KINDS)
            for kind in KINDS[turn:] + KINDS[:turn]:  # each goes first in turn
                fill(kind, tasks)
                target = worker.slot.processed + tasks
                client.config_resetstat()
                before = requests.sent
                cpu, wall = time.process_time(), time.perf_counter()
                while worker.slot.processed < target:
                    worker._step()
                worker.reservations.flush()  # the last acks belong to this kind too
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                trips = requests.sent - before
                calls = commands_of(command_calls(client))
                redis_us[kind].append(script_usec(client) / tasks)
                for name, count in calls.items():
                    commands[kind][name] = commands[kind].get(name, 0) + count
                sent[kind] += trips
                cpu_per_task[kind].append(cpu / tasks * 1e6)
                rates[kind].append(tasks / wall)
                rows.append(
                    (
                        number + 1,
                        kind,
                        tasks,
                        cpu / tasks * 1e6,
                        wall / tasks * 1e6,
                        tasks / wall,
                        f"{trips / tasks:.3f}",
                        f"{sum(calls.values()) / tasks:.2f}",
                        redis_us[kind][-1],
                    )
                )
        client.close()
    table(
        (
            "round",
            "kind",
            "tasks",
            "child CPU us/task",
            "wall us/task",
            "tasks/s",
            "round trips/task",
            "commands/task",
            "Redis scripts us/task",
        ),
        rows,
        f"Per task: one worker child in-process, empty tasks, --prefetch {options.prefetch}",
    )
    plain = median(cpu_per_task["plain"])
    total = tasks * rounds
    table(
        (
            "kind",
            "child CPU us/task",
            "+ us/task vs plain",
            "tasks/s",
            "round trips/task",
            "commands/task",
            "Redis scripts us/task",
        ),
        [
            (
                kind,
                median(cpu_per_task[kind]),
                f"{median(cpu_per_task[kind]) - plain:+.2f}",
                median(rates[kind]),
                f"{sent[kind] / total:.3f}",
                f"{sum(commands[kind].values()) / total:.2f}",
                median(redis_us[kind]),
            )
            for kind in KINDS
        ],
        f"Per task, medians of {rounds} round(s) (round trips and commands: all rounds; "
        "Redis scripts: the time Redis spent in its scripts, INFO commandstats' evalsha)",
    )
    names = sorted(
        {name for counts in commands.values() for name in counts},
        key=lambda name: (-commands["batch member"].get(name, 0), name),
    )
    table(
        ("command", *(f"{kind}/task" for kind in KINDS)),
        [
            (name, *(f"{commands[kind].get(name, 0) / total:.3f}" for kind in KINDS))
            for name in names
        ],
        "Redis commands per task by command (INFO commandstats; commands run inside "
        "scripts counted too, so evalsha is the script calls and the rest mostly what "
        "they ran)",
    )


def commands_of(calls: dict[str, int]) -> dict[str, int]:
    """The calls of the worker's commands, without the benchmark's own."""
    return {name: count for name, count in calls.items() if name not in OWN_COMMANDS}


# -- 2. a big batch and a worker pool --------------------------------------------------


def big_batch(members: int, concurrency: int, rounds: int) -> None:
    with RedisServer() as server:
        os.environ["REDIS_URL"] = server.url
        queue = RedisQueue(Config.resolve(redis_url=server.url))
        use(queue)
        client = queue.client
        print(f"\n{machine_summary(client)}")
        rates, counts = [], []
        for number in range(1, rounds + 1):
            calls = [bench_tasks.empty.pending() for _ in range(members)]
            started, clock = time.time(), time.perf_counter()
            handle = batch(calls).then(record_then).dispatch()
            dispatch = time.perf_counter() - clock
            pool = rqueue_work(server.url, concurrency)
            pool_started = time.time()
            try:
                first = watch(handle, client, pool, 120 + members / 500)
            finally:
                stop_process(pool)
            status = handle.status()
            if status is None or status.finished_at is None:
                raise RuntimeError(f"batch {handle.id} vanished or did not finish: {status}")
            then = client.hgetall(THEN_KEY + handle.id)
            then_at = float(then[b"at"])
            size = queue.sizes(["default"])[0]
            rates.append(
                (
                    number,
                    members,
                    dispatch,
                    members / dispatch,
                    members / max(status.finished_at - (first or pool_started), 1e-6),
                    then_at - pool_started,
                    then_at - started,
                )
            )
            counts.append(
                (
                    number,
                    *status_counts(status),
                    int(then[b"runs"]),
                    size.ready + size.delayed + size.reserved,
                    size.failed,
                )
            )
    table(
        (
            "round",
            "members",
            "dispatch s",
            "dispatched members/s",
            "completed members/s",
            "pool start -> then ran, s",
            "dispatch start -> then ran, s",
        ),
        rates,
        f"A batch of empty tasks with `then`: dispatched with no worker running, then "
        f"`rqueue work --concurrency {concurrency}` (completed: from the first member "
        "counted to the batch finished)",
    )
    table(
        (
            "round",
            "total",
            "succeeded",
            "failed",
            "skipped",
            "pending",
            "finished",
            "then runs",
            "left queued",
            "failed list",
        ),
        counts,
        "Counts once the pool has stopped",
    )


def watch(
    handle: Batch, client: redis.Redis, pool: subprocess.Popen[bytes], timeout: float
) -> float:
    """Poll until the batch's ``then`` has run; return when a member was first counted
    (0.0 if it had already finished at the first look)."""
    first = 0.0
    deadline = time.time() + timeout
    while not client.hexists(THEN_KEY + handle.id, "at"):
        if time.time() > deadline:
            raise TimeoutError(f"`then` had not run after {timeout:.0f} s: {handle.status()}")
        if pool.poll() is not None:
            raise RuntimeError(f"the worker pool exited ({pool.returncode}) before `then` ran")
        status = handle.status()
        if not first and status is not None and status.processed:
            first = time.time()
        time.sleep(0.02)
    return first


def status_counts(status: BatchStatus) -> tuple[int, int, int, int, int, str]:
    return (
        status.total,
        status.succeeded,
        status.failed,
        status.skipped,
        status.pending,
        "yes" if status.finished else "no",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=30_000, help="tasks per kind per round")
    parser.add_argument("--members", type=int, default=100_000, help="members of the big batch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2, help="children of the pool")
    parser.add_argument("--quick", action="store_true", help="3,000 tasks, 5,000 members, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.members, args.rounds = 3000, 5000, 1
    logging.getLogger("rqueue").setLevel(logging.WARNING)
    per_task(args.tasks, args.rounds)
    big_batch(args.members, args.concurrency, args.rounds)


if __name__ == "__main__":
    main()
