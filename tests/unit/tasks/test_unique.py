"""Unique tasks (``@task(unique=)``): one call per key queued or running.

Real ``rqueue work`` processes run the tasks of unique_tasks.py. The lock is taken by
push.lua with the push, and released by its owner's id only: on success (or at start
with ``unique_until="processing"``), on final failure, on cancel, on clear, or when
it expires.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import unique_tasks
from support import Workers, follow_log, in_threads, logged, ready, strings, wait_for

from rqueue.encoding.payload import decode
from rqueue.errors import DispatchRefused, InvalidTaskOption
from rqueue.failed import FailedTasks
from rqueue.settings.config import Config
from rqueue.store.cancel import CancelOutcome
from rqueue.store.queue import RedisQueue
from rqueue.tasks.handles import Dispatched

FAST = ("--kill-grace", "0.5", "--block-for", "0.5")


def holder(queue: RedisQueue, key: str) -> str | None:
    """The id holding the lock ``key`` (scoped by its task's name), expired or not."""
    held = queue.client.hget(queue.keys("default").unique, f"key:{key}")
    return None if held is None else held.decode().split(" ")[0]


def queued_brief() -> Dispatched | None:
    """Dispatch ``brief`` (unique_for=0.5): its handle if queued, None if deduplicated."""
    handle = unique_tasks.brief.dispatch()
    return None if handle.deduplicated else handle


def ready_ids(queue: RedisQueue) -> list[str]:
    return [decode(payload).id for payload in ready(queue)]


@pytest.mark.topology
def test_racing_dispatches_queue_exactly_one(config: Config, queue: RedisQueue) -> None:
    """100 dispatchers, each with its own connection, released at once by a barrier."""
    count = 100

    def dispatch() -> Dispatched:
        connection = RedisQueue(config)
        try:
            return unique_tasks.single.using(connection=connection).dispatch()
        finally:
            connection.client.close()

    handles = [h for h in in_threads(count, dispatch) if isinstance(h, Dispatched)]
    assert len(handles) == count
    (queued,) = [h for h in handles if not h.deduplicated]
    assert ready_ids(queue) == [queued.id]
    assert {h.id for h in handles} == {queued.id}  # the 99 others name the one queued
    assert holder(queue, unique_tasks.single.name) == queued.id


def test_dispatch_many_first_call_of_a_key_wins(queue: RedisQueue) -> None:
    kept = unique_tasks.record.using(keep_result=60)
    first, again, other = kept.dispatch_many([("m",), ("m",), ("n",)])
    assert not first.deduplicated and not other.deduplicated
    assert again.deduplicated and again.id == first.id
    assert ready_ids(queue) == [first.id, other.id]
    assert again.status() == "pending"  # the call that holds the lock keeps its result
    later = unique_tasks.record.later(60, "m")  # a delayed dispatch is checked too
    assert later.deduplicated and later.id == first.id


def test_a_key_is_scoped_by_its_task_and_must_be_a_str_or_int(queue: RedisQueue) -> None:
    assert not unique_tasks.record.dispatch("k").deduplicated
    assert not unique_tasks.waits.dispatch("k").deduplicated  # same key, another task
    with pytest.raises(InvalidTaskOption, match="unique="):
        unique_tasks.keyless.dispatch("x")
    assert len(ready(queue)) == 2


def test_a_key_naming_another_task_never_takes_that_task_s_lock(queue: RedisQueue) -> None:
    """A key given by ``unique=`` is scoped by its task's name (``<task name>:<key>``), a task's
    own key (``unique=True``) is its bare name: one colon, never two, so the two never
    meet, whatever the key spells (issue #26, item 9)."""
    single = unique_tasks.single.name
    function = single.partition(":")[2]
    for value in (single, function, f"{function}:x"):
        assert not unique_tasks.record.dispatch(value).deduplicated
    assert not unique_tasks.single.dispatch().deduplicated
    assert unique_tasks.single.dispatch().deduplicated  # its own lock, taken only by itself
    assert len(ready(queue)) == 4


def test_released_after_success(queue: RedisQueue, workers: Workers) -> None:
    first = unique_tasks.record.dispatch("s")
    assert unique_tasks.record.dispatch("s").deduplicated
    workers.start(*FAST)
    wait_for(lambda: strings(queue.client, unique_tasks.DONE) == ["s"], 10, "the task to run")
    key = f"{unique_tasks.record.name}:s"
    wait_for(lambda: holder(queue, key) is None, 5, "the lock to be released")
    second = unique_tasks.record.dispatch("s")
    assert not second.deduplicated and second.id != first.id


def test_kept_while_retrying_released_on_final_failure(queue: RedisQueue, workers: Workers) -> None:
    first = unique_tasks.fails.dispatch("f")  # tries=2, backoff=2
    workers.start(*FAST)
    wait_for(lambda: queue.client.get("test:unique:attempts:f") == b"1", 10, "attempt 1")
    during = unique_tasks.fails.dispatch("f")  # waiting for its retry: same owner
    assert during.deduplicated and during.id == first.id
    wait_for(lambda: FailedTasks(queue).list(["default"]), 15, "the task to fail for good")
    key = f"{unique_tasks.fails.name}:f"
    wait_for(lambda: holder(queue, key) is None, 5, "the lock to be released")
    assert not unique_tasks.fails.dispatch("f").deduplicated


def test_kept_while_running_unless_until_processing(queue: RedisQueue, workers: Workers) -> None:
    processed = unique_tasks.waits.dispatch("w")
    processing = unique_tasks.waits_processing.dispatch("p")
    workers.start(*FAST, "--concurrency", "2")
    wait_for(
        lambda: sorted(strings(queue.client, unique_tasks.STARTED)) == ["p", "w"], 10, "both run"
    )
    again = unique_tasks.waits.dispatch("w")
    assert again.deduplicated and again.id == processed.id
    second = unique_tasks.waits_processing.dispatch("p")  # its lock went as it started
    assert not second.deduplicated and second.id != processing.id
    queue.client.set(unique_tasks.go("w"), 1)
    queue.client.set(unique_tasks.go("p"), 1)
    wait_for(lambda: len(strings(queue.client, unique_tasks.DONE)) == 3, 10, "all three to run")


@pytest.mark.topology
def test_released_on_cancel_and_on_clear(queue: RedisQueue) -> None:
    first = unique_tasks.record.later(60, "c")
    assert first.cancel() is CancelOutcome.CANCELLED
    second = unique_tasks.record.dispatch("c")
    assert not second.deduplicated
    assert unique_tasks.record.dispatch("c").id == second.id
    assert queue.clear("default") == 2  # the cancelled payload is still in its zset
    third = unique_tasks.record.dispatch("c")
    assert not third.deduplicated and third.id not in (first.id, second.id)


def test_expires_after_unique_for(queue: RedisQueue) -> None:
    first = unique_tasks.brief.dispatch()  # unique_for=0.5
    assert unique_tasks.brief.dispatch().id == first.id
    second = wait_for(queued_brief, 5, "the lock to expire")
    assert second.id != first.id
    assert ready_ids(queue) == [first.id, second.id]


def test_only_the_owner_releases_a_lock(queue: RedisQueue) -> None:
    """Laravel #59567: a task whose lock expired and was taken by a newer dispatch
    must not release the newer one's lock when it finishes."""
    first = unique_tasks.brief.dispatch()
    second = wait_for(queued_brief, 5, "the lock to expire")
    assert not queue.release_unique("default", first.id)  # what its worker would call
    assert holder(queue, unique_tasks.brief.name) == second.id
    assert queue.release_unique("default", second.id)
    assert holder(queue, unique_tasks.brief.name) is None


def test_a_lock_key_of_another_type_is_a_clear_error_and_loses_nothing(
    queue: RedisQueue, workers: Workers
) -> None:
    locks = queue.keys("default").unique
    held = unique_tasks.record.dispatch("h")
    delayed = unique_tasks.record.later(60, "d")
    queue.client.delete(locks)
    queue.client.set(locks, "hostile")
    with pytest.raises(DispatchRefused, match="not rqueue's unique locks"):
        unique_tasks.record.dispatch("x")
    assert queue.client.get(locks) == b"hostile"  # nothing written over
    assert ready_ids(queue) == [held.id]  # nothing queued, nothing lost
    assert delayed.cancel() is CancelOutcome.CANCELLED  # cancel works all the same
    worker = workers.start(*FAST)
    lines = follow_log(worker)
    wait_for(lambda: strings(queue.client, unique_tasks.DONE) == ["h"], 10, "the task to run")
    wait_for(lambda: logged(lines, "unique lock cannot be released"), 5, "the error logged")
    assert not FailedTasks(queue).list(["default"])  # the task's success stands
    assert queue.client.get(locks) == b"hostile"


def test_signed_payloads_are_deduplicated(
    config: Config, queue: RedisQueue, workers: Workers
) -> None:
    secret = "s" * 32
    signing = unique_tasks.record.using(connection=RedisQueue(replace(config, secret=secret)))
    first = signing.dispatch("signed")
    assert signing.dispatch("signed").id == first.id
    workers.start(*FAST, env={"RQUEUE_SECRET": secret})
    wait_for(lambda: strings(queue.client, unique_tasks.DONE) == ["signed"], 10, "the task")
    key = f"{unique_tasks.record.name}:signed"
    wait_for(lambda: holder(queue, key) is None, 5, "the lock to be released")
