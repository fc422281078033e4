"""Tasks of the ``rqueue supervise`` tests: a burst held until the test opens a gate."""

from __future__ import annotations

import os
import time

from rqueue import task
from rqueue.store.default import default_queue

DONE = "test:pool:done"
GATE = "test:pool:open"


@task(queue="burst", tries=1, timeout=60)
def gated(number: int) -> None:
    """Waits (bounded) until the test opens the gate, then records its number and
    its process once: a task run twice shows twice."""
    client = default_queue().client
    deadline = time.monotonic() + 30
    while not client.exists(GATE) and time.monotonic() < deadline:
        time.sleep(0.02)
    client.rpush(DONE, f"{number}:{os.getpid()}")
