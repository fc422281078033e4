"""Kept results: status through a task's life, values, errors, timeouts and expiry."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import workflow_tasks as flows
from support import Workers, wait_for

import rqueue
from rqueue import InvalidTaskOption, TaskCancelled, TaskFailed
from rqueue.failed import FailedTasks
from rqueue.store.queue import RedisQueue


@pytest.mark.topology
def test_a_kept_result_round_trips_and_status_follows_the_task(
    queue: RedisQueue, workers: Workers
) -> None:
    handle = flows.add.dispatch(2, 3)
    assert handle.status() == "pending"
    later = flows.add.later(3600, 1, 1)
    assert later.status() == "delayed"
    worker = workers.start("--sleep", "0.05")
    assert handle.result(timeout=20) == 5
    assert handle.status() == "succeeded"
    rebuilt = rqueue.result_of(handle.id)
    assert rebuilt.queue == "default" and rebuilt.result(timeout=0) == 5
    assert later.cancel()
    assert later.status() == "cancelled"
    with pytest.raises(TaskCancelled):
        later.result(timeout=1)
    worker.signal(15)
    assert worker.wait() == 0


@pytest.mark.topology
def test_a_failure_raises_task_failed_with_the_remote_type_message_and_traceback(
    queue: RedisQueue, workers: Workers
) -> None:
    handle = flows.explode.dispatch("boom")
    workers.start()
    with pytest.raises(TaskFailed) as raised:
        handle.result(timeout=20)
    assert raised.value.exception == "ValueError"
    assert raised.value.message == "boom"
    assert "raise ValueError(message)" in raised.value.traceback
    assert handle.status() == "failed"


def test_a_result_that_cannot_be_encoded_fails_the_task_with_a_clear_message(
    queue: RedisQueue, workers: Workers
) -> None:
    handle = flows.unkeepable.dispatch()
    workers.start()
    with pytest.raises(TaskFailed) as raised:
        handle.result(timeout=20)
    assert "the return value of workflow_tasks:unkeepable could not be stored" in (
        raised.value.message
    )


def test_result_times_out_while_the_task_waits_and_status_says_running_once_taken(
    queue: RedisQueue, workers: Workers
) -> None:
    handle = flows.add.dispatch(1, 2)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        handle.result(timeout=0.3)
    assert time.monotonic() - started >= 0.3
    # A reserved task is running: take it by hand, as a worker would.
    queue.reserve("default", 1, 60_000, 1_000, 1_000)
    assert handle.status() == "running"


def test_a_plain_task_keeps_nothing_and_reads_unknown(queue: RedisQueue, workers: Workers) -> None:
    handle = flows.note.dispatch("x")
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    assert handle.status() == "unknown"
    assert not [k for k in queue.client.scan_iter("*result*")]
    with pytest.raises(TimeoutError):
        handle.result(timeout=0)


def test_a_kept_result_expires(queue: RedisQueue, workers: Workers) -> None:
    handle = flows.add.using(keep_result=timedelta(seconds=2)).dispatch(4, 4)
    workers.start()
    assert handle.result(timeout=20) == 8  # wakes as the worker writes it, 2 s to spare
    wait_for(lambda: handle.status() == "unknown", 10)


def test_keep_result_out_of_range_is_refused_naming_the_option() -> None:
    for bad in (0, -1, float("inf"), "60", True):
        with pytest.raises(InvalidTaskOption, match="keep_result"):
            flows.add.using(keep_result=bad)  # type: ignore[arg-type]


def test_a_garbage_result_record_is_a_clear_error(queue: RedisQueue) -> None:
    handle = flows.add.dispatch(1, 1)
    queue.client.set(queue.keys("default").result(handle.id), b"\xc1garbage")
    with pytest.raises(rqueue.InvalidPayload, match=handle.id):
        handle.status()


def test_many_waiters_all_wake_on_one_result(queue: RedisQueue, workers: Workers) -> None:
    import threading

    handle = flows.add.dispatch(20, 22)
    seen: list[int] = []

    def wait() -> None:
        seen.append(handle.result(timeout=20))

    threads = [threading.Thread(target=wait) for _ in range(3)]
    for thread in threads:
        thread.start()
    workers.start()
    for thread in threads:
        thread.join(25)
    assert seen == [42, 42, 42]


def test_a_failed_task_retried_from_the_failed_list_reads_pending_and_can_be_cancelled(
    queue: RedisQueue, workers: Workers
) -> None:
    handle = flows.explode.dispatch("once")
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    assert handle.status() == "failed"
    failed = FailedTasks(queue)
    [record] = failed.list()
    assert failed.retry(record)
    assert handle.status() == "pending"
    assert handle.cancel()
    assert handle.status() == "cancelled"
