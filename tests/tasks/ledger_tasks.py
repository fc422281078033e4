"""A task for tests/chaos/test_redis_refusals.py, which workers import with ``-A``.

It records each run in a ledger on another Redis than the worker's, as a task with
an outside effect (an email, a payment) would: a test counts the runs there while
the worker's own Redis changes role under it.
"""

from __future__ import annotations

import time

import redis

from rqueue import task

LEDGER = "test:tally"


@task
def tally(ledger_url: str, number: int) -> None:
    time.sleep(0.05)  # long enough for a role change to land mid-stream
    client = redis.Redis.from_url(ledger_url)
    client.hincrby(LEDGER, str(number), 1)
    client.close()
