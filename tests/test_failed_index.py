"""The failed index (#16): one record found and removed in O(log n), every record of a
task id kept, concurrent retries pushing once, and a failed list written by the version
before converted whole, in order, by however many readers at once."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import pytest
from support import in_threads, ready

from rqueue.failed import CHUNK, FailedTask, FailedTasks, decode_record, make_record
from rqueue.payload import Job, decode, encode, new_id
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


def legacy_records(name: str, count: int) -> list[bytes]:
    """``count`` records as the version before the index wrote them, oldest first."""
    jobs = [Job(new_id(), "apptasks:record", (i,), {}, name, tries=1) for i in range(count)]
    return [make_record(name, encode(job), "ValueError", "old", job=job) for job in jobs]


def commands_run(queue: RedisQueue, action: Callable[[], object]) -> dict[str, int]:
    """How many times Redis ran each command during ``action`` (scripts' own included)."""
    queue.client.config_resetstat()
    action()
    stats = queue.client.info("commandstats")
    return {name: int(calls["calls"]) for name, calls in stats.items() if name != "cmdstat_info"}


def test_a_record_in_the_middle_is_found_and_removed_with_the_same_calls_at_any_size(
    queue: RedisQueue,
) -> None:
    small, large = fill(queue, "small", 20), fill(queue, "large", 3000)
    failed = FailedTasks(queue)
    failed.forget(failed.find_all([small[0]], ["small"])[small[0]])  # loads the scripts
    costs = []
    for name, ids in (("small", small), ("large", large)):
        middle, other = ids[len(ids) // 2], ids[len(ids) // 3]
        found = failed.find_all([middle, other], [name])
        costs.append(commands_run(queue, partial(failed.find_all, [middle], [name])))
        costs.append(commands_run(queue, partial(failed.forget, found[middle])))
        costs.append(commands_run(queue, partial(failed.retry, found[other])))
        assert middle not in [f.id for f in failed.iterate([name])]
        assert [decode(p).id for p in ready(queue, name)] == [other]
    assert costs[:3] == costs[3:]  # 20 records or 3,000: the same calls
    for cost in costs:
        assert not {"cmdstat_lrem", "cmdstat_lrange", "cmdstat_hgetall", "cmdstat_zrange"} & set(
            cost
        )
        assert sum(cost.values()) < 30
    assert queue.sizes(["large"])[0].failed == 2998


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
    keys = queue.keys("default")
    assert sorted(queue.client.hkeys(keys.failed_records)) == sorted(
        [record_key(job.id, n) for n in range(1, 6)] + [record_key(other.id)]
    )
    (second,) = [f for f in failed.iterate() if f.message == "failure second"]
    assert failed.forget(second) and not failed.forget(second)
    assert failed.retry(failed.find(job.id))  # type: ignore[arg-type]
    left = [f.message for f in failed.iterate() if f.id == job.id]
    assert left == ["written twice", "failure third", "failure first"]
    assert failed.find(job.id).message == "written twice"  # type: ignore[union-attr]
    # The id's records fill #1 to #3 again: the gaps took its last ones.
    mine_keys = {
        k for k in queue.client.hkeys(keys.failed_records) if k.startswith(job.id.encode())
    }
    assert mine_keys == {record_key(job.id, n) for n in (1, 2, 3)}
    assert queue.client.zcard(keys.failed_index) == queue.client.hlen(keys.failed_records) == 4


@pytest.mark.topology
def test_a_record_moved_since_it_was_read_is_still_retried_once(queue: RedisQueue) -> None:
    job = failed_job(queue, "default", 1)
    for value in (2, 3):
        failed_job(queue, "default", value, replace(job, args=(value,)))
    failed = FailedTasks(queue)
    (newest_key, newest), *_ = failed.store.window("default", 0, 0, True)
    assert newest_key == record_key(job.id, 3)
    (oldest,) = [f for f in failed.iterate(["default"]) if f.message == "failure 1"]
    assert failed.forget(oldest)  # #2 and #3 move down to #1 and #2
    records = queue.keys("default").failed_records
    assert queue.client.hmget(records, [record_key(job.id, n) for n in (2, 3)]) == [newest, None]
    again = with_attempts(encode(replace(job, args=(3,))), 0)
    assert failed.store.retry("default", [(newest_key, newest, again)]) == 1
    assert failed.store.retry("default", [(newest_key, newest, again)]) == 0
    assert ready(queue) == [again]


@pytest.mark.topology
def test_concurrent_retries_of_one_record_push_it_once(queue: RedisQueue) -> None:
    fill(queue, "default", 5)
    failed = FailedTasks(queue)
    record: FailedTask = failed.page(offset=2, limit=1).records[0]
    assert sorted(in_threads(6, lambda: failed.retry(record))) == [False] * 5 + [True]  # type: ignore[type-var]
    assert [decode(p).id for p in ready(queue)] == [record.id]
    assert queue.sizes(["default"])[0].failed == 4


@pytest.mark.topology
def test_a_legacy_failed_list_is_converted_whole_and_in_order(queue: RedisQueue) -> None:
    keys = queue.keys("default")
    old = legacy_records("default", 2 * CHUNK + 10)
    old.insert(CHUNK, b"\xc1 not a record <b>")
    old.append(old[3])  # one record twice in the list: both are kept
    queue.client.rpush(keys.failed, *old)
    queue.remember_queues(["default"])
    newer = fill(queue, "default", 2)  # a worker of the new version, before any read
    assert queue.sizes(["default"])[0].failed == len(old) + 2  # not hidden before converting
    failed = FailedTasks(queue)
    page = failed.page(limit=len(old) + 10)
    assert queue.client.exists(keys.failed) == 0
    assert (page.total, page.unreadable) == (len(old) + 2, 1)
    assert [f.id for f in page.records[:2]] == newer[::-1]
    assert [f.raw for f in page.records[2:]] == [r for r in old[::-1] if r != old[CHUNK]]
    assert failed.find(failed.page(offset=4, limit=1).records[0].id) is not None
    assert queue.sizes(["default"])[0].failed == len(old) + 2
    assert failed.retry_all() == len(old) + 1  # all but the garbage: 2 new, 1 twice
    assert queue.client.hvals(keys.failed_records) == [b"\xc1 not a record <b>"]


def test_a_record_an_old_parent_wrote_to_the_failed_list_is_held(queue: RedisQueue) -> None:
    """How a worker checks a parent's failure report: it said "no such record" for
    one in a failed list from before the index, until something else converted it."""
    old = legacy_records("default", 3)
    queue.client.rpush(queue.keys("default").failed, *old)
    failed = FailedTasks(queue)
    assert failed.holds(decode_record(old[1]))
    assert not failed.holds(decode_record(legacy_records("default", 1)[0]))


def test_two_converters_at_once_move_every_record_once(queue: RedisQueue) -> None:
    keys = queue.keys("default")
    old = legacy_records("default", 3000)
    queue.client.rpush(keys.failed, *old)
    moved = in_threads(3, lambda: FailedTasks(queue).store.convert("default", 50))
    assert sum(moved) == 3000  # type: ignore[arg-type]
    assert queue.client.exists(keys.failed) == 0
    assert queue.client.zcard(keys.failed_index) == 3000
    assert sorted(queue.client.hvals(keys.failed_records)) == sorted(old)
    in_order = [raw for _, raw in FailedTasks(queue).store.window("default", 0, -1, False)]
    assert in_order == old


def test_an_ids_records_stay_in_order_and_fill_their_keys_whatever_is_removed(
    queue: RedisQueue,
) -> None:
    """Random failures, forgets, retries and flushes over three task ids: after each,
    the records are the model's, in its order, and each id's fill #1 to #m."""
    rng = random.Random(16)
    jobs = [failed_job(queue, "default", i) for i in range(3)]
    failed = FailedTasks(queue)
    model = [raw for _, raw in failed.store.window("default", 0, -1, False)]
    keys = queue.keys("default")
    for step in range(150):
        action = rng.choice(["fail", "fail", "forget", "retry", "flush", "retry many"])
        if action == "fail" or not model:
            job = rng.choice(jobs)
            failed_job(queue, "default", step, replace(job, args=(step,)))
            model.append(failed.store.window("default", -1, -1, False)[0][1])
        elif action == "forget":
            raw = rng.choice(model)
            assert failed.forget(decode_record(raw))
            model.remove(raw)
        elif action == "flush":
            most = rng.randint(1, 4)
            assert failed.store.flush_oldest("default", most) == min(most, len(model))
            del model[:most]
        else:  # one or several records, as read (their keys), in one call
            window = failed.store.window("default", 0, -1, False)
            chosen = rng.sample(window, 1 if action == "retry" else min(3, len(window)))
            retries = [(key, raw, decode_record(raw).payload) for key, raw in chosen]
            assert failed.store.retry("default", retries) == len(chosen)
            for _, raw in chosen:
                model.remove(raw)
        assert [raw for _, raw in failed.store.window("default", 0, -1, False)] == model
        held = queue.client.hkeys(keys.failed_records)
        assert queue.client.zcard(keys.failed_index) == len(held) == len(model)
        for job in jobs:
            mine = sum(1 for raw in model if decode_record(raw).id == job.id)
            expected = {record_key(job.id, n) for n in range(1, mine + 1)}
            assert {k for k in held if k.startswith(job.id.encode())} == expected
