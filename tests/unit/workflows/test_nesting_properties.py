"""Nested workflows counted on the real scripts, whatever the order and the re-runs.

Hypothesis builds random workflows (chains whose steps are tasks or batches, batches
whose members are tasks, chains or batches, three levels deep) and a simulated worker
runs them through the worker's own completion code (``effects.on_success`` /
``on_failure`` / ``on_skip`` and ``apply``) against real Redis: the tasks in a random
order, some failing for good, and some completed twice (a worker that died before its
ack). Whatever happens: the workflow ends (nothing left queued), every batch finishes
with each member counted once, and each task, callback and step after a batch is
queued once. With no failure, every task runs once and every batch succeeds whole.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

import workflow_tasks as flows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rqueue import Batch, batch, chain
from rqueue.encoding.payload import decode
from rqueue.store.queue import RedisQueue
from rqueue.workflows import effects, heard
from rqueue.workflows.batches import BATCH
from rqueue.workflows.chains import Chain
from rqueue.workflows.pending_batch import PendingBatch

leaves = st.builds(lambda n: flows.note.pending(n), st.integers(0, 99))


def _chains(links: st.SearchStrategy[Any]) -> st.SearchStrategy[Chain]:
    return st.lists(links, min_size=1, max_size=3).map(lambda steps: chain(*steps))


def _batches(members: st.SearchStrategy[Any]) -> st.SearchStrategy[PendingBatch]:
    built = st.lists(members, min_size=0, max_size=3).map(batch)
    return st.tuples(built, st.booleans()).map(lambda pair: pair[0].allow_failures(pair[1]))


def _workflows(depth: int) -> st.SearchStrategy[Any]:
    if depth == 0:
        return leaves
    inner = _workflows(depth - 1)
    return st.one_of(leaves, _batches(inner), _chains(st.one_of(leaves, _batches(inner))))


workflows = st.one_of(_chains(st.one_of(leaves, _batches(_workflows(2)))), _batches(_workflows(2)))


class Simulated:
    """A worker that takes the queue's tasks in a random order and completes each."""

    def __init__(self, queue: RedisQueue, chooser: random.Random, failing: float) -> None:
        self.queue = queue
        self.chooser = chooser
        self.failing = failing
        self.ran: Counter[str] = Counter()
        self.batches: set[str] = set()

    def run_all(self) -> None:
        ready = self.queue.keys("default").ready
        for _ in range(10_000):
            payloads = self.queue.client.lrange(ready, 0, -1)
            if not payloads:
                return
            payload = self.chooser.choice(payloads)
            self.queue.client.lrem(ready, 1, payload)
            self.complete(payload)
        raise AssertionError("the workflow never ended")

    def complete(self, payload: bytes) -> None:
        job = decode(payload)
        self.ran[job.id] += 1
        if BATCH in job.meta:
            self.batches.add(job.meta[BATCH])
        if effects.is_member(job) and heard.batch_cancelled(job, self.queue):
            completion = effects.on_skip(job, payload)
        elif self.chooser.random() < self.failing and not effects.is_callback(job):
            args = ("ValueError", "boom", "", time.time(), None)
            completion = effects.on_failure(job, payload, *args)
        else:
            completion = effects.on_success(job, payload, None, time.time(), None)
        for _ in range(self.chooser.choice((1, 1, 2))):  # twice: its ack was lost
            effects.apply(completion, self.queue)


def _tasks_in(workflow: Any) -> int:
    if isinstance(workflow, Chain):
        return sum(map(_tasks_in, workflow.steps))
    if isinstance(workflow, PendingBatch):
        return sum(map(_tasks_in, workflow.calls))
    return 1


def _all_batches(queue: RedisQueue) -> list[str]:
    found = queue.client.zrange(queue.global_keys.batches, 0, -1)
    return [batch_id.decode() for batch_id in found]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(workflow=workflows, seed=st.integers(0, 2**32), failing=st.sampled_from([0.0, 0.0, 0.3]))
def test_nested_workflows_end_with_every_level_counted_once(
    queue: RedisQueue, workflow: Any, seed: int, failing: float
) -> None:
    queue.client.flushall()
    workflow.dispatch()
    worker = Simulated(queue, random.Random(seed), failing)
    worker.run_all()
    assert all(count == 1 for count in worker.ran.values()), "a task was queued twice"
    for batch_id in _all_batches(queue):
        status = Batch(batch_id, queue).status()
        assert status is not None and status.finished, f"batch {batch_id} never finished"
        assert status.succeeded + status.failed + status.skipped == status.total
        if not failing:
            assert (status.succeeded, status.failed, status.skipped) == (status.total, 0, 0)
    if not failing:
        assert len(worker.ran) == _tasks_in(workflow)
