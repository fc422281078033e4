"""Tasks for tests/unit/tasks/test_dispatch_checks.py: calls checked against the signature at
dispatch, results not kept, a wrapping decorator."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from rqueue import Batch, task


@task
def hello(name: str) -> str:
    return f"hello {name}"


@task
async def hello_async(name: str) -> str:
    return f"hello {name}"


@task(keep_result=60)
def kept(n: int) -> int:
    return n


@task
def notify(batch: Batch, who: str) -> None:
    """A batch callback: the worker gives it the batch first."""


def with_connection(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A decorator that supplies the first argument itself: its callers pass one less."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn("connection", *args, **kwargs)

    return wrapper


@task
@with_connection
def store(connection: str, value: int) -> str:
    return f"{connection}: {value}"


@task
def anything(*args: Any, **kwargs: Any) -> int:
    return len(args) + len(kwargs)


def not_a_task(n: int) -> None:
    """Plain: what dispatch_many is sometimes given by mistake."""
