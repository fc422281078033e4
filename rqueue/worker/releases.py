"""Who put a task back with ``Release``, and what that costs the task.

A middleware's release (a rate limit, a lock held elsewhere, an open breaker) gives
the attempt back: the task did not run, and a rate limit may hold a task back
through a long backlog. A release raised by the task's own code is a retry it asked
for: it uses the attempt, as Laravel's ``$this->release()`` counts towards
``$tries`` and Celery's ``self.retry()`` towards ``max_retries``. So a task that
releases itself on every try fails after its last one (:func:`last_try`), instead
of looping for ever.

Either way the release is logged at INFO, naming who released: the task itself, or
the middleware class whose code raised it (read off the traceback, so no middleware
has to say so; only a release costs the walk).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rqueue.errors import MaxAttemptsExceeded
from rqueue.middleware.base import Middleware, Release

TASK_ITSELF = "the task itself"
WARM_SHUTDOWN = "a warm shutdown"
"""Who put back an iterable task stopped at an item boundary (``tasks/iterable.py``'s
``Suspended``): its attempt is given back, as a middleware's release gives it."""


def released_by(exc: Release, fn: Callable[..., Any] | None) -> str:
    """``"the task itself"``, or ``"its middleware <Class>"``: the innermost of the
    task's function and the middleware whose frames the release passed through."""
    code = getattr(fn, "__code__", None)
    frames = []
    trace = exc.__traceback__
    while trace is not None:
        frames.append(trace.tb_frame)
        trace = trace.tb_next
    for frame in reversed(frames):  # from where it was raised, outwards
        if frame.f_code is code:
            return TASK_ITSELF
        owner = frame.f_locals.get("self")
        if isinstance(owner, Middleware):
            return f"its middleware {type(owner).__qualname__}"
    return TASK_ITSELF  # raised with no middleware around it: the task's own call


def last_try(exc: Release, attempts: int, tries: int) -> MaxAttemptsExceeded:
    """The failure of a task that released itself on its last try (``exc`` its cause)."""
    failure = MaxAttemptsExceeded(
        f"released by the task itself on its last try ({attempts} of {tries}); a release "
        "from the task's own code uses an attempt (raise Release from a middleware to "
        "hold a task back without using one)"
    )
    failure.__cause__ = exc
    return failure
