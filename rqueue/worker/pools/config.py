"""The pools file: ``[tool.rqueue]`` in pyproject.toml, or the top of an rqueue.toml.

Read once, checked whole, into frozen :class:`Pool` values. Every ``rqueue work``
option a long-running pool can take is a key of the same name, checked by the same
rule the command applies (the ``LIMITS`` of ``worker/options.py``, ``Rate.parse``,
``WorkerOptions`` itself), so the file and the command refuse the same values. An error
names the file and the full key (``tool.rqueue.pools.mail.timeout``), and is a usage
error of ``rqueue supervise`` (exit 2).

``[...environments.<env>.pools.<name>]`` overrides a pool's keys in that environment
(``rqueue supervise --env production``), as Horizon's environments do.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rqueue.errors import InvalidQueueName
from rqueue.middleware.concurrency import check_limit
from rqueue.settings.config import EVENTS_LENGTH, ConfigError, Limit
from rqueue.settings.config import LIMITS as CONFIG_LIMITS
from rqueue.store.keys import validate_queue_name
from rqueue.worker.options import LIMITS, Rate, WorkerOptions, parse_rates

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = None

BALANCES = ("auto", "simple", "off")
WORK_NUMBERS = (
    "timeout", "tries", "sleep", "block_for", "max_jobs", "max_time", "memory", "rest",
    "prefetch", "slots", "threads", "kill_grace", "aging",
)  # fmt: skip
"""``rqueue work`` options that are numbers, checked by their ``LIMITS`` entry."""
WORK_FLAGS = ("schedule", "metrics", "events", "otel")
"""``rqueue work`` on/off options: ``true`` or ``false``."""
WORK_CHOICES: Mapping[str, tuple[str, ...]] = {
    "log_level": ("DEBUG", "INFO", "WARNING", "ERROR"),
    "log_format": ("text", "json"),
}
WORK_OTHERS = ("rate", "group_rate", "group_concurrency", "events_length", "wait_replicas", "app")
WORK_KEYS = (*WORK_NUMBERS, *WORK_FLAGS, *WORK_CHOICES, *WORK_OTHERS)
"""Every ``rqueue work`` option a pool takes, by its name (``--block-for``: ``block_for``).
Not ``--concurrency`` (``min_processes``/``max_processes`` say it), nor ``--once`` and
``--stop-when-*`` (a pool runs until stopped) nor the connection's (``rqueue supervise``
passes its own)."""

_PROCESSES = LIMITS["concurrency"]
POOL_LIMITS: Mapping[str, Limit] = {
    "min_processes": _PROCESSES,
    "max_processes": _PROCESSES,
    "balance_max_shift": Limit(1, 1000, whole=True, unit="processes"),
    "balance_cooldown": Limit(0, 3600, unit="seconds"),
    "time_to_clear": Limit(0.1, 86_400, unit="seconds"),
}
POOL_KEYS = ("queues", "balance", *POOL_LIMITS, *WORK_KEYS)
_POOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class Pool:
    """One named pool: its queues, its process range, how it balances, and the
    ``rqueue work`` options of its processes."""

    name: str
    queues: tuple[str, ...]
    min_processes: int = 1
    max_processes: int = 1
    balance: str = "auto"
    """``auto``: a parent a queue, processes following each queue's load; ``simple``:
    a parent a queue, processes split evenly; ``off``: one parent, queues in order."""
    balance_max_shift: int = 1
    """Most processes a parent gains or loses in one step (Horizon's ``balanceMaxShift``)."""
    balance_cooldown: float = 3.0
    """Seconds between two steps (Horizon's ``balanceCooldown``)."""
    time_to_clear: float = 10.0
    """Seconds the pool aims to clear its queues' backlog within: it grows while the
    work waiting (tasks times their mean runtime) would take its processes longer."""
    work: Mapping[str, Any] = field(default_factory=dict)
    """The ``rqueue work`` options given (``WORK_KEYS``), checked."""


@dataclass(frozen=True)
class PoolsFile:
    path: Path
    environment: str | None
    pools: tuple[Pool, ...]


def find(path: str | None, directory: Path) -> Path:
    """``path``, else ``rqueue.toml`` in ``directory``, else its ``pyproject.toml``."""
    if path is not None:
        return Path(path)
    for name in ("rqueue.toml", "pyproject.toml"):
        if (directory / name).is_file():
            return directory / name
    raise ConfigError(
        f"no rqueue.toml or pyproject.toml in {directory.resolve()}: give --config PATH"
    )


def load(path: Path, environment: str | None = None) -> PoolsFile:
    """The pools of the file at ``path`` in ``environment`` (None: no overrides)."""
    if tomllib is None:  # pragma: no cover - Python 3.10
        raise ConfigError("reading a pools file needs Python 3.11 or later (tomllib)")
    try:
        with open(path, "rb") as file:
            document = tomllib.load(file)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    root, where = document, ""
    if path.name == "pyproject.toml" or "tool" in document:
        tool = document.get("tool", {})
        root, where = tool.get("rqueue") if isinstance(tool, dict) else None, "tool.rqueue"
        if not isinstance(root, dict):
            raise ConfigError(f"{path}: no [tool.rqueue] table")
    prefix = f"{where}." if where else ""
    try:
        pools = _pools(root, prefix, environment)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return PoolsFile(path, environment, pools)


def _pools(root: dict[str, Any], prefix: str, environment: str | None) -> tuple[Pool, ...]:
    _known(root, ("pools", "environments"), prefix.rstrip(".") or "the top level")
    base = _table(root.get("pools", {}), f"{prefix}pools")
    if not base:
        raise ConfigError(f"{prefix}pools: no pool declared ([{prefix}pools.NAME])")
    environments = _table(root.get("environments", {}), f"{prefix}environments")
    overrides: dict[str, Any] = {}
    if environment is not None:
        if environment not in environments:
            known = ", ".join(environments) or "none"
            raise ConfigError(
                f"{prefix}environments: no environment {environment!r} (declared: {known})"
            )
        where = f"{prefix}environments.{environment}"
        env = _table(environments[environment], where)
        _known(env, ("pools",), where)
        overrides = _table(env.get("pools", {}), f"{where}.pools")
        for name in overrides:
            if name not in base:
                raise ConfigError(f"{where}.pools.{name}: no pool {name!r} in {prefix}pools")
    pools = []
    for name, table in base.items():
        sources = dict.fromkeys(_table(table, f"{prefix}pools.{name}"), f"{prefix}pools.{name}")
        values = dict(table)
        if name in overrides:
            where = f"{prefix}environments.{environment}.pools.{name}"
            values.update(_table(overrides[name], where))
            sources.update(dict.fromkeys(overrides[name], where))
        pools.append(pool(name, values, sources, f"{prefix}pools.{name}"))
    return tuple(pools)


def pool(name: str, values: Mapping[str, Any], sources: Mapping[str, str], where: str) -> Pool:
    """Check one pool's merged ``values`` (declared at ``where``); ``sources`` says which
    table gave each key, for the error to name it."""
    if not _POOL_NAME.fullmatch(name):
        raise ConfigError(f"{where}: a pool's name is 1 to 64 letters, digits or '_.-'")

    def key(k: str) -> str:
        return f"{sources.get(k, where)}.{k}"

    for k in values:
        if k not in POOL_KEYS:
            raise ConfigError(f"{key(k)}: unknown key (a pool takes {', '.join(POOL_KEYS)})")
    queues = _queues(values.get("queues"), key("queues"))
    numbers = {k: POOL_LIMITS[k].check(key(k), values[k]) for k in POOL_LIMITS if k in values}
    least, most = numbers.get("min_processes", 1), numbers.get("max_processes")
    most = least if most is None else most  # least is 1 or more (its limit)
    if least > most:
        raise ConfigError(f"{key('min_processes')} ({least}) is above max_processes ({most})")
    balance = values.get("balance", "auto")
    if balance not in BALANCES:
        raise ConfigError(f"{key('balance')} must be one of {', '.join(BALANCES)}, not {balance!r}")
    if balance != "off" and most < len(queues):
        raise ConfigError(
            f"{key('max_processes')} ({most}) is below the {len(queues)} queues: balance "
            f"{balance!r} runs each queue's own processes (or set balance = 'off')"
        )
    work = {k: values[k] for k in WORK_KEYS if k in values}
    for k, value in work.items():
        _check_work(k, value, key(k), queues)
    if "events_length" in work and not work.get("events"):
        raise ConfigError(f"{key('events_length')}: the length of events' streams: set events")
    try:  # what else the command would refuse (WorkerOptions checks it all again)
        checked = {k: work[k] for k in WORK_NUMBERS if k in work}
        WorkerOptions(queues, concurrency=least, max_concurrency=most, **checked)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    others = {k: v for k, v in numbers.items() if k not in ("min_processes", "max_processes")}
    return Pool(name, queues, least, most, balance, **others, work=work)


def _check_work(name: str, value: Any, key: str, queues: tuple[str, ...]) -> None:
    """One ``rqueue work`` option, by the command's own rule."""
    if name in WORK_NUMBERS:
        LIMITS[name].check(key, value)
    elif name in WORK_FLAGS:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, not {value!r}")
    elif name in WORK_CHOICES:
        if value not in WORK_CHOICES[name]:
            raise ConfigError(f"{key} must be one of {', '.join(WORK_CHOICES[name])}")
    elif name == "app":
        if not isinstance(value, list) or not all(
            isinstance(m, str) and _MODULE.fullmatch(m) for m in value
        ):
            raise ConfigError(f"{key} must be a list of module names, not {value!r}")
    else:
        _check_other(name, value, key, queues)


def _check_other(name: str, value: Any, key: str, queues: tuple[str, ...]) -> None:
    try:
        if name in ("rate", "group_rate"):
            if not isinstance(value, str):
                raise ConfigError(f"must be text such as '100/m', not {value!r}")
            parse_rates(value, queues) if name == "rate" else Rate.parse(value)
        elif name == "group_concurrency":
            check_limit(value, "it")
        elif name == "events_length":
            EVENTS_LENGTH.check("it", value)
        else:
            CONFIG_LIMITS["wait_replicas"][1].check("it", value)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def _queues(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        raise ConfigError(f"{key}: missing: a pool names its queues, highest priority first")
    if not isinstance(value, list) or not value or not all(isinstance(q, str) for q in value):
        raise ConfigError(f"{key} must be a list of queue names, not {value!r}")
    try:
        for name in value:
            validate_queue_name(name)
    except InvalidQueueName as exc:
        raise ConfigError(f"{key}: {exc}") from None
    if len(set(value)) < len(value):
        raise ConfigError(f"{key} names a queue twice")
    return tuple(value)


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table, not {value!r}")
    return value


def _known(table: Mapping[str, Any], keys: tuple[str, ...], where: str) -> None:
    for k in table:
        if k not in keys:
            raise ConfigError(f"{where}: unknown key {k!r} (known: {', '.join(keys)})")
