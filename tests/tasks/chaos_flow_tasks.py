"""Tasks of the batch chaos tests (test_batch_chaos.py); workers import this module.

A member records that its index ran (a set: at least once) and that it ran at all
(a counter: how often); a callback records each of its runs with the counts it saw.
Everything goes to the Redis the worker serves, so it survives a restart from AOF.
"""

from __future__ import annotations

import time

from rqueue import Batch, task
from rqueue.store.default import default_queue

RAN = "chaos-flow:ran"
"""Set of the member indexes that ran."""
RUNS = "chaos-flow:runs"
"""How many times members ran, reruns included."""
CALLED = "chaos-flow:called"
"""List: one ``name:succeeded/failed/total`` entry per callback run."""


@task
def count_member(index: int, work_ms: float = 0.0) -> int:
    if work_ms:
        time.sleep(work_ms / 1000)
    pipe = default_queue().client.pipeline(transaction=False)
    pipe.sadd(RAN, index)
    pipe.incr(RUNS)
    pipe.execute()
    return index + 1


@task
def record_callback(found: Batch, name: str) -> None:
    status = found.status()
    seen = "gone" if status is None else f"{status.succeeded}/{status.failed}/{status.total}"
    default_queue().client.rpush(CALLED, f"{name}:{seen}")


STEPS = "chaos-flow:steps"
"""Set of the workflow's own steps that ran (``start``, ``middle``)."""
STEP_RUNS = "chaos-flow:step-runs"
"""Hash: step name -> how often it ran, reruns included."""
SECOND = "chaos-flow:second"
"""Set of the indexes whose chain's second step ran."""


@task
def second_step(index: int) -> None:
    """The second step of a member's chain: it runs only after the first succeeded."""
    client = default_queue().client
    if not client.sismember(RAN, index):
        raise AssertionError(f"the second step of {index} ran before its first")
    client.sadd(SECOND, index)


@task
def record_step(name: str) -> None:
    pipe = default_queue().client.pipeline(transaction=False)
    pipe.sadd(STEPS, name)
    pipe.hincrby(STEP_RUNS, name, 1)
    pipe.execute()


@task
def summarise(found: Batch, results: list[int]) -> None:
    """The chord's callback: how many results it got, and their sum."""
    default_queue().client.rpush(CALLED, f"chord:{len(results)}:{sum(results)}")
