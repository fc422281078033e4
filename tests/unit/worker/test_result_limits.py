"""Stored results (issue 26): a return value that cannot be stored fails its task at once,
alone, with a message about the return value; a refused acknowledgement never wedges a
worker child."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import result_tasks as tasks
from support import Workers, failures, push_job, wait_for

from rqueue import TaskFailed, chain
from rqueue.failed import FailedTasks
from rqueue.settings.config import Config, ConfigError
from rqueue.store.queue import RedisQueue


def ran(queue: RedisQueue) -> list[str]:
    return [v.decode() for v in queue.client.lrange(tasks.RAN, 0, -1)]


def notes_ran(queue: RedisQueue, count: int) -> bool:
    return sum(1 for v in ran(queue) if v.startswith("note:")) == count


@pytest.fixture
def small_bulk_limit(queue: RedisQueue) -> Iterator[None]:
    """The suite's own server takes no value over 1 MiB (its smallest setting)."""
    before = queue.client.config_get("proto-max-bulk-len")["proto-max-bulk-len"]
    queue.client.config_set("proto-max-bulk-len", 1024 * 1024)
    try:
        yield
    finally:
        queue.client.config_set("proto-max-bulk-len", before)


def test_a_result_over_the_size_limit_fails_that_task_alone(
    queue: RedisQueue, workers: Workers
) -> None:
    handle = tasks.big.dispatch(200_000)
    for i in range(3):
        tasks.note.dispatch(i)
    workers.start("--sleep", "0.05", env={"RQUEUE_MAX_RESULT_BYTES": "100000"})
    with pytest.raises(TaskFailed) as raised:
        handle.result(timeout=20)
    assert raised.value.exception == "ResultTooLarge"
    assert "the return value of result_tasks:big could not be stored" in raised.value.message
    assert "over the limit of 100000 (RQUEUE_MAX_RESULT_BYTES)" in raised.value.message
    wait_for(lambda: notes_ran(queue, 3), 20, "the tasks behind it")
    assert ran(queue).count("big:200000") == 1  # not retried: it would return the same
    assert failures(queue) == ["result_tasks:big ResultTooLarge"]


def test_a_result_over_the_servers_bulk_limit_fails_that_task_alone(
    queue: RedisQueue, workers: Workers, small_bulk_limit: None
) -> None:
    # The default limit (16 MiB) is over this server's: Redis would drop the connection
    # of the ack carrying it, which looks like an outage, retried for ever.
    handle = tasks.big.dispatch(2 * 1024 * 1024)
    for i in range(3):
        tasks.note.dispatch(i)
    workers.start("--sleep", "0.05")
    with pytest.raises(TaskFailed) as raised:
        handle.result(timeout=20)
    assert raised.value.exception == "ResultTooLarge"
    assert "proto-max-bulk-len" in raised.value.message
    wait_for(lambda: notes_ran(queue, 3), 20, "the tasks behind it")
    assert queue.client.ping()


def test_an_ack_redis_refuses_fails_that_task_alone(queue: RedisQueue, workers: Workers) -> None:
    # A kept result whose time to live Redis refuses ("invalid expire time"): a command
    # error on the ack, in the same reserve call as the acks of the tasks around it.
    tasks.note.dispatch("before")
    bad = push_job(queue, "result_tasks:kept_note", "bad", meta={"keep": 2**63 - 1})
    good = tasks.kept_note.dispatch("good")
    for i in range(3):
        tasks.note.dispatch(i)
    workers.start("--sleep", "0.05")
    assert good.result(timeout=20) == "good"
    wait_for(lambda: notes_ran(queue, 4), 20, "the tasks around it")
    wait_for(lambda: failures(queue), 20, "the refused task to fail")
    [record] = FailedTasks(queue).list(["default"])
    assert record.id == bad.id and record.exception == "ResponseError"
    assert record.message.startswith("Redis refused its acknowledgement:")
    assert ran(queue).count("kept:bad") == 1
    wait_for(lambda: queue.sizes(["default"])[0].reserved == 0, 20, "every ack through")


@pytest.mark.parametrize("mode", [(), ("--threads", "2")], ids=["process", "threads"])
def test_an_unencodable_result_fails_at_once_naming_the_return_value(
    queue: RedisQueue, workers: Workers, mode: tuple[str, ...]
) -> None:
    handle = tasks.make.dispatch()
    workers.start("--sleep", "0.05", *mode)
    with pytest.raises(TaskFailed) as raised:
        handle.result(timeout=20)
    message = raised.value.message
    assert message.startswith(
        "the return value of result_tasks:make could not be stored: "
        "result['parts'][1]: object is not a type rqueue can encode"
    ), message
    assert "args[0]" not in message
    assert ran(queue) == ["make"]  # once: its side effects are not repeated
    assert raised.value.exception == "ResultNotStored"


def test_a_return_value_a_chain_cannot_pass_on_fails_at_once(
    queue: RedisQueue, workers: Workers
) -> None:
    chain(tasks.hand_on.pending(0), tasks.note.pending(), pipe=True).dispatch()
    workers.start("--sleep", "0.05")
    wait_for(lambda: failures(queue), 20, "the step to fail")
    [record] = FailedTasks(queue).list(["default"])
    assert record.exception == "ResultNotStored"
    assert record.message.startswith(
        "the return value of result_tasks:hand_on could not be passed to the next step: "
        "result: object is not a type rqueue can encode"
    ), record.message
    assert ran(queue) == ["hand_on:0"]


def test_a_next_step_over_the_payload_limit_fails_at_once(
    queue: RedisQueue, workers: Workers
) -> None:
    chain(tasks.hand_on.pending(50_000), tasks.note.pending(), pipe=True).dispatch()
    workers.start("--sleep", "0.05", env={"RQUEUE_MAX_PAYLOAD_BYTES": "20000"})
    wait_for(lambda: failures(queue), 20, "the step to fail")
    [record] = FailedTasks(queue).list(["default"])
    assert record.exception == "ResultNotStored"
    assert record.message.startswith("the next step of result_tasks:hand_on could not be queued")
    assert ran(queue) == ["hand_on:50000"]


@pytest.mark.parametrize("bad", ["0", "-1", "1e3", "lots", str(512 * 1024 * 1024 + 1)])
def test_the_result_limit_is_checked_like_the_payload_limit(
    bad: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RQUEUE_MAX_RESULT_BYTES", bad)
    with pytest.raises(ConfigError, match="RQUEUE_MAX_RESULT_BYTES must be a whole number"):
        Config.resolve()
    monkeypatch.setenv("RQUEUE_MAX_RESULT_BYTES", "2048")
    assert Config.resolve().max_result_bytes == 2048


def test_a_failure_redis_refuses_to_record_in_full_stops_no_worker_parent(
    queue: RedisQueue, workers: Workers
) -> None:
    # Its worker child dies; the parent fails the task with its kept result record,
    # whose time to live Redis refuses: the failure is filed without it, and the
    # parent (which used to crash on the ResponseError) goes on.
    bad = push_job(queue, "result_tasks:dies", meta={"keep": 2**63 - 1})
    worker = workers.start("--sleep", "0.05")
    wait_for(lambda: failures(queue), 20, "the task to fail")
    [record] = FailedTasks(queue).list(["default"])
    assert (record.id, record.exception) == (bad.id, "WorkerLost")
    tasks.note.dispatch("after")
    wait_for(lambda: notes_ran(queue, 1), 20, "a task after it")
    assert worker.process.poll() is None
    # The note's ack may still be on its way (a child sends acks with its next reserve).
    wait_for(lambda: queue.sizes(["default"])[0].reserved == 0, 20, "nothing left reserved")


def test_a_failure_with_a_huge_message_fails_that_task_alone(
    queue: RedisQueue, workers: Workers, small_bulk_limit: None
) -> None:
    # The message alone is over what this server takes in one value: the failure
    # record is cut to size instead of dropping the connection for ever.
    tasks.explode_loudly.dispatch(2 * 1024 * 1024)
    tasks.note.dispatch("after")
    workers.start("--sleep", "0.05")
    wait_for(lambda: failures(queue), 20, "the task to fail")
    [record] = FailedTasks(queue).list(["default"])
    assert record.exception == "ValueError"
    assert record.message.endswith(f"... ({2 * 1024 * 1024 - 64 * 1024} more characters cut)")
    assert record.traceback.startswith("Traceback") and "raise ValueError(" in record.traceback
    assert "characters cut) ..." in record.traceback and len(record.traceback) < 70_000
    wait_for(lambda: notes_ran(queue, 1), 20, "the task behind it")
