"""The tasks the rqueue benchmarks dispatch; workers import this module from benchmarks/.

``incr`` uses its own Redis client (opened once per process, after the fork), as
the peers' INCR tasks and the bare-INCR processes do, so the comparison is like for like.
"""

from __future__ import annotations

import os
import time

import redis

from rqueue import task

COUNTER = "bench:done"
STARTS = "bench:starts"

_client: list[redis.Redis] = []


def client() -> redis.Redis:
    if not _client:
        _client.append(redis.Redis.from_url(os.environ["REDIS_URL"]))
    return _client[0]


@task
def empty() -> None:
    """Does nothing: what is left is the queue's own cost."""


@task
def incr() -> None:
    """One Redis round trip, so completion can be counted (as most published benchmarks do)."""
    client().incr(COUNTER)


@task
def record_start(due: float = 0.0) -> None:
    """Report when this task started (and when it was due) for the latency benchmark."""
    client().rpush(STARTS, f"{time.time()!r} {due!r}")
