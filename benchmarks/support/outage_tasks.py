"""The task ``benchmarks/reliability/shard_outage.py`` dispatches: it records how long
it waited, from its dispatch (or its due time) to its start, in a list of its own queue's slot."""

from __future__ import annotations

import time

from rqueue import task
from rqueue.store.default import default_queue


@task
def picked(sent: float, key: str, kind: str = "ready") -> None:
    default_queue().client.rpush(key, f"{kind}:{sent}:{time.time() - sent}")
