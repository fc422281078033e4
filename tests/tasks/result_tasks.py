"""Tasks of the stored-result tests (issue 26): each records that it ran in Redis, so a
test can count its runs; workers import this module from tests/tasks/."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from rqueue import task
from rqueue.encoding.payload import Job
from rqueue.middleware.base import Middleware, Release
from rqueue.store.default import default_queue

RAN = "test:result:ran"


def ran(what: str) -> None:
    default_queue().client.rpush(RAN, what)


@task(keep_result=60)
def big(size: int) -> str:
    ran(f"big:{size}")
    return "x" * size


@task(keep_result=60, tries=3)
def make() -> object:
    ran("make")
    return {"parts": [1, object()]}


@task(tries=3)
def hand_on(size: int) -> Any:
    """A chain's first step whose return value the next step cannot take."""
    ran(f"hand_on:{size}")
    return "x" * size if size else object()


@task
def note(value: Any) -> None:
    ran(f"note:{value}")


@task(keep_result=60)
def kept_note(value: Any) -> Any:
    ran(f"kept:{value}")
    return value


@task(tries=2)
def release_self(delay: float) -> None:
    ran("release_self")
    raise Release(delay)


def _put_back(delay: float) -> None:
    """A helper of the task's own code: the release is still the task's."""
    raise Release(delay)


@task(tries=3)
def release_via_helper() -> None:
    ran("release_via_helper")
    _put_back(0)


class HoldOnce(Middleware):
    """Releases each call the first time it comes (its attempt given back)."""

    def __call__(self, job: Job, call_next: Callable[[], Any]) -> Any:
        if default_queue().client.incr(f"test:hold-once:{job.id}") == 1:
            raise Release(0)
        return call_next()


@task(tries=1, middleware=[HoldOnce()])
def held(value: Any) -> None:
    ran(f"held:{value}")


@task(tries=1)
def dies() -> None:
    ran("dies")
    os._exit(1)


@task(tries=1)
def explode_loudly(size: int) -> None:
    ran("explode_loudly")
    raise ValueError("x" * size)
