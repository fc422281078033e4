"""Dispatching: what lands in Redis after dispatch, later, using and dispatch_many."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import apptasks
import pytest
from support import load_scripts, ready

import rqueue.store.default
from rqueue import dispatch_many, task
from rqueue.encoding.payload import Job, decode
from rqueue.errors import InvalidQueueName, InvalidSchedule
from rqueue.settings.config import Config, ConfigError
from rqueue.store.default import default_queue
from rqueue.store.keys import GlobalKeys, QueueKeys
from rqueue.store.queue import RedisQueue
from rqueue.tasks import registry


def redis_now_ms(queue: RedisQueue) -> float:
    seconds, micros = queue.client.time()
    return seconds * 1000 + micros / 1000


# Keys other features keep beside a queue's own (cancel's index of pending ids).
AUXILIARY = (b":pending-ids",)


def core_keys(queue: RedisQueue) -> set[bytes]:
    """Every key, less the auxiliary ones, which never hold a payload."""
    keys = set(queue.client.keys("*"))
    return {k for k in keys if not k.endswith(AUXILIARY)}


def encoded(*keys: str) -> set[bytes]:
    return {key.encode() for key in keys}


def only_job(queue: RedisQueue, key: str) -> Job:
    kind = queue.client.type(key)
    members = (
        queue.client.lrange(key, 0, -1) if kind == b"list" else queue.client.zrange(key, 0, -1)
    )
    assert len(members) == 1, members
    return decode(members[0])


@pytest.mark.topology
def test_dispatch_pushes_one_payload_onto_the_ready_list(queue: RedisQueue) -> None:
    handle = apptasks.record.dispatch(42)
    client = queue.client
    default, known = queue.keys("default"), queue.global_keys.known_queues
    assert core_keys(queue) == encoded(default.ready, default.notify, known)
    assert client.type(default.ready) == b"list"
    assert client.type(default.notify) == b"list"  # wakes an idle worker's BLPOP
    assert client.smembers(known) == {b"default"}
    job = only_job(queue, default.ready)
    assert (job.id, job.task, job.args, job.kwargs) == (handle.id, "apptasks:record", (42,), {})
    assert (job.queue, job.attempts, job.tries, job.timeout, job.backoff) == (
        "default",
        0,
        None,
        None,
        (),
    )
    assert abs(job.dispatched_at - time.time()) < 5
    assert len(handle.id) == 32 and int(handle.id, 16) >= 0
    assert (handle.task, handle.queue) == ("apptasks:record", "default")


@pytest.mark.topology
def test_every_dispatch_gets_its_own_id_and_keeps_order(queue: RedisQueue) -> None:
    handles = [apptasks.record.dispatch(i) for i in range(5)]
    assert len({h.id for h in handles}) == 5
    jobs = [decode(p) for p in ready(queue)]
    assert [j.id for j in jobs] == [h.id for h in handles]
    assert [j.args for j in jobs] == [(i,) for i in range(5)]


@pytest.mark.topology
def test_task_options_go_into_the_payload(queue: RedisQueue) -> None:
    apptasks.always_fails.dispatch("x")
    job = only_job(queue, queue.keys("emails").ready)
    assert (job.task, job.queue, job.tries, job.backoff) == (
        "apptasks:always_fails",
        "emails",
        3,
        (0.2, 0.4),
    )
    apptasks.sleeps.dispatch(1)
    assert only_job(queue, queue.keys("default").ready).timeout == 1.0


@pytest.mark.topology
def test_kwargs_are_kept_by_name(queue: RedisQueue) -> None:
    apptasks.with_hooks.dispatch(value="v", fail=True)
    job = only_job(queue, queue.keys("default").ready)
    assert job.args == () and job.kwargs == {"value": "v", "fail": True}


@pytest.mark.topology
@pytest.mark.parametrize(
    "when",
    [
        pytest.param(timedelta(seconds=30), id="timedelta"),
        pytest.param(30, id="int-seconds"),
        pytest.param(30.0, id="float-seconds"),
        pytest.param(
            lambda: datetime.now(timezone.utc) + timedelta(seconds=30), id="aware-datetime"
        ),
        pytest.param(
            lambda: datetime.now(timezone(timedelta(hours=-7))) + timedelta(seconds=30),
            id="aware-offset",
        ),
        pytest.param(lambda: datetime.now() + timedelta(seconds=30), id="naive-is-local-time"),
    ],
)
def test_later_adds_to_the_delayed_set_scored_by_due_time(queue: RedisQueue, when: Any) -> None:
    value = when() if callable(when) else when
    before = redis_now_ms(queue)
    handle = apptasks.record.later(value, "x")
    after = redis_now_ms(queue)
    client = queue.client
    default = queue.keys("default")
    assert client.type(default.delayed) == b"zset"
    assert client.exists(default.ready) == 0
    assert client.smembers(queue.global_keys.known_queues) == {b"default"}
    ((member, score),) = client.zrange(default.delayed, 0, -1, withscores=True)
    assert decode(member).id == handle.id and decode(member).args == ("x",)
    assert before + 28_000 <= score <= after + 31_000
    # The parent's timer list holds the new earliest due time, to wake it.
    assert client.lrange(default.timer, 0, -1) == [str(int(score)).encode()]


@pytest.mark.topology
def test_later_in_the_past_is_ready_now(queue: RedisQueue) -> None:
    apptasks.record.later(datetime.now(timezone.utc) - timedelta(hours=1), 1)
    apptasks.record.later(-5, 2)
    apptasks.record.later(timedelta(0), 3)
    default = queue.keys("default")
    assert queue.client.llen(default.ready) == 3
    assert queue.client.exists(default.delayed) == 0


@pytest.mark.topology
def test_a_later_earlier_due_time_moves_the_timer(queue: RedisQueue) -> None:
    timer = queue.keys("default").timer
    apptasks.record.later(60, 1)
    first = int(queue.client.lindex(timer, 0))
    apptasks.record.later(120, 2)
    assert int(queue.client.lindex(timer, 0)) == first
    apptasks.record.later(10, 3)
    assert int(queue.client.lindex(timer, 0)) < first - 40_000
    assert queue.client.llen(timer) == 1


@pytest.mark.topology
@pytest.mark.parametrize(
    "when",
    [
        "tomorrow",
        None,
        True,
        float("inf"),
        float("nan"),
        timedelta(days=11 * 365),
        1.7e12,
        datetime(2099, 1, 1, tzinfo=timezone.utc),
    ],
)
def test_bad_later_values_are_refused(queue: RedisQueue, when: Any) -> None:
    with pytest.raises(InvalidSchedule):
        apptasks.record.later(when, 1)
    assert queue.client.keys("queues:*") == []


@pytest.mark.topology
def test_using_overrides_options_for_its_dispatches_only(queue: RedisQueue) -> None:
    custom = apptasks.record.using(queue="high", tries=5, timeout=2.5, backoff=[1, 2])
    handle = custom.dispatch("x")
    job = only_job(queue, queue.keys("high").ready)
    assert (job.id, job.queue, job.tries, job.timeout, job.backoff) == (
        handle.id,
        "high",
        5,
        2.5,
        (1.0, 2.0),
    )
    assert job.task == "apptasks:record"  # still the same task for the worker
    apptasks.record.dispatch("y")
    assert only_job(queue, queue.keys("default").ready).tries is None
    apptasks.always_fails.using(backoff=7).later(60, "z")
    delayed = only_job(queue, queue.keys("emails").delayed)
    assert (delayed.queue, delayed.tries, delayed.backoff) == ("emails", 3, (7.0,))
    assert apptasks.record.on_queue("low").dispatch(1).queue == "low"
    assert queue.known_queues() == ["default", "emails", "high", "low"]


def test_each_dispatch_of_a_plain_task_carries_its_own_time(queue: RedisQueue) -> None:
    """A plain task packs its calls from one template (made at its first dispatch):
    each call's time is its own, not the template's."""
    apptasks.record.dispatch(1)
    between = time.time()
    second = apptasks.record.dispatch(2)
    jobs = {job.id: job for job in map(decode, queue.client.lrange("queues:default", 0, -1))}
    assert jobs[second.id].dispatched_at >= between
    assert (jobs[second.id].args, jobs[second.id].queue) == ((2,), "default")


def test_using_after_a_dispatch_has_its_own_options(queue: RedisQueue) -> None:
    """A task's template is worked out again for a ``using()`` copy, even one made
    after the task's own dispatches made it."""
    apptasks.record.dispatch(1)
    handle = apptasks.record.using(queue="high", tries=5, timeout=2.5).dispatch(2)
    job = only_job(queue, queue.keys("high").ready)
    assert (job.id, job.queue, job.tries, job.timeout) == (handle.id, "high", 5, 2.5)
    moving = apptasks.record.using(retry_until=timedelta(seconds=30))
    moving.dispatch(3)
    between = time.time()
    moving.dispatch(4)
    last = decode(queue.client.lrange("queues:default", -1, -1)[0])
    assert last.args == (4,)
    assert last.retry_until is not None and last.retry_until >= between + 30  # its own time's


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"queue": "has space"}, InvalidQueueName),
        ({"queue": "a,b"}, InvalidQueueName),
        ({"tries": 0}, ValueError),
        ({"timeout": -1}, ValueError),
        ({"backoff": [1, -2]}, ValueError),
        ({"backoff": float("nan")}, ValueError),
    ],
)
def test_using_refuses_bad_options(change: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        apptasks.record.using(**change)


def test_dispatch_many_is_one_round_trip(
    queue: RedisQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = queue.client.connection_pool
    checkouts: list[object] = []
    original = pool.get_connection

    def counting(*args: Any, **kwargs: Any) -> Any:
        checkouts.append(args)
        return original(*args, **kwargs)

    # The steady state: the scripts are loaded (a fresh server would answer NOSCRIPT once)
    # and the queues were registered (a round trip a minute of its own).
    load_scripts(queue)
    queue.remember_queues(["default", "emails"])
    queue.client.config_resetstat()
    monkeypatch.setattr(pool, "get_connection", counting)
    calls = [apptasks.record.pending(i) for i in range(50)]
    calls += [apptasks.always_fails.pending(f"e{i}") for i in range(10)]
    calls.append(apptasks.with_hooks.pending("v", fail=True))
    handles = dispatch_many(calls)
    monkeypatch.setattr(pool, "get_connection", original)
    assert len(checkouts) == 1
    # One push script call per queue, not one per task.
    assert queue.client.info("commandstats")["cmdstat_evalsha"]["calls"] == 2
    defaults = [decode(p) for p in ready(queue)]
    emails = [decode(p) for p in ready(queue, "emails")]
    assert [j.args for j in defaults[:50]] == [(i,) for i in range(50)]
    assert defaults[50].kwargs == {"fail": True} and defaults[50].args == ("v",)
    assert [j.args for j in emails] == [(f"e{i}",) for i in range(10)]
    assert [h.id for h in handles] == [j.id for j in defaults[:50] + emails + defaults[50:]]
    assert queue.known_queues() == ["default", "emails"]


@pytest.mark.topology
def test_task_dispatch_many_takes_argument_tuples_and_pendings(queue: RedisQueue) -> None:
    handles = apptasks.with_hooks.dispatch_many(
        [("a",), ("b", True), apptasks.with_hooks.pending("c", fail=True)]
    )
    jobs = [decode(p) for p in ready(queue)]
    assert [(j.args, j.kwargs) for j in jobs] == [
        (("a",), {}),
        (("b", True), {}),
        (("c",), {"fail": True}),
    ]
    assert [h.id for h in handles] == [j.id for j in jobs]


@pytest.mark.topology
def test_dispatch_many_of_thousands_is_chunked_below_luas_unpack_limit(queue: RedisQueue) -> None:
    apptasks.record.dispatch_many([(i,) for i in range(2500)])
    assert queue.client.llen(queue.keys("default").ready) == 2500


@pytest.mark.topology
def test_calling_a_task_runs_it_inline(queue: RedisQueue) -> None:
    assert apptasks.record("inline") == "inline"
    assert apptasks.fails_until("v", succeed_on=1) == "v"
    assert queue.client.lrange(apptasks.DONE, 0, -1) == [b"inline", b"v"]
    assert queue.client.keys("queues:*") == []
    with pytest.raises(ValueError, match="failing on purpose"):
        apptasks.always_fails("x")
    assert apptasks.record.__name__ == "record"


def test_tasks_are_registered_by_module_and_qualified_name(queue: RedisQueue) -> None:
    assert apptasks.record.name == "apptasks:record"
    assert registry.lookup("apptasks:record") is apptasks.record
    assert apptasks.always_fails.options.queue == "emails"


def test_hooks_must_be_callable() -> None:
    with pytest.raises(TypeError, match="callable"):
        task(after_succeeded="not a function")(lambda: None)  # type: ignore[call-overload]


@pytest.mark.topology
def test_prefix_goes_in_front_of_every_key(config: Config) -> None:
    prefixed = RedisQueue(replace(config, prefix="app1:"))
    prefixed.client.flushall()
    apptasks.record.using(connection=prefixed).dispatch(1)
    apptasks.record.using(connection=prefixed).later(30, 2)
    # The keys an unprefixed queue would use (hash-tagged on a cluster), each prefixed.
    plain = QueueKeys.for_queue("default", cluster=config.cluster)
    known = GlobalKeys.for_prefix(cluster=config.cluster).known_queues
    unprefixed = (plain.ready, plain.notify, plain.delayed, plain.timer, known)
    assert core_keys(prefixed) == encoded(*(f"app1:{key}" for key in unprefixed))
    prefixed.client.close()


def test_cluster_mode_hash_tags_the_queue_name(config: Config) -> None:
    keys = QueueKeys.for_queue("emails", cluster=True)
    assert (keys.ready, keys.delayed, keys.reserved, keys.failed) == (
        "queues:{emails}",
        "queues:{emails}:delayed",
        "queues:{emails}:reserved",
        "queues:{emails}:failed",
    )
    plain = QueueKeys.for_queue("emails")
    assert (plain.ready, plain.delayed, plain.reserved, plain.failed, plain.notify) == (
        "queues:emails",
        "queues:emails:delayed",
        "queues:emails:reserved",
        "queues:emails:failed",
        "queues:emails:notify",
    )
    # Cluster mode against a server that is not a cluster: a clear error, at once.
    clustered = RedisQueue(replace(config, cluster=True))
    with pytest.raises(ConfigError, match=r"Redis Cluster mode .* is not a cluster node"):
        apptasks.record.using(connection=clustered).dispatch(1)


@pytest.mark.topology
def test_dispatch_uses_the_connection_from_redis_url(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No explicit connection: the default one is opened lazily from REDIS_URL.
    monkeypatch.setattr(rqueue.store.default, "_default_queue", [])
    handle = apptasks.record.dispatch("env")
    default = default_queue()
    assert default.config.redis_url == config.redis_url
    assert decode(default.client.lindex(default.keys("default").ready, -1)).id == handle.id
    default.client.flushall()


@pytest.mark.topology
def test_a_naive_datetime_is_local_time_not_utc(queue: RedisQueue) -> None:
    # Far from UTC, so reading a naive time as UTC would be hours off.
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    try:
        local_now = datetime.now()
        utc_now = datetime.now(timezone.utc).replace(tzinfo=None)
        assert abs(local_now - utc_now) > timedelta(hours=5)
        before = redis_now_ms(queue)
        apptasks.record.later(local_now + timedelta(seconds=60), 1)
        delayed = queue.keys("default").delayed
        ((_, score),) = queue.client.zrange(delayed, 0, -1, withscores=True)
        assert before + 55_000 <= score <= before + 62_000
    finally:
        if saved is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = saved
        time.tzset()
