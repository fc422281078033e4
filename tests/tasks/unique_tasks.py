"""Tasks for the unique-task tests (tests/unit/tasks/test_unique.py); workers import this module
from tests/tasks/. Each is unique by the value it is given (or per task) and
records its attempts in Redis, so a test can count them and wait for them."""

from __future__ import annotations

import time

from rqueue import task
from rqueue.store.default import default_queue

DONE = "test:unique:done"
STARTED = "test:unique:started"


def by_value(value: str) -> str:
    return value


def attempt(value: str) -> int:
    client = default_queue().client
    client.rpush(STARTED, value)
    return int(client.incr(f"test:unique:attempts:{value}"))


def go(value: str) -> str:
    """The key a test sets to let ``waits`` finish."""
    return f"test:unique:go:{value}"


@task(unique=True)
def single() -> None:
    """One per task: every call shares its lock."""


@task(unique=by_value)
def record(value: str) -> None:
    attempt(value)
    default_queue().client.rpush(DONE, value)


@task(unique=by_value, tries=2, backoff=2)
def fails(value: str) -> None:
    attempt(value)
    raise ValueError(f"raising on purpose: {value}")


def _wait_for_go(value: str) -> None:
    attempt(value)
    client = default_queue().client
    deadline = time.monotonic() + 20
    while not client.exists(go(value)) and time.monotonic() < deadline:
        time.sleep(0.02)
    client.rpush(DONE, value)


@task(unique=by_value)
def waits(value: str) -> None:
    """Runs until the test says go: its lock lasts until it is processed."""
    _wait_for_go(value)


@task(unique=by_value, unique_until="processing")
def waits_processing(value: str) -> None:
    """As ``waits``, but its lock goes as it starts."""
    _wait_for_go(value)


@task(unique=True, unique_for=0.5)
def brief() -> None:
    """A lock that lasts half a second."""


def no_key(value: str) -> None:
    """Not a key: a unique= callable must return a str or an int."""


@task(unique=no_key)
def keyless(value: str) -> None:
    """Its dispatch is refused: its key function returns None."""
