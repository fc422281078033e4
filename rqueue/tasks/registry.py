"""Finding the task a payload names: the worker's side of the task registry.

A worker runs a payload only if its name resolves to a callable registered with
``@task`` (see :func:`rqueue.tasks.decorator.registered`), so writing to Redis never lets anyone
run arbitrary code. Nor does it let anyone import an arbitrary module, since
importing runs a module's top-level code (``unittest.__main__`` runs tests and exits,
``venv.__main__`` builds a virtualenv). So a name's module is imported only if it is
already imported (the ``-A`` modules, imported before the children fork, and their
imports) or, for a worker started without ``-A``, it lies in the project: under the
worker's working directory or a ``PYTHONPATH`` entry. A worker started with ``-A``
imports nothing else: its ``-A`` modules and their submodules are its allow-list.
Never a ``__main__`` module, never one from the standard library or site-packages.
This module sits above :mod:`rqueue.tasks.decorator`: tasks register themselves when defined,
and only the worker looks names up.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import site
import sys
import sysconfig
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from typing import Any

from rqueue.errors import TaskImportFailed, TaskNotRegistered, describe
from rqueue.tasks.decorator import registered, registered_task, unregister
from rqueue.tasks.definition import Task
from rqueue.tasks.names import malformed_name, unimportable_module


def lookup(name: str, allowed: Sequence[str] = ()) -> Task[Any, Any]:
    """Find a registered task, importing its module first if the rule above allows.

    ``allowed`` is the worker's ``-A`` modules: when given, a module that is neither
    one of them nor inside one is never imported.

    Raises TaskImportFailed if the module is missing or raised while importing (worth
    retrying: a deploy may be in progress), TaskNotRegistered for everything else.
    """
    found = registered_task(name)
    if found is not None:
        return found
    problem = malformed_name(name)
    if problem is not None:
        raise TaskNotRegistered(f"malformed task name {name!r}: {problem}")
    module = name.partition(":")[0]
    if module not in sys.modules:
        if allowed and not any(module == a or module.startswith(a + ".") for a in allowed):
            raise TaskNotRegistered(
                f"task {name!r} cannot run: module {module!r} is not one of this worker's "
                f"-A modules ({', '.join(allowed)}) nor inside one, and a worker started "
                "with -A imports no other module by a name read from Redis"
            )
        _import(module, name)
    found = registered_task(name)
    if found is None:
        raise TaskNotRegistered(
            f"{name!r} is not registered with @task (module {module!r} imported, "
            "but no task of that name); only @task functions run"
        )
    return found


def _import(module: str, name: str) -> None:
    """Import a task's module, or say why not; user code runs here, so catch anything."""
    problem = unimportable_module(module)
    if problem is not None:
        raise TaskNotRegistered(f"task {name!r} cannot run: {problem}")
    top = module.partition(".")[0]
    importlib.invalidate_caches()  # files a deploy has just written must be seen
    spec = _find_top_level(top)
    if spec is None:
        raise TaskImportFailed(
            f"cannot import module {module!r} for task {name!r}: ModuleNotFoundError: "
            f"no module named {top!r} in "
            f"the worker's directory or on PYTHONPATH ({_WHERE}){_RETRIED}"
        )
    if not _in_project(spec):
        raise TaskNotRegistered(
            f"task {name!r} cannot run: module {top!r} is not in the project (the worker's "
            "working directory or PYTHONPATH), and workers import no other module by a name "
            f"read from Redis; preload it with `rqueue work -A {module}` if it holds tasks"
        )
    before = set(registered())
    try:
        importlib.import_module(module)
    except BaseException as exc:  # SystemExit at import included: it is this attempt's failure
        unregister(set(registered()) - before)  # a half-imported module registers nothing
        kind, message = describe(exc)
        raise TaskImportFailed(
            f"importing module {module!r} for task {name!r} failed: {kind}: {message}"
            f"{_hint(exc, module)}{_RETRIED}"
        ) from exc


_WHERE = (
    "start the worker from your project's directory, add the module's folder to "
    "PYTHONPATH, or preload the module with `rqueue work -A MODULE`"
)
_RETRIED = "; retried within the task's tries (a deploy in progress is the usual cause)"


def _hint(exc: BaseException, module: str) -> str:
    if not isinstance(exc, ModuleNotFoundError):
        return ""
    missing = exc.name or ""
    if module == missing or module.startswith(missing + "."):
        return f" ({_WHERE})"
    return f" (module {missing!r}, which it imports, is not installed where the worker runs)"


def _find_top_level(top: str) -> ModuleSpec | None:
    """The spec of a top-level module; for a top-level name this imports nothing."""
    try:
        return importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None


def _in_project(spec: ModuleSpec) -> bool:
    """True if every file or folder of the module lies under a project root, and none
    in an installation (a project's own ``.venv`` or ``.tox`` lies under its root)."""
    if spec.origin is not None and spec.has_location:
        locations = [os.path.realpath(spec.origin)]
    else:
        locations = [os.path.realpath(p) for p in spec.submodule_search_locations or []]
    roots = [os.path.realpath(p or os.curdir) for p in _project_roots()]
    installed = _installed_roots()
    return bool(locations) and all(
        any(_under(location, root) for root in roots)
        and not any(_under(location, root) for root in installed)
        for location in locations
    )


def _installed_roots() -> list[str]:
    """Where the standard library and installed packages live, for this interpreter."""
    paths = sysconfig.get_paths()
    found = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    found.update(site.getsitepackages())
    found.add(site.getusersitepackages())
    return [os.path.realpath(p) for p in found]


def _project_roots() -> list[str]:
    return [os.getcwd(), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]


def _under(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root
