"""A worker child holds little of a queue with priority levels (``worker/held_work.py``):
an urgent task dispatched behind a backlog of low ones runs next, not after a batch the
child reserved before it came; so does a quiet fair group's task behind a busy group."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from support import Workers, strings, task_module, wait_for

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

ORDER = "test:order"
GO = "test:go"
"""What a ``low`` task waits for (bounded) before it ends: the test says when."""
QUEUE = "held"
BACKLOG = 12
TASKS = f"""
from rqueue import task
from rqueue.store.default import default_queue


def held(label):
    client = default_queue().client
    client.rpush({ORDER!r}, f"start-{{label}}")
    client.blpop({GO!r}, timeout=30)
    client.rpush({ORDER!r}, label)


@task(queue={QUEUE!r}, priority=9)
def low(label):
    held(label)


@task(queue={QUEUE!r}, priority=9)
async def low_async(label):
    held(label)  # blocks the loop: with --slots 1 there is nothing else to run


@task(queue={QUEUE!r}, group="busy")
def busy(label):
    held(label)


@task(queue={QUEUE!r}, priority=0)
def urgent():
    default_queue().client.rpush({ORDER!r}, "start-urgent")


@task(queue={QUEUE!r}, group="quiet")
def quiet():
    default_queue().client.rpush({ORDER!r}, "start-urgent")
"""
pytestmark = pytest.mark.topology


@pytest.fixture
def tasks(config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    yield from task_module("held_tasks", TASKS, tmp_path, monkeypatch)


def started(queue: RedisQueue, label: str) -> bool:
    return f"start-{label}" in strings(queue.client, ORDER)


def starts(queue: RedisQueue) -> list[str]:
    """The tasks started so far, in order."""
    return [label for label in strings(queue.client, ORDER) if label.startswith("start-")]


@pytest.mark.parametrize(
    ("name", "first", "mode"),
    [
        ("low", "urgent", ()),
        ("low_async", "urgent", ("--slots", "1")),
        ("low", "urgent", ("--threads", "1")),
        ("busy", "quiet", ()),  # fair groups' turns are kept among the levels
    ],
    ids=["process", "slots", "threads", "groups"],
)
def test_an_urgent_task_runs_next_behind_a_backlog_at_the_default_prefetch(
    tasks: ModuleType,
    queue: RedisQueue,
    config: Config,
    tmp_path: Path,
    name: str,
    first: str,
    mode: tuple[str, ...],
) -> None:
    for n in range(BACKLOG):
        getattr(tasks, name).dispatch(f"low{n}")
    workers = Workers(config, cwd=tmp_path)
    workers.start(QUEUE, "-A", "held_tasks", "--block-for", "0.2", *mode)
    reserved = queue.keys(QUEUE).reserved
    try:
        held = []
        for n in range(3):  # each low task ends when the test says: batches would grow
            wait_for(lambda n=n: started(queue, f"low{n}"), message=f"low{n} started")
            held.append(queue.client.zcard(reserved))
            if n < 2:
                queue.client.rpush(GO, "go")
        getattr(tasks, first).dispatch()
        # low2 ends: the urgent task is the next to start; a new group's after one turn
        # of the busy one's (low3, which ends at once)
        turns = 1 if first == "quiet" else 0
        queue.client.rpush(GO, *["go"] * (1 + turns))
        wait_for(lambda: len(starts(queue)) > 3 + turns, message="the next tasks started")
        order = starts(queue)
        queue.client.rpush(GO, *["go"] * BACKLOG)
        wait_for(lambda: len(starts(queue)) == BACKLOG + 1, message="the backlog ran")
    finally:
        workers.kill_all()
    assert held == [1, 1, 1], held  # the running task: none reserved ahead
    before = [f"start-low{n}" for n in range(3 + turns)]
    assert order[: 4 + turns] == [*before, "start-urgent"], order
