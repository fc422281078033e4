"""Firings planned ahead of their trigger (#30): built before it, sent at it, and still
never early by Redis's clock, never from a stale read, never past what a tick at that
time would fire."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import apptasks
import pytest
from support import ready

from rqueue import schedules
from rqueue.encoding.payload import decode
from rqueue.schedules import scheduler as scheduler_module
from rqueue.schedules.api import Schedules
from rqueue.schedules.scheduler import Scheduler, trigger_id
from rqueue.store.queue import RedisQueue

LEAD_MS = 1500
"""How far ahead the trigger lies when a test adds its schedules: time to plan them
on a busy machine, with PLAN_AHEAD raised to take them in."""


@pytest.fixture(autouse=True)
def plan_far_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_module, "PLAN_AHEAD", 10.0)


def jobs(queue: RedisQueue) -> list[Any]:
    return [decode(p) for p in ready(queue)]


def add_due_soon(queue: RedisQueue, names: list[str], **options: Any) -> int:
    """Schedules every minute whose first trigger is LEAD_MS ahead; that trigger."""
    trigger = Schedules(queue).now_ms() + LEAD_MS
    start = datetime.fromtimestamp(trigger / 1000, timezone.utc)
    schedules.add_many(
        {"name": name, "task": apptasks.scheduled, "every": 60, "start": start, **options}
        for name in names
    )
    return trigger


def run_parent(queue: RedisQueue, scheduler: Scheduler, done: Callable[[], bool]) -> None:
    """Tick as a worker parent does, blocked on the timer list between ticks, until
    ``done()``; bounded."""
    deadline = time.monotonic() + 10 + LEAD_MS / 1000
    while not done():
        assert time.monotonic() < deadline, "not done in time"
        wait = scheduler.tick()
        if wait > 0 and not done():
            queue.client.blpop([queue.keys("default").timer], timeout=wait)


@pytest.mark.topology
def test_a_burst_is_planned_ahead_and_fired_at_its_trigger_each_once(queue: RedisQueue) -> None:
    names = [f"b{i}" for i in range(30)]
    trigger = add_due_soon(queue, names)
    scheduler = Scheduler(queue, ["default"])
    scheduler.tick()
    assert scheduler._plan and jobs(queue) == []  # planned, not fired before its time
    run_parent(queue, scheduler, lambda: len(ready(queue)) >= 30)
    fired = jobs(queue)
    assert sorted(job.meta["schedule"] for job in fired) == sorted(names)
    assert {job.id for job in fired} == {trigger_id(name, trigger) for name in names}
    # A planned run is dispatched at its trigger, as a tick there would have been.
    assert {job.dispatched_at for job in fired} == {trigger / 1000}
    assert all(schedules.get(name).last_ms == trigger for name in names)


@pytest.mark.topology
def test_a_planned_firing_sent_early_by_a_fast_clock_waits_for_redis_time(
    queue: RedisQueue,
) -> None:
    trigger = add_due_soon(queue, ["soon"])
    scheduler = Scheduler(queue, ["default"])
    scheduler.tick()
    plan = scheduler._plan
    # This worker's clock runs ahead: the plan comes due at once, by it.
    plan._groups = [group._replace(at=0.0) for group in plan._groups]
    scheduler._tick()
    assert jobs(queue) == [] and schedules.get("soon").last_ms is None
    assert plan and plan.wait() > 0  # kept, due when Redis's clock reaches the trigger
    run_parent(queue, scheduler, lambda: bool(ready(queue)))
    assert [job.id for job in jobs(queue)] == [trigger_id("soon", trigger)]


@pytest.mark.topology
def test_a_schedule_changed_after_it_was_planned_fires_as_changed(queue: RedisQueue) -> None:
    add_due_soon(queue, ["changed", "paused", "removed", "kept"], args=("old",))
    scheduler = Scheduler(queue, ["default"])
    scheduler.tick()
    assert scheduler._plan
    schedules.update("changed", args=("new",))
    schedules.pause("paused")
    schedules.remove("removed")
    run_parent(queue, scheduler, lambda: len(ready(queue)) >= 2 and not scheduler._plan)
    fired = {job.meta["schedule"]: job.args for job in jobs(queue)}
    assert fired == {"changed": ("new",), "kept": ("old",)}
    assert schedules.get("paused").paused and schedules.get("paused").last_ms is None


@pytest.mark.topology
def test_two_parents_planning_one_burst_fire_each_trigger_once(queue: RedisQueue) -> None:
    names = [f"t{i}" for i in range(20)]
    add_due_soon(queue, names)
    first, second = Scheduler(queue, ["default"]), Scheduler(queue, ["default"])
    first.tick()
    second.tick()
    assert first._plan and second._plan
    run_parent(queue, first, lambda: not first._plan)
    run_parent(queue, second, lambda: not second._plan)
    fired = jobs(queue)
    assert len(fired) == 20 and len({job.id for job in fired}) == 20


@pytest.mark.topology
def test_a_planned_firing_sent_past_its_misfire_grace_is_refused(queue: RedisQueue) -> None:
    now = Schedules(queue).now_ms()
    day_ago = datetime.fromtimestamp(now / 1000 - 86_400 + 30, timezone.utc)  # off-beat
    schedules.add("late", apptasks.scheduled, every=60, misfire_grace=1, start=day_ago)
    missed = schedules.get("late").timing.next_after(now - 120_000)
    assert missed is not None and missed <= now - 60_000  # far more than the grace ago
    keys = queue.keys("default")
    queue.client.zadd(keys.schedules, {"late": missed})
    definition = queue.client.hget(keys.schedule_defs, "late")
    scheduler = Scheduler(queue, ["default"])
    # As planned ahead of that trigger by a parent that then stalled past the grace.
    planned = scheduler._planned("default", b"late", missed, definition)
    assert planned is not None and planned.fire_by == missed + 1000
    sent = scheduler.store.send([scheduler.store.prepare([planned])])[0]
    assert sent.won == [False] and sent.early == [] and jobs(queue) == []
    scheduler.tick()  # a tick fires it by its misfire policy: one run for the missed
    fired = jobs(queue)
    assert [job.meta["trigger_ms"] for job in fired] == [missed]
    assert fired[0].dispatched_at * 1000 >= now  # fired by a tick, not the plan


@pytest.mark.topology
def test_while_a_plan_holds_each_tick_plans_only_what_came_into_reach(
    queue: RedisQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_due_soon(queue, ["first"])
    scheduler = Scheduler(queue, ["default"])
    scheduler.tick()
    later = Schedules(queue).now_ms() + 20_000  # out of reach (10 s), then in it (30 s)
    start = datetime.fromtimestamp(later / 1000, timezone.utc)
    schedules.add("later", apptasks.scheduled, every=60, start=start)
    monkeypatch.setattr(scheduler_module, "PLAN_AHEAD", 30.0)
    scheduler._replan_at = 0.0  # its next tick plans again
    scheduler._tick()

    def planned() -> list[bytes]:
        return sorted(f.name for g in scheduler._plan._groups for f in g.prepared.firings)

    assert planned() == [b"first", b"later"]  # each once: "first" is not planned again
    run_parent(queue, scheduler, lambda: bool(ready(queue)))
    assert [job.meta["schedule"] for job in jobs(queue)] == ["first"]
    assert planned() == [b"later"]
