"""The task registry and the default connection: the only process-wide state.

A worker runs a payload only if its name resolves to a callable registered here
with ``@task``, so writing to Redis never lets anyone run arbitrary code.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from rqueue.config import Config
from rqueue.errors import TaskNotRegistered

if TYPE_CHECKING:
    from rqueue.queue import RedisQueue
    from rqueue.task import Task

_tasks: dict[str, Task[Any, Any]] = {}
_default_queue: list[RedisQueue] = []


def register(task: Task[Any, Any]) -> None:
    _tasks[task.name] = task


def registered() -> dict[str, Task[Any, Any]]:
    return dict(_tasks)


def lookup(name: str) -> Task[Any, Any]:
    """Find a registered task, importing its module first if needed."""
    found = _tasks.get(name)
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
    found = _tasks.get(name)
    if found is None:
        raise TaskNotRegistered(
            f"{name!r} is not registered with @task (module {module!r} imported, "
            "but no task of that name); only @task functions run"
        )
    return found


def module_name(module: str) -> str:
    """The importable name of a module, even when it runs as ``__main__``."""
    if module != "__main__":
        return module
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        return str(spec.name)
    path = getattr(main, "__file__", None)
    return os.path.splitext(os.path.basename(path))[0] if path else module


def default_queue() -> RedisQueue:
    """The connection ``dispatch`` uses unless a task is bound to another one.

    Opened lazily from the environment, so importing tasks never touches Redis.
    """
    if not _default_queue:
        from rqueue.queue import RedisQueue

        _default_queue.append(RedisQueue(Config.resolve()))
    return _default_queue[0]


def use(queue: RedisQueue) -> None:
    """Make ``queue`` the default connection of this process (workers do this per child)."""
    _default_queue[:] = [queue]


def _forget_connection_after_fork() -> None:
    # A socket shared between parent and child would interleave their replies.
    _default_queue.clear()


os.register_at_fork(after_in_child=_forget_connection_after_fork)
