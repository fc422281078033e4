"""A batch under faults (issue 12): worker children and whole workers killed, Redis
restarted from its AOF, while real ``rqueue work`` processes run its members.

Members run at least once, and some twice (a worker killed before its ack); the
batch must still count each exactly once, finish with exact counts, and queue each
of its ``then`` and ``finally`` callbacks exactly once. The long run of the same is
``python benchmarks/reliability/chaos.py --scenario batch``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from collections.abc import Callable, Iterator

import chaos_flow_tasks as flows
import pytest
import redis
from support import TASKS_DIR, WorkerProcess, Workers, follow_log, wait_for

from rqueue import Batch, batch, chain
from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.workflows.batch_status import BatchStatus

MEMBERS = 2000
WORKER_ARGS = (
    *("--concurrency", "2", "--timeout", "1", "--kill-grace", "0.5", "--tries", "50"),
    *("--log-level", "WARNING"),
)
"""Tries to spare: a member killed mid-run has used an attempt, and a failure for good
would cancel the batch. A whole worker's reservations come back after 15 s (the
reservation margin) + timeout + grace."""


class Logged:
    """Workers started with WORKER_ARGS, their logs read as they come (a full pipe
    would stall them)."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers
        self.logs: list[list[str]] = []

    def start(self) -> WorkerProcess:
        worker = self.workers.start(*WORKER_ARGS)
        self.logs.append(follow_log(worker))
        return worker

    def tracebacks(self) -> str:
        """The workers' logs from the first traceback on, if any: what a failure shows."""
        text = "".join(line for lines in self.logs for line in list(lines))
        return text[max(0, text.index("Traceback") - 300) :] if "Traceback" in text else ""


def dispatch(connection: RedisQueue, work_ms: float) -> Batch:
    member = flows.count_member.using(connection=connection)
    return (
        batch([member.pending(i, work_ms) for i in range(MEMBERS)])
        .then(flows.record_callback.pending("then"))
        .catch(flows.record_callback.pending("catch"))
        .finally_(flows.record_callback.pending("finally"))
        .dispatch(connection)
    )


def kill_a_child(started: list[WorkerProcess], chooser: random.Random) -> int:
    """SIGKILL one child of the workers still alive; how many were killed (0 or 1)."""
    alive = [w for w in started if w.process.poll() is None]
    children = [c for w in alive for c in w.children()]
    if children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(chooser.choice(children).pid, signal.SIGKILL)
            return 1
    return 0


def status(found: Batch) -> BatchStatus | None:
    """The batch's counts; None while Redis is not answering."""
    with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
        return found.status()
    return None


def succeeded_at_least(found: Batch, count: float) -> Callable[[], bool]:
    def reached() -> bool:
        now = status(found)
        return now is not None and now.succeeded >= count

    return reached


def finished(found: Batch) -> bool:
    now = status(found)
    return now is not None and now.finished


def drained(connection: RedisQueue) -> bool:
    """No member or callback waits, runs or is held by a dead worker any more."""
    sizes = connection.sizes(["default"])[0]
    return sizes.ready + sizes.delayed + sizes.reserved == 0


def assert_counted_exactly(connection: RedisQueue, found: Batch) -> None:
    final = found.status()
    assert final is not None and final.finished and not final.cancelled
    assert (final.total, final.succeeded, final.failed, final.skipped) == (MEMBERS, MEMBERS, 0, 0)
    assert (final.pending, final.failed_ids) == (0, ())
    ran = {int(i) for i in connection.client.smembers(flows.RAN)}
    assert ran == set(range(MEMBERS)), f"{MEMBERS - len(ran)} members never ran"
    runs = int(connection.client.get(flows.RUNS))
    called = sorted(c.decode() for c in connection.client.lrange(flows.CALLED, 0, -1))
    print(f"members ran {runs} times for {MEMBERS} members; callbacks: {called}")
    # Each once, after the last member was counted: a re-run of the member that made
    # them due (its ack lost) must not queue a second copy.
    done = f"{MEMBERS}/0/{MEMBERS}"
    assert called == [f"finally:{done}", f"then:{done}"]


def test_a_batch_under_worker_kills_counts_exactly_and_calls_back_once(
    queue: RedisQueue, workers: Workers
) -> None:
    # 8 ms a member: 4 s of work at the least over 4 children, so the faults below all
    # fall while it runs (a member costs the worker itself some 20 us: at 1 ms the batch
    # could finish within the first few kills).
    found = dispatch(queue, work_ms=8)
    logged = Logged(workers)
    started = [logged.start() for _ in range(2)]
    chooser = random.Random(12)
    child_kills = whole_kills = 0
    deadline = time.monotonic() + 60
    # Kill until the batch's counts say it finished: after that its callbacks run,
    # and a callback killed mid-run would rightly run again (at least once).
    while not finished(found):
        assert time.monotonic() < deadline, f"the batch did not finish: {found.status()}"
        alive = [w for w in started if w.process.poll() is None]
        if whole_kills < 2 and child_kills >= (2, 6)[whole_kills]:
            victim = chooser.choice(alive)
            os.killpg(victim.pid, signal.SIGKILL)  # parent and children: acks lost
            victim.wait()
            whole_kills += 1
            started.remove(victim)
            started.append(logged.start())
        else:
            child_kills += kill_a_child(alive, chooser)
        time.sleep(chooser.uniform(0.15, 0.45))  # the pace of the faults
    assert child_kills >= 8 and whole_kills == 2, (child_kills, whole_kills)
    wait_for(lambda: queue.client.llen(flows.CALLED) >= 2, 20, "then and finally")
    # Whatever the dead workers held comes back once their reservations expire.
    wait_for(lambda: drained(queue), 40, "every member and callback to leave the queue")
    assert_counted_exactly(queue, found)
    assert not logged.tracebacks(), logged.tracebacks()[:3000]


@pytest.fixture
def persistent_server() -> Iterator[RedisServer]:
    """A Redis of the test's own with AOF on (``appendfsync always``), to restart."""
    with RedisServer(persistent=True) as server:
        yield server


def test_a_batch_across_redis_restarts_counts_exactly_and_calls_back_once(
    persistent_server: RedisServer,
) -> None:
    target = RedisQueue(Config.resolve(redis_url=persistent_server.url))
    workers = Workers(target.config, cwd=TASKS_DIR)
    try:
        found = dispatch(target, work_ms=0)
        logged = Logged(workers)
        for _ in range(2):
            logged.start()
        for share in (0.25, 0.6):
            wait_for(succeeded_at_least(found, share * MEMBERS), 60, f"{share:.0%} succeeded")
            before = found.status()
            assert before is not None and not before.finished, "the batch finished too soon"
            persistent_server.kill()  # as a crash: only what the AOF holds survives
            time.sleep(0.5)  # the outage
            persistent_server.start()
        wait_for(lambda: finished(found), 60, "the batch to finish")
        wait_for(lambda: target.client.llen(flows.CALLED) >= 2, 20, "then and finally")
        wait_for(lambda: drained(target), 40, "every member and callback to leave the queue")
        assert_counted_exactly(target, found)
        for worker in workers.started:
            assert worker.process.poll() is None, "a worker exited during the restarts"
        assert not logged.tracebacks(), logged.tracebacks()[:3000]
    finally:
        workers.kill_all()
        target.client.close()


WORKFLOW_MEMBERS = 2000
CHORD = 100


def dispatch_workflow(connection: RedisQueue) -> list[Batch]:
    """A chain of a step, a batch of 2,000 chains of two, a step, and a batch whose
    ``then`` gets its members' results; the chain's two batches, as handles."""
    members = batch(
        [
            chain(flows.count_member.pending(i, 8.0), flows.second_step.pending(i))
            for i in range(WORKFLOW_MEMBERS)
        ]
    )
    members = members.then(flows.record_callback.pending("then"))
    members = members.finally_(flows.record_callback.pending("finally"))
    chord = batch([flows.count_member.pending(WORKFLOW_MEMBERS + i) for i in range(CHORD)])
    chord = chord.then(flows.summarise, results=True)
    first = flows.record_step.using(connection=connection).pending("start")
    steps = chain(first, members, flows.record_step.pending("middle"), chord).dispatch()
    found = [step for step in steps.steps if isinstance(step, Batch)]
    return [Batch(step.id, connection) for step in found]


def test_a_nested_workflow_under_kills_and_a_redis_restart_runs_each_step_once(
    persistent_server: RedisServer,
) -> None:
    """Issue 31's scenario: children killed at random, a whole worker killed (its acks
    lost: what it held runs again), Redis restarted from its AOF, while the chain runs.
    Every task's effect lands once (sets), every member is counted once, and each
    callback is queued once (derived ids): the counts are exact and the callbacks'
    list holds each once. A step may run twice (a lost ack); its effect does not."""
    target = RedisQueue(Config.resolve(redis_url=persistent_server.url))
    workers = Workers(target.config, cwd=TASKS_DIR)
    try:
        members, chord = dispatch_workflow(target)
        logged = Logged(workers)
        started = [logged.start() for _ in range(2)]
        chooser = random.Random(31)
        kills = restarts = whole_kills = 0
        deadline = time.monotonic() + 120
        # Faults until the chord's members are all counted (its then may run after).
        while not finished(chord):
            assert time.monotonic() < deadline, f"not finished: {status(members)}"
            counted = status(members)
            if restarts == 0 and counted is not None and counted.succeeded >= 300:
                persistent_server.kill()  # as a crash: only what the AOF holds survives
                time.sleep(0.5)
                persistent_server.start()
                restarts += 1
            if whole_kills == 0 and kills >= 6:  # parent and children: acks lost
                victim = started.pop(0)
                os.killpg(victim.pid, signal.SIGKILL)
                victim.wait()
                whole_kills += 1
                started.append(logged.start())
            kills += kill_a_child(started, chooser)
            time.sleep(chooser.uniform(0.15, 0.45))
        assert restarts == 1 and whole_kills == 1 and kills >= 6, (restarts, whole_kills, kills)
        summed = sum(i + 1 for i in range(WORKFLOW_MEMBERS, WORKFLOW_MEMBERS + CHORD))
        wait_for(lambda: target.client.llen(flows.CALLED) >= 3, 30, "every callback")
        wait_for(lambda: drained(target), 40, "every task to leave the queue")
        client = target.client
        assert client.smembers(flows.STEPS) == {b"start", b"middle"}
        assert {int(i) for i in client.smembers(flows.RAN)} == set(range(WORKFLOW_MEMBERS + CHORD))
        assert {int(i) for i in client.smembers(flows.SECOND)} == set(range(WORKFLOW_MEMBERS))
        done = f"{WORKFLOW_MEMBERS}/0/{WORKFLOW_MEMBERS}"
        called = sorted(c.decode() for c in client.lrange(flows.CALLED, 0, -1))
        runs = {k.decode(): int(v) for k, v in client.hgetall(flows.STEP_RUNS).items()}
        print(f"{kills} children and {whole_kills} worker killed, {restarts} restart; ", end="")
        member_runs = int(client.get(flows.RUNS) or 0)
        print(f"step runs {runs}; {member_runs} first-step runs for {WORKFLOW_MEMBERS + CHORD}; ")
        print(f"callbacks {called}")
        assert sorted(set(called)) == sorted(
            [f"finally:{done}", f"then:{done}", f"chord:{CHORD}:{summed}"]
        )
        for found, total in ((members, WORKFLOW_MEMBERS), (chord, CHORD)):
            final = found.status()
            assert final is not None and final.finished and not final.cancelled
            assert (final.total, final.succeeded, final.failed, final.skipped) == (
                total,
                total,
                0,
                0,
            )
        assert not logged.tracebacks(), logged.tracebacks()[:3000]
    finally:
        workers.kill_all()
        target.client.close()
