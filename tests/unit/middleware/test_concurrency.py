"""Concurrency limits per key (``Concurrency``, ``@task(concurrency=N)``), with real
``rqueue work`` processes racing on a real Redis (and on the cluster topology).

Each test fails without the behaviour it is named for: the tasks of
concurrency_tasks.py record each start and end in Redis, so runs that overlapped
beyond the limit, a lost call or an attempt used by waiting show.
"""

from __future__ import annotations

import concurrency_tasks as ct
import pytest
from support import Workers, failures, push_job, strings, wait_for

from rqueue.errors import InvalidTaskOption
from rqueue.middleware import Concurrency
from rqueue.store import guards
from rqueue.store.guards import Slot
from rqueue.store.header import header
from rqueue.store.queue import RedisQueue

FAST = ("--kill-grace", "0.5", "--block-for", "0.5", "--log-level", "warning")


def most_at_once(events: list[str]) -> int:
    """The most runs between their start and their end at any one time."""
    running = most = 0
    for event in events:
        running += 1 if event.startswith("start") else -1
        most = max(most, running)
    return most


def finished(queue: RedisQueue, count: int) -> bool:
    return sum(e.startswith("end") for e in strings(queue.client, ct.EVENTS)) >= count


def idle(queue: RedisQueue) -> bool:
    """Nothing ready, delayed or reserved."""
    keys = queue.keys("default")
    pipe = queue.client.pipeline(transaction=False)
    pipe.llen(keys.ready).zcard(keys.delayed).zcard(keys.reserved)
    return sum(pipe.execute()) == 0


def check_all_ran_once(queue: RedisQueue, count: int) -> None:
    events = strings(queue.client, ct.EVENTS)
    starts = [e.split() for e in events if e.startswith("start")]
    assert sorted(int(value) for _, value, _ in starts) == list(range(count)), "each ran once"
    assert {used for _, _, used in starts} == {"1"}, "waiting for a slot used no attempt"
    assert 1 < most_at_once(events) <= ct.LIMIT
    assert not failures(queue)


@pytest.mark.topology
@pytest.mark.parametrize(
    ("task", "mode"),
    [
        (ct.limited, ("--concurrency", "10")),
        (ct.limited, ("--concurrency", "5", "--threads", "2")),
        (ct.limited_async, ("--concurrency", "5", "--slots", "2")),
    ],
    ids=["process", "threads", "slots"],
)
def test_fifty_racing_runners_never_run_more_than_the_limit_at_once(
    queue: RedisQueue, workers: Workers, task: object, mode: tuple[str, ...]
) -> None:
    count = 60
    task.dispatch_many([(str(i), 0.05) for i in range(count)])  # type: ignore[attr-defined]
    for _ in range(5):  # 5 workers of 10 children, threads or slots: 50 runners
        workers.start(*mode, *FAST)
    wait_for(lambda: finished(queue, count), 120, "every call to run")
    # their slots last 300 s (the tasks' timeout): only the frees' wakes finish in time
    check_all_ran_once(queue, count)
    wait_for(lambda: idle(queue), 10, "nothing left queued")
    slots = queue.keys("default").middleware("slots", f"task:{task.name}:concurrency")  # type: ignore[attr-defined]
    assert not queue.client.zcard(slots), "every slot freed by its owner"


@pytest.mark.topology
def test_holders_killed_mid_run_leave_nothing_stuck(queue: RedisQueue, workers: Workers) -> None:
    # Two slots; the first two calls SIGKILL their children holding them. Their slots
    # expire (2 s), the calls parked behind them run, and the killed ones run again.
    values = ["kill-a", "kill-b", *map(str, range(8))]
    for value in values:
        ct.limited_dies.dispatch(value, 0.05)
    for _ in range(2):
        workers.start("--concurrency", "3", *FAST)
    wait_for(lambda: finished(queue, len(values)), 60, "every call to run, the killed ones again")
    events = strings(queue.client, ct.EVENTS)
    ended = sorted(e.split()[1] for e in events if e.startswith("end"))
    assert ended == sorted(values), "each finished once"
    killed = ("start kill-a 1", "start kill-b 1")  # runs that never ended
    assert most_at_once([e for e in events if e not in killed]) <= 2
    wait_for(lambda: idle(queue), 10, "nothing left queued")
    assert not failures(queue)


@pytest.mark.topology
def test_only_the_holder_frees_a_slot(queue: RedisQueue) -> None:
    slot = Slot(limit=1, lasting=60)
    assert guards.take_slot(queue, "default", "k", "a:1", slot, b"") == (0, 0)
    code, wait = guards.take_slot(queue, "default", "k", "b:1", slot, b"")
    assert code == 2 and 59 < wait <= 60  # full; not parked without a payload
    assert guards.free_slot(queue, "default", "k", "b:1") == 0  # not its slot
    assert guards.free_slot(queue, "default", "k", "a:1") == 1  # freed, nobody parked
    assert guards.take_slot(queue, "default", "k", "b:1", slot, b"") == (0, 0)


@pytest.mark.topology
def test_a_call_parked_for_a_slot_is_woken_by_the_run_that_frees_one(queue: RedisQueue) -> None:
    slot, keys = Slot(limit=1, lasting=60), queue.keys("default")
    assert guards.take_slot(queue, "default", "k", "holder:1", slot, b"") == (0, 0)
    job = push_job(queue, "concurrency_tasks:limited", "x", 0)
    (reserved,) = queue.reserve("default", 1, 60_000, 0, 0).payloads
    code, wait = guards.take_slot(queue, "default", "k", f"{job.id}:1", slot, reserved)
    assert code == 1 and 59 < wait <= 60  # parked, due by itself when the slot expires
    assert not queue.client.zcard(keys.reserved) and queue.client.zcard(keys.delayed) == 1
    (parked,) = queue.client.zrange(keys.delayed, 0, 0)
    assert (header(parked) or ("", -1))[1] == 0, "waiting used no attempt"
    assert guards.free_slot(queue, "default", "k", "holder:1") == 2  # woken at once
    assert queue.client.lrange(keys.ready, 0, -1) == [parked]
    assert not queue.client.zcard(keys.delayed)
    (again,) = queue.reserve("default", 1, 60_000, 0, 0).payloads
    assert guards.take_slot(queue, "default", "k", f"{job.id}:1", slot, again) == (0, 0)
    waiters = keys.middleware("slot-waiters", "k")
    assert not queue.client.zcard(waiters), "out of the line once it runs"


def test_using_concurrency_limits_the_calls_it_is_given_to(
    queue: RedisQueue, workers: Workers
) -> None:
    count = 12
    for i in range(count):
        ct.unlimited.using(concurrency=2).dispatch(str(i), 0.05)
    workers.start("--concurrency", "4", *FAST)
    workers.start("--concurrency", "4", *FAST)
    wait_for(lambda: finished(queue, count), 120, "every call to run")
    events = strings(queue.client, ct.EVENTS)
    assert 1 < most_at_once(events) <= 2
    assert not failures(queue)


@pytest.mark.parametrize(
    ("make", "option"),
    [
        (lambda: Concurrency("k", limit=0), "Concurrency(limit)"),
        (lambda: Concurrency("k", limit=1.5), "Concurrency(limit)"),
        (lambda: Concurrency("k", limit=True), "Concurrency(limit)"),
        (lambda: Concurrency("", limit=2), "Concurrency(key)"),
        (lambda: Concurrency("k", limit=2, expire_after=0), "Concurrency(expire_after)"),
        (lambda: Concurrency("k", limit=2, shared=1), "Concurrency(shared)"),
    ],
)
def test_settings_out_of_range_are_refused_naming_the_option(make: object, option: str) -> None:
    with pytest.raises(ValueError, match=option.replace("(", r"\(").replace(")", r"\)")):
        make()  # type: ignore[operator]


@pytest.mark.parametrize("limit", [0, -1, 2.0, "3", True])
def test_the_concurrency_option_out_of_range_is_refused(limit: object) -> None:
    with pytest.raises(InvalidTaskOption, match="concurrency must be an int"):
        ct.limited.using(concurrency=limit)  # type: ignore[arg-type]
