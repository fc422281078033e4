"""Property tests (issue 3): payload round trips, and a state machine on a real Redis.

The state machine runs random sequences of dispatch, later, pop (reserve), ack,
release, fail, migrate and failed-retry, and after every step checks that each task
id is in exactly one place: ready, delayed, reserved, failed or done.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from support import run_machine

from rqueue.encoding.payload import Job, decode, encode, new_id
from rqueue.failed import FailedTasks, make_record
from rqueue.settings.config import Config
from rqueue.store.header import payload_attempts, payload_id, with_attempts
from rqueue.store.queue import RedisQueue
from rqueue.store.signing import sign, verify

# -- payload round trips ---------------------------------------------------------------

aware_datetimes = st.datetimes(
    min_value=datetime(1970, 1, 2),
    max_value=datetime(2200, 1, 1),
    timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30))]),
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=30)
    | st.binary(max_size=30)
    | aware_datetimes
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=8) | st.integers(-5, 5), inner, max_size=4)
    ),
    max_leaves=15,
)
queue_names = st.from_regex(r"[A-Za-z0-9_.\-:@/]{1,20}", fullmatch=True)


def _normal(value: Any) -> Any:
    """What a value decodes back to: tuples become lists, datetimes become UTC, NaN is NaN."""
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


jobs = st.builds(
    Job,
    id=st.builds(new_id),
    task=st.from_regex(r"[a-z_][a-z0-9_.]{0,20}:[A-Za-z_][A-Za-z0-9_.]{0,20}", fullmatch=True),
    args=st.lists(values, max_size=4).map(tuple),
    kwargs=st.dictionaries(st.text(max_size=10), values, max_size=4),
    queue=queue_names,
    attempts=st.integers(0, 2**32 - 1),
    tries=st.none() | st.integers(1, 1000),
    timeout=st.none() | st.integers(1, 10**6).map(lambda ms: ms / 1000),
    backoff=st.lists(st.integers(0, 10**6).map(lambda ms: ms / 1000), max_size=4).map(tuple),
    dispatched_at=st.floats(0, 4e9),
    meta=st.dictionaries(st.text(max_size=8), st.text(max_size=8) | st.integers(-5, 5), max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(job=jobs)
def test_every_supported_value_round_trips_through_a_payload(job: Job) -> None:
    data = encode(job)
    back = decode(data)
    assert payload_id(data) == job.id and payload_attempts(data) == job.attempts
    assert replace(back, args=(), kwargs={}) == replace(job, args=(), kwargs={})
    assert _normal(back.args) == _normal(job.args)
    assert _normal(back.kwargs) == _normal(job.kwargs)
    # Decoding and encoding again gives the same bytes: nothing is lost on the way.
    assert encode(back) == data


@settings(max_examples=60, deadline=None)
@given(job=jobs, secret=st.text(min_size=1, max_size=40), attempts=st.integers(0, 2**32 - 1))
def test_signed_payloads_round_trip_and_survive_attempt_patches(
    job: Job, secret: str, attempts: int
) -> None:
    signed = sign(encode(job), secret, job.queue)
    patched = with_attempts(signed, attempts)
    verify(patched, secret, job.queue)
    back = decode(patched)
    assert back.attempts == attempts and back.id == job.id and back.task == job.task
    assert _normal(back.args) == _normal(job.args)
    assert _normal(back.kwargs) == _normal(job.kwargs)
    assert len(msgpack.unpackb(signed, raw=False, strict_map_key=False, timestamp=3)[-1]) == 32


# -- the state machine -------------------------------------------------------------------

QUEUE = "props"


class QueueMachine(RuleBasedStateMachine):
    """A worker's-eye model: what it holds, what it finished; Redis holds the rest."""

    connection: RedisQueue

    def __init__(self) -> None:
        super().__init__()
        self.queue = self.connection
        self.queue.client.flushall()
        self.dispatched: set[str] = set()
        self.done: set[str] = set()
        self.holding: set[bytes] = set()

    # -- producing -------------------------------------------------------------------

    def _job(self) -> Job:
        return Job(
            id=new_id(),
            task="apptasks:record",
            args=(len(self.dispatched),),
            kwargs={},
            queue=QUEUE,
        )

    @rule(count=st.integers(1, 3))
    def dispatch(self, count: int) -> None:
        jobs = [self._job() for _ in range(count)]
        self.queue.push(QUEUE, [encode(j) for j in jobs])
        self.dispatched |= {j.id for j in jobs}

    @rule(delay_ms=st.sampled_from([1, 20, 60_000]))
    def later(self, delay_ms: int) -> None:
        job = self._job()
        self.queue.push(QUEUE, [encode(job)], delay_ms)
        self.dispatched.add(job.id)

    # -- consuming -------------------------------------------------------------------
    # Rules draw the same data whatever Redis holds (an index into what the worker
    # holds, used modulo its size), so hypothesis can replay a sequence even though
    # expiries and due times follow Redis's clock.

    def _take(self, index: int) -> bytes | None:
        if not self.holding:
            return None
        payload = sorted(self.holding)[index % len(self.holding)]
        self.holding.remove(payload)
        return payload

    @rule(count=st.integers(1, 4), timeout_ms=st.sampled_from([1, 30, 60_000]))
    def pop(self, count: int, timeout_ms: int) -> None:
        ready = self.queue.client.lrange(self.queue.keys(QUEUE).ready, 0, count - 1)
        reservation = self.queue.reserve(QUEUE, count, timeout_ms, 0, 0)
        # The head of the list, in order, each with one more attempt and no other change.
        assert reservation.payloads == [with_attempts(p, payload_attempts(p) + 1) for p in ready]
        # A task reserved again had its earlier reservation expire: that copy is stale.
        taken = {payload_id(p) for p in reservation.payloads}
        self.holding = {p for p in self.holding if payload_id(p) not in taken}
        self.holding.update(reservation.payloads)

    @rule(index=st.integers(0, 50))
    def ack(self, index: int) -> None:
        task = self._take(index)
        if task is not None and self.queue.ack(QUEUE, [task]):
            self.done.add(payload_id(task) or "")

    @rule(
        index=st.integers(0, 50), delay_ms=st.sampled_from([0, 5, 60_000]), unstarted=st.booleans()
    )
    def release(self, index: int, delay_ms: int, unstarted: bool) -> None:
        task = self._take(index)
        if task is not None:
            self.queue.release(QUEUE, [task], delay_ms / 1000, unstarted=unstarted)

    @rule(index=st.integers(0, 50))
    def fail(self, index: int) -> None:
        task = self._take(index)
        if task is not None:
            record = make_record(QUEUE, task, "ValueError", "failing on purpose", job=decode(task))
            self.queue.fail(QUEUE, task, record)

    @rule()
    def migrate(self) -> None:
        self.queue.migrate(QUEUE)

    @rule(index=st.integers(0, 50))
    def retry_failed(self, index: int) -> None:
        failed = FailedTasks(self.queue).list([QUEUE])
        if failed:
            chosen = failed[index % len(failed)]
            assert FailedTasks(self.queue).retry(chosen)
            assert not FailedTasks(self.queue).retry(chosen)  # a second retry pushes nothing
            assert (
                payload_attempts(self.queue.client.lrange(self.queue.keys(QUEUE).ready, -1, -1)[0])
                == 0
            )

    # -- the invariant ---------------------------------------------------------------

    @invariant()
    def each_task_is_in_exactly_one_place(self) -> None:
        client, keys = self.queue.client, self.queue.keys(QUEUE)
        places: dict[str, list[bytes]] = {
            "ready": client.lrange(keys.ready, 0, -1),
            "delayed": client.zrange(keys.delayed, 0, -1),
            "reserved": client.zrange(keys.reserved, 0, -1),
            "failed": [f.payload for f in FailedTasks(self.queue).list([QUEUE])],
        }
        where: Counter[str] = Counter()
        located: dict[str, str] = {}
        for place, payloads in places.items():
            for payload in payloads:
                task_id = payload_id(payload) or "?"
                where[task_id] += 1
                located[task_id] = place
        for task_id in self.done:
            where[task_id] += 1
            located[task_id] = "done"
        assert set(where) == self.dispatched, "a task was lost or appeared from nowhere"
        twice = {t: n for t, n in where.items() if n != 1}
        assert not twice, f"tasks in more than one place: {twice}"
        # What this worker still holds is reserved, unless its reservation expired.
        for reserved in self.holding:
            task_id = payload_id(reserved) or "?"
            assert located[task_id] in ("reserved", "ready", "delayed", "failed")


@pytest.mark.timeout(120)
def test_every_task_is_in_exactly_one_place_after_any_sequence(config: Config) -> None:
    run_machine(QueueMachine, config, examples=40, steps=25)
