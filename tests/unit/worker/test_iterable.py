"""Iterable tasks (``@task(iterable=True)``): a generator yielding a cursor per item,
checkpointed in Redis and resumed by the next attempt after a killed child, a warm
shutdown (which uses no attempt) or a timeout; a timeout bounds each stretch between
checkpoints; progress from ``Total``; hostile checkpoints. Real ``rqueue work`` in
process, thread and async modes, real Redis.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import apptasks
import iterable_tasks as it
import msgpack
import pytest
from support import Workers, failures, follow_log, logged, strings, wait_for

from rqueue.errors import InvalidCursor, InvalidTaskOption
from rqueue.store import checkpoints, progress
from rqueue.store.checkpoints import Checkpoint
from rqueue.store.header import payload_attempts
from rqueue.store.queue import RedisQueue
from rqueue.tasks.decorator import task
from rqueue.tasks.definition import Task
from rqueue.testing import sync

FAST = ("--block-for", "0.5", "--log-level", "info")
MODES = {
    "process": ((), it.walk),
    "threads": (("--threads", "2"), it.walk),
    "async": ((), it.async_walk),
}


def seen(queue: RedisQueue) -> dict[int, int]:
    """How often each item ran."""
    raw = queue.client.hgetall(it.SEEN)
    return {int(k): int(v) for k, v in raw.items()}  # type: ignore[union-attr]


def starts(queue: RedisQueue) -> list[tuple[str, int]]:
    """``(cursor it started from, attempt)`` of each attempt."""
    return [(c, int(a)) for c, a in (s.split() for s in strings(queue.client, it.STARTS))]


def kept(queue: RedisQueue, task_id: str) -> Checkpoint | None:
    return checkpoints.read(queue, "default", task_id)


def task_of(mode: str) -> Task[..., Any]:
    return MODES[mode][1]


@pytest.mark.topology
@pytest.mark.parametrize("mode", MODES)
def test_a_killed_child_resumes_from_the_last_checkpoint(
    queue: RedisQueue, workers: Workers, mode: str
) -> None:
    items = 80
    handle = task_of(mode).dispatch(items, 0.04)
    worker = workers.start("-c", "1", *MODES[mode][0], *FAST)
    child = worker.wait_for_children(1)[0].pid
    wait_for(lambda: kept(queue, handle.id), 10, "a first checkpoint")
    os.kill(child, signal.SIGKILL)
    wait_for(lambda: handle.status() == "succeeded", 30, "the task to finish")
    counts = seen(queue)
    assert sorted(counts) == list(range(items))  # every item ran
    (first, _), (resumed, attempt) = starts(queue)
    assert first == "None" and attempt == 2
    assert int(resumed) > 0  # not from the start
    # Items before the checkpoint it resumed from ran once; only those after it (one
    # checkpoint window, a second at most: 25 items at this pace) ran twice.
    assert all(counts[i] == 1 for i in range(int(resumed)))
    assert sum(counts.values()) - items <= 26
    assert handle.result(timeout=5) == (f"walked {items}" if mode != "async" else None)


@pytest.mark.topology
@pytest.mark.parametrize("mode", MODES)
def test_a_warm_shutdown_stops_at_an_item_boundary_and_uses_no_attempt(
    queue: RedisQueue, workers: Workers, mode: str
) -> None:
    items = 200  # 10 s of items: the stop must not wait for them
    handle = (
        it.walk_once.dispatch(items, 0.05)
        if mode != "async"
        else it.async_walk.using(tries=1).dispatch(items, 0.05)
    )
    worker = workers.start("-c", "1", *MODES[mode][0], *FAST)
    wait_for(lambda: len(seen(queue)) >= 5, 10, "a few items")
    stopped_at = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(10) == 0
    assert time.monotonic() - stopped_at < 3
    assert "released by a warm shutdown" in worker.output()
    (payload,) = queue.client.lrange(queue.keys("default").ready, 0, -1)  # back at once
    assert payload_attempts(payload) == 0  # its attempt given back
    done = len(seen(queue))
    assert 5 <= done < items
    saved = kept(queue, handle.id)
    assert saved is not None and saved.cursor == done and saved.done == done
    # One try, and it was not used: the next worker finishes the task from there.
    code, output = workers.run("--stop-when-empty", *MODES[mode][0], *FAST)
    assert code == 0, output
    assert handle.status() == "succeeded"
    counts = seen(queue)
    assert counts == dict.fromkeys(range(items), 1)  # none twice: the stop checkpointed
    assert starts(queue) == [("None", 1), (str(done), 1)]
    assert not failures(queue)


@pytest.mark.parametrize("mode", MODES)
def test_a_timeout_bounds_each_stretch_between_checkpoints_not_the_task(
    queue: RedisQueue, workers: Workers, mode: str
) -> None:
    # 60 items of 0.1 s: 6 s in all, three times its 2 s timeout, one attempt.
    handle = task_of(mode).using(timeout=2).dispatch(60, 0.1)
    code, output = workers.run("--stop-when-empty", "--kill-grace", "1", *MODES[mode][0], *FAST)
    assert code == 0, output
    assert not failures(queue)
    assert handle.status() == "succeeded"
    assert starts(queue) == [("None", 1)]
    assert seen(queue) == dict.fromkeys(range(60), 1)


@pytest.mark.parametrize("mode", MODES)
def test_an_item_that_overruns_the_timeout_is_retried_from_the_checkpoint(
    queue: RedisQueue, workers: Workers, mode: str
) -> None:
    queue.client.hset(it.STALL, "30", 4)  # item 30 stalls on the first attempt
    handle = task_of(mode).using(timeout=1.5).dispatch(40, 0.05)
    code, output = workers.run("--stop-when-empty", "--kill-grace", "10", *MODES[mode][0], *FAST)
    assert code == 0, output
    assert "attempt 1: timed out; will retry" in output
    assert handle.status() == "succeeded"
    (first, _), (resumed, attempt) = starts(queue)
    assert first == "None" and attempt == 2 and int(resumed) >= 10  # resumed, not restarted
    counts = seen(queue)
    assert sorted(counts) == list(range(40))
    assert all(counts[i] == 1 for i in range(int(resumed)))
    # After the stall, only the retry ran: a thread that overran (it cannot be stopped)
    # was refused its next checkpoint, the task being settled, and stopped there.
    assert all(counts[i] == 1 for i in range(31, 40))
    if mode == "threads":
        assert "CheckpointRefused" not in output  # its thread's end is no outcome


@pytest.mark.topology
def test_progress_is_reported_from_the_total(queue: RedisQueue, workers: Workers) -> None:
    handle = it.walk.dispatch(60, 0.05)
    workers.start("-c", "1", *FAST)
    said = wait_for(lambda: progress.read(queue, "default", handle.id), 10, "a report")
    assert 0 < said.fraction < 1
    assert said.message is not None and said.message.endswith(" of 60 items")
    wait_for(lambda: handle.status() == "succeeded", 15, "the task")
    final = progress.read(queue, "default", handle.id)
    assert final is not None and (final.fraction, final.message) == (1.0, "60 of 60 items")


def test_a_checkpoint_is_forgotten_when_the_task_fails_for_good(
    queue: RedisQueue, workers: Workers
) -> None:
    handle = it.bad_cursor.dispatch()
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    assert failures(queue) == ["iterable_tasks:bad_cursor InvalidCursor"]  # once: no retry
    assert "cannot be checkpointed" in output
    assert queue.client.exists(queue.keys("default").checkpoint(handle.id)) == 0


def test_a_cancelled_iterable_task_forgets_its_checkpoint(
    queue: RedisQueue, workers: Workers
) -> None:
    """A cancel ends it for good: no later run (a retry from elsewhere) resumes from it."""
    workers.start(*FAST)
    handle = it.walk.dispatch(10_000, 0.01)
    wait_for(lambda: kept(queue, handle.id) is not None, 20, "a first checkpoint")
    assert handle.cancel().delivered
    wait_for(lambda: handle.status() == "cancelled", 10, "it to be cancelled")
    wait_for(lambda: kept(queue, handle.id) is None, 5, "its checkpoint gone")
    assert failures(queue) == []


def test_a_task_whose_reservation_was_lost_stops_and_leaves_it_to_its_holder(
    queue: RedisQueue, workers: Workers
) -> None:
    """Its checkpoint is refused: it stops there, and settles nothing (no retry, no
    failure, no hook), whatever its tries: the task is another worker's now."""
    lines = follow_log(workers.start(*FAST))
    handle = it.walk.dispatch(10_000, 0.01)
    wait_for(lambda: kept(queue, handle.id) is not None, 20, "a first checkpoint")
    reserved = queue.keys("default").reserved
    (payload,) = queue.client.zrange(reserved, 0, -1)
    queue.client.zrem(reserved, payload)  # as if it expired and another worker took it
    wait_for(lambda: logged(lines, "no longer holds it"), 10, "it to stop")
    assert not logged(lines, "will retry")
    assert failures(queue) == []
    keys = queue.keys("default")
    assert queue.client.llen(keys.ready) == 0 == queue.client.zcard(keys.delayed)


HOSTILE: dict[str, bytes] = {
    "garbage": b"\xc1\xff not msgpack",
    "not an array": msgpack.packb({"cursor": 1}),
    "negative count": msgpack.packb([3, -1, None]),
    "a bool count": msgpack.packb([3, True, None]),
    "a text total": msgpack.packb([3, 1, "lots"]),
    "an extension type": msgpack.packb([msgpack.ExtType(5, b"x"), 1, None]),
    "NaN": msgpack.packb([float("nan"), 1, None]),
    "too deep": msgpack.packb([[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]], 1, None]),
    "too big": msgpack.packb(["x" * (checkpoints.MAX_BYTES + 1), 1, None]),
    "int keys": msgpack.packb([{1: 2}, 1, None], strict_types=False),
}


@pytest.mark.parametrize("raw", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_checkpoint_reads_as_a_clear_error(raw: bytes) -> None:
    with pytest.raises(InvalidCursor, match=r"is not one rqueue wrote .*delete the key"):
        checkpoints.decode(raw, "queues:default:checkpoint:x")


@pytest.mark.topology
def test_a_hostile_checkpoint_fails_the_task_at_once_naming_its_key(
    queue: RedisQueue, workers: Workers
) -> None:
    handle = it.walk.dispatch(5)
    key = queue.keys("default").checkpoint(handle.id)
    queue.client.set(key, HOSTILE["negative count"])
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    assert failures(queue) == ["iterable_tasks:walk InvalidCursor"]  # tries=3: not retried
    assert key in output
    assert not seen(queue)  # no item ran
    assert queue.client.exists(key) == 0  # forgotten with the failure
    queue.client.hset(key, "a", "hash")  # not even a string
    with pytest.raises(InvalidCursor, match="not a string"):
        checkpoints.read(queue, "default", handle.id)


def test_a_checkpoint_round_trips_plain_cursors() -> None:
    for cursor in (None, True, 7, 2.5, "k", b"\x00", [1, "a"], {"page": "t", "n": [1]}):
        saved = Checkpoint(cursor, 3, 10)
        assert checkpoints.decode(checkpoints.encode(saved), "k") == saved
    assert checkpoints.decode(checkpoints.encode(Checkpoint((1, 2), 0, None)), "k").cursor == [1, 2]
    for bad in (object(), float("inf"), {1: "a"}, "x" * checkpoints.MAX_BYTES):
        with pytest.raises(InvalidCursor, match="cannot be checkpointed"):
            checkpoints.encode(Checkpoint(bad, 0, None))


def test_inline_an_iterable_task_runs_to_its_end(queue: RedisQueue) -> None:
    assert it.walk(4) == "walked 4"  # called directly
    assert it.walk(4, cursor=2) == "walked 4"
    with sync():
        handle = it.walk.dispatch(3)
    assert handle.result() == "walked 3"
    said = handle.progress()  # kept in memory, reported once at the end
    assert said is not None and (said.fraction, said.message) == (1.0, "3 of 3 items")
    assert seen(queue) == {0: 2, 1: 2, 2: 3, 3: 2}


def test_a_task_calling_an_iterable_function_directly_keeps_no_checkpoint(
    queue: RedisQueue, workers: Workers
) -> None:
    handle = it.calls_walk.dispatch(3)
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    assert handle.result(timeout=5) == "walked 3"
    assert queue.client.exists(queue.keys("default").checkpoint(handle.id)) == 0
    assert progress.read(queue, "default", handle.id) is None  # not the caller's progress


def test_only_a_generator_taking_a_cursor_is_iterable() -> None:
    with pytest.raises(InvalidTaskOption, match="must be a generator function"):
        task(iterable=True)(lambda cursor=None: 1)

    def no_cursor() -> Any:
        yield 1

    with pytest.raises(InvalidTaskOption, match="must take a `cursor` argument"):
        task(iterable=True)(no_cursor)
    with pytest.raises(InvalidTaskOption, match="iterable must be True or False"):
        task(iterable=1)(no_cursor)  # type: ignore[call-overload]


def test_only_an_iterable_tasks_calls_carry_its_mark() -> None:
    assert it.walk_once.options.job_meta() == {"keep": 60000, "iterable": 1}
    assert apptasks.record.options.job_meta() == {}  # a plain task's job: no entry
