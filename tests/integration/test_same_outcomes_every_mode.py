"""One workflow, every way rqueue runs tasks, the same outcomes.

A chain with a catch, a batch whose member adds a member and whose ``then`` and
``finally_`` report its counts, a unique task, a task with ``max_exceptions``, and
results kept: run by real ``rqueue work`` children one task at a time, in threads
(``--threads``), as coroutines (``--slots``, the ``async def`` twins), and inline under
``sync()`` (both twins). Every mode must end with the same statuses, results and
records: the attempt lifecycle is one, whatever calls the function.

Written before the lifecycle was made one (#27), it found that under ``sync()`` a
member's ``current_batch()`` named the batch in Redis, where an inline batch never is:
its ``add()`` failed the member.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mode_tasks as mt
import pytest
from support import Workers, strings, wait_for

from rqueue import batch, chain
from rqueue.store.queue import RedisQueue
from rqueue.testing import sync

FAST = ("--block-for", "0.5", "--log-level", "warning")

EXPECTED_RECORDS = sorted(
    [
        "add:1+2",
        "double:3",
        "explode:6",
        "caught:chain:ValueError:exploded at 6",
        "member:0",
        "member:1",
        "adds:2",
        "member:12",
        "then:4:4:0",
        "finally:4:4:0",
        "once:a",
        "once:a",
        "flaky:x:1",
        "flaky:x:2",
    ]
)
"""What the workflow does, in any order: the chain stops at ``explode`` and its catch
runs; the batch grows to four members; the unique task runs twice, one after the other
(its lock freed at its end); the task with ``max_exceptions=2`` stops at its second."""


def dispatch_all(tasks: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """Dispatch the workflow; return what reads its outcome once it has run."""
    steps = chain(
        tasks["add"].pending(1, 2),
        tasks["double"].pending(),
        tasks["explode"].pending(),
        tasks["never"].pending(),
        pipe=True,
    ).catch(tasks["caught"], "chain")
    dispatched = steps.dispatch()
    members = [tasks["member"].pending(0), tasks["member"].pending(1), tasks["adds"].pending(2)]
    opened = (
        batch(members)
        .then(tasks["finished"], "then")
        .finally_(tasks["finished"], "finally")
        .dispatch()
    )
    flaky = tasks["flaky"].dispatch("x")

    def outcome() -> dict[str, Any]:
        status = opened.status()
        assert status is not None
        return {
            "chain": dispatched.status(),
            "chain results": [dispatched.steps[0].result(0), dispatched.steps[1].result(0)],
            "batch": (status.total, status.succeeded, status.failed, status.finished),
            "flaky": flaky.status(),
        }

    return outcome


def run_unique_twice(tasks: dict[str, Any], settled: Callable[[Any], None]) -> list[str]:
    """The unique task, dispatched again once its first call finished: the lock is free."""
    statuses = []
    for _ in range(2):
        handle = tasks["once"].dispatch("a")
        settled(handle)
        statuses.append(handle.status())
    return statuses


def in_worker(queue: RedisQueue, workers: Workers, tasks: dict[str, Any], *mode: str) -> Any:
    outcome = dispatch_all(tasks)
    workers.start(*mode, *FAST)
    wait_for(lambda: len(strings(queue.client, mt.DONE)) >= 12, 60, "the workflow to run")

    def settled(handle: Any) -> None:
        wait_for(lambda: handle.status() == "succeeded", 30, "the unique task")

    unique = run_unique_twice(tasks, settled)
    wait_for(lambda: len(strings(queue.client, mt.DONE)) >= len(EXPECTED_RECORDS), 30)
    wait_for(lambda: outcome()["flaky"] == "failed", 30, "the flaky task to fail")
    return outcome(), unique


def inline(tasks: dict[str, Any]) -> Any:
    with sync():
        outcome = dispatch_all(tasks)
        unique = run_unique_twice(tasks, lambda handle: None)
        return outcome(), unique


def test_every_mode_gives_the_same_outcomes(queue: RedisQueue, workers: Workers) -> None:
    """Run alone (each mode in turn, Redis emptied between them): one test, so a failure
    names the mode that differs from process mode."""
    runs: dict[str, Any] = {}

    def record(name: str, outcome: Any) -> None:
        runs[name] = (outcome, sorted(strings(queue.client, mt.DONE)))
        queue.client.flushdb()

    record("processes", in_worker(queue, workers, mt.SYNC, "-c", "2"))
    workers.kill_all()
    record("threads", in_worker(queue, workers, mt.SYNC, "-c", "1", "--threads", "4"))
    workers.kill_all()
    record("slots", in_worker(queue, workers, mt.ASYNC, "-c", "1", "--slots", "4"))
    workers.kill_all()
    record("sync", inline(mt.SYNC))
    record("sync, async def", inline(mt.ASYNC))

    reference = runs["processes"]
    assert reference[1] == EXPECTED_RECORDS
    assert reference[0] == (
        {
            "chain": ["succeeded", "succeeded", "failed", "unknown"],
            "chain results": [3, 6],
            "batch": (4, 4, 0, True),
            "flaky": "failed",
        },
        ["succeeded", "succeeded"],
    )
    for name, run in runs.items():
        assert run == reference, name


@pytest.mark.parametrize("tasks", [mt.SYNC, mt.ASYNC], ids=["def", "async def"])
def test_the_twins_are_alike(tasks: dict[str, Any]) -> None:
    """The two families name the same workflow (a typo would make the modes differ)."""
    assert sorted(tasks) == sorted(mt.SYNC)
