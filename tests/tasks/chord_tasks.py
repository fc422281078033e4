"""Tasks of the tests of batch callbacks that get their members' results (a chord).

Each callback records the results it was given, as JSON, in Redis (it runs in a
worker child), so a test can wait for them and assert on them.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from rqueue import Batch, current_batch, task
from rqueue.store.default import default_queue

GOT = "test:chord"


def redis():  # type: ignore[no-untyped-def]
    return default_queue().client


def got() -> list[tuple[str, list[Any]]]:
    """What each callback recorded: (its label, the results it was given)."""
    found = [json.loads(raw) for raw in redis().lrange(GOT, 0, -1)]
    return [(label, results) for label, results in found]


@task
def square(index: int) -> int:
    return index * index


@task
def plus_one(value: int) -> int:
    return value + 1


@task
def word(index: int) -> str:
    return f"w{index}"


@task(tries=1)
def fails(index: int) -> int:
    raise RuntimeError(f"member {index} fails")


@task
def adds(count: int) -> str:
    found = current_batch()
    assert found is not None
    found.add([square.pending(100 + i) for i in range(count)])
    return "added"


@task
def counts_runs(index: int) -> str:
    """Its value says which run of it this is: the first, the second..."""
    return f"{index}:{redis().incr(f'test:chord-runs:{index}')}"


def _kill_own_child_first_time(result: Any) -> None:
    if result.endswith(":1"):
        os.kill(os.getpid(), signal.SIGKILL)


@task(after_succeeded=_kill_own_child_first_time, tries=3)
def dies_after_first_success(index: int) -> str:
    """Succeeds, then its worker child dies before the count (and ack) could go."""
    return counts_runs.fn(index)


@task(tries=1)
def fails_first_time(index: int) -> int:
    if redis().incr(f"test:chord-fails-first:{index}") == 1:
        raise RuntimeError(f"first run of {index} fails")
    return index * 10


@task
def big(index: int, size: int) -> str:
    return "x" * size


@task(tries=3)
def unkeepable(index: int) -> object:
    redis().incr("test:chord-unkeepable-runs")
    return object()


@task
def record(found: Batch, results: list[Any], label: str) -> None:
    redis().rpush(GOT, json.dumps([label, results]))


@task
def record_batch_only(found: Batch, label: str) -> None:
    redis().rpush(GOT, json.dumps([label, None]))
