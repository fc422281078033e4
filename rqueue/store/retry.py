"""Riding out a Redis outage: backoff with jitter, and retrying a state change until it lands.

A task's outcome (ack, release, fail) must never be dropped because Redis blinked,
and a fleet of workers must not reconnect in lockstep: hence the jitter.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol, TypeVar

import redis

T = TypeVar("T")

REDIS_ERRORS = (redis.ConnectionError, redis.TimeoutError)


def backoff_delay(failures: int) -> float:
    """Seconds to wait after ``failures`` failures in a row: 0.1 s doubling up to 5 s, jittered."""
    return min(5.0, 0.1 * 2.0 ** min(failures, 6)) * random.uniform(0.5, 1.0)


class Persist(Protocol):
    """A process's own way of retrying a state change until Redis takes it (see persist)."""

    def __call__(self, call: Callable[[], T], /) -> T: ...


def persist(call: Callable[[], T], on_error: Callable[[int, Exception], None]) -> T:
    """Call until Redis answers; ``on_error(failures, exc)`` waits, or raises to give up."""
    failures = 0
    while True:
        try:
            return call()
        except REDIS_ERRORS as exc:
            failures += 1
            on_error(failures, exc)
