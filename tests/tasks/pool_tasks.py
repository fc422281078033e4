"""Tasks of the ``rqueue supervise`` tests: a burst held until the test opens a gate."""

from __future__ import annotations

import os
import time

from rqueue import task
from rqueue.store.default import default_queue

DONE = "test:pool:done"
GATE = "test:pool:open"
STARTED = "test:pool:started"
OPENED = "test:pool:opened"
"""Numbers of the tasks let through before the gate opens for all."""


@task(queue="burst", tries=1, timeout=60)
def gated(number: int) -> None:
    """Waits (bounded) until the test opens the gate (for all, or for its number),
    then records its number and its process once: a task run twice shows twice."""
    client = default_queue().client
    client.rpush(STARTED, number)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if client.exists(GATE) or client.sismember(OPENED, number):
            break
        time.sleep(0.02)
    client.rpush(DONE, f"{number}:{os.getpid()}")
