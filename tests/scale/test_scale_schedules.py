"""A scheduler tick reads the schedules that are due, not a fixed batch of them (#16).

With 10^5 schedules a tick that read the first 200 of every queue's timeline spent
most of a parent's CPU parsing entries not yet due; it now reads one more than were
due last time, and more while all it read were due, so a burst still fires in one tick.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import apptasks
import pytest

from rqueue import schedules
from rqueue.encoding.payload import decode
from rqueue.schedules.api import Schedules
from rqueue.schedules.scheduler import BATCH, Scheduler
from rqueue.store.queue import RedisQueue

HOURLY = 3600
DAY_AGO = datetime.now(timezone.utc) - timedelta(days=1)  # anchors every schedule alike


def add_hourly(count: int) -> None:
    for i in range(count):
        schedules.add(f"s{i}", apptasks.scheduled, every=HOURLY, start=DAY_AGO, args=("x",))


def make_due(queue: RedisQueue, names: list[str]) -> None:
    """Move schedules' next fire time to their trigger of the last hour, as if overdue."""
    now = Schedules(queue).now_ms()
    aligned = schedules.get(names[0]).timing.next_after(now - 1 - HOURLY * 1000)
    assert aligned is not None and aligned <= now
    queue.client.zadd(queue.keys("default").schedules, dict.fromkeys(names, aligned))


def fired(queue: RedisQueue) -> list[str]:
    ready = queue.client.lrange(queue.keys("default").ready, 0, -1)
    return [decode(payload).meta["schedule"] for payload in ready]


def reading(scheduler: Scheduler, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many timeline entries each of the scheduler's reads returned (one queue)."""
    sizes: list[int] = []
    earliest = scheduler.store.earliest

    def counted(*args: object) -> list[tuple[int, list[tuple[bytes, float, bytes | None]]]]:
        replies = earliest(*args)  # type: ignore[arg-type]
        sizes.extend(len(entries) for _, entries in replies)
        return replies

    monkeypatch.setattr(scheduler.store, "earliest", counted)
    return sizes


def test_a_tick_reads_the_due_schedules_and_one_more(
    queue: RedisQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_hourly(50)
    make_due(queue, ["s3", "s7", "s9"])
    scheduler = Scheduler(queue, ["default"])
    sizes = reading(scheduler, monkeypatch)
    scheduler.tick()
    assert sorted(fired(queue)) == ["s3", "s7", "s9"]
    scheduler.tick()
    scheduler.tick()
    assert sorted(fired(queue)) == ["s3", "s7", "s9"]
    # One entry read, due, so eight: two due, then one not (no more due, it stopped
    # there). Two were due last time, so three; none, so the next alone.
    assert sizes == [1, 8, 3, 1]


def test_a_burst_larger_than_a_batch_fires_in_one_tick_each_once(queue: RedisQueue) -> None:
    count = BATCH + 100
    add_hourly(count)
    make_due(queue, [f"s{i}" for i in range(count)])
    Scheduler(queue, ["default"]).tick()
    names = fired(queue)
    assert len(names) == count and set(names) == {f"s{i}" for i in range(count)}
