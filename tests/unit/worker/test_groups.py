"""Fair groups inside a queue (``using(group=...)``, ``@task(group=fn)``): the groups and
the plain ready list take turns, one task a turn, so one group's backlog delays another
group's task by one turn at most; grouped tasks keep their group when delayed, released
or retried; ``rqueue size`` counts them, ``rqueue clear`` empties them; a worker's
``--group-concurrency`` and ``--group-rate`` limit each group."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from support import Workers, cli, strings, task_module, wait_for

from rqueue import dispatch_many
from rqueue.encoding.payload import decode, encode
from rqueue.errors import InvalidTaskOption
from rqueue.failed import FailedTasks
from rqueue.metrics.read import oldest_wait
from rqueue.settings.config import Config
from rqueue.store import browse
from rqueue.store.queue import RedisQueue

ORDER = "test:order"
GO = "test:go"
QUEUE = "fair"
TASKS = f"""
from rqueue import task
from rqueue.store.default import default_queue


@task(queue={QUEUE!r})
def record(label):
    default_queue().client.rpush({ORDER!r}, label)


@task(queue={QUEUE!r})
async def record_async(label):
    default_queue().client.rpush({ORDER!r}, label)


@task(queue={QUEUE!r}, group=lambda tenant, label: tenant)
def by_tenant(tenant, label):
    default_queue().client.rpush({ORDER!r}, label)


@task(queue={QUEUE!r}, tries=1)
def doomed(label):
    raise RuntimeError("for good")


@task(queue={QUEUE!r})
def held(label):
    client = default_queue().client
    client.rpush({ORDER!r}, "start-" + label)
    client.blpop({GO!r}, timeout=30)
    client.rpush({ORDER!r}, "end-" + label)
"""
RESERVE = {"default_timeout_ms": 60_000, "grace_ms": 1000, "margin_ms": 1000}
pytestmark = pytest.mark.topology


@pytest.fixture
def tasks(config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    yield from task_module("fair_tasks", TASKS, tmp_path, monkeypatch)


@pytest.fixture
def fair_workers(config: Config, tmp_path: Path) -> Workers:
    return Workers(config, cwd=tmp_path)


def dispatch_tenants(task: object) -> list[str]:
    """Five of tenant a, two of b, one of c, then two without a group; returns the order
    the turns run them: a, b, c and the plain list (joining last) one each in turn."""
    for group, count in (("a", 5), ("b", 2), ("c", 1), (None, 2)):
        for n in range(1, count + 1):
            task.using(group=group).dispatch(f"{group or 'plain'}{n}")  # type: ignore[attr-defined]
    return ["a1", "b1", "c1", "plain1", "a2", "b2", "plain2", "a3", "a4", "a5"]


def dispatch_by_group(task: object, *labels: str) -> None:
    """Dispatch each label in the group its first letter names."""
    for label in labels:
        task.using(group=label[0]).dispatch(label)  # type: ignore[attr-defined]


def labels(reply: list[bytes]) -> list[str]:
    return [decode(payload).args[-1] for payload in reply]


def test_reserve_takes_the_groups_in_turn_across_batches(
    tasks: ModuleType, queue: RedisQueue
) -> None:
    expected = dispatch_tenants(tasks.record)
    taken: list[str] = []
    while len(taken) < len(expected):
        taken += labels(queue.reserve(QUEUE, 3, **RESERVE).payloads)
    assert taken == expected
    assert queue.reserve(QUEUE, 3, **RESERVE).payloads == []
    assert queue.client.exists(queue.keys(QUEUE).turns) == 0  # empty groups cost nothing


def test_ten_thousand_groups_each_get_a_turn(tasks: ModuleType, queue: RedisQueue) -> None:
    calls = [tasks.record.using(group=f"t{n}").pending(f"t{n}") for n in range(10_000)]
    calls += [tasks.record.using(group="t0").pending("t0-again")]
    dispatch_many(calls)
    assert queue.sizes([QUEUE])[0].groups == 10_000
    taken: list[str] = []
    while batch := queue.reserve(QUEUE, 1000, **RESERVE).payloads:
        taken += labels(batch)
    assert taken == [f"t{n}" for n in range(10_000)] + ["t0-again"]
    assert queue.client.exists(queue.keys(QUEUE).turns) == 0


def test_a_reserve_counts_the_groups_it_did_not_read_as_still_ready(
    tasks: ModuleType, queue: RedisQueue
) -> None:
    dispatch_many([tasks.record.using(group=f"t{n}").pending(f"t{n}") for n in range(300)])
    reserved = queue.reserve(QUEUE, 100, **RESERVE)
    assert (len(reserved.payloads), reserved.still_ready) == (100, 200)
    assert queue.client.llen(queue.keys(QUEUE).notify) == 1  # other workers stay woken


@pytest.mark.parametrize(
    ("name", "mode"),
    [("record", ()), ("record", ("--threads", "1")), ("record_async", ("--slots", "1"))],
    ids=["process", "threads", "slots"],
)
def test_workers_take_the_groups_in_turn(
    tasks: ModuleType,
    queue: RedisQueue,
    fair_workers: Workers,
    name: str,
    mode: tuple[str, ...],
) -> None:
    expected = dispatch_tenants(getattr(tasks, name))
    code, output = fair_workers.run(QUEUE, "-A", "fair_tasks", "--stop-when-empty", *mode)
    assert code == 0, output
    assert strings(queue.client, ORDER) == expected


def test_a_quiet_groups_task_waits_one_turn_behind_a_noisy_backlog(
    tasks: ModuleType, queue: RedisQueue, fair_workers: Workers
) -> None:
    noisy = tasks.record.using(group="noisy")
    dispatch_many([noisy.pending(f"noisy{n}") for n in range(500)])
    tasks.record.using(group="quiet").dispatch("quiet")
    code, output = fair_workers.run(QUEUE, "-A", "fair_tasks", "--stop-when-empty")
    assert code == 0, output
    assert strings(queue.client, ORDER).index("quiet") == 1  # after one noisy turn


def test_a_group_from_the_calls_arguments(tasks: ModuleType, queue: RedisQueue) -> None:
    for tenant, label in (("x", "x1"), ("x", "x2"), ("y", "y1")):
        tasks.by_tenant.dispatch(tenant, label)
    dispatch_many([tasks.by_tenant.pending("x", "x3"), tasks.by_tenant.pending("z", "z1")])
    assert labels(queue.reserve(QUEUE, 5, **RESERVE).payloads) == ["x1", "y1", "z1", "x2", "x3"]


def test_delayed_released_and_retried_tasks_keep_their_group(
    tasks: ModuleType, queue: RedisQueue, fair_workers: Workers
) -> None:
    for label in ("a1", "a2"):
        tasks.record.using(group="a").dispatch(label)
    tasks.record.using(group="b").later(0.05, "b1")
    wait_for(lambda: queue.migrate(QUEUE).moved, message="the delayed task due")
    first = queue.reserve(QUEUE, 2, **RESERVE).payloads
    assert labels(first) == ["a1", "b1"]
    queue.release(QUEUE, first, unstarted=True)  # a stopping worker gives them back
    assert labels(queue.reserve(QUEUE, 3, **RESERVE).payloads) == ["a1", "b1", "a2"]
    tasks.doomed.using(group="c").dispatch("c1")
    code, output = fair_workers.run(QUEUE, "-A", "fair_tasks", "--stop-when-empty")
    assert code == 0, output
    assert FailedTasks(queue).retry_all([QUEUE]) == 1
    assert queue.client.llen(queue.keys(QUEUE).group("c")) == 1
    assert queue.sizes([QUEUE])[0].groups == 1


def test_size_clear_and_cancel_know_the_groups(tasks: ModuleType, queue: RedisQueue) -> None:
    tasks.record.using(group="a").dispatch("a1")
    cancelled = tasks.record.using(group="a").dispatch("a2")
    tasks.record.using(group="b").dispatch("b1")
    tasks.record.dispatch("plain")
    assert cancelled.cancel()
    size = queue.sizes([QUEUE])[0]
    assert (size.ready, size.groups) == (3, 2)
    shown = cli(queue.config, "size", QUEUE)
    assert "groups 2" in shown.stdout, shown.stdout + shown.stderr
    taken = queue.reserve(QUEUE, 2, **RESERVE).payloads
    assert labels(taken) == ["a1", "b1"]  # the cancelled one dropped
    queue.ack(QUEUE, taken)
    tasks.record.using(group="d").dispatch("d1")
    assert queue.clear(QUEUE) == 3  # a2 (cancelled, still listed), plain and d1
    assert queue.sizes([QUEUE])[0].ready == 0
    keys = queue.keys(QUEUE)
    assert queue.client.exists(keys.turns, keys.group("d"), *keys.levels) == 0


def test_the_dashboards_ready_list_shows_the_groups_tasks(
    tasks: ModuleType, queue: RedisQueue
) -> None:
    tasks.record.using(priority=0).dispatch("first")
    tasks.record.dispatch("plain")
    for label in ("a1", "a2", "b1"):
        tasks.record.using(group=label[0]).dispatch(label)
    tasks.record.using(priority=9).dispatch("last")
    window = browse.ready(queue, QUEUE, 1, 10)
    assert window.total == 6
    shown = [decode(entry.payload).args[0] for entry in window.entries]
    assert shown == ["plain", "a1", "a2", "b1", "last"]  # level 5, its groups by turn


def test_the_oldest_wait_counts_the_groups_heads(tasks: ModuleType, queue: RedisQueue) -> None:
    tasks.record.using(group="a").dispatch("alone")
    assert oldest_wait(queue, QUEUE, now=time.time() + 60) >= 60  # the dashboard's figure


def test_a_payload_with_a_group_no_dispatch_gives_is_plain(
    tasks: ModuleType, queue: RedisQueue
) -> None:
    keys = queue.keys(QUEUE)
    tasks.record.using(group="a").later(60, "marks the queue")  # groups in use
    for forged in ("", "x" * 201):
        job = tasks.record.make_job((forged or "empty",), {})
        job.meta["group"] = forged
        queue.client.zadd(keys.delayed, {queue._signed(QUEUE, [encode(job)])[0]: 0})
    assert queue.migrate(QUEUE).moved == 2
    assert queue.client.llen(keys.ready) == 2  # the plain list's, not a key of their own
    taken = labels(queue.reserve(QUEUE, 5, **RESERVE).payloads)
    assert sorted(taken) == ["empty", "x" * 201]  # due at once: in the delayed set's order


def test_a_worker_limits_each_groups_concurrency(
    tasks: ModuleType, queue: RedisQueue, fair_workers: Workers
) -> None:
    fair_workers.start(
        QUEUE, "-A", "fair_tasks", "--threads", "4", "--prefetch", "1", "--group-concurrency", "1"
    )
    try:
        # a1 first, and the others once it holds its group's slot: which of a1 and a2
        # took the slot first was a race between two threads, and a test that waited for
        # a1 while a2 held the slot waited for ever
        dispatch_by_group(tasks.held, "a1")
        wait_for(lambda: "start-a1" in strings(queue.client, ORDER), message="a1 started")
        dispatch_by_group(tasks.held, "a2", "a3", "b1")
        wait_for(lambda: "start-b1" in strings(queue.client, ORDER), message="b1 started")
        wait_for(lambda: queue.sizes([QUEUE])[0].delayed == 2, message="a2 and a3 parked")
        queue.client.rpush(GO, *["go"] * 4)
        try:
            wait_for(lambda: len(strings(queue.client, ORDER)) == 8, timeout=60)
        except AssertionError:
            size = queue.sizes([QUEUE])[0]
            state = (strings(queue.client, ORDER), size, queue.client.llen(GO))
            raise AssertionError(f"not all ran: order, size, tokens left: {state}") from None
    finally:
        fair_workers.kill_all()
    running: set[str] = set()
    for entry in strings(queue.client, ORDER):  # never two of group a at once
        edge, label = entry.split("-")
        if edge == "start":
            assert not any(r.startswith(label[0]) for r in running), entry
            running.add(label)
        else:
            running.discard(label)
    assert FailedTasks(queue).list([QUEUE]) == []


def test_a_worker_limits_each_groups_rate(
    tasks: ModuleType, queue: RedisQueue, fair_workers: Workers
) -> None:
    dispatch_by_group(tasks.record, "a1", "a2", "a3", "b1")
    fair_workers.start(QUEUE, "-A", "fair_tasks", "--group-rate", "1/m")
    try:
        wait_for(
            lambda: (
                sorted(strings(queue.client, ORDER)) == ["a1", "b1"]
                and queue.sizes([QUEUE])[0].delayed == 2
            ),
            message="one of each group ran, the other two of a wait for their turn",
        )
    finally:
        fair_workers.kill_all()


@pytest.mark.parametrize("group", ["", "x" * 201, "tab\there", 1.5, True, b"a"])
def test_a_group_a_dispatch_cannot_carry_is_refused_naming_the_option(
    tasks: ModuleType, group: object
) -> None:
    with pytest.raises(InvalidTaskOption, match="group"):
        tasks.record.using(group=group)


def test_a_group_callable_returning_a_bad_name_is_refused(tasks: ModuleType) -> None:
    with pytest.raises(InvalidTaskOption, match="group= callable returned"):
        tasks.by_tenant.dispatch("", "label")


def test_a_call_with_a_group_and_a_priority_runs_at_its_level(
    tasks: ModuleType, queue: RedisQueue
) -> None:
    tasks.record.using(group="a").dispatch("a1")
    tasks.record.using(group="b", priority=1).dispatch("urgent")
    taken = queue.reserve(QUEUE, 2, **RESERVE).payloads
    assert labels(taken) == ["urgent", "a1"]
    assert decode(taken[0]).meta["group"] == "b"  # its group's limits still apply


@pytest.mark.parametrize(
    ("option", "value"), [("--group-concurrency", "0"), ("--group-rate", "ten/s")]
)
def test_group_limits_out_of_range_name_the_option(config: Config, option: str, value: str) -> None:
    result = cli(config, "work", QUEUE, option, value)
    assert result.returncode == 2
    assert option in result.stderr, result.stderr
