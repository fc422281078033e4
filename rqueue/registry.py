"""Finding the task a payload names: the worker's side of the task registry.

A worker runs a payload only if its name resolves to a callable registered with
``@task`` (see :func:`rqueue.task.registered`), so writing to Redis never lets anyone
run arbitrary code. This module sits above :mod:`rqueue.task`: tasks register
themselves when defined, and only the worker looks names up.
"""

from __future__ import annotations

import importlib
from typing import Any

from rqueue.errors import TaskNotRegistered
from rqueue.task import Task, registered_task


def lookup(name: str) -> Task[Any, Any]:
    """Find a registered task, importing its module first if needed."""
    found = registered_task(name)
    if found is not None:
        return found
    module, sep, qualname = name.partition(":")
    if not sep or not module or not qualname:
        raise TaskNotRegistered(f"malformed task name {name!r} (expected 'module:function')")
    try:
        importlib.import_module(module)
    except Exception as exc:
        raise TaskNotRegistered(
            f"importing module {module!r} for task {name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    found = registered_task(name)
    if found is None:
        raise TaskNotRegistered(
            f"{name!r} is not registered with @task (module {module!r} imported, "
            "but no task of that name); only @task functions run"
        )
    return found
