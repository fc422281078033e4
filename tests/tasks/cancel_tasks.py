"""Tasks for the tests of cancelling a running task (tests/unit/worker/test_cancel_running.py);
workers import this module from tests/tasks/. Each says in Redis that it started, then
waits (bounded) in the way its mode can be cancelled, and records how it ended."""

from __future__ import annotations

import asyncio
import time

from rqueue import TaskEvent, current_job, on_cancelled, task
from rqueue.errors import TaskCancelled
from rqueue.store.default import default_queue

STARTED = "test:cancel:started"
"""The value of each run that started."""
ENDED = "test:cancel:ended"
"""``value how`` of each run that ended: ``finished`` (it ran to its end) or ``stopped``
(it met its cancel)."""
HOOKED = "test:cancel:hooked"
"""``hook value`` from ``after_cancelled``, ``listener value`` from ``on_cancelled``."""


def note(key: str, text: str) -> None:
    default_queue().client.rpush(key, text)


def cancelled_hook(exc: BaseException, job: object) -> None:
    assert isinstance(exc, TaskCancelled)
    note(HOOKED, f"hook {getattr(job, 'args', ('?',))[0]}")


@on_cancelled
def cancelled_listener(event: TaskEvent) -> None:
    note(HOOKED, f"listener {event.job.args[0]}")


@task(tries=3, after_cancelled=cancelled_hook)
def sleeps(value: str, seconds: float = 20.0) -> None:
    """Process mode: TaskCancelled is raised inside the sleep."""
    note(STARTED, value)
    try:
        time.sleep(seconds)
    except TaskCancelled:
        note(ENDED, f"{value} stopped")
        raise
    note(ENDED, f"{value} finished")


@task(tries=3)
def ignores(value: str, seconds: float = 20.0) -> None:
    """Swallows its cancel and goes on sleeping: its child is killed after the grace."""
    note(STARTED, value)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            time.sleep(deadline - time.monotonic())
        except TaskCancelled:
            note(ENDED, f"{value} ignored")
    note(ENDED, f"{value} finished")


@task(tries=3, after_cancelled=cancelled_hook)
def polls(value: str, seconds: float = 20.0) -> None:
    """Thread mode: looks at current_job().cancelled between steps."""
    note(STARTED, value)
    job = current_job()
    assert job is not None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if job.cancelled:
            note(ENDED, f"{value} stopped")
            job.check_cancelled()
        time.sleep(0.01)
    note(ENDED, f"{value} finished")


@task(tries=3, after_cancelled=cancelled_hook)
async def awaits(value: str, seconds: float = 20.0) -> None:
    """Slot mode: the coroutine is cancelled."""
    note(STARTED, value)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        note(ENDED, f"{value} stopped")
        raise
    note(ENDED, f"{value} finished")


@task(tries=3)
def quick(value: str) -> str:
    note(ENDED, f"{value} finished")
    return value


GAVE_UP: list[str] = []
"""What ``after_cancelled`` heard of ``gives_up`` runs, in this process (inline runs)."""
RAN: list[str] = []
"""Each run of ``gives_up``, in this process (inline runs)."""


def _gave_up(exc: BaseException, job: object) -> None:
    GAVE_UP.append(str(getattr(job, "args", ("?",))[0]))


@task(tries=3, after_cancelled=_gave_up)
def gives_up(value: str) -> None:
    """Raises TaskCancelled with no cancel asked for it (as ``result()`` of a cancelled
    task would): an error like any other, not a cancel."""
    RAN.append(value)
    raise TaskCancelled(f"{value}: the task it waited for was cancelled")


@task(tries=3, dont_retry_for=(RuntimeError,))
def wraps(value: str, seconds: float = 20.0) -> None:
    """Wraps its cancel in an error its dont_retry_for lists: still cancelled, not failed."""
    note(STARTED, value)
    try:
        time.sleep(seconds)
    except TaskCancelled as exc:
        note(ENDED, f"{value} stopped")
        raise RuntimeError("wrapped") from exc
