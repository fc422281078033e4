"""The failed list (#25): ``queues:<name>:failed`` is the store of a queue's failed
records, newest at the head, and its lookup finds one by its task id without a scan.

Every script that changes the list keeps the two in step (lua/failed_list.lua); the
state machine at the end drives the real scripts with reads gone stale in between, as
racing commands would, and checks that invariant after every step.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import apptasks
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from support import Workers, in_threads, ready, run_machine, wait_for

from rqueue.encoding.payload import Job, decode, encode, new_id
from rqueue.failed import FailedTask, FailedTasks, decode_record, make_record
from rqueue.settings.config import Config
from rqueue.store.failed_store import record_key
from rqueue.store.header import with_attempts
from rqueue.store.queue import RedisQueue


def failed_job(queue: RedisQueue, name: str, value: object, job: Job | None = None) -> Job:
    """Record one failure of ``job`` (a new one unless given) as a worker does (fail.lua)."""
    job = job or Job(new_id(), "apptasks:record", (value,), {}, name, attempts=1, tries=1)
    payload = encode(job)
    record = make_record(name, payload, "ValueError", f"failure {value}", job=job)
    assert queue.fail(name, payload, record, force=True)
    return job


def fill(queue: RedisQueue, name: str, count: int) -> list[str]:
    ids = [failed_job(queue, name, i).id for i in range(count)]
    queue.remember_queues([name])
    return ids


def commands_run(queue: RedisQueue, action: Callable[[], object]) -> dict[str, int]:
    """How many times Redis ran each command during ``action`` (scripts' own included)."""
    queue.client.config_resetstat()
    action()
    stats = queue.client.info("commandstats")
    return {name: int(calls["calls"]) for name, calls in stats.items() if name != "cmdstat_info"}


def assert_in_step(queue: RedisQueue, name: str = "default") -> list[bytes]:
    """The invariant of lua/failed_list.lua: as many lookup members as list elements,
    the member at each rank naming the id of the record at that index, and each id's
    members ``#1`` to ``#m``. The list, newest first."""
    keys = queue.keys(name)
    records = queue.client.lrange(keys.failed, 0, -1)
    members = queue.client.zrevrange(keys.failed_lookup, 0, -1)
    assert len(members) == len(records)
    per_id: dict[str, int] = {}
    for member, record in zip(members, records, strict=True):
        task_id = member.decode().rpartition("#")[0]
        assert task_id == decode_record(record).id
        per_id[task_id] = per_id.get(task_id, 0) + 1
    for task_id, count in per_id.items():
        mine = {m for m in members if m.decode().rpartition("#")[0] == task_id}
        assert mine == {record_key(task_id, n) for n in range(1, count + 1)}
    return records


@pytest.mark.topology
def test_a_task_that_fails_for_good_is_an_element_of_the_failed_list(
    queue: RedisQueue, workers: Workers
) -> None:
    handle = apptasks.always_fails.dispatch("boom")  # queue emails, tries 3
    workers.start("emails", "--block-for", "0.5")
    failed_key = queue.keys("emails").failed
    wait_for(lambda: queue.client.llen(failed_key) == 1, 15, "the task to fail for good")
    (raw,) = queue.client.lrange(failed_key, 0, -1)
    record = decode_record(raw)
    assert (record.id, record.task, record.attempts) == (handle.id, "apptasks:always_fails", 3)
    assert "failing on purpose: boom" in record.message
    assert decode(record.payload).args == ("boom",)
    assert FailedTasks(queue).find(handle.id) == record
    assert queue.sizes(["emails"])[0].failed == 1
    assert_in_step(queue, "emails")


@pytest.mark.topology
def test_the_newest_record_is_at_the_head(queue: RedisQueue) -> None:
    ids = fill(queue, "default", 5)
    key = queue.keys("default").failed
    assert [decode_record(r).id for r in queue.client.lrange(key, 0, -1)] == ids[::-1]
    assert [f.id for f in FailedTasks(queue).page().records] == ids[::-1]
    assert [f.id for f in FailedTasks(queue).list()] == ids


def test_a_record_anywhere_is_found_and_removed_with_the_same_calls_at_any_size(
    queue: RedisQueue,
) -> None:
    small, large = fill(queue, "small", 20), fill(queue, "large", 3000)
    failed = FailedTasks(queue)
    failed.forget(failed.find_all([small[0]], ["small"])[small[0]])  # loads the scripts
    small, large = small[1:], large[1:]
    for position in (lambda ids: ids[-1], lambda ids: ids[len(ids) // 2], lambda ids: ids[0]):
        costs = []
        for name, ids in (("small", small), ("large", large)):
            target, other = position(ids), ids[len(ids) // 3]
            found = failed.find_all([target, other], [name])
            costs.append(commands_run(queue, partial(failed.find_all, [target], [name])))
            costs.append(commands_run(queue, partial(failed.forget, found[target])))
            costs.append(commands_run(queue, partial(failed.retry, found[other])))
            ids.remove(target), ids.remove(other)
            assert target not in [f.id for f in failed.iterate([name])]
            assert decode(ready(queue, name)[-1]).id == other
            assert_in_step(queue, name)
        assert costs[:3] == costs[3:]  # 20 records or 3,000: the same calls
        for cost in costs:  # a window is never read to find one record
            assert not {"cmdstat_lrange", "cmdstat_zrange", "cmdstat_zrangebyscore"} & set(cost)
            assert sum(cost.values()) < 30
    assert queue.sizes(["large"])[0].failed == 3000 - 6


@pytest.mark.topology
def test_every_record_of_one_task_id_is_kept_and_the_newest_is_found(queue: RedisQueue) -> None:
    job = failed_job(queue, "default", "first")
    other = failed_job(queue, "default", "other")
    for value in ("second", "third"):  # failed again, as after a retry
        failed_job(queue, "default", value, replace(job, args=(value,)))
    payload = encode(job)
    twice = make_record("default", payload, "ValueError", "written twice", job=job)
    for _ in range(2):  # one record written twice (a retried write): two records
        assert queue.fail("default", payload, twice, force=True)
    queue.remember_queues(["default"])
    failed = FailedTasks(queue)
    mine = [f.message for f in failed.iterate() if f.id == job.id]
    assert mine == [
        "written twice",
        "written twice",
        "failure third",
        "failure second",
        "failure first",
    ]
    assert failed.find(job.id).message == "written twice"  # type: ignore[union-attr]
    assert queue.client.llen(queue.keys("default").failed) == 6
    (second,) = [f for f in failed.iterate() if f.message == "failure second"]
    assert failed.forget(second) and not failed.forget(second)
    assert failed.retry(failed.find(job.id))  # type: ignore[arg-type]
    left = [f.message for f in failed.iterate() if f.id == job.id]
    assert left == ["written twice", "failure third", "failure first"]
    assert failed.find(job.id).message == "written twice"  # type: ignore[union-attr]
    assert len(assert_in_step(queue)) == 4
    assert failed.find(other.id) is not None


@pytest.mark.topology
def test_a_record_moved_since_it_was_read_is_still_retried_once(queue: RedisQueue) -> None:
    job = failed_job(queue, "default", 1)
    for value in (2, 3):
        failed_job(queue, "default", value, replace(job, args=(value,)))
    failed = FailedTasks(queue)
    (newest_member, newest), *_ = failed.store.window("default", 0, 0, True)
    assert newest_member == record_key(job.id, 3)
    (oldest,) = [f for f in failed.iterate(["default"]) if f.message == "failure 1"]
    assert failed.forget(oldest)  # #2 and #3 move down to #1 and #2
    assert failed.store.window("default", 0, 0, True) == [(record_key(job.id, 2), newest)]
    again = with_attempts(encode(replace(job, args=(3,))), 0)
    assert failed.store.retry("default", [(newest_member, newest, again)]) == 1
    assert failed.store.retry("default", [(newest_member, newest, again)]) == 0
    assert ready(queue) == [again]
    assert len(assert_in_step(queue)) == 1


@pytest.mark.topology
def test_concurrent_retries_of_one_record_push_it_once(queue: RedisQueue) -> None:
    fill(queue, "default", 5)
    failed = FailedTasks(queue)
    record: FailedTask = failed.page(offset=2, limit=1).records[0]
    assert sorted(in_threads(6, lambda: failed.retry(record))) == [False] * 5 + [True]  # type: ignore[type-var]
    assert [decode(p).id for p in ready(queue)] == [record.id]
    assert queue.sizes(["default"])[0].failed == 4
    assert_in_step(queue)


@pytest.mark.topology
def test_racing_fails_retries_and_forgets_keep_the_list_and_lookup_in_step(
    queue: RedisQueue,
) -> None:
    ids = fill(queue, "default", 60)
    failed = FailedTasks(queue)
    records = failed.list()
    rng = random.Random(25)
    rng.shuffle(records)

    def act(i: int) -> object:
        if i % 3 == 0:
            return failed_job(queue, "default", f"new {i}")
        if i % 3 == 1:
            return failed.retry(records[i])
        return failed.forget(records[i])

    counter = iter(range(60))
    in_threads(30, lambda: act(next(counter)))
    in_threads(30, lambda: act(next(counter)))
    left = assert_in_step(queue)
    assert len(left) == 60 - 40 + 20
    assert {decode(p).id for p in ready(queue)} == {records[i].id for i in range(1, 60, 3)}
    gone = {records[i].id for i in range(60) if i % 3}
    assert not gone & {decode_record(r).id for r in left}
    assert set(ids) - gone <= {decode_record(r).id for r in left}


@pytest.mark.topology
def test_a_hand_edit_of_the_list_is_mended_and_loses_nothing(queue: RedisQueue) -> None:
    ids = fill(queue, "default", 10)
    key = queue.keys("default").failed
    queue.client.lpush(key, b"\xc1 pushed by hand <b>")
    queue.client.rpush(key, b"\x81\xa2id\xa3abc")  # a map with an id, and nothing else
    failed = FailedTasks(queue)
    page = failed.page(limit=20)
    assert (page.total, page.unreadable) == (12, 2)
    assert [f.id for f in page.records] == ids[::-1]
    assert queue.client.zcard(queue.keys("default").failed_lookup) == 12  # mended
    middle = failed.find(ids[5])
    assert middle is not None and failed.retry(middle)
    assert failed.retry_all() == 9  # the two that are no records stay
    assert queue.client.lrange(key, 0, -1) == [b"\xc1 pushed by hand <b>", b"\x81\xa2id\xa3abc"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("payload", 400_000_000),  # became bytes(400000000) on retry
        ("payload", "text"),
        ("id", 7),
        ("queue", None),
        ("failed_at", float("nan")),
        ("failed_at", float("inf")),
        ("failed_at", 1e300),
        ("attempts", -1),
        ("attempts", 2**40),
        ("attempts", "3"),
        ("pid", 1.5),
        ("timed_out", "yes"),
        ("message", b"\xff"),
    ],
)
def test_a_record_whose_field_has_the_wrong_type_is_unreadable_and_stays(
    queue: RedisQueue, field: str, value: object
) -> None:
    import msgpack

    good = fill(queue, "default", 1)[0]
    job = Job(new_id(), "apptasks:record", (1,), {}, "default", tries=1)
    fields = msgpack.unpackb(make_record("default", encode(job), "ValueError", "x", job=job))
    fields[field] = value
    bad = msgpack.packb(fields, use_bin_type=True)
    queue.fail("default", b"", bad, force=True)
    failed = FailedTasks(queue)
    page = failed.page()
    assert ([f.id for f in page.records], page.unreadable) == ([good], 1)
    assert failed.retry_all() == 1
    assert ready(queue) and max(len(p) for p in ready(queue)) < 1000
    assert queue.client.lrange(queue.keys("default").failed, 0, -1) == [bad]


class FailedListMachine(RuleBasedStateMachine):
    """Fails, retries, forgets and flushes on one queue, some with what was read a few
    steps before (as a command racing others acts on a page it read): after each step
    the list is the model's, in order, and the lookup in step with it."""

    connection: RedisQueue

    def __init__(self) -> None:
        super().__init__()
        self.connection.client.flushall()
        self.failed = FailedTasks(self.connection)
        self.jobs = [
            Job(new_id(), "apptasks:record", (i,), {}, "default", tries=1) for i in range(3)
        ]
        self.model: list[bytes] = []  # oldest first
        self.read: list[tuple[bytes, bytes]] = []  # (member, record) as read, maybe stale
        self.step = 0

    @rule(which=st.integers(0, 2))
    def fail(self, which: int) -> None:
        self.step += 1
        job = replace(self.jobs[which], args=(self.step,))
        payload = encode(job)
        record = make_record("default", payload, "ValueError", str(self.step), job=job)
        assert self.connection.fail("default", payload, record, force=True)
        self.model.append(record)

    @rule()
    def read_window(self) -> None:
        self.read = self.failed.store.window("default", 0, -1, False)

    @precondition(lambda self: self.read)
    @rule(data=st.data(), forget=st.booleans())
    def act_on_what_was_read(self, data: st.DataObject, forget: bool) -> None:
        chosen = data.draw(st.lists(st.sampled_from(self.read), min_size=1, max_size=3))
        still = [raw for _, raw in chosen]
        expected = 0
        model = list(self.model)
        for raw in still:
            if raw in model:
                model.remove(raw)
                expected += 1
        if forget:
            done = sum(self.failed.store.forget("default", m, raw) for m, raw in chosen)
        else:
            retries = [(m, raw, decode_record(raw).payload) for m, raw in chosen]
            done = self.failed.store.retry("default", retries)
        assert done == expected
        self.model = model

    @rule(most=st.integers(1, 4))
    def flush(self, most: int) -> None:
        assert self.failed.store.flush_oldest("default", most) == min(most, len(self.model))
        del self.model[:most]

    @invariant()
    def list_and_lookup_in_step(self) -> None:
        assert assert_in_step(self.connection)[::-1] == self.model


def test_the_list_and_its_lookup_stay_in_step_after_any_sequence(config: Config) -> None:
    run_machine(FailedListMachine, config, examples=60, steps=40)


@pytest.mark.parametrize("broken", ["failed", "failed_lookup"])
def test_a_failed_key_of_the_wrong_type_leaves_the_task_reserved_not_lost(
    queue: RedisQueue, broken: str
) -> None:
    import redis

    queue.push("default", [encode(Job(new_id(), "apptasks:record", (1,), {}, "default"))])
    (reserved,) = queue.reserve("default", 1, 60_000, 0, 0).payloads
    queue.client.set(getattr(queue.keys("default"), broken), "not a list nor a zset")
    record = make_record("default", reserved, "ValueError", "x", job=decode(reserved))
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        queue.fail("default", reserved, record)
    assert queue.client.zrange(queue.keys("default").reserved, 0, -1) == [reserved]
