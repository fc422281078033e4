"""The Lua scripts through RedisQueue: each state change and its invariant."""

from __future__ import annotations

from dataclasses import replace

import msgpack
import pytest

from rqueue.encoding.payload import Job, decode, encode, new_id
from rqueue.failed import FailedTasks, decode_record, make_record
from rqueue.store.header import payload_attempts, with_attempts
from rqueue.store.queue import RedisQueue
from rqueue.store.scripts import Scripts

Q = "default"
READY, DELAYED, RESERVED, FAILED = (
    "queues:default",
    "queues:default:delayed",
    "queues:default:reserved",
    "queues:default:failed",
)
NOTIFY, TIMER = "queues:default:notify", "queues:default:timer"
FAILED_LOOKUP = "queues:default:failed-lookup"


def payload(value: object = 1, **changes: object) -> bytes:
    job = Job(id=new_id(), task="apptasks:record", args=(value,), kwargs={}, queue=Q)
    return encode(replace(job, **changes))  # type: ignore[arg-type]


def ready(queue: RedisQueue) -> list[bytes]:
    return list(queue.client.lrange(READY, 0, -1))


def zset(queue: RedisQueue, key: str) -> dict[bytes, float]:
    return dict(queue.client.zrange(key, 0, -1, withscores=True))


def redis_now_ms(queue: RedisQueue) -> int:
    seconds, micros = queue.client.time()
    return seconds * 1000 + micros // 1000


def reserve_all(queue: RedisQueue, count: int = 100) -> list[bytes]:
    return queue.reserve(Q, count, 60_000, 0, 0).payloads


# -- reserve ---------------------------------------------------------------------------


def test_reserve_moves_tasks_from_the_list_to_the_reserved_set(queue: RedisQueue) -> None:
    pushed = [payload(i) for i in range(3)]
    queue.push(Q, pushed)
    reservation = queue.reserve(Q, 2, 60_000, 0, 0)
    assert reservation.payloads == [with_attempts(p, 1) for p in pushed[:2]]
    assert reservation.queue == Q
    assert ready(queue) == pushed[2:]
    assert queue.client.type(RESERVED) == b"zset"
    assert set(zset(queue, RESERVED)) == {with_attempts(p, 1) for p in pushed[:2]}
    # More are ready, so the next idle worker is woken.
    assert queue.client.llen(NOTIFY) == 1
    queue.reserve(Q, 5, 60_000, 0, 0)
    assert queue.client.exists(READY, NOTIFY) == 0


def test_reserve_counts_one_more_attempt_each_time(queue: RedisQueue) -> None:
    queue.push(Q, [payload(attempts=4)])
    (reserved,) = reserve_all(queue)
    assert payload_attempts(reserved) == 5 and decode(reserved).attempts == 5


def test_reservation_expiry_comes_from_each_tasks_own_timeout(queue: RedisQueue) -> None:
    pushed = [payload(1, timeout=2), payload(2), payload(3, timeout=0.5)]
    queue.push(Q, pushed)
    default_ms, grace_ms, margin_ms = 10_000, 700, 3_000
    reservation = queue.reserve(Q, 3, default_ms, grace_ms, margin_ms)
    now = reservation.now_ms
    assert abs(now - redis_now_ms(queue)) < 2000  # Redis's clock, not the client's
    scores = zset(queue, RESERVED)
    expected = [
        now + margin_ms + 2000 + grace_ms,
        now + margin_ms + default_ms + grace_ms,
        now + margin_ms + 500 + grace_ms,
    ]
    assert [scores[p] for p in reservation.payloads] == expected


def test_renew_extends_a_live_reservation_and_never_revives_an_expired_one(
    queue: RedisQueue,
) -> None:
    queue.push(Q, [payload(1), payload(2)])
    first, second = queue.reserve(Q, 2, 1_000, 0, 0).payloads
    assert queue.renew(Q, first, 120) is True
    assert zset(queue, RESERVED)[first] >= redis_now_ms(queue) + 119_000
    queue.client.zadd(RESERVED, {second: 0})  # its reservation ran out...
    assert queue.migrate(Q).moved == 1  # ...and it went back to the ready list
    assert queue.renew(Q, second, 120) is False
    assert second not in zset(queue, RESERVED)


def test_reserve_takes_a_fair_share_of_a_short_queue(queue: RedisQueue) -> None:
    queue.push(Q, [payload(i) for i in range(5)])
    assert len(queue.reserve(Q, 20, 1000, 0, 0, share=2).payloads) == 3  # ceil(5 / 2)
    assert len(queue.reserve(Q, 20, 1000, 0, 0, share=4).payloads) == 1  # ceil(2 / 4)
    assert len(queue.reserve(Q, 20, 1000, 0, 0, share=4).payloads) == 1
    assert queue.reserve(Q, 20, 1000, 0, 0, share=4).payloads == []


def test_reserve_on_an_empty_queue_returns_the_redis_time_only(queue: RedisQueue) -> None:
    queue.client.rpush(NOTIFY, 1)
    reservation = queue.reserve(Q, 10, 1000, 0, 0)
    assert reservation.payloads == [] and reservation.now_ms > 0
    assert queue.client.exists(NOTIFY) == 0  # a stale wake-up is cleared


def test_foreign_bytes_are_reserved_unchanged_with_the_default_timeout(queue: RedisQueue) -> None:
    queue.client.rpush(READY, b"not a payload at all")
    reservation = queue.reserve(Q, 1, 4000, 100, 0)
    (task,) = reservation.payloads
    assert task == b"not a payload at all"
    assert zset(queue, RESERVED) == {task: reservation.now_ms + 4100}


def test_reserve_acks_piggybacked_in_the_same_round_trip(queue: RedisQueue) -> None:
    queue.push(Q, [payload(1), payload(2)])
    (first,) = queue.reserve(Q, 1, 1000, 0, 0).payloads
    (second,) = queue.reserve(Q, 1, 1000, 0, 0, ack=[first]).payloads
    assert set(zset(queue, RESERVED)) == {second}


# -- ack, release, fail ----------------------------------------------------------------


def test_ack_removes_the_exact_reserved_bytes(queue: RedisQueue) -> None:
    queue.push(Q, [payload(1), payload(2)])
    first, second = reserve_all(queue)
    assert queue.ack(Q, [first]) == 1
    assert queue.ack(Q, [first]) == 0
    assert queue.ack(Q, [with_attempts(second, 0)]) == 0  # the original bytes are not the key
    assert set(zset(queue, RESERVED)) == {second}


def test_release_with_backoff_moves_to_the_delayed_set(queue: RedisQueue) -> None:
    queue.push(Q, [payload(1)])
    (reserved,) = reserve_all(queue)
    before = redis_now_ms(queue)
    assert queue.release(Q, [reserved], delay=30) == 1
    after = redis_now_ms(queue)
    assert queue.client.exists(RESERVED, READY) == 0
    assert queue.client.type(DELAYED) == b"zset"
    ((member, score),) = zset(queue, DELAYED).items()
    assert member == reserved  # the attempt stays counted
    assert before + 30_000 <= score <= after + 30_000
    assert queue.client.lrange(TIMER, 0, -1) == [str(int(score)).encode()]


def test_release_without_delay_goes_to_the_back_of_the_list(queue: RedisQueue) -> None:
    queue.push(Q, [payload(1), payload(2)])
    (first,) = queue.reserve(Q, 1, 1000, 0, 0).payloads
    queue.client.delete(NOTIFY)
    assert queue.release(Q, [first]) == 1
    assert ready(queue)[-1] == first and payload_attempts(ready(queue)[-1]) == 1
    assert queue.client.llen(NOTIFY) == 1


def test_unstarted_release_gives_the_attempt_back_at_the_front_in_order(
    queue: RedisQueue,
) -> None:
    pushed = [payload(i, attempts=2) for i in range(4)]
    queue.push(Q, pushed)
    reserved = queue.reserve(Q, 3, 1000, 0, 0).payloads
    assert [payload_attempts(r) for r in reserved] == [3, 3, 3]
    assert queue.release(Q, reserved, unstarted=True) == 3
    assert ready(queue) == pushed
    assert queue.client.exists(RESERVED) == 0


def test_late_release_of_a_task_no_longer_reserved_moves_nothing(queue: RedisQueue) -> None:
    queue.push(Q, [payload(1)])
    (reserved,) = reserve_all(queue)
    queue.client.zadd(RESERVED, {reserved: 0})
    assert queue.migrate(Q).moved == 1  # expired and handed back
    assert queue.release(Q, [reserved], delay=5) == 0
    assert queue.release(Q, [reserved], unstarted=True) == 0
    assert ready(queue) == [reserved] and queue.client.exists(DELAYED) == 0


def test_fail_moves_the_task_to_the_failed_list_with_its_record(queue: RedisQueue) -> None:
    queue.push(Q, [payload("x", tries=1)])
    (reserved,) = reserve_all(queue)
    job = decode(reserved)
    record = make_record(Q, reserved, "ValueError", "bad", "Traceback ...", job)
    assert queue.fail(Q, reserved, record) is True
    assert queue.client.exists(RESERVED) == 0
    (raw,) = queue.client.lrange(FAILED, 0, -1)
    assert queue.client.zrange(FAILED_LOOKUP, 0, -1) == [f"{job.id}#1".encode()]
    found = decode_record(raw)
    assert found.payload == reserved
    assert (found.id, found.queue, found.task) == (job.id, Q, "apptasks:record")
    assert (found.exception, found.message, found.traceback, found.attempts) == (
        "ValueError",
        "bad",
        "Traceback ...",
        1,
    )
    assert found.pid > 0 and found.host and found.failed_at > 0
    assert set(msgpack.unpackb(raw)) >= {
        "exception",
        "message",
        "traceback",
        "failed_at",
        "attempts",
    }


def test_fail_of_a_task_no_longer_reserved_records_nothing_unless_forced(
    queue: RedisQueue,
) -> None:
    data = payload(1)
    record = make_record(Q, data, "X", "y")
    assert queue.fail(Q, data, record) is False
    assert queue.client.exists(FAILED, FAILED_LOOKUP) == 0
    assert queue.fail(Q, data, record, force=True) is True
    assert queue.client.zcard(FAILED_LOOKUP) == queue.client.llen(FAILED) == 1


# -- migrate ---------------------------------------------------------------------------


def test_migrate_moves_due_delayed_and_expired_reserved_back_in_order(queue: RedisQueue) -> None:
    due = [payload(i) for i in range(3)]
    later = payload("later")
    queue.client.zadd(DELAYED, {due[2]: 3, due[0]: 1, due[1]: 2})
    queue.push(Q, [later], delay_ms=60_000)
    queue.push(Q, [payload("running")])
    (running,) = reserve_all(queue)
    expired = with_attempts(payload("expired"), 2)
    queue.client.zadd(RESERVED, {expired: 5})
    queue.client.delete(NOTIFY)
    migration = queue.migrate(Q)
    assert migration.moved == 4
    assert ready(queue) == [*due, expired]  # the expired one keeps its counted attempt
    assert set(zset(queue, DELAYED)) == {later}
    assert set(zset(queue, RESERVED)) == {running}
    assert migration.next_due_ms == min(zset(queue, DELAYED)[later], zset(queue, RESERVED)[running])
    assert abs(migration.now_ms - redis_now_ms(queue)) < 2000
    assert queue.client.llen(NOTIFY) == 1


def test_migrate_is_bounded_per_call(queue: RedisQueue) -> None:
    queue.client.zadd(DELAYED, {payload(i): i for i in range(5)})
    queue.client.zadd(RESERVED, {payload(f"r{i}"): i for i in range(3)})
    first = queue.migrate(Q, limit=2)
    assert first.moved == 4 and first.next_due_ms == 2  # the rest is already due
    assert queue.client.zcard(DELAYED) == 3 and queue.client.zcard(RESERVED) == 1
    assert queue.migrate(Q, limit=2).moved == 3
    assert queue.migrate(Q, limit=2).moved == 1
    final = queue.migrate(Q, limit=2)
    assert (final.moved, final.next_due_ms) == (0, None)
    assert queue.client.llen(READY) == 8


def test_migrate_with_nothing_waiting(queue: RedisQueue) -> None:
    migration = queue.migrate(Q)
    assert (migration.moved, migration.next_due_ms) == (0, None)
    assert queue.client.exists(NOTIFY) == 0


# -- failed tasks, clear, script loading ----------------------------------------------------


def test_retry_failed_resets_attempts_and_pushes_once(queue: RedisQueue) -> None:
    original = payload("x", tries=3)
    queue.push(Q, [original])
    (reserved,) = reserve_all(queue)
    queue.fail(Q, reserved, make_record(Q, reserved, "E", "m", job=decode(reserved)))
    failed = FailedTasks(queue)
    (found,) = failed.list()
    queue.client.delete(NOTIFY)
    assert failed.retry(found) is True
    assert failed.retry(found) is False  # a concurrent second retry pushes nothing
    assert ready(queue) == [original]  # attempts back to 0, every other byte the same
    assert queue.client.exists(FAILED, FAILED_LOOKUP) == 0
    assert queue.client.llen(NOTIFY) == 1


def test_clear_deletes_pending_tasks_and_keeps_failed_ones(queue: RedisQueue) -> None:
    queue.push(Q, [payload(i) for i in range(3)])
    queue.push(Q, [payload("d")], delay_ms=60_000)
    (reserved, *_) = reserve_all(queue, 1)
    queue.fail(Q, reserved, make_record(Q, reserved, "E", "m"))
    queue.push(Q, [payload("r")])
    reserve_all(queue, 1)
    assert queue.clear(Q) == 4  # 2 ready, 1 delayed, 1 reserved
    assert queue.client.exists(READY, DELAYED, RESERVED, NOTIFY, TIMER) == 0
    assert queue.client.zcard(FAILED_LOOKUP) == queue.client.llen(FAILED) == 1
    assert queue.clear(Q) == 0


def test_scripts_are_reloaded_after_a_script_flush(queue: RedisQueue) -> None:
    queue.client.script_flush()
    queue.push(Q, [payload(1)])  # single call: loads on NOSCRIPT
    queue.client.script_flush()
    queue.push_many([(Q, 0, [payload(2)]), ("other", 0, [payload(3)])])  # pipelined
    queue.client.script_flush()
    queue.push(Q, [payload(4)])
    (first,) = queue.reserve(Q, 1, 1000, 0, 0).payloads
    queue.client.script_flush()
    assert len(queue.reserve(Q, 10, 1000, 0, 0, ack=[first]).payloads) == 2  # pipelined with ack
    assert queue.client.llen("queues:other") == 1
    assert queue.client.zcard(RESERVED) == 2


def test_a_script_is_sent_whole_once_then_by_sha(queue: RedisQueue) -> None:
    scripts = Scripts()
    queue.client.script_flush()
    queue.client.config_resetstat()
    queue.push(Q, [payload(0)])
    queue.reserve(Q, 1, 1000, 0, 0)
    stats = queue.client.info("commandstats")
    assert stats["cmdstat_eval"]["calls"] == 2  # each first sent by SHA, then whole
    assert queue.client.script_exists(scripts.push.sha, scripts.reserve.sha) == [True, True]
    queue.client.config_resetstat()
    queue.push(Q, [payload(1)])
    queue.push(Q, [payload(2)])
    queue.reserve(Q, 1, 1000, 0, 0)
    stats = queue.client.info("commandstats")
    assert "cmdstat_eval" not in stats
    assert stats["cmdstat_evalsha"]["calls"] >= 3


@pytest.mark.parametrize(
    "name", ["push", "reserve", "ack", "release", "fail", "migrate", "retry_failed", "clear"]
)
def test_every_script_documents_keys_argv_and_its_return(name: str) -> None:
    source = getattr(Scripts(), name).source
    header = "\n".join(line for line in source.splitlines() if line.startswith("--"))
    assert "KEYS[1]" in header and "Returns" in header
    assert "redis.call('KEYS'" not in source  # every key is passed in KEYS
