"""Priority levels inside a queue (``@task(priority=N)``, ``using(priority=N)``): strict
between levels, FIFO within one, kept by delayed, retried and released tasks, counted
by ``rqueue size``, emptied by ``rqueue clear``; ``--aging`` lets a waiting level through."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from support import Workers, cli, strings, task_module, wait_for

from rqueue import batch, chain, dispatch_many
from rqueue.encoding.payload import decode
from rqueue.errors import InvalidTaskOption
from rqueue.failed import FailedTasks
from rqueue.metrics.read import oldest_wait
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

ORDER = "test:order"
GO = "test:go"
"""What a ``single`` waits for (bounded) before it ends: the test says when."""
QUEUE = "levels"
TASKS = f"""
import time

from rqueue import current_job, task
from rqueue.store.default import default_queue


@task(queue={QUEUE!r})
def record(label):
    default_queue().client.rpush({ORDER!r}, label)


@task(queue={QUEUE!r})
async def record_async(label):
    default_queue().client.rpush({ORDER!r}, label)


@task(queue={QUEUE!r})
def slow(label):
    time.sleep(0.01)
    default_queue().client.rpush({ORDER!r}, label)


@task(queue={QUEUE!r}, priority=9, concurrency=1)
def single(label):
    default_queue().client.rpush({ORDER!r}, f"start-{{label}}")
    default_queue().client.blpop({GO!r}, timeout=30)
    default_queue().client.rpush({ORDER!r}, label)


@task(queue={QUEUE!r}, priority=1, debounce=0.05)
def debounced(label):
    default_queue().client.rpush({ORDER!r}, label)


@task(queue={QUEUE!r}, priority=3, tries=1)
def doomed():
    raise RuntimeError("for good")


@task(queue={QUEUE!r}, priority=1, backoff=0)
def flaky(label):
    attempt = current_job().attempts
    default_queue().client.rpush({ORDER!r}, f"{{label}}#{{attempt}}")
    if attempt == 1:
        raise RuntimeError("once")
"""
RESERVE = {"default_timeout_ms": 60_000, "grace_ms": 1000, "margin_ms": 1000}
pytestmark = pytest.mark.topology


@pytest.fixture
def tasks(config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    yield from task_module("prio_tasks", TASKS, tmp_path, monkeypatch)


@pytest.fixture
def prio_workers(config: Config, tmp_path: Path) -> Workers:
    return Workers(config, cwd=tmp_path)


def dispatch_mixed(task: object) -> list[str]:
    """Dispatch labels at mixed levels; returns the order a strict, FIFO queue runs them."""
    levels = [9, None, 0, 5, 9, None, 0, 3, 7, 4]
    for n, level in enumerate(levels):
        task.using(priority=level).dispatch(f"{n}")  # type: ignore[attr-defined]
    ranked = sorted(range(len(levels)), key=lambda n: (5 if levels[n] is None else levels[n], n))
    return [str(n) for n in ranked]


def labels(queue: RedisQueue, reply: list[bytes]) -> list[str]:
    return [decode(payload).args[0] for payload in reply]


@pytest.mark.parametrize(
    ("name", "mode"),
    [("record", ()), ("record", ("--threads", "1")), ("record_async", ("--slots", "1"))],
    ids=["process", "threads", "slots"],
)
def test_workers_run_levels_strictly_and_each_level_in_order(
    tasks: ModuleType,
    queue: RedisQueue,
    prio_workers: Workers,
    name: str,
    mode: tuple[str, ...],
) -> None:
    expected = dispatch_mixed(getattr(tasks, name))
    code, output = prio_workers.run(QUEUE, "-A", "prio_tasks", "--stop-when-empty", *mode)
    assert code == 0, output
    assert strings(queue.client, ORDER) == expected


def test_reserve_takes_levels_in_order_across_batches(tasks: ModuleType, queue: RedisQueue) -> None:
    expected = dispatch_mixed(tasks.record)
    taken: list[str] = []
    while len(taken) < len(expected):
        taken += labels(queue, queue.reserve(QUEUE, 3, **RESERVE).payloads)
    assert taken == expected
    assert queue.reserve(QUEUE, 3, **RESERVE).payloads == []


def test_a_rate_limited_reserve_with_a_claims_key_asks_again_for_the_levels(
    tasks: ModuleType, config: Config
) -> None:
    fresh = RedisQueue(config)  # has not learned that the queue has levels
    tasks.record.using(priority=0).dispatch("first")
    tasks.record.dispatch("plain")
    got = fresh.reserve(QUEUE, 5, **RESERVE, claims="token", rate=(100, 1000))
    assert (labels(fresh, got.payloads), got.still_ready) == (["first"], 1)  # one frees now
    assert fresh.claimed(QUEUE, "token") == got.payloads


def test_a_delayed_task_goes_to_its_level_when_due(tasks: ModuleType, queue: RedisQueue) -> None:
    tasks.record.dispatch("plain")
    tasks.record.using(priority=2).later(0.05, "urgent")
    wait_for(lambda: queue.migrate(QUEUE).moved, message="the delayed task due")
    assert queue.sizes([QUEUE])[0].levels == (0, 0, 1, 0, 0, 1, 0, 0, 0, 0)
    assert labels(queue, queue.reserve(QUEUE, 2, **RESERVE).payloads) == ["urgent", "plain"]


def test_a_debounced_call_goes_to_its_level_when_due(tasks: ModuleType, queue: RedisQueue) -> None:
    tasks.debounced.dispatch("first")
    tasks.debounced.dispatch("latest")  # replaces it
    wait_for(lambda: queue.migrate(QUEUE).moved, message="the debounced call due")
    assert queue.sizes([QUEUE])[0].levels == (0, 1, 0, 0, 0, 0, 0, 0, 0, 0)


def test_released_tasks_go_back_to_their_level(tasks: ModuleType, queue: RedisQueue) -> None:
    for level in (8, 8, 1):
        tasks.record.using(priority=level).dispatch(f"p{level}")
    tasks.record.dispatch("plain")
    first = queue.reserve(QUEUE, 2, **RESERVE).payloads  # p1, then plain
    assert labels(queue, first) == ["p1", "plain"]
    queue.release(QUEUE, first, unstarted=True)  # a stopping worker gives them back
    again = queue.reserve(QUEUE, 1, **RESERVE).payloads
    assert labels(queue, again) == ["p1"]
    queue.release(QUEUE, again)  # a retry without backoff: to the end of its level
    assert queue.sizes([QUEUE])[0].levels == (0, 1, 0, 0, 0, 1, 0, 0, 2, 0)
    queue.release(QUEUE, queue.reserve(QUEUE, 1, **RESERVE).payloads, delay=0.05)
    wait_for(lambda: queue.migrate(QUEUE).moved, message="the retry due")
    assert labels(queue, queue.reserve(QUEUE, 4, **RESERVE).payloads) == [
        "p1",
        "plain",
        "p8",
        "p8",
    ]


def test_a_retried_task_runs_before_lower_levels(
    tasks: ModuleType, queue: RedisQueue, prio_workers: Workers
) -> None:
    tasks.flaky.dispatch("flaky")
    for n in range(4):
        tasks.record.dispatch(f"plain{n}")
    code, output = prio_workers.run(
        QUEUE, "-A", "prio_tasks", "--stop-when-empty", "--prefetch", "1"
    )
    assert code == 0, output
    order = strings(queue.client, ORDER)
    assert order[0] == "flaky#1" and order.index("flaky#2") <= 2, order


def test_workflows_keep_their_steps_priorities(
    tasks: ModuleType, queue: RedisQueue, prio_workers: Workers
) -> None:
    record = tasks.record
    batch([record.using(priority=2).pending(f"member{n}") for n in range(3)]).dispatch()
    assert queue.sizes([QUEUE])[0].levels == (0, 0, 3, 0, 0, 0, 0, 0, 0, 0)
    queue.clear(QUEUE)
    step2 = record.using(priority=0).pending("step2")
    chain(record.using(priority=1).pending("step1"), step2).dispatch()
    for n in range(4):
        record.dispatch(f"plain{n}")
    code, output = prio_workers.run(
        QUEUE, "-A", "prio_tasks", "--stop-when-empty", "--prefetch", "1"
    )
    assert code == 0, output
    order = strings(queue.client, ORDER)  # the next step, pushed by push_once.lua
    assert order[0] == "step1" and order.index("step2") <= 2, order


def test_a_failed_task_retried_and_a_waiting_task_released_keep_their_level(
    tasks: ModuleType, queue: RedisQueue, prio_workers: Workers
) -> None:
    tasks.doomed.dispatch()
    first = tasks.record.using(keep_result=60).dispatch("first")
    waiting = tasks.record.using(queue="levels-wait", priority=0, after=[first])
    waiting.dispatch("after")
    prio_workers.start(QUEUE, "-A", "prio_tasks", "--block-for", "0.2")
    try:
        wait_for(lambda: FailedTasks(queue).list([QUEUE]), message="the doomed task failed")
        wait_for(
            lambda: queue.sizes(["levels-wait"])[0].levels == (1, 0, 0, 0, 0, 0, 0, 0, 0, 0),
            message="the waiting task released to its level",
        )
    finally:
        prio_workers.kill_all()
    assert FailedTasks(queue).retry_all([QUEUE]) == 1
    assert queue.sizes([QUEUE])[0].levels == (0, 0, 0, 1, 0, 0, 0, 0, 0, 0)


def test_a_call_woken_by_a_freed_concurrency_slot_keeps_its_level(
    tasks: ModuleType, queue: RedisQueue, prio_workers: Workers
) -> None:
    tasks.single.dispatch("a")
    prio_workers.start(QUEUE, "-A", "prio_tasks", "-c", "2", "--prefetch", "1")
    try:
        wait_for(lambda: "start-a" in strings(queue.client, ORDER), message="a started")
        tasks.single.dispatch("b")  # parked while "a" holds the one slot
        wait_for(lambda: queue.sizes([QUEUE])[0].delayed == 1, message="b parked")
        busy = tasks.slow.using(priority=6)
        dispatch_many([busy.pending(f"six{n}") for n in range(150)])  # 1.5 s of work
        queue.client.rpush(GO, "a", "b")  # "a" ends, and frees the slot, only now
        wait_for(lambda: "b" in strings(queue.client, ORDER), timeout=60, message="b ran")
    finally:
        prio_workers.kill_all()
    order = strings(queue.client, ORDER)
    after = [label for label in order[order.index("start-b") :] if label.startswith("six")]
    assert len(after) <= 4, order  # after level 6's tasks, as level 9: but those in hand


def test_size_clear_and_cancel_know_the_levels(tasks: ModuleType, queue: RedisQueue) -> None:
    tasks.record.using(priority=0).dispatch("first")
    cancelled = tasks.record.using(priority=0).dispatch("cancelled")
    tasks.record.using(priority=9).dispatch("last")
    tasks.record.dispatch("plain")
    assert cancelled.cancel()
    size = queue.sizes([QUEUE])[0]
    assert (size.ready, size.levels) == (3, (2, 0, 0, 0, 0, 1, 0, 0, 0, 1))
    shown = cli(queue.config, "size", QUEUE)
    assert "levels 0=2 5=1 9=1" in shown.stdout, shown.stdout + shown.stderr
    taken = queue.reserve(QUEUE, 3, **RESERVE).payloads
    assert labels(queue, taken) == ["first", "plain"]  # the cancelled one dropped
    queue.ack(QUEUE, taken)
    tasks.record.using(priority=4).later(60, "delayed")
    assert queue.clear(QUEUE) == 2
    size = queue.sizes([QUEUE])[0]
    assert (size.ready, size.delayed, size.levels) == (0, 0, ())
    assert queue.client.exists(*queue.keys(QUEUE).levels) == 0


def test_the_oldest_wait_counts_the_levels_heads(tasks: ModuleType, queue: RedisQueue) -> None:
    tasks.record.using(priority=9).dispatch("alone")
    assert oldest_wait(queue, QUEUE, now=time.time() + 60) >= 60  # the dashboard's figure
    tasks.record.dispatch("plain")
    assert oldest_wait(queue, QUEUE, now=time.time() + 60) >= 60


def test_aging_promotes_a_waiting_levels_oldest_task(tasks: ModuleType, queue: RedisQueue) -> None:
    tasks.record.using(priority=9).dispatch("starving")
    tasks.record.using(priority=0).dispatch("busy")
    assert queue.migrate(QUEUE, aging=0.05).moved == 0  # seen at the head now
    assert queue.migrate(QUEUE).moved == 0  # no aging: nothing moves, ever
    wait_for(lambda: queue.migrate(QUEUE, aging=0.05).moved, message="the promotion")
    assert labels(queue, queue.reserve(QUEUE, 2, **RESERVE).payloads) == ["starving", "busy"]


@pytest.mark.parametrize("aging", [None, "0.3"], ids=["strict", "aging"])
def test_a_worker_with_aging_lets_a_starving_level_through(
    tasks: ModuleType, queue: RedisQueue, prio_workers: Workers, aging: str | None
) -> None:
    tasks.slow.using(priority=9).dispatch("starving")
    busy = tasks.slow.using(priority=0)
    dispatch_many([busy.pending(f"busy{n}") for n in range(300)])  # 3 s of work at least
    extra = ("--aging", aging) if aging else ()
    code, output = prio_workers.run(
        QUEUE, "-A", "prio_tasks", "--stop-when-empty", "--prefetch", "1", *extra, timeout=120
    )
    assert code == 0, output
    order = strings(queue.client, ORDER)
    if aging:  # promoted after 0.3 s untaken, on the parent's next tick: well before the end
        assert order.index("starving") < 200, order.index("starving")
    else:
        assert order[-1] == "starving"


@pytest.mark.parametrize("level", [-1, 10, 2.0, True, "1"])
def test_a_priority_out_of_range_is_refused_naming_the_option(
    tasks: ModuleType, level: object
) -> None:
    with pytest.raises(InvalidTaskOption, match="priority"):
        tasks.record.using(priority=level)
