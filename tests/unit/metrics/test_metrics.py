"""Metrics kept in Redis: counted by real workers, read back per minute and all time."""

from __future__ import annotations

import math
import time

import apptasks
import msgpack
import pytest
from support import Workers, push_job

from rqueue.encoding.payload import Job, new_id
from rqueue.metrics import BOUNDS, Histogram, oldest_wait, queue_series, totals
from rqueue.metrics.collector import MINUTE_TTL, UNREGISTERED, Collector
from rqueue.metrics.schema import BUCKETS, WAIT_AT, WIDTH
from rqueue.store.cluster import ClusterClient
from rqueue.store.queue import RedisQueue

pytestmark = pytest.mark.topology  # real workers and readers, on every topology

FAST = ("--kill-grace", "0.5", "--block-for", "0.5")
RECORD = "apptasks:record"


def _job(task: str = RECORD, attempts: int = 1, dispatched_at: float = 0.0) -> Job:
    return Job(new_id(), task, (), {}, "default", attempts, dispatched_at=dispatched_at)


def test_real_workers_count_successes_failures_and_retries(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.record.dispatch_many([(i,) for i in range(3)])
    apptasks.fails_until.dispatch("once", 2)  # one retry, then a success
    apptasks.always_fails.dispatch("x")  # emails: two retries, then failed for good
    code, output = workers.run("default,emails", "--stop-when-drained", *FAST)
    assert code == 0, output

    default, emails = totals(queue, "default"), totals(queue, "emails")
    record, flaky, failing = (
        default[RECORD],
        default["apptasks:fails_until"],
        emails["apptasks:always_fails"],
    )
    assert (record.processed, record.failed, record.retried) == (3, 0, 0)
    assert (flaky.processed, flaky.failed, flaky.retried) == (1, 0, 1)
    assert (failing.processed, failing.failed, failing.retried) == (0, 1, 2)
    # Every attempt's runtime is observed; waits only of first attempts.
    assert (record.runtime.count, flaky.runtime.count, failing.runtime.count) == (3, 2, 3)
    assert (record.wait.count, flaky.wait.count, failing.wait.count) == (3, 1, 1)
    assert 0 < record.runtime.sum < 3 * 5.0 and record.wait.sum >= 0

    series = queue_series(queue, "default", minutes=10)
    assert len(series) == 10
    assert sum(p.processed for p in series) == 4 and sum(p.retried for p in series) == 1
    busy = [p for p in series if p.processed]
    assert all(p.runtime_p95 is not None and p.runtime_p95 <= BOUNDS[-1] for p in busy)
    only_flaky = queue_series(queue, "default", minutes=10, task="apptasks:fails_until")
    assert sum(p.processed for p in only_flaky) == 1
    assert sum(p.failed for p in queue_series(queue, "emails", minutes=10)) == 1


def test_tasks_the_parent_settles_are_counted_and_its_reports_are_not(
    queue: RedisQueue, workers: Workers
) -> None:
    """A child that dies counts nothing: its parent counts the retry and the failure
    it decides. The parent's report of the failure (an internal task) is not work."""
    apptasks.dies_with_hook.using(tries=2, backoff=0).dispatch()
    code, output = workers.run("--stop-when-drained", *FAST)
    assert code == 0, output
    assert queue.client.lrange(apptasks.HOOKS, 0, -1) == [b"failed:WorkerLost:2"]
    counted = totals(queue, "default")
    assert list(counted) == ["apptasks:dies_with_hook"]
    dies = counted["apptasks:dies_with_hook"]
    assert (dies.processed, dies.failed, dies.retried) == (0, 1, 1)
    assert dies.runtime.count == 0  # how long it ran before it died is not known


def test_a_worker_with_metrics_off_writes_none(queue: RedisQueue, workers: Workers) -> None:
    apptasks.record.dispatch_many([(1,), (2,)])
    code, output = workers.run("--stop-when-empty", "--no-metrics", *FAST)
    assert code == 0, output
    assert queue.client.llen(apptasks.DONE) == 2
    assert totals(queue, "default") == {}
    assert not list(queue.client.scan_iter(match="*metrics*"))


def test_series_is_one_point_per_minute_oldest_first(queue: RedisQueue) -> None:
    collector = Collector(queue)
    for runtime in (0.001, 0.002, 0.3):
        collector.succeeded("default", _job(dispatched_at=time.time() - 2.0), runtime)
    collector.retried("default", RECORD, _job(), 0.004)
    collector.flush()
    now = time.time()
    series = queue_series(queue, "default", minutes=5, now=now)
    assert [p.minute for p in series] == [(int(now // 60) - 4 + i) * 60 for i in range(5)]
    last = series[-1]
    assert (last.processed, last.retried, last.failed) == (3, 1, 0)
    assert last.runtime_mean == pytest.approx((0.001 + 0.002 + 0.3 + 0.004) / 4)
    assert last.wait_mean is not None and 1.5 < last.wait_mean < 60
    assert all(p.processed == 0 and p.runtime_mean is None for p in series[:-1])
    # Two minutes later the same counts are two points further back.
    later = queue_series(queue, "default", minutes=5, now=now + 120)
    assert later[-3].processed == 3 and later[-1].processed == 0
    with pytest.raises(ValueError, match="1 to 1440"):
        queue_series(queue, "default", minutes=1441)


def test_recording_costs_no_round_trip_and_a_flush_one_call_per_queue(
    queue: RedisQueue,
) -> None:
    collector = Collector(queue)
    calls_before = _evalsha_calls(queue)
    for _ in range(1000):
        collector.succeeded("default", _job(), 0.0001)
        collector.succeeded("emails", _job(), 0.0001)
    recorded = _evalsha_calls(queue) - calls_before
    collector.flush()
    flushed = _evalsha_calls(queue) - calls_before - recorded
    # Recording flushes at most once a second: 2,000 records take far less than that
    # on any machine, so at most one interval's flush (one call per queue) happened.
    assert recorded in (0, 2) and recorded + flushed == 2
    assert totals(queue, "default")[RECORD].processed == 1000
    assert totals(queue, "emails")[RECORD].processed == 1000


def _evalsha_calls(queue: RedisQueue) -> int:
    """Script calls served, summed over every primary (one server but on Cluster)."""
    client = queue.client
    nodes = client.slots.primaries() if isinstance(client, ClusterClient) else [client]
    stats = [node.info("commandstats").get("cmdstat_evalsha", {}) for node in nodes]
    return sum(int(s.get("calls", 0)) for s in stats)


def test_minutes_expire_so_a_queue_keeps_a_day_at_most(queue: RedisQueue) -> None:
    collector = Collector(queue)
    collector.succeeded("default", _job(), 0.01)
    collector.flush()
    keys = queue.keys("default")
    minute_key = keys.metrics_minute(int(time.time() // 60))
    assert 0 < queue.client.ttl(minute_key) <= MINUTE_TTL
    assert queue.client.ttl(keys.metrics) == -1  # all time: bounded by tasks, not time


def test_names_of_unregistered_tasks_are_counted_under_one_name(
    queue: RedisQueue, workers: Workers
) -> None:
    for i in range(3):
        apptasks.record.using(queue="default").dispatch(i)
    for i in range(5):
        push_job(queue, f"nowhere_{i}:missing")
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    counted = totals(queue, "default")
    assert counted[UNREGISTERED].failed == 5
    assert not any(name.startswith("nowhere") for name in counted)


def test_hostile_metrics_data_reads_as_nothing_and_is_written_over(queue: RedisQueue) -> None:
    keys = queue.keys("default")
    minute = int(time.time() // 60)
    valid = [0] * WIDTH
    valid[0], valid[WAIT_AT + 3], valid[WAIT_AT + BUCKETS] = 7, 2, 0.075
    queue.client.hset(
        keys.metrics,
        mapping={
            RECORD: b"\xc1 not msgpack",
            "short": msgpack.packb([1, 2, 3]),
            "nan": msgpack.packb([math.nan] * WIDTH),
            "negative": msgpack.packb([-1] * WIDTH),
            "fraction": msgpack.packb([0.5] * WIDTH),
            "huge": msgpack.packb([2**60] * WIDTH),
            "map": msgpack.packb({"p": 1}),
            "\x1b[31mevil": msgpack.packb(valid),
            b"\xff\xfe": msgpack.packb(valid),
        },
    )
    queue.client.set(keys.metrics_minute(minute), "a string, not a hash")
    read = totals(queue, "default")
    assert set(read) == {"\x1b[31mevil", "\ufffd\ufffd"}  # kept as given; shown escaped
    evil = read["\x1b[31mevil"]
    assert evil.processed == 7 and evil.wait.count == 2 and evil.wait.mean == 0.0375
    assert evil.wait.quantile(0.5) == pytest.approx(0.0375)
    assert queue_series(queue, "default", minutes=2)[-1].processed == 0

    collector = Collector(queue)
    collector.succeeded("default", _job(), 0.01)
    collector.failed("default", "huge", None, None)
    collector.flush()  # the garbage is replaced, not a failed flush
    read = totals(queue, "default")
    assert read[RECORD].processed == 1 and read[RECORD].runtime.count == 1
    assert read["huge"].failed == 1 and read["huge"].runtime.count == 0
    assert queue_series(queue, "default", minutes=2)[-1].processed == 1


def test_oldest_wait_is_the_real_age_of_the_head_task(queue: RedisQueue) -> None:
    assert oldest_wait(queue, "default") is None
    now = time.time()
    push_job(queue, "apptasks:record", "first", dispatched_at=now - 300)
    push_job(queue, "apptasks:record", "second", dispatched_at=now - 10)
    age = oldest_wait(queue, "default", now=now)
    assert age is not None and 300 <= age < 310  # the head's, not the newest's
    queue.client.lpush(queue.keys("garbage").ready, b"\x1b[2Jnot a payload")
    assert oldest_wait(queue, "garbage") is None


def test_histogram_quantiles_interpolate_within_buckets() -> None:
    empty = Histogram()
    assert empty.quantile(0.5) is None and empty.mean is None
    one_bucket = Histogram(tuple(10 if i == 1 else 0 for i in range(14)), 0.08)
    assert one_bucket.quantile(0.5) == pytest.approx(0.0075)
    assert one_bucket.cumulative()[-1] == (math.inf, 10)
    slow = Histogram(tuple(4 if i == 13 else 0 for i in range(14)), 400.0)
    assert slow.quantile(0.95) == BOUNDS[-1] and slow.mean == 100.0
