"""Schedules through the Python API and the scheduler tick, in this process (fast)."""

from __future__ import annotations

import itertools
import math
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import apptasks
import pytest
from support import ready

from rqueue import schedules
from rqueue.encoding.payload import decode
from rqueue.errors import InvalidSchedule, TaskNotRegistered, UnserializableArgument
from rqueue.schedules.api import ScheduleExists, ScheduleNotFound, Schedules
from rqueue.schedules.scheduler import CATCH_UP_LIMIT, PRECISE_WAIT, Due, Scheduler, trigger_id
from rqueue.store.keys import QueueKeys
from rqueue.store.queue import RedisQueue

UTC = timezone.utc


def redis_now(queue: RedisQueue) -> int:
    return Schedules(queue).now_ms()


def ready_jobs(queue: RedisQueue, name: str = "default") -> list[Any]:
    return [decode(p) for p in ready(queue, name)]


@pytest.mark.topology
def test_add_stores_the_schedule_beside_its_queue(queue: RedisQueue) -> None:
    added = schedules.add("cleanup", apptasks.scheduled, every=timedelta(minutes=5), args=(7,))
    client, default = queue.client, queue.keys("default")
    assert client.type(default.schedules) == b"zset"
    assert client.type(default.schedule_defs) == b"hash"
    assert client.hgetall(queue.global_keys.schedule_index) == {b"cleanup": b"default"}
    assert client.zscore(default.schedules, "cleanup") == added.next_ms
    assert added.next_ms == added.created_ms + 300_000
    assert schedules.get("cleanup").args == (7,)
    runs = schedules.get("cleanup").next_runs(3)
    assert [(b - a).total_seconds() for a, b in itertools.pairwise(runs)] == [300, 300]


def test_cluster_keys_share_the_queue_hash_slot() -> None:
    keys = QueueKeys.for_queue("emails", cluster=True)
    assert keys.schedules == "queues:{emails}:schedules"
    assert keys.schedule_defs == "queues:{emails}:schedule-defs"
    assert keys.ready == "queues:{emails}"


@pytest.mark.topology
@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"cron": "not a cron"}, InvalidSchedule, "invalid cron expression"),
        (
            {"cron": "0 3 * * *", "timezone": "Europe/Atlantis"},
            InvalidSchedule,
            "unknown time zone",
        ),
        (
            {
                "every": 60,
                "start": datetime(2027, 6, 1, tzinfo=UTC),
                "end": datetime(2027, 1, 1, tzinfo=UTC),
            },
            InvalidSchedule,
            "before start",
        ),
        ({"every": 60, "start": datetime(2027, 6, 1)}, InvalidSchedule, "naive"),
        ({"every": 60, "misfire": "sometimes"}, InvalidSchedule, "misfire"),
        # These three raised ValueError, OverflowError and a msgpack overflow:
        ({"every": 60, "misfire_grace": math.nan}, InvalidSchedule, "misfire_grace must be"),
        ({"every": 60, "misfire_grace": math.inf}, InvalidSchedule, "misfire_grace must be"),
        ({"every": 60, "misfire_grace": 1e300}, InvalidSchedule, "misfire_grace must be"),
        ({"every": 1e300}, InvalidSchedule, "every= must be from 1 second to ten years"),
        ({"every": 60, "args": (object(),)}, UnserializableArgument, "args\\[0\\]"),
        ({}, InvalidSchedule, "exactly one of"),
    ],
)
def test_bad_definitions_are_refused_and_nothing_is_stored(
    queue: RedisQueue, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        schedules.add("bad", apptasks.scheduled, **options)
    assert queue.client.keys("*") == []


def test_a_retry_until_that_is_not_a_length_of_time_is_refused(queue: RedisQueue) -> None:
    for until in (datetime(2030, 1, 1, tzinfo=timezone.utc), lambda: 60):
        with pytest.raises(InvalidSchedule, match=r"retry_until .* not a moment or a callable"):
            schedules.add("bad", apptasks.scheduled.using(retry_until=until), every=60)
    assert queue.client.keys("*") == []


def test_a_declared_schedule_follows_its_task_s_options_in_the_code(queue: RedisQueue) -> None:
    """Only a change of timing reached a declared schedule: keep_result added to the
    task in the code stayed out of its runs."""
    found = Schedules(queue)
    found.declare(apptasks.scheduled, None, 60, "UTC")
    assert found.get(apptasks.scheduled.name).keep_ms == 0
    found.declare(apptasks.scheduled.using(keep_result=30, max_exceptions=3), None, 60, "UTC")
    declared = found.get(apptasks.scheduled.name)
    assert (declared.keep_ms, declared.max_exceptions, declared.declared) == (30_000, 3, True)
    assert (declared.every_ms, declared.timezone) == (60_000, "UTC")
    stored = found.store.get(apptasks.scheduled.name)
    found.declare(apptasks.scheduled.using(keep_result=30, max_exceptions=3), None, 60, "UTC")
    assert found.store.get(apptasks.scheduled.name) == stored  # the same code: no rewrite


@pytest.mark.topology
def test_unknown_task_is_refused_and_nothing_is_stored(queue: RedisQueue) -> None:
    with pytest.raises(TaskNotRegistered, match="no task of that name"):
        schedules.add("bad", "apptasks:no_such_task", every=60)
    with pytest.raises(TaskNotRegistered):
        schedules.add("bad", "no_such_module_xyz:task", every=60)
    assert queue.client.keys("*") == []


@pytest.mark.topology
def test_duplicate_name_is_refused(queue: RedisQueue) -> None:
    schedules.add("once", apptasks.scheduled, every=60, args=("a",))
    with pytest.raises(ScheduleExists):
        schedules.add("once", apptasks.scheduled, every=30, args=("b",))
    assert schedules.get("once").every_ms == 60_000


@pytest.mark.topology
def test_bad_update_changes_nothing(queue: RedisQueue) -> None:
    schedules.add("keep", apptasks.scheduled, cron="*/5 * * * *", args=("a",))
    default = queue.keys("default")

    def stored() -> tuple[Any, Any]:
        client = queue.client
        return client.hget(default.schedule_defs, "keep"), client.zscore(default.schedules, "keep")

    before = stored()
    for changes in (
        {"cron": "0 25 * * *"},
        {"timezone": "Nowhere/Else"},
        {"end": datetime(2000, 1, 1, tzinfo=UTC), "start": datetime(2001, 1, 1, tzinfo=UTC)},
        {"task": "apptasks:missing"},
        {"colour": "red"},
    ):
        with pytest.raises((InvalidSchedule, TaskNotRegistered)):
            schedules.update("keep", **changes)
    assert stored() == before
    with pytest.raises(ScheduleNotFound):
        schedules.update("nope", cron="* * * * *")


@pytest.mark.topology
def test_update_pause_resume_remove(queue: RedisQueue) -> None:
    schedules.add("s", apptasks.scheduled, every=3600, args=("a",))
    updated = schedules.update("s", cron="*/10 * * * * *", args=("b",))
    assert updated.cron == "*/10 * * * * *" and updated.every_ms is None
    assert updated.next_ms is not None and updated.next_ms % 10_000 == 0
    default = queue.keys("default")
    assert queue.client.lrange(default.timer, 0, -1)  # wakes a blocked parent
    paused = schedules.pause("s")
    assert paused.paused and paused.next_ms is None
    assert queue.client.zscore(default.schedules, "s") is None
    resumed = schedules.resume("s")
    assert not resumed.paused and resumed.next_ms is not None
    schedules.remove("s")
    assert queue.client.keys("*schedule*") == []
    with pytest.raises(ScheduleNotFound):
        schedules.get("s")


DAY_AGO = datetime.now(UTC) - timedelta(days=1)  # a start in the past anchors intervals


def due_now(queue: RedisQueue, name: str, ago_ms: int = 0) -> int:
    """Move a schedule's next fire time into the past, as if workers had been down."""
    when = redis_now(queue) - ago_ms
    schedule = schedules.get(name)
    aligned = schedule.timing.next_after(when - 1 - (schedule.every_ms or 1000))
    assert aligned is not None
    queue.client.zadd(queue.keys("default").schedules, {name: aligned})
    return aligned


@pytest.mark.topology
def test_a_prioritised_task_s_runs_go_to_its_level(queue: RedisQueue) -> None:
    schedules.add("urgent", apptasks.scheduled.using(priority=0), every=1, args=("x",))
    trigger = due_now(queue, "urgent")
    definition = queue.client.hget(queue.keys("default").schedule_defs, "urgent")
    Scheduler(queue, ["default"])._fire(
        [Due("default", b"urgent", trigger, redis_now(queue), definition)]
    )
    schedules.run_now("urgent")
    assert queue.sizes(["default"])[0].levels == (2, 0, 0, 0, 0, 0, 0, 0, 0, 0)


@pytest.mark.topology
def test_fire_enqueues_each_trigger_once_with_deterministic_id_and_meta(queue: RedisQueue) -> None:
    schedules.add("tick", apptasks.scheduled, every=1, args=("x",))
    trigger = due_now(queue, "tick")
    first, second = Scheduler(queue, ["default"]), Scheduler(queue, ["default"])
    definition = queue.client.hget(queue.keys("default").schedule_defs, "tick")
    first._fire([Due("default", b"tick", trigger, redis_now(queue), definition)])
    # It read the same score: its compare-and-set fails.
    second._fire([Due("default", b"tick", trigger, redis_now(queue), definition)])
    jobs = ready_jobs(queue)
    assert len(jobs) == 1
    assert jobs[0].id == trigger_id("tick", trigger)
    assert jobs[0].meta["schedule"] == "tick" and jobs[0].meta["trigger_ms"] == trigger
    assert jobs[0].meta["trigger"].endswith("Z") and jobs[0].args == ("x",)
    assert schedules.get("tick").last_ms == trigger
    assert queue.client.sismember(queue.keys("default").pending_ids, bytes.fromhex(jobs[0].id))


@pytest.mark.topology
def test_tick_returns_time_until_the_next_schedule(queue: RedisQueue) -> None:
    scheduler = Scheduler(queue, ["default"])
    assert scheduler.tick() >= 59  # nothing scheduled: the parent's own cap applies
    schedules.add("later", apptasks.scheduled, every=30, args=("x",))
    assert 25 < scheduler.tick() <= 30 - PRECISE_WAIT  # wakes early, sleeps the rest precisely
    assert Scheduler(queue, ["default"], enabled=False).tick() == 60.0


@pytest.mark.topology
def test_misfire_skip_fires_once_for_an_outage(queue: RedisQueue) -> None:
    schedules.add("skip", apptasks.scheduled, every=60, start=DAY_AGO, args=("x",), misfire_grace=5)
    missed_from = due_now(queue, "skip", ago_ms=3600_000)
    Scheduler(queue, ["default"]).tick()
    triggers = [j.meta["trigger_ms"] for j in ready_jobs(queue)]
    # one run stands for the hour of missed triggers; a trigger inside the grace is on time
    assert triggers[0] == missed_from and len(triggers) <= 2
    assert all(t >= redis_now(queue) - 5000 - 1000 for t in triggers[1:])
    assert schedules.get("skip").next_ms > redis_now(queue)  # type: ignore[operator]


@pytest.mark.topology
def test_misfire_all_fires_each_missed_trigger_up_to_the_limit(queue: RedisQueue) -> None:
    schedules.add(
        "few",
        apptasks.scheduled,
        every=60,
        start=DAY_AGO,
        args=("x",),
        misfire="all",
        misfire_grace=5,
    )
    start = due_now(queue, "few", ago_ms=10 * 60_000)
    Scheduler(queue, ["default"]).tick()
    triggers = [j.meta["trigger_ms"] for j in ready_jobs(queue)]
    assert triggers == list(range(start, start + 60_000 * len(triggers), 60_000))
    assert 10 <= len(triggers) <= 11
    queue.client.delete(queue.keys("default").ready)
    schedules.add(
        "many",
        apptasks.scheduled,
        every=60,
        start=DAY_AGO,
        args=("y",),
        misfire="all",
        misfire_grace=5,
    )
    due_now(queue, "many", ago_ms=5 * 3600_000)  # 300 missed triggers
    Scheduler(queue, ["default"]).tick()
    late = [j for j in ready_jobs(queue) if j.meta["trigger_ms"] < redis_now(queue) - 5000]
    assert len(late) == CATCH_UP_LIMIT
    assert schedules.get("many").next_ms > redis_now(queue)  # type: ignore[operator]


@pytest.mark.topology
def test_late_triggers_within_the_grace_all_fire(queue: RedisQueue) -> None:
    schedules.add(
        "grace", apptasks.scheduled, every=1, start=DAY_AGO, args=("x",), misfire_grace=60
    )
    start = due_now(queue, "grace", ago_ms=5000)
    Scheduler(queue, ["default"]).tick()
    triggers = [j.meta["trigger_ms"] for j in ready_jobs(queue)]
    assert triggers[:5] == [start + 1000 * k for k in range(5)]


@pytest.mark.topology
def test_window_end_marks_the_schedule_finished(queue: RedisQueue) -> None:
    now = redis_now(queue)
    schedules.add(
        "short",
        apptasks.scheduled,
        every=1,
        args=("x",),
        start=datetime.fromtimestamp((now - 2000) / 1000, UTC),
        end=datetime.fromtimestamp((now - 1000) / 1000, UTC),
    )
    added = schedules.get("short")
    assert added.finished and added.next_ms is None  # its window is already over
    assert Scheduler(queue, ["default"]).tick() >= 59 and ready_jobs(queue) == []


@pytest.mark.topology
def test_no_local_clock_is_consulted(queue: RedisQueue, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding and firing read Redis TIME only: a wrong local clock cannot matter."""

    def no_clock(*args: Any) -> float:
        raise AssertionError("the local wall clock was read")

    monkeypatch.setattr(time, "time", no_clock)
    monkeypatch.setattr(time, "time_ns", no_clock)
    schedules.add("clockless", apptasks.scheduled, every=1, args=("x",))
    trigger = due_now(queue, "clockless")
    Scheduler(queue, ["default"]).tick()
    monkeypatch.undo()
    assert [j.meta["trigger_ms"] for j in ready_jobs(queue)] == [trigger]


@pytest.mark.topology
def test_run_now_enqueues_outside_the_timeline(queue: RedisQueue) -> None:
    added = schedules.add("manual", apptasks.scheduled, every=3600, args=("m",))
    task_id = schedules.run_now("manual")
    [job] = ready_jobs(queue)
    assert job.id == task_id and job.meta["manual"] is True and job.meta["schedule"] == "manual"
    assert schedules.get("manual").next_ms == added.next_ms
    with pytest.raises(ScheduleNotFound):
        schedules.run_now("absent")


@pytest.mark.topology
def test_declared_cron_is_created_once_by_workers_of_its_queue(queue: RedisQueue) -> None:
    Scheduler(queue, ["default"]).tick()
    with pytest.raises(ScheduleNotFound):
        schedules.get(apptasks.declared_every_two_seconds.name)
    Scheduler(queue, ["declared"]).tick()
    Scheduler(queue, ["declared"]).tick()
    declared = schedules.get(apptasks.declared_every_two_seconds.name)
    assert declared.declared and declared.cron == "*/2 * * * * *"
    assert declared.timezone == "Europe/Berlin" and declared.queue == "declared"
    assert len(schedules.list()) == 1


def test_declaring_a_bad_cron_fails_at_import() -> None:
    from rqueue import task

    with pytest.raises(InvalidSchedule):

        @task(cron="every day")
        def broken() -> None: ...


@pytest.mark.topology
def test_the_schedules_doc_example_runs(queue: RedisQueue, tmp_path: Any) -> None:
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).parents[3]
    text = (root / "docs" / "schedules.md").read_text()
    [code] = re.findall(r"^```python runnable\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    (tmp_path / "manage.py").write_text(code)
    url = queue.config.redis_url
    done = subprocess.run(
        [sys.executable, "manage.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "", "REDIS_URL": url, "PYTHONPATH": str(root)},
    )
    assert done.returncode == 0, done.stderr
    assert "2027-01-01 00:00" in done.stdout and "CancelOutcome.CANCELLED" in done.stdout
    assert schedules.list() == []


@pytest.mark.parametrize(
    "name", ["fire_schedules", "save_schedules", "claim_names", "remove_schedule", "cancel"]
)
def test_new_scripts_document_themselves_and_take_every_key_in_keys(name: str) -> None:
    from rqueue.store.scripts import Scripts

    source = getattr(Scripts(), name).source
    header = "\n".join(line for line in source.splitlines() if line.startswith("--"))
    for part in ("KEYS[1]", "ARGV[1]", "Returns", "Invariant"):
        assert part in header
    assert "redis.call('KEYS'" not in source and ".. ':" not in source  # no names built in Lua


@pytest.mark.parametrize("garbage", [b"\xc1", b"\x93\x01\x02\x03", b"\x81\xa4args\xc3"])
def test_a_definition_that_does_not_decode_is_listed_as_unreadable(
    queue: RedisQueue, garbage: bytes
) -> None:
    schedules.add("keep", apptasks.scheduled, every=60)
    default = queue.keys("default")
    queue.client.hset(default.schedule_defs, "junk", garbage)
    queue.client.hset(queue.global_keys.schedule_index, "junk", "default")
    listed = schedules.list()
    assert [(s.name, s.unreadable is None) for s in listed] == [("junk", False), ("keep", True)]
    assert listed[0].state.startswith("unreadable (") and listed[0].queue == "default"
    with pytest.raises(InvalidSchedule, match="unreadable"):
        schedules.get("junk")
