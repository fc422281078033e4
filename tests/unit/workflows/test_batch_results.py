"""A batch callback that gets its members' results (``results=True``, Celery's chord)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import chord_tasks as chords
import pytest
from support import Workers, wait_for

from rqueue import batch, chain
from rqueue.encoding.payload import decode
from rqueue.errors import ResultTooLarge
from rqueue.failed import FailedTasks
from rqueue.settings.config import Config, ConfigError
from rqueue.store.batch_store import RESULTS_PAGE, BatchStore
from rqueue.store.queue import RedisQueue
from rqueue.testing import fake, sync
from rqueue.workflows import effects
from rqueue.workflows.pending_batch import PendingBatch

SETTING = "RQUEUE_MAX_BATCH_RESULTS_BYTES"


def recorded(count: int, timeout: float = 30) -> list[tuple[str, list[Any]]]:
    """What the callbacks recorded, once ``count`` have."""
    wait_for(lambda: len(chords.got()) >= count, timeout)
    return sorted(chords.got())


def failure(queue: RedisQueue, task_id: str, name: str = "default") -> Any:
    found = FailedTasks(queue).find_all([task_id], [name]).get(task_id)
    assert found is not None
    return found


def ordered_batch() -> PendingBatch:
    """Members in two queues, one adding two more: their results follow the others'."""
    members = [chords.square.pending(i) for i in range(5)]
    members += [chords.word.using(queue="other").pending(i) for i in range(5, 8)]
    members.append(chords.adds.pending(2))
    return (
        batch(members)
        .then(chords.record.pending("then"), results=True)
        .finally_(chords.record, "finally", results=True)
    )


EXPECTED = [0, 1, 4, 9, 16, "w5", "w6", "w7", "added", 10_000, 10_201]


@pytest.mark.topology
def test_then_and_finally_get_the_results_in_member_order(
    queue: RedisQueue, workers: Workers
) -> None:
    b = ordered_batch().dispatch()
    workers.start("default,other", "--concurrency", "2")
    assert recorded(2) == [("finally", EXPECTED), ("then", EXPECTED)]
    status = b.status()
    assert status is not None and (status.total, status.succeeded) == (11, 11)


def test_sync_and_run_all_give_the_results_a_worker_gives(queue: RedisQueue) -> None:
    with sync():
        ordered_batch().dispatch()
    assert sorted(chords.got()) == [("finally", EXPECTED), ("then", EXPECTED)]
    queue.client.delete(chords.GOT)
    with fake() as recorded_calls:
        ordered_batch().dispatch()
        recorded_calls.run_all()
    assert sorted(chords.got()) == [("finally", EXPECTED), ("then", EXPECTED)]


def nested_batch() -> PendingBatch:
    """A chain's last step gives its member's result; a batch member gives none."""
    members = [
        chain(chords.square.pending(3), chords.plus_one.pending(), pipe=True),
        chords.square.pending(2),
        batch([chords.square.pending(5)]),
    ]
    return batch(members).then(chords.record, "then", results=True)


@pytest.mark.topology
def test_a_chain_member_gives_its_last_steps_value(queue: RedisQueue, workers: Workers) -> None:
    nested_batch().dispatch()
    workers.start()
    assert recorded(1) == [("then", [10, 4, None])]
    queue.client.delete(chords.GOT)
    with sync():
        nested_batch().dispatch()
    assert chords.got() == [("then", [10, 4, None])]


def test_finally_gets_none_for_a_member_that_failed_or_could_not_be_kept(
    queue: RedisQueue, workers: Workers
) -> None:
    members = [chords.square.pending(2), chords.fails.pending(1), chords.unkeepable.pending(3)]
    b = batch(members).allow_failures().finally_(chords.record, "finally", results=True)
    b.dispatch()
    workers.start()
    assert recorded(1) == [("finally", [4, None, None])]
    # A value that cannot be kept fails the member at once, as a kept result does.
    assert int(queue.client.get("test:chord-unkeepable-runs")) == 1


def test_a_member_run_twice_keeps_the_value_of_its_first_count(
    queue: RedisQueue, workers: Workers
) -> None:
    batch([chords.counts_runs.pending(i) for i in range(3)]).then(
        chords.record, "then", results=True
    ).dispatch()
    ready = queue.keys("default").ready
    for payload in queue.client.lrange(ready, 0, -1):
        queue.client.rpush(ready, payload)  # every member queued twice
    code, _ = workers.run("--stop-when-empty", "--concurrency", "1")
    assert code == 0
    assert recorded(1) == [("then", ["0:1", "1:1", "2:1"])]
    assert [int(queue.client.get(f"test:chord-runs:{i}")) for i in range(3)] == [2, 2, 2]


def test_a_member_whose_worker_died_before_its_count_runs_again_for_its_value(
    queue: RedisQueue, workers: Workers
) -> None:
    """Its value died with the child that was to send it: the parent gives the member
    back instead of counting it without one."""
    b = (
        batch([chords.dies_after_first_success.pending(0), chords.square.pending(3)])
        .then(chords.record, "then", results=True)
        .dispatch()
    )
    workers.start("--concurrency", "1")
    assert recorded(1) == [("then", ["0:2", 9])]
    assert int(queue.client.get("test:chord-runs:0")) == 2
    status = b.status()
    assert status is not None and status.succeeded == 2


def test_a_retried_member_that_succeeds_brings_its_value(
    queue: RedisQueue, workers: Workers
) -> None:
    b = (
        batch([chords.fails_first_time.pending(1), chords.square.pending(3)])
        .allow_failures()
        .then(chords.record, "then", results=True)
        .dispatch()
    )
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    assert chords.got() == []
    assert b.retry() == 1
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    assert recorded(1) == [("then", [10, 9])]


def test_a_member_over_the_batch_results_bound_fails_for_good_naming_it(
    queue: RedisQueue, workers: Workers
) -> None:
    """Each value packs to 102 bytes: two fit in 250, the third does not."""
    b = (
        batch([chords.big.pending(i, 100) for i in range(3)])
        .allow_failures()
        .finally_(chords.record, "finally", results=True)
        .dispatch()
    )
    code, _ = workers.run("--stop-when-empty", "--concurrency", "1", env={SETTING: "250"})
    assert code == 0
    assert recorded(1) == [("finally", ["x" * 100, "x" * 100, None])]
    status = b.status()
    assert status is not None and (status.succeeded, status.failed) == (2, 1)
    failed = failure(queue, b.member_id(2))
    assert failed.exception == "ResultTooLarge" and failed.attempts == 1
    assert SETTING in failed.message and b.id in failed.message


def test_the_bound_holds_under_sync_too(queue: RedisQueue, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SETTING, "250")
    with sync():
        pending = batch([chords.big.pending(i, 100) for i in range(3)]).allow_failures()
        found = pending.finally_(chords.record, "finally", results=True).dispatch()
    assert chords.got() == [("finally", ["x" * 100, "x" * 100, None])]
    status = found.status()
    assert status is not None and (status.succeeded, status.failed) == (2, 1)


@pytest.mark.topology
def test_garbage_in_the_results_fails_only_the_callback(
    queue: RedisQueue, workers: Workers
) -> None:
    callback = chords.record.using(queue="callbacks").pending("then")
    b = batch([chords.square.pending(i) for i in range(3)]).then(callback, results=True)
    found = b.dispatch()
    code, _ = workers.run("--stop-when-empty")  # the members, not the callback
    assert code == 0
    keys = BatchStore(queue).keys(found.id)
    queue.client.hset(keys.results, "1", b"\xc1 not msgpack")
    code, _ = workers.run("callbacks", "--stop-when-empty")
    assert code == 0
    assert chords.got() == []
    record = FailedTasks(queue).list(["callbacks"])
    assert [(r.exception, r.attempts) for r in record] == [("InvalidPayload", 1)]
    assert f"member 1 of batch {found.id}" in record[0].message
    status = found.status()
    assert status is not None and (status.succeeded, status.failed) == (3, 0)


def test_a_callback_whose_batch_is_gone_fails_saying_so(
    queue: RedisQueue, workers: Workers
) -> None:
    callback = chords.record.using(queue="callbacks").pending("then")
    found = batch([chords.square.pending(1)]).then(callback, results=True).dispatch()
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    BatchStore(queue).forget([found.id])  # as rqueue batches prune
    assert not queue.client.keys(f"*{found.id}*")
    code, _ = workers.run("callbacks", "--stop-when-empty")
    assert code == 0
    [record] = FailedTasks(queue).list(["callbacks"])
    assert f"batch {found.id} is gone (expired or pruned)" in record.message


def test_a_large_batch_is_read_in_pages(queue: RedisQueue, workers: Workers) -> None:
    count = RESULTS_PAGE + 5
    callback = chords.record.using(queue="callbacks").pending("then")
    batch([chords.square.pending(i) for i in range(count)]).then(callback, results=True).dispatch()
    # Their stderr is not read: a worker logging every member would fill its pipe.
    code, _ = workers.run("--stop-when-empty", "--concurrency", "2", "--log-level", "WARNING")
    assert code == 0
    queue.client.config_resetstat()
    code, _ = workers.run("callbacks", "--stop-when-empty")
    assert code == 0
    [(_, results)] = chords.got()
    assert results == [i * i for i in range(count)]
    assert queue.client.info("commandstats")["cmdstat_hmget"]["calls"] == 2


def test_a_callback_that_gets_the_results_is_checked_for_two_given_arguments() -> None:
    members = [chords.square.pending(1)]
    with pytest.raises(TypeError, match="record_batch_only cannot be called"):
        batch(members).then(chords.record_batch_only, "then", results=True)
    with pytest.raises(TypeError, match="record cannot be called"):
        batch(members).finally_(chords.record, "finally")
    batch(members).then(chords.record_batch_only, "then")
    batch(members).finally_(chords.record.pending("finally"), results=True)


@pytest.mark.parametrize("bad", ["0", "-5", "1e3", "lots", str(16 * 1024**3 + 1)])
def test_the_batch_results_bound_is_checked_like_the_other_settings(
    bad: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SETTING, bad)
    with pytest.raises(ConfigError, match=f"{SETTING} must be a whole number from 1 to"):
        Config.resolve()
    monkeypatch.setenv(SETTING, "4096")
    assert Config.resolve().max_batch_results_bytes == 4096
    with pytest.raises(ConfigError, match="max_batch_results_bytes must be"):
        Config(max_batch_results_bytes=0)


def test_a_member_counted_at_once_over_the_bound_raises_for_its_worker_to_fail_it(
    queue: RedisQueue, config: Config
) -> None:
    """Counted at once (a traced worker, ``counts_wait`` off): the same bound, raised."""
    small = RedisQueue(replace(config, max_batch_results_bytes=10))
    found = batch([chords.big.pending(0, 20)]).then(chords.record, "then", results=True)
    b = found.dispatch(small)
    payload = queue.client.lindex(queue.keys("default").ready, 0)
    completion = effects.on_success(decode(payload), payload, "x" * 20, time.time(), None)
    with pytest.raises(ResultTooLarge, match=f"member 0 of batch {b.id}.*{SETTING}"):
        effects.apply(completion, small)
    status = b.status()
    assert status is not None and (status.succeeded, status.failed) == (0, 1)
    small.client.close()
