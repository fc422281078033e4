"""Tasks of the workflow tests; workers import this module from tests/tasks/.

Each task records what it did in Redis (it runs in a worker child), so a test can
assert on it and wait for it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

from rqueue import Batch, TaskFailed, current_batch, current_job, task
from rqueue.store.default import default_queue

DONE = "test:flow"


def redis():  # type: ignore[no-untyped-def]
    return default_queue().client


@task(keep_result=60)
def add(a: int, b: int) -> int:
    redis().rpush(DONE, f"add:{a}+{b}")
    return a + b


@task(keep_result=60, tries=1)
def explode(message: str) -> None:
    redis().rpush(DONE, f"explode:{message}")
    raise ValueError(message)


@task(keep_result=60)
def unkeepable() -> object:
    return object()


@task
def note(value: Any) -> Any:
    redis().rpush(DONE, f"note:{value}")
    return value


@task(keep_result=60)
def double(value: int) -> int:
    redis().rpush(DONE, f"double:{value}")
    return value * 2


@task
def grow_chain(value: str) -> None:
    job = current_job()
    assert job is not None
    job.chain.append(note.pending(f"appended-after-{value}"))
    job.chain.prepend(note.pending(f"prepended-after-{value}"))


@task
def on_failure(failure: TaskFailed, label: str) -> None:
    redis().rpush(DONE, f"catch:{label}:{failure.exception}:{failure.message}")


@task
def die_once(value: str) -> str:
    """Kill its own worker child the first time it runs (a lost ack), then succeed."""
    if redis().incr(f"test:die-once:{value}") == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    redis().rpush(DONE, f"die-once:{value}")
    return value


@task
def member(index: int) -> int:
    redis().incr("test:member-runs")
    return index


@task(tries=1)
def member_fails(index: int) -> None:
    redis().incr("test:member-runs")
    raise RuntimeError(f"member {index} fails")


@task
def adds_members(count: int) -> None:
    found = current_batch()
    assert found is not None
    found.add([member.pending(1000 + i) for i in range(count)])


@task
def batch_callback(found: Batch, label: str) -> None:
    status = found.status()
    assert status is not None
    redis().rpush(DONE, f"{label}:{status.succeeded}/{status.failed}/{status.total}")


def _kill_own_child(result: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@task(after_succeeded=_kill_own_child, tries=3)
def step_then_die(value: str) -> str:
    """A step whose worker child dies right after it succeeded (in its hook)."""
    redis().rpush(DONE, f"step-then-die:{value}")
    return value


@task(tries=1)
def fails_first_time(index: int) -> int:
    """Fails on its first run, succeeds when retried."""
    if redis().incr(f"test:fails-first:{index}") == 1:
        raise RuntimeError(f"first run of {index} fails")
    redis().incr("test:member-runs")
    return index


MET = "test:adds-met"


def _all_met(count: int) -> bool:
    return int(redis().get(MET) or 0) >= count


def _meet(count: int) -> None:
    """Wait (10 s at most) until ``count`` callers reached this point."""
    redis().incr(MET)
    deadline = time.monotonic() + 10
    while not _all_met(count) and time.monotonic() < deadline:
        time.sleep(0.01)


@task
def adds_twice(index: int, members: int) -> None:
    """Add a member, wait until every member of the batch added one, add another:
    with ``--threads`` the members' runs interleave."""
    found = current_batch()
    assert found is not None
    found.add([member.pending(2000 + 2 * index)])
    _meet(members)
    found.add([member.pending(2001 + 2 * index)])


@task
async def adds_twice_async(index: int, members: int) -> None:
    """``adds_twice`` as a coroutine: with ``--slots`` the members' runs interleave."""
    found = current_batch()
    assert found is not None
    found.add([member.pending(2000 + 2 * index)])
    redis().incr(MET)
    deadline = time.monotonic() + 10
    while not _all_met(members) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    found.add([member.pending(2001 + 2 * index)])


@task
def progress_seen(found: Batch) -> None:
    """A progress callback: record the counts it was given, not the counts now."""
    assert found.counted is not None
    counted = found.counted
    redis().rpush(DONE, f"seen:{counted.succeeded}/{counted.total}:{counted.progress:.0f}")
