"""Task names: the ``module:function`` a worker imports to find a task, and which
names no worker could ever run.

Checked where a task is defined (``@task``), where it is dispatched, and where a
worker looks a name from Redis up (:mod:`rqueue.tasks.registry`), so all three agree.
"""

from __future__ import annotations

import os
import sys

from rqueue.errors import InvalidTaskOption


def check_name(name: object) -> None:
    """An explicit ``name=`` must be one a worker can import: ``module:function``."""
    if not isinstance(name, str):
        problem: str | None = "it is not a string"
    else:
        problem = malformed_name(name) or unimportable_module(name.partition(":")[0])
    if problem is not None:
        raise InvalidTaskOption(f"@task(name={name!r}): {problem}")


INTERNAL_PREFIX = "rqueue."
"""Task names in this namespace are rqueue's own, queued only by a worker parent."""


def is_internal(task_name: str) -> bool:
    """True for rqueue's own tasks (``worker/admission.py`` admits them from parents only)."""
    return task_name.startswith(INTERNAL_PREFIX)


def malformed_name(name: str) -> str | None:
    """Why ``name`` is not ``module:function`` (dotted Python names on both sides), or None."""
    module, sep, qualname = name.partition(":")
    parts = (*module.split("."), *qualname.split("."))
    if sep and all(part.isidentifier() for part in parts):
        return None
    return (
        "a task name is 'module:function' (e.g. 'billing:charge'): the module a worker "
        "imports to find the task, then the function's name"
    )


def unimportable_module(module: str) -> str | None:
    """Why a worker could never import ``module`` to find a task in it, or None.

    A ``__main__`` module is the script that was run (``python -c``, ``python -m pkg``,
    a notebook): importing it again would run that script, so workers never do
    (:mod:`rqueue.tasks.registry`), and a task defined there could never run.
    """
    if "__main__" not in module.split("."):
        return None
    return (
        f"it is defined in {module}, the script being run, which workers never import; "
        "move the task to a module (e.g. tasks.py) and import it from there"
    )


def derived_name(fn: object) -> str:
    """The name a worker finds ``fn`` by, ``module:qualified.name``; InvalidTaskOption
    saying why for a function no worker could find by its own name.

    A worker imports the module and looks the name up among the tasks that import
    registered: a lambda has no name of its own, and a function defined inside another
    is registered only if that one runs. Refused at ``@task``, not by every worker
    that tries it later. ``name=`` opts out: a factory that makes tasks when its
    module is imported gives each one a name, as it must.
    """
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        what = f"{fn!r} has no module and qualified name of its own"
    elif "<lambda>" in qualname:
        what = f"{qualname} is a lambda"
    elif "<locals>" in qualname:
        what = f"{qualname} is defined inside {qualname.split('.<locals>')[0]}()"
    else:
        name = f"{module_name(module)}:{qualname}"
        problem = malformed_name(name)
        if problem is None:
            return name
        what = f"its name {name!r} is not one: {problem}"
    raise InvalidTaskOption(
        f"@task: {what}; a worker finds a task by importing its module and looking up "
        "its name there, so a task must be a function defined with def at module level "
        "(or be given name='module:function' by code that runs on import)"
    )


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
