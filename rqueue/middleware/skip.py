"""``Skip``: do not run a call when a condition holds (Laravel's ``Skip::when``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rqueue.encoding.payload import Job
from rqueue.middleware.base import Middleware

Condition = bool | Callable[..., object] | None


@dataclass(frozen=True)
class Skip(Middleware):
    """Skip the run if ``when`` is true or ``unless`` is false: each a bool, or a
    function of the call's arguments, asked in the worker just before the run. A
    skipped call counts as done (it returns None), as in Laravel; it is not retried."""

    when: Condition = None
    unless: Condition = None

    def __post_init__(self) -> None:
        for name in ("when", "unless"):
            value = getattr(self, name)
            if value is not None and type(value) is not bool and not callable(value):
                raise ValueError(f"Skip({name}) must be a bool or a function, got {value!r}")

    def __call__(self, job: Job, call_next: Callable[[], Any]) -> Any:
        if self.when is not None and _holds(self.when, job):
            return None
        if self.unless is not None and not _holds(self.unless, job):
            return None
        return call_next()


def _holds(condition: bool | Callable[..., object], job: Job) -> bool:
    return bool(condition(*job.args, **job.kwargs) if callable(condition) else condition)
