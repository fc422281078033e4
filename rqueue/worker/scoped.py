"""The lifecycle of a child that an integration joined: every call in its scopes.

Tracing (``rqueue/contrib/opentelemetry.py``, ``sentry.py``) needs its span current
while the task's function runs, in the thread or coroutine that runs it, whatever the
mode: its participant's ``call_scope`` (``attempt.py``). A child whose roster has such
a participant (``participants.join``) runs a :class:`ScopedLifecycle`, whose every call
is made in the attempt's call scopes; a child with none runs the plain
:class:`~rqueue.worker.lifecycle.Lifecycle`, whose hot path never asks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from rqueue.worker.attempt import Attempt, call_scopes
from rqueue.worker.lifecycle import Lifecycle


class ScopedLifecycle(Lifecycle):
    """A :class:`Lifecycle` that calls each task's function in its call scopes: inside
    its middleware, after ``before_call``, in process mode, in a thread
    (``--threads``) and in a middleware stack's thread (async mode); the concurrent
    runner enters them itself around a coroutine with no stack."""

    scoping = True

    def call(self, attempt: Attempt, invoke: Callable[[], Any] | None = None) -> Any:
        job, task = attempt.job, attempt.task
        assert task is not None  # looked up
        if invoke is None:
            invoke = functools.partial(task.fn, *attempt.args, **job.kwargs)
        called = invoke

        def scoped() -> Any:
            with call_scopes(attempt):
                return called()

        return super().call(attempt, scoped)
