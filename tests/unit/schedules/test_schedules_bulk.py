"""Schedules in bulk: ``add_many``, and a tick firing a queue's due schedules in one
script call, each still a compare-and-set of its own (#30)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import apptasks
import pytest
from support import ready

from rqueue import schedules
from rqueue.encoding.payload import decode
from rqueue.errors import InvalidQueueName, InvalidSchedule, TaskNotRegistered
from rqueue.schedules.api import ScheduleExists, Schedules
from rqueue.schedules.record import Schedule
from rqueue.schedules.scheduler import Scheduler, trigger_id
from rqueue.store import schedule_store
from rqueue.store.queue import RedisQueue

HOURLY = 3600
DAY_AGO = datetime.now(timezone.utc) - timedelta(days=1)  # anchors every schedule alike
QUEUES = ("default", "reports", "emails")


def entry(i: int, **options: Any) -> dict[str, Any]:
    return {
        "name": f"s{i}",
        "task": apptasks.scheduled,
        "every": HOURLY,
        "start": DAY_AGO,
        "args": (f"a{i}",),
        "queue": QUEUES[i % len(QUEUES)],
        **options,
    }


def stored_names(queue: RedisQueue) -> set[str]:
    index = queue.client.hkeys(queue.global_keys.schedule_index)
    defined = {
        name.decode()
        for q in QUEUES
        for name in queue.client.hkeys(queue.keys(q).schedule_defs)
        + queue.client.zrange(queue.keys(q).schedules, 0, -1)
    }
    return {name.decode() for name in index} | defined


def make_due(queue: RedisQueue, names: list[str]) -> int:
    """Move schedules' next fire time to their trigger of the last hour, as if due."""
    now = Schedules(queue).now_ms()
    aligned = schedules.get(names[0]).timing.next_after(now - 1 - HOURLY * 1000)
    assert aligned is not None and aligned <= now
    for name in names:
        queue.client.zadd(queue.keys(schedules.get(name).queue).schedules, {name: aligned})
    return aligned


def fired(queue: RedisQueue) -> list[Any]:
    return [decode(p) for q in QUEUES for p in ready(queue, q)]


def anonymous(schedule: Schedule) -> Schedule:
    """All but what tells these schedules apart (and when each was made)."""
    return replace(schedule, name="", args=(), queue="", created_ms=0)


@pytest.mark.topology
def test_many_added_in_bulk_all_exist_and_fire_as_those_added_one_by_one(
    queue: RedisQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small chunks, so these few cross every boundary: calls, round trips, queues.
    monkeypatch.setattr(schedule_store, "SAVE_CHUNK", 4)
    monkeypatch.setattr(schedule_store, "PIPELINED", 12)
    count = 60
    added = schedules.add_many(entry(i) for i in range(count))
    one = schedules.add("one", apptasks.scheduled, every=HOURLY, start=DAY_AGO, args=("a",))
    assert [s.name for s in added] == [f"s{i}" for i in range(count)]
    assert stored_names(queue) == {f"s{i}" for i in range(count)} | {"one"}
    listed = {s.name: s for s in schedules.list()}
    for schedule in added:
        assert listed[schedule.name] == schedule  # what add_many returned is what is stored
        assert listed[schedule.name].queue == QUEUES[int(schedule.name[1:]) % len(QUEUES)]
        assert listed[schedule.name].next_ms == one.next_ms
        assert anonymous(schedule) == anonymous(one)
    names = [f"s{i}" for i in range(count)]
    trigger = make_due(queue, [*names, "one"])
    Scheduler(queue, list(QUEUES)).tick()
    jobs = {job.meta["schedule"]: job for job in fired(queue)}
    assert len(fired(queue)) == count + 1 and set(jobs) == {*names, "one"}
    for name in names:
        assert (
            jobs[name].id == trigger_id(name, trigger) and jobs[name].meta["trigger_ms"] == trigger
        )
        assert jobs[name].args == (f"a{name[1:]}",)
        assert (jobs[name].task, jobs[name].tries) == (jobs["one"].task, jobs["one"].tries)


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        ({"cron": "not a cron", "every": None}, InvalidSchedule, "entry 7 ('s7'): invalid cron"),
        ({"task": "nowhere:missing"}, TaskNotRegistered, "entry 7 ('s7'): "),
        ({"queue": "bad queue\n"}, InvalidQueueName, "entry 7 ('s7'): "),
        ({"misfire": "sometimes"}, InvalidSchedule, "entry 7 ('s7'): misfire must be"),
        ({"evry": 5}, InvalidSchedule, "entry 7: "),
        ({"name": ""}, InvalidSchedule, "entry 7 (''): invalid schedule name"),
    ],
)
def test_a_bad_entry_is_refused_naming_it_and_nothing_is_stored(
    queue: RedisQueue, bad: dict[str, Any], error: type[Exception], message: str
) -> None:
    entries = [entry(i) for i in range(10)]
    entries[7] = {**entries[7], **bad}
    with pytest.raises(error) as raised:
        schedules.add_many(entries)
    assert str(raised.value).startswith(message)
    assert stored_names(queue) == set()


@pytest.mark.topology
def test_a_name_taken_or_given_twice_is_refused_and_nothing_is_stored(
    queue: RedisQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schedule_store, "SAVE_CHUNK", 2)  # claims in calls and round
    monkeypatch.setattr(schedule_store, "PIPELINED", 4)  # trips before and after s3's
    schedules.add("s3", apptasks.scheduled, every=60, args=("kept",))
    with pytest.raises(ScheduleExists, match="a schedule named 's3' exists already; use update"):
        schedules.add_many([entry(i) for i in range(10)])
    assert stored_names(queue) == {"s3"} and schedules.get("s3").args == ("kept",)
    with pytest.raises(ScheduleExists, match="schedule names given twice: 's1'"):
        schedules.add_many([entry(1), entry(2), entry(1)])
    assert stored_names(queue) == {"s3"}
    assert schedules.add_many([]) == []


def test_a_tick_fires_a_queue_s_due_schedules_in_one_script_call(queue: RedisQueue) -> None:
    schedules.add_many(entry(i, queue="default") for i in range(30))
    make_due(queue, [f"s{i}" for i in range(30)])
    queue.client.config_resetstat()
    Scheduler(queue, ["default"]).tick()
    assert len(fired(queue)) == 30
    calls = {
        name: stats["calls"]
        for name, stats in queue.client.info("commandstats").items()
        if name in ("cmdstat_evalsha", "cmdstat_hget", "cmdstat_hmget")
    }
    # Three reads (of 1, 8 and 64 entries) and three fires (of 1, 8 and 21 schedules):
    # one earliest_schedules.lua and one fire_schedules.lua each. The HGETs are the
    # scripts': each read's of the due definitions, each fire's compare-and-set.
    assert calls == {"cmdstat_evalsha": 6, "cmdstat_hget": 60}


def test_each_schedule_of_a_call_is_its_own_compare_and_set(
    queue: RedisQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    schedules.add_many(entry(i, queue="default") for i in range(5))
    make_due(queue, [f"s{i}" for i in range(5)])
    scheduler = Scheduler(queue, ["default"])
    fire = scheduler.store.fire

    def changed_meanwhile(firings: Any) -> list[bool]:
        schedules.pause("s2")  # after the scheduler read it, before its call
        return fire(firings)

    monkeypatch.setattr(scheduler.store, "fire", changed_meanwhile)
    scheduler._reads["default"] = 10  # all five in one read, so in one call
    scheduler.tick()
    assert sorted(job.meta["schedule"] for job in fired(queue)) == ["s0", "s1", "s3", "s4"]
    assert schedules.get("s2").paused and schedules.get("s2").last_ms is None
