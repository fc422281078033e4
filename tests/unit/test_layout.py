"""The package's import rule (docs/architecture.md), checked on the source itself.

Each part may import its own layer and the layers below it, never one above, and no
two modules may import each other, not even through a chain or for type checking
alone: what a newcomer draws from ``ls rqueue/`` stays true as the package grows.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "rqueue"

LAYERS: list[tuple[str, ...]] = [
    (
        "rqueue.errors",
        "rqueue.text",
        "rqueue.settings.redis_url",
        "rqueue.settings.config",
        "rqueue.encoding.sealing",
        "rqueue.encoding.codec",
        # The folders' own __init__ modules import nothing: ``from rqueue.tasks import
        # registry`` names the folder on its way to a module of its layer.
        "rqueue.tasks",
        "rqueue.encoding",
        "rqueue.settings",
    ),
    ("rqueue.store",),
    (
        "rqueue.tasks.arguments",
        "rqueue.encoding.ranges",
        "rqueue.encoding.sealed_args",
        "rqueue.encoding.payload",
        "rqueue.timing",
        "rqueue.tasks.validation",
        "rqueue.tasks.hooks",
        "rqueue.tasks.option_values",
        "rqueue.tasks.option_arguments",
        "rqueue.tasks.options",
        "rqueue.tasks.handles",
        "rqueue.tasks.interception",
        "rqueue.tasks.observers",
        "rqueue.tasks.bulk",
        "rqueue.tasks.definition",
        "rqueue.tasks.debouncing",
        "rqueue.tasks.dependencies",
        "rqueue.tasks.decorator",
        "rqueue.tasks.names",
        "rqueue.tasks.registry",
        "rqueue.events",
        "rqueue.tasks.awaiting",
        "rqueue.tasks.current",
        "rqueue.tasks.progress",
        "rqueue.tasks.iterable",
        "rqueue.middleware",
        "rqueue.failed",
        "rqueue.metrics",
        "rqueue.tasks.whereabouts",
        "rqueue.server",
    ),
    ("rqueue.schedules", "rqueue.workflows"),
    ("rqueue.worker",),
    ("rqueue", "rqueue.testing"),
    ("rqueue.cli", "rqueue.__main__", "rqueue.web", "rqueue.contrib"),
]
"""Bottom first. ``rqueue`` is the package's ``__init__``: the public API, which may
gather anything but the command line; ``rqueue.testing`` (fakes, sync mode, the pytest
plugin) stands beside it, so that ``RQUEUE_SYNC=1`` can take effect on import."""


def module_names() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def layer_of(module: str) -> int:
    best, level = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or module.startswith(prefix + ".")
            if matches and len(prefix) > best:
                best, level = len(prefix), index
    assert level >= 0, f"{module} is in no layer: add it to LAYERS and docs/architecture.md"
    return level


def imports_of(module: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """Every rqueue module ``module`` imports, at any depth of its code."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            targets = [f"{origin}.{alias.name}" for alias in node.names] + [origin]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            # Its own packages are imported before any module anyway: no edge of its own.
            if target and target != module and not module.startswith(target + "."):
                yield target


def graph() -> dict[str, set[str]]:
    known = module_names()
    edges = {name: set(imports_of(name, path, known)) for name, path in known.items()}
    # A package's __init__ importing its own children is how a folder shows its API.
    for name in edges:
        edges[name] = {t for t in edges[name] if not t.startswith(name + ".")}
    return edges


def test_every_import_points_down_or_sideways() -> None:
    upward = [
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        for module, targets in graph().items()
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]
    assert upward == []


def test_no_two_modules_import_each_other_even_through_a_chain() -> None:
    edges = graph()
    circles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        for target in sorted(edges[node]):
            if target in path:
                circles.append([*path[path.index(target) :], target])
            elif target not in done:
                visit(target, [*path, target])
        done.add(node)

    done: set[str] = set()
    for start in sorted(edges):
        if start not in done:
            visit(start, [start])
    assert circles == []


def test_the_checker_sees_a_package_s_modules_and_their_imports() -> None:
    # The two tests above would pass on an empty graph: pin that it is not one.
    edges = graph()
    assert "rqueue.store.queue" in edges["rqueue.store.default"]
    assert "rqueue.tasks.decorator" in edges["rqueue.tasks.registry"]
    assert layer_of("rqueue.store.lua") == 1 and layer_of("rqueue.cli.work") == 6
