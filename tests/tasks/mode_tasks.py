"""Tasks of tests/integration/test_same_outcomes_every_mode.py: one workflow's tasks, each twice,
as ``def`` (process mode, ``--threads``, ``sync()``) and as ``async def`` (``--slots``,
``sync()``), the same bodies. Each records what it did in Redis under its plain name
(the async twin's name without ``_async``), so every mode's record reads the same.
"""

from __future__ import annotations

from typing import Any

from rqueue import Batch, TaskFailed, current_batch, current_job, task
from rqueue.store.default import default_queue

DONE = "test:modes"


def _record(what: str) -> None:
    default_queue().client.rpush(DONE, what)


def _attempt() -> int:
    job = current_job()
    assert job is not None
    return job.attempts


def _added(index: int, twin: Any) -> None:
    found = current_batch()
    assert found is not None
    _record(f"adds:{index}")
    found.add([twin.pending(index + 10)])


@task(keep_result=60)
def add(a: int, b: int) -> int:
    _record(f"add:{a}+{b}")
    return a + b


@task(keep_result=60)
async def add_async(a: int, b: int) -> int:
    _record(f"add:{a}+{b}")
    return a + b


@task(keep_result=60)
def double(value: int) -> int:
    _record(f"double:{value}")
    return value * 2


@task(keep_result=60)
async def double_async(value: int) -> int:
    _record(f"double:{value}")
    return value * 2


@task(keep_result=60, tries=1)
def explode(value: int) -> None:
    _record(f"explode:{value}")
    raise ValueError(f"exploded at {value}")


@task(keep_result=60, tries=1)
async def explode_async(value: int) -> None:
    _record(f"explode:{value}")
    raise ValueError(f"exploded at {value}")


@task(keep_result=60)
def never(value: int) -> None:
    _record(f"never:{value}")


@task(keep_result=60)
async def never_async(value: int) -> None:
    _record(f"never:{value}")


@task
def caught(failure: TaskFailed, label: str) -> None:
    _record(f"caught:{label}:{failure.exception}:{failure.message}")


@task
async def caught_async(failure: TaskFailed, label: str) -> None:
    _record(f"caught:{label}:{failure.exception}:{failure.message}")


@task(keep_result=60)
def member(index: int) -> int:
    _record(f"member:{index}")
    return index


@task(keep_result=60)
async def member_async(index: int) -> int:
    _record(f"member:{index}")
    return index


@task(keep_result=60)
def adds(index: int) -> None:
    _added(index, member)


@task(keep_result=60)
async def adds_async(index: int) -> None:
    _added(index, member_async)


@task
def finished(found: Batch, label: str) -> None:
    status = found.status()
    assert status is not None
    _record(f"{label}:{status.total}:{status.succeeded}:{status.failed}")


@task
async def finished_async(found: Batch, label: str) -> None:
    status = found.status()
    assert status is not None
    _record(f"{label}:{status.total}:{status.succeeded}:{status.failed}")


@task(keep_result=60, unique=True)
def once(value: str) -> str:
    _record(f"once:{value}")
    return value


@task(keep_result=60, unique=True)
async def once_async(value: str) -> str:
    _record(f"once:{value}")
    return value


@task(keep_result=60, tries=5, max_exceptions=2, backoff=0)
def flaky(value: str) -> None:
    _record(f"flaky:{value}:{_attempt()}")
    raise RuntimeError(f"flaky {value}")


@task(keep_result=60, tries=5, max_exceptions=2, backoff=0)
async def flaky_async(value: str) -> None:
    _record(f"flaky:{value}:{_attempt()}")
    raise RuntimeError(f"flaky {value}")


SYNC = {
    "add": add,
    "double": double,
    "explode": explode,
    "never": never,
    "caught": caught,
    "member": member,
    "adds": adds,
    "finished": finished,
    "once": once,
    "flaky": flaky,
}
ASYNC: dict[str, Any] = {
    "add": add_async,
    "double": double_async,
    "explode": explode_async,
    "never": never_async,
    "caught": caught_async,
    "member": member_async,
    "adds": adds_async,
    "finished": finished_async,
    "once": once_async,
    "flaky": flaky_async,
}
"""The workflow's tasks by plain name, as ``def`` and as ``async def``."""
