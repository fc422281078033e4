"""Batches: counts, callbacks exactly once, cancellation, add, retry, several queues."""

from __future__ import annotations

import pytest
import workflow_tasks as flows
from support import Workers, load_scripts, strings, wait_for

import rqueue
from rqueue import batch, batch_of
from rqueue.failed import CHUNK, make_record
from rqueue.store.queue import RedisQueue
from rqueue.testing import sync


def flow(queue: RedisQueue) -> list[str]:
    return strings(queue.client, flows.DONE)


def callbacks(queue: RedisQueue) -> list[str]:
    return sorted(s for s in flow(queue) if not s.startswith("note:"))


@pytest.mark.topology
def test_then_and_finally_fire_once_when_every_member_succeeded(
    queue: RedisQueue, workers: Workers
) -> None:
    members = [flows.member.pending(i) for i in range(40)]
    members += [flows.member.using(queue="other").pending(i) for i in range(40, 50)]
    b = (
        batch(members)
        .then(flows.batch_callback.pending("then"))
        .catch(flows.batch_callback.pending("catch"))
        .finally_(flows.batch_callback.pending("finally"))
        .name("fifty")
        .dispatch()
    )
    status = b.status()
    assert status is not None and status.total == 50 and status.pending == 50
    assert status.name == "fifty" and status.queues == ("default", "other")
    workers.start("default,other", "--concurrency", "2")
    wait_for(lambda: len(callbacks(queue)) == 2, 30)
    assert callbacks(queue) == ["finally:50/0/50", "then:50/0/50"]
    status = b.status()
    assert status is not None
    assert (status.succeeded, status.failed, status.pending, status.processed) == (50, 0, 0, 50)
    assert status.finished and status.progress == 100.0 and not status.cancelled
    assert batch_of(b.id).status() == status


def test_the_first_failure_fires_catch_and_cancels_the_rest(
    queue: RedisQueue, workers: Workers
) -> None:
    members = [flows.member_fails.pending(0)] + [flows.member.pending(i) for i in range(1, 20)]
    b = (
        batch(members)
        .then(flows.batch_callback.pending("then"))
        .catch(flows.batch_callback.pending("catch"))
        .finally_(flows.batch_callback.pending("finally"))
        .dispatch()
    )
    workers.start("--concurrency", "1")
    wait_for(lambda: any(s.startswith("finally") for s in flow(queue)), 30)
    status = b.status()
    assert status is not None and status.cancelled and status.finished
    assert (status.failed, status.succeeded + status.skipped) == (1, 19)
    assert status.failed_ids == (b.member_id(0),)
    assert int(queue.client.get("test:member-runs")) == 1 + status.succeeded
    assert [c.split(":")[0] for c in callbacks(queue)] == ["catch", "finally"]


def test_allow_failures_keeps_going_and_finally_fires_without_then(
    queue: RedisQueue, workers: Workers
) -> None:
    members = [
        flows.member_fails.pending(i) if i % 5 == 0 else flows.member.pending(i) for i in range(20)
    ]
    b = (
        batch(members)
        .then(flows.batch_callback.pending("then"))
        .catch(flows.batch_callback.pending("catch"))
        .finally_(flows.batch_callback.pending("finally"))
        .allow_failures()
        .dispatch()
    )
    workers.start("--concurrency", "2")
    wait_for(lambda: any(s.startswith("finally") for s in flow(queue)), 30)
    status = b.status()
    assert status is not None and not status.cancelled
    assert (status.succeeded, status.failed, status.skipped) == (16, 4, 0)
    assert int(queue.client.get("test:member-runs")) == 20
    wait_for(lambda: len(callbacks(queue)) == 2, 10)
    assert [c.split(":")[0] for c in callbacks(queue)] == ["catch", "finally"]


def test_a_cancelled_batch_skips_its_pending_members(queue: RedisQueue, workers: Workers) -> None:
    b = (
        batch([flows.member.pending(i) for i in range(10)])
        .finally_(flows.batch_callback.pending("finally"))
        .dispatch()
    )
    assert b.cancel() is True
    assert b.cancel() is False
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    assert queue.client.get("test:member-runs") is None
    wait_for(lambda: callbacks(queue) == ["finally:0/0/10"], 10)
    status = b.status()
    assert status is not None and status.skipped == 10 and status.finished


def test_a_member_that_runs_twice_is_counted_once(queue: RedisQueue, workers: Workers) -> None:
    b = (
        batch([flows.member.pending(i) for i in range(3)])
        .then(flows.batch_callback.pending("then"))
        .dispatch()
    )
    ready = queue.keys("default").ready
    for payload in queue.client.lrange(ready, 0, -1):
        queue.client.rpush(ready, payload)  # every member queued twice
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    assert int(queue.client.get("test:member-runs")) == 6
    status = b.status()
    assert status is not None and (status.succeeded, status.total) == (3, 3)
    wait_for(lambda: callbacks(queue) == ["then:3/0/3"], 10)


def test_a_member_adds_members_once_however_often_it_runs(
    queue: RedisQueue, workers: Workers
) -> None:
    b = batch([flows.adds_members.pending(3)]).then(flows.batch_callback.pending("then")).dispatch()
    ready = queue.keys("default").ready
    queue.client.rpush(ready, queue.client.lindex(ready, 0))  # it runs twice
    workers.start()
    wait_for(lambda: callbacks(queue) == ["then:4/0/4"], 30)
    status = b.status()
    assert status is not None and (status.total, status.succeeded) == (4, 4)
    assert int(queue.client.get("test:member-runs")) == 3


def test_retry_dispatches_the_failed_members_again_in_as_many_calls_for_one_as_for_all(
    queue: RedisQueue, workers: Workers
) -> None:
    load_scripts(queue)  # the first retry's calls all count, as the second's
    script_calls = []
    for failing in (1, 3):
        members = [flows.member_fails.pending(i) for i in range(failing)]
        b = batch([*members, flows.member.pending(9)]).allow_failures().dispatch()
        code, _ = workers.run("--stop-when-empty")
        assert code == 0
        status = b.status()
        assert status is not None and (status.failed, status.succeeded) == (failing, 1)
        queue.client.config_resetstat()
        assert b.retry() == failing
        evalsha = queue.client.info("commandstats")["cmdstat_evalsha"]
        script_calls.append(evalsha["calls"] - evalsha.get("failed_calls", 0))  # no NOSCRIPT
        assert queue.sizes(["default"])[0].failed == 0
        assert queue.sizes(["default"])[0].ready == failing
        queue.client.delete(queue.keys("default").ready)
    assert script_calls[0] == script_calls[1]  # was one more call per member


def test_retry_reads_only_the_newest_failed_records_it_needs(
    queue: RedisQueue, workers: Workers
) -> None:
    for _ in range(3 * CHUNK):  # older failures of other tasks
        record = make_record("default", b"older", "RuntimeError", "older", "", None, False)
        assert queue.fail("default", b"older", record, force=True)
    b = batch([flows.member_fails.pending(0)]).allow_failures().dispatch()
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    queue.client.config_resetstat()
    assert b.retry() == 1
    # Its member's record is looked up by its id: no read walks the older records (the
    # one HGETALL is of the batch's own state).
    stats = queue.client.info("commandstats")
    assert stats["cmdstat_hgetall"]["calls"] == 1
    walks = ("zrange", "zrevrange", "zrangebyscore", "lrange", "hscan", "hvals")
    assert not [name for name in walks if f"cmdstat_{name}" in stats]


def test_progress_fires_with_the_counts_when_each_member_finished(
    queue: RedisQueue, workers: Workers
) -> None:
    """The callbacks run after every member (they queue behind them), but each gets the
    counts of the moment its member was counted, not 100% every time."""
    b = batch([flows.member.pending(i) for i in range(4)]).progress(flows.progress_seen).dispatch()
    workers.start("-c", "1")
    wait_for(lambda: len(flow(queue)) == 4, 20)
    assert sorted(flow(queue)) == ["seen:1/4:25", "seen:2/4:50", "seen:3/4:75", "seen:4/4:100"]
    status = b.status()
    assert status is not None and status.progress == 100.0


def test_progress_runs_as_members_finish_not_after_every_member(
    queue: RedisQueue, workers: Workers
) -> None:
    """A due callback goes to the head of its queue: the next task reserved."""
    b = batch([flows.note.pending(i) for i in range(6)]).progress(flows.progress_seen).dispatch()
    workers.start("-c", "1", "--prefetch", "1")
    wait_for(lambda: len(flow(queue)) == 12, 20)
    done = flow(queue)
    assert done.index("seen:1/6:17") < done.index("note:5")  # before the last member ran
    status = b.status()
    assert status is not None and status.finished


def test_progress_gets_the_counts_of_its_moment_under_sync_too(queue: RedisQueue) -> None:
    with sync():
        batch([flows.member.pending(i) for i in range(2)]).progress(flows.progress_seen).dispatch()
    assert flow(queue) == ["seen:1/2:50", "seen:2/2:100"]


def test_an_empty_batch_fires_then_and_finally_at_once(queue: RedisQueue, workers: Workers) -> None:
    b = (
        batch([])
        .then(flows.batch_callback.pending("then"))
        .finally_(flows.batch_callback.pending("finally"))
        .dispatch(queue)
    )
    status = b.status()
    assert status is not None and status.finished and status.total == 0
    assert queue.client.pttl(min(queue.client.keys(f"*batches*{b.id}*"), key=len)) > 0
    workers.start()
    wait_for(lambda: callbacks(queue) == ["finally:0/0/0", "then:0/0/0"], 20)


def test_retry_opens_a_batch_its_first_failure_cancelled_and_then_fires(
    queue: RedisQueue, workers: Workers
) -> None:
    b = (
        batch([flows.fails_first_time.pending(0)])
        .then(flows.batch_callback.pending("then"))
        .finally_(flows.batch_callback.pending("finally"))
        .dispatch()
    )
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    status = b.status()
    assert status is not None and status.cancelled and status.finished and status.failed == 1
    assert b.retry() == 1
    status = b.status()
    assert status is not None and not status.cancelled and not status.finished
    workers.start()
    wait_for(lambda: "then:1/0/1" in flow(queue), 20)
    status = b.status()
    assert status is not None and (status.succeeded, status.failed) == (1, 0) and status.finished
    assert int(queue.client.get("test:member-runs")) == 1
    assert [c.split(":")[0] for c in callbacks(queue)] == ["finally", "then"]  # finally once


def test_members_that_keep_results_read_by_member_id(queue: RedisQueue, workers: Workers) -> None:
    b = batch([flows.add.pending(i, i) for i in range(3)]).dispatch()
    handles = [rqueue.result_of(b.member_id(i), "default") for i in range(3)]
    assert [h.status() for h in handles] == ["pending"] * 3
    workers.start()
    assert [h.result(timeout=20) for h in handles] == [0, 2, 4]
