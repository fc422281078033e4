"""The task ``benchmarks/reliability/shard_outage.py`` dispatches: it records how long
it waited, from its dispatch to its start, in a list of its own queue's slot."""

from __future__ import annotations

import time

from rqueue import task
from rqueue.store.default import default_queue


@task
def picked(sent: float, key: str) -> None:
    default_queue().client.rpush(key, f"{sent}:{time.time() - sent}")
