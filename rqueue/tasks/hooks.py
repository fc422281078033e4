"""A task's ``after_succeeded``, ``after_failed`` and ``after_cancelled`` hooks: how a
worker calls one.

Declared with ``@task(after_succeeded=..., after_failed=..., after_cancelled=...)``
(rqueue/tasks/options.py checks them); the worker calls them once an attempt has settled.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from rqueue.encoding.payload import Job

Hook = Callable[..., Any]


def call_hook(hook: Hook, value: Any, job: Job) -> Any:
    """Call a hook with ``(value, job)``, or ``(value)`` if it takes one argument; what
    it returns (an ``async def`` hook's coroutine) is the caller's to await."""
    try:
        parameters = inspect.signature(hook).parameters.values()
    except (TypeError, ValueError):
        return hook(value, job)
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    takes_varargs = any(p.kind == p.VAR_POSITIONAL for p in parameters)
    if len(positional) >= 2 or takes_varargs:
        return hook(value, job)
    return hook(value)
