"""Tasks with ``async def`` hooks, and ``async def`` listeners, for
tests/unit/worker/test_async_hooks.py; workers import this module from tests/tasks/.

Every hook and listener awaits before it writes to Redis, so a write proves it was
awaited to its end, not merely called. Each also writes the serial number of the event
loop it ran on (numbered on first sight, per process): one loop per child shows as
one number, where ``asyncio.run()`` per call would count up.
"""

from __future__ import annotations

import asyncio
import itertools

from rqueue import Job, TaskEvent, on_failed, on_processed, task
from rqueue.store.default import default_queue

HOOKED = "test:async-hooks:hooked"
"""``succeeded|failed name loop-serial`` from each hook."""
HEARD = "test:async-hooks:heard"
"""``event name loop-serial`` from the listener."""
SLOW = "test:async-hooks:slow"
"""``start`` and ``end`` of the slow hook."""

_serials = itertools.count(1)


def note(key: str, text: str) -> None:
    default_queue().client.rpush(key, text)


def loop_serial() -> int:
    loop = asyncio.get_running_loop()
    if not hasattr(loop, "test_serial"):
        loop.test_serial = next(_serials)  # type: ignore[attr-defined]
    serial: int = loop.test_serial  # type: ignore[attr-defined]
    return serial


async def _succeeded(result: str, job: Job) -> None:
    await asyncio.sleep(0.01)
    note(HOOKED, f"succeeded {result} {loop_serial()}")


async def _failed(exception: BaseException, job: Job) -> None:
    await asyncio.sleep(0.01)
    note(HOOKED, f"failed {job.args[0]} {loop_serial()}")


async def _heard(event: TaskEvent) -> None:
    if event.job.task.startswith(f"{__name__}:"):  # registered in the test process too
        await asyncio.sleep(0.01)
        note(HEARD, f"{event.name} {event.job.args[0]} {loop_serial()}")


on_processed(_heard)
on_failed(_heard)


@task(tries=1, after_succeeded=_succeeded, after_failed=_failed)
def plain(name: str, fail: bool = False) -> str:
    """Runs in process mode: its hooks run to their end on the child's loop."""
    if fail:
        raise RuntimeError(name)
    return name


@task(tries=1, after_succeeded=_succeeded, after_failed=_failed)
async def awaited(name: str, fail: bool = False) -> str:
    """Runs in async mode: its hooks are scheduled on the running loop."""
    await asyncio.sleep(0.01)
    if fail:
        raise RuntimeError(name)
    return name


async def _broken(result: str) -> None:
    await asyncio.sleep(0.01)
    raise RuntimeError("async hook is broken")


@task(after_succeeded=_broken, keep_result=60)
def plain_broken(name: str) -> str:
    return name


@task(after_succeeded=_broken, keep_result=60)
async def awaited_broken(name: str) -> str:
    await asyncio.sleep(0.01)
    return name


async def _slow(result: None) -> None:
    note(SLOW, "start")
    await asyncio.sleep(1.5)
    note(SLOW, "end")


@task(after_succeeded=_slow)
async def awaited_slow() -> None:
    await asyncio.sleep(0.01)
