"""App-wide listeners: the one hook surface for optional behaviour.

Laravel's ``Queue::before``/``after``/``failing`` and ``Queue::exceptionOccurred``:
metrics, auditing or alerting hang off these instead of branches in the worker loop.
Listeners are registered at import time, like tasks, and run in the worker child;
an ``async def`` listener is awaited (rqueue/tasks/awaiting.py says where and how).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from rqueue.encoding.payload import Job
from rqueue.tasks import awaiting
from rqueue.tasks.validation import check_callable

EventName = Literal["processing", "processed", "exception", "failed", "cancelled"]

log = logging.getLogger("rqueue.events")
_RAISED = "listener %r for %s raised"


@dataclass(frozen=True)
class TaskEvent:
    """What a listener receives.

    ``processing``: before the task runs. ``processed``: it returned ``result``.
    ``exception``: an attempt raised ``exception`` and ``will_retry`` says whether it
    is retried. ``failed``: no attempts are left (or it could not run at all).
    ``cancelled``: it was cancelled while it ran (``exception`` is the
    ``TaskCancelled`` it stopped with; None if its worker had to be killed).
    """

    name: EventName
    job: Job
    result: Any = None
    exception: BaseException | None = None
    will_retry: bool = False
    duration: float = 0.0


Listener = Callable[[TaskEvent], Awaitable[None] | None]
_listeners: dict[str, list[Listener]] = {
    "processing": [],
    "processed": [],
    "exception": [],
    "failed": [],
    "cancelled": [],
}


def listen(event: EventName, listener: Listener) -> Listener:
    check_callable(listener, "listener", may_be_async=True)
    _listeners[event].append(listener)
    return listener


def on_processing(listener: Listener) -> Listener:
    return listen("processing", listener)


def on_processed(listener: Listener) -> Listener:
    return listen("processed", listener)


def on_exception(listener: Listener) -> Listener:
    return listen("exception", listener)


def on_failed(listener: Listener) -> Listener:
    return listen("failed", listener)


def on_cancelled(listener: Listener) -> Listener:
    return listen("cancelled", listener)


def forget(listener: Listener) -> None:
    for listeners in _listeners.values():
        while listener in listeners:
            listeners.remove(listener)


def has_listeners(event: EventName) -> bool:
    return bool(_listeners[event])


def emit(event: TaskEvent) -> None:
    """Call every listener; one that raises is logged and never affects the task. An
    ``async def`` listener is awaited here, or scheduled on the loop running in this
    thread (rqueue/tasks/awaiting.py)."""
    for listener in _listeners[event.name]:
        try:
            returned = listener(event)
        except BaseException:  # sys.exit() in a listener must not end the worker child
            log.exception(_RAISED, listener, event.name)
            continue
        if returned is not None and inspect.isawaitable(returned):  # None: a plain def's
            awaiting.finish(returned, log, _RAISED, listener, event.name)
