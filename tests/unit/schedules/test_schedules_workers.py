"""Schedules fired by real ``rqueue work`` parents: the race, live changes, outages."""

from __future__ import annotations

import itertools
import os
import signal
from collections import Counter
from datetime import datetime, timedelta, timezone

import apptasks
import pytest
from support import TASKS_DIR, Workers, wait_for

from rqueue import schedules
from rqueue.schedules.api import Schedules
from rqueue.store.queue import RedisQueue

pytestmark = pytest.mark.topology  # every test here runs on Cluster and Sentinel as well

UTC = timezone.utc
SKEWED = str(TASKS_DIR / "skewed_clock")


def now_ms(queue: RedisQueue) -> int:
    return Schedules(queue).now_ms()


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def runs(queue: RedisQueue, name: str) -> list[tuple[int, str]]:
    """(trigger ms, label) of every run of a schedule, in the order they ran."""
    found = []
    for raw in queue.client.lrange(f"test:runs:{name}", 0, -1):
        trigger, _, label = raw.decode().partition(":")
        found.append((int(trigger), label))
    return found


def triggers_ran(queue: RedisQueue) -> Counter[str]:
    return Counter({k.decode(): int(v) for k, v in queue.client.hgetall(apptasks.TRIGGERS).items()})


def skewed(seconds: float) -> dict[str, str]:
    path = os.pathsep.join(p for p in (SKEWED, os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "RQUEUE_TEST_CLOCK_SKEW": str(seconds)}


def test_three_parents_race_on_50_schedules_each_trigger_once(
    queue: RedisQueue, workers: Workers
) -> None:
    """50 schedules every second for 8 s, three parents (two with clocks 30 s off): 400
    triggers, each a race the three parents run."""
    fast = workers.start("--concurrency", "2", "--log-level", "WARNING", env=skewed(30))
    fast.wait_for_children(2, timeout=30)
    apptasks.report_clock.dispatch()
    clock = wait_for(lambda: queue.client.lpop("test:clock"), 20, "the skewed worker's clock")
    assert float(clock) * 1000 - now_ms(queue) > 25_000  # its clock really is 30 s ahead
    slow = workers.start("--concurrency", "2", "--log-level", "WARNING", env=skewed(-30))
    plain = workers.start("--concurrency", "2", "--log-level", "WARNING")
    for worker in (slow, plain):
        worker.wait_for_children(2, timeout=30)

    start = (now_ms(queue) // 1000 + 3) * 1000
    end = start + 7_000  # inclusive: 8 triggers each
    for i in range(50):
        timing = {"cron": "* * * * * *"} if i % 2 else {"every": 1}
        schedules.add(
            f"race-{i}", apptasks.scheduled, args=(f"r{i}",), start=at(start), end=at(end), **timing
        )
    wait_for(lambda: sum(triggers_ran(queue).values()) >= 400, 60, "400 scheduled runs")
    counts = triggers_ran(queue)
    expected = {f"race-{i}@{t}" for i in range(50) for t in range(start, end + 1, 1000)}
    assert set(counts) == expected  # every trigger, nothing outside the window
    assert set(counts.values()) == {1}  # each exactly once
    assert all(s.finished and s.next_ms is None for s in schedules.list())
    print(
        f"race: {len(counts)} triggers, {sum(counts.values())} runs, "
        f"max count {max(counts.values())}"
    )
    for worker in (fast, slow, plain):
        assert worker.process.poll() is None  # none crashed


def test_changes_take_effect_at_the_next_tick_while_workers_run(
    queue: RedisQueue, workers: Workers
) -> None:
    for _ in range(2):
        workers.start("--log-level", "WARNING")
    schedules.add("beat", apptasks.scheduled, cron="* * * * * *", args=("beat",))
    schedules.add("live", apptasks.scheduled, cron="* * * * * *", args=("v1",))

    def beats_after(moment: int, count: int = 2) -> bool:
        """The always-on schedule ran ``count`` triggers after ``moment``: ticks went past it."""
        return sum(1 for t, _ in runs(queue, "beat") if t > moment) >= count

    wait_for(lambda: len(runs(queue, "live")) >= 2, 30, "live schedule running")

    changed = now_ms(queue)
    schedules.update("live", args=("v2",))
    wait_for(lambda: any(label == "v2" for _, label in runs(queue, "live")), 10, "new args")
    assert all(label == "v2" for t, label in runs(queue, "live") if t > changed)

    paused = now_ms(queue)
    schedules.pause("live")
    wait_for(lambda: beats_after(paused), 10, "two ticks after the pause")
    resumed = now_ms(queue)
    schedules.resume("live")
    wait_for(lambda: any(t > resumed for t, _ in runs(queue, "live")), 10, "runs after resume")
    assert not [t for t, _ in runs(queue, "live") if paused < t <= resumed]

    schedules.update("live", every=timedelta(seconds=2))
    retimed = now_ms(queue)
    wait_for(lambda: len([t for t, _ in runs(queue, "live") if t > retimed]) >= 2, 10, "retimed")
    later = sorted(t for t, _ in runs(queue, "live") if t > retimed)
    assert later[1] - later[0] == 2000

    removed = now_ms(queue)
    schedules.remove("live")
    wait_for(lambda: beats_after(removed), 10, "two ticks after the removal")
    assert not [t for t, _ in runs(queue, "live") if t > removed]
    assert set(triggers_ran(queue).values()) == {1}


def test_misfire_policies_after_every_worker_was_stopped(
    queue: RedisQueue, workers: Workers
) -> None:
    start = at(now_ms(queue) - 3_600_000)
    for policy in ("skip", "all"):
        schedules.add(
            policy,
            apptasks.scheduled,
            every=1,
            args=(policy,),
            start=start,
            misfire=policy,
            misfire_grace=1,
        )
    first = workers.start("--log-level", "WARNING")
    wait_for(lambda: runs(queue, "skip") and runs(queue, "all"), 30, "both schedules running")
    first.signal(signal.SIGTERM)
    assert first.wait(20) == 0
    down = now_ms(queue)
    last_fired = schedules.get("skip").last_ms
    assert last_fired is not None
    wait_for(lambda: now_ms(queue) > down + 4000, 10, "an outage of four seconds")
    up = now_ms(queue)
    workers.start("--log-level", "WARNING")
    wait_for(
        lambda: (
            any(t > up for t, _ in runs(queue, "skip"))
            and any(t > up for t, _ in runs(queue, "all"))
        ),
        30,
        "runs after the restart",
    )

    every = sorted(t for t, _ in runs(queue, "all"))
    assert every == list(range(every[0], every[-1] + 1, 1000))  # all: nothing missed
    after = sorted(t for t, _ in runs(queue, "skip") if t > last_fired)
    # skip: one run for the whole outage, carrying its first missed trigger ...
    assert after[0] == last_fired + 1000
    assert after[1] - after[0] >= 2000  # ... the other missed ones skipped ...
    assert [b - a for a, b in itertools.pairwise(after[1:])] == [1000] * (len(after) - 2)
    assert set(triggers_ran(queue).values()) == {1}


def test_a_cron_declared_on_a_task_is_fired_by_a_worker_importing_it(
    queue: RedisQueue, workers: Workers
) -> None:
    workers.start("declared", "-A", "apptasks", "--log-level", "WARNING")
    wait_for(lambda: queue.client.llen("test:declared") >= 2, 30, "declared schedule runs")
    declared = schedules.get(apptasks.declared_every_two_seconds.name)
    assert declared.declared and declared.last_ms is not None and declared.last_ms % 2000 == 0


def test_no_schedule_worker_fires_nothing(queue: RedisQueue, workers: Workers) -> None:
    schedules.add("idle", apptasks.scheduled, cron="* * * * * *", args=("x",))
    workers.start("--no-schedule", "--log-level", "WARNING").wait_for_children(1, timeout=30)
    apptasks.record.dispatch("went")
    wait_for(lambda: queue.client.lrange(apptasks.DONE, 0, -1), 20, "the worker ran a task")
    wait_for(lambda: now_ms(queue) > (schedules.get("idle").next_ms or 0) + 1500, 10, "a due time")
    assert runs(queue, "idle") == [] and queue.client.llen(queue.keys("default").ready) == 0
