"""A running task's cancel racing its outcome: exactly one outcome, no key left behind.

Hypothesis drives the real scripts (cancel.lua, ack.lua, release.lua for a retry,
fail.lua, settle_cancelled.lua, prune_cancelling.lua) on a real Redis in random
orders, one reserved task at a time, and compares where the task ends up with a
model of the rule: the first script that takes the task out of the reserved set
decides its outcome, except that a retry (release.lua) of a task whose cancel was
requested is refused, and its worker settles it as cancelled instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rqueue.encoding.payload import Job, encode, new_id
from rqueue.failed import make_record
from rqueue.settings.config import Config
from rqueue.store import cancel as cancelling
from rqueue.store.cancel import CancelOutcome
from rqueue.store.header import raw_id
from rqueue.store.queue import RedisQueue

OPS = ("cancel", "ack", "retry", "fail", "settle", "prune")


@dataclass
class Model:
    """Where the task is, as the rule says, and what each cancel should answer."""

    where: str = "reserved"  # reserved, delayed, acked, failed, cancelled
    requested: bool = False
    cancelled_pending: bool = False
    filed: int = 0

    def step(self, op: str, fail: bool) -> CancelOutcome | None:
        reserved = self.where == "reserved"
        if op == "cancel":
            if self.where == "delayed":
                if self.cancelled_pending:
                    return CancelOutcome.ALREADY_CANCELLED
                self.cancelled_pending = True
                return CancelOutcome.CANCELLED
            if reserved:
                self.requested = True
                return CancelOutcome.CANCELLING
            return CancelOutcome.NOT_PENDING
        if op == "prune" and not reserved:
            self.requested = False
        if not reserved or op == "prune":
            return None
        if op == "ack":
            self.where = "acked"
        elif op == "fail":
            self.where, self.filed, self.requested = "failed", self.filed + 1, False
        elif op == "retry" and not self.requested:
            self.where = "delayed"
        else:  # settle, or a retry refused for the cancel and settled by its worker
            self.where = "cancelled"
            self.filed += fail if self.requested else 0
            self.requested = False
        return None


@pytest.fixture
def connection(config: Config) -> RedisQueue:
    return RedisQueue(config)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(st.sampled_from(OPS), min_size=1, max_size=7), fail=st.booleans())
def test_a_cancel_racing_an_outcome_settles_exactly_one(
    connection: RedisQueue, ops: list[str], fail: bool
) -> None:
    client, name = connection.client, "race"
    client.flushdb()
    keys = connection.keys(name)
    job = Job(id=new_id(), task="app:work", args=(), kwargs={}, queue=name)
    connection.push(name, [encode(job)], kept=frozenset([job.id]), keep_ms=60_000)
    reserved = connection.reserve(name, 1, 60_000, 1_000, 1_000).payloads[0]
    record = make_record(name, reserved, "TaskCancelled", "cancelled")
    model = Model()
    for op in ops:
        expected = model.step(op, fail)
        if op == "cancel":
            assert cancelling.cancel(connection, job.id, name, fail) is expected, ops
        elif op == "ack":
            connection.ack(name, [reserved])
        elif op == "retry":
            if connection.release(name, [reserved], 30.0, error="ValueError") == -1:
                cancelling.settle(connection, name, reserved, job.id, record, False)
        elif op == "fail":
            connection.fail(name, reserved, make_record(name, reserved, "ValueError", "no"))
        elif op == "settle":
            cancelling.settle(connection, name, reserved, job.id, record, False)
        else:
            cancelling.prune(connection, [name])
    cancelling.prune(connection, [name])
    model.step("prune", fail)

    stored = client.get(keys.result(job.id))
    state = msgpack.unpackb(stored)["state"] if stored else None
    assert client.zcard(keys.reserved) == (model.where == "reserved"), ops
    assert client.zcard(keys.delayed) == (model.where == "delayed"), ops
    assert client.llen(keys.failed) == model.filed, ops
    assert (state == "cancelled") == (model.where == "cancelled" or model.cancelled_pending), ops
    assert client.hlen(keys.cancelling) == (model.requested and model.where == "reserved"), ops
    assert client.sismember(keys.cancelled, raw_id(job.id)) == model.cancelled_pending, ops
    pending = model.where == "delayed" and not model.cancelled_pending
    assert client.sismember(keys.pending_ids, raw_id(job.id)) == pending, ops
