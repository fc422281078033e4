"""Schedule records as an attacker (or a bug) leaves them in Redis, beside good ones:
every reader (the scheduler, ``rqueue schedule list``, the dashboard, Prometheus) shows
an unreadable one as unreadable, skips it, and serves the rest. And what a listing says
of a schedule that no worker fires, or that the code declares again once removed.

Real Redis, the real scheduler tick, the real ``rqueue`` command and the dashboard
served by uvicorn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import apptasks
import httpx
import msgpack
import pytest
from browser import served_dashboard
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support import Workers, cli, wait_for

from rqueue.encoding.payload import decode
from rqueue.errors import InvalidSchedule
from rqueue.metrics.prometheus import registry_for
from rqueue.metrics.registry import served_queues
from rqueue.schedules.api import Schedules
from rqueue.schedules.scheduler import Scheduler
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

Plant = Callable[[RedisQueue, Schedules], None]


def _rewritten(**fields: Any) -> Plant:
    """Schedule ``bad`` with these fields of its stored definition changed by hand."""

    def plant(queue: RedisQueue, schedules: Schedules) -> None:
        schedules.add("bad", apptasks.scheduled, cron="* * * * * *", args=["bad"])
        defs = queue.keys("default").schedule_defs
        stored = msgpack.unpackb(queue.client.hget(defs, "bad"), strict_map_key=False)
        queue.client.hset(defs, "bad", msgpack.packb({**stored, **fields}))
        _due(queue, "bad")

    return plant


def _scored(score: float) -> Plant:
    def plant(queue: RedisQueue, schedules: Schedules) -> None:
        schedules.add("bad", apptasks.scheduled, every=1, args=["bad"])
        queue.client.zadd(queue.keys("default").schedules, {"bad": score})

    return plant


def _foreign_queue(queue: RedisQueue, schedules: Schedules) -> None:
    queue.client.hset(queue.global_keys.schedule_index, "bad", b"\xff\xfe-not-utf8")


def _foreign_name(queue: RedisQueue, schedules: Schedules) -> None:
    schedules.add("bad", apptasks.scheduled, every=1, args=["bad"])
    keys = queue.keys("default")
    queue.client.hset(keys.schedule_defs, b"\xffbad", queue.client.hget(keys.schedule_defs, "bad"))
    queue.client.hdel(keys.schedule_defs, "bad")
    queue.client.hset(queue.global_keys.schedule_index, "bad", "default")


def _not_a_map(queue: RedisQueue, schedules: Schedules) -> None:
    schedules.add("bad", apptasks.scheduled, every=1, args=["bad"])
    queue.client.hset(queue.keys("default").schedule_defs, "bad", msgpack.packb([1, 2]))
    _due(queue, "bad")


def _due(queue: RedisQueue, name: str) -> None:
    """Put ``name`` on the timeline a second ago."""
    now = Schedules(queue).now_ms()
    queue.client.zadd(queue.keys("default").schedules, {name: now - 1000})


HOSTILE: dict[str, Plant] = {
    "start_ms=1e20": _rewritten(start_ms=1e20),
    "start_ms=1e22": _rewritten(start_ms=1e22),
    "start_ms past year 9999": _rewritten(start_ms=253_402_300_799_999),
    "last_ms='x'": _rewritten(last_ms="x"),
    "created_ms=2**63-1": _rewritten(created_ms=2**63 - 1),
    "kwargs with a number for a name": _rewritten(kwargs={1: 2}),
    "tries='3'": _rewritten(tries="3"),
    "not a map": _not_a_map,
    "a fire time of -inf": _scored(float("-inf")),
    "a fire time of inf": _scored(float("inf")),
    "a queue that is not UTF-8": _foreign_queue,
    "a name that is not UTF-8": _foreign_name,
}


def _good(queue: RedisQueue, schedules: Schedules) -> int:
    """Schedule ``good`` (every second), due now; returns its trigger."""
    schedules.add("good", apptasks.scheduled, every=1, args=["good"])
    now = schedules.now_ms()
    trigger = schedules.get("good").timing.next_after(now - 2000)
    assert trigger is not None and trigger <= now
    queue.client.zadd(queue.keys("default").schedules, {"good": trigger})
    return trigger


READS_WELL = {"start_ms past year 9999"}
"""Cases whose record reads: only firing it fails (year 10000), so the scheduler
shelves it; a listing shows it as it is."""


@pytest.fixture(params=sorted(HOSTILE))
def planted(request: pytest.FixtureRequest, queue: RedisQueue) -> tuple[int, str]:
    """A good schedule due now beside one hostile record: the good one's trigger, and
    the case."""
    schedules = Schedules(queue)
    trigger = _good(queue, schedules)
    HOSTILE[request.param](queue, schedules)
    return trigger, request.param


def test_the_scheduler_fires_the_good_schedule_and_shelves_the_hostile_one(
    queue: RedisQueue, planted: tuple[int, str], caplog: pytest.LogCaptureFixture
) -> None:
    scheduler = Scheduler(queue, ["default"])
    with caplog.at_level(logging.ERROR, logger="rqueue.scheduler"):
        scheduler.tick()
        scheduler.tick()  # the next tick, too, goes through
    assert "tick failed" not in caplog.text
    fired = [decode(p) for p in queue.client.lrange(queue.keys("default").ready, 0, -1)]
    assert planted[0] in [job.meta["trigger_ms"] for job in fired if job.args == ("good",)]
    assert all(job.args == ("good",) for job in fired)  # the hostile one never fires


def test_the_api_lists_the_hostile_record_as_unreadable_and_the_rest_as_usual(
    queue: RedisQueue, planted: tuple[int, str]
) -> None:
    schedules = Schedules(queue)
    listed = {s.name: s for s in schedules.list()}
    assert listed["good"].unreadable is None and listed["good"].state == "active"
    assert schedules.get("good").name == "good"
    if planted[1] in READS_WELL:
        return
    (bad,) = (s for name, s in listed.items() if name.endswith("bad"))
    assert bad.unreadable and bad.state.startswith("unreadable (") and bad.next_runs(3) == []
    if bad.name == "bad":
        with pytest.raises(InvalidSchedule, match="unreadable"):
            schedules.get("bad")
        schedules.remove("bad")  # an unreadable record can still be removed
        assert [s.name for s in schedules.list()] == ["good"]


def test_schedule_list_shows_it_as_unreadable_with_no_traceback(
    config: Config, queue: RedisQueue, planted: tuple[int, str]
) -> None:
    listed = cli(config, "schedule", "list")
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    rows = {line.split()[0].replace("\\xff", ""): line for line in listed.stdout.splitlines()}
    assert "every 1 s" in rows["good"] and "unreadable" not in rows["good"]
    bad = rows[next(name for name in rows if name.endswith("bad"))]
    assert "unreadable (" in bad or planted[1] in READS_WELL
    shown = cli(config, "schedule", "show", "bad")
    assert "Traceback" not in shown.stderr


def test_the_schedules_page_shows_it_as_unreadable_and_the_rest(
    queue: RedisQueue, planted: tuple[int, str]
) -> None:
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as client:
        page = client.get("/schedules")
        assert page.status_code == 200
        assert 'data-schedule="good"' in page.text and "every 1 s" in page.text
        assert "unreadable (" in page.text or planted[1] in READS_WELL


def test_a_schedule_that_starts_before_1970_still_reads(queue: RedisQueue) -> None:
    start = datetime(1960, 1, 1, tzinfo=timezone.utc)
    added = Schedules(queue).add("old", apptasks.scheduled, every=3600, start=start)
    assert added.unreadable is None and added.start_ms is not None and added.start_ms < 0
    assert Schedules(queue).list()[0].state == "active"


def test_prometheus_serves_every_queue_beside_hostile_records(queue: RedisQueue) -> None:
    apptasks.record.dispatch("waiting")
    keys = queue.keys("default")
    queue.remember_queues(["default"])
    queue.client.sadd(queue.global_keys.known_queues, b"\xff\xfe", "bad name\n")
    queue.client.hset(keys.metrics, mapping={"junk": "x", "processed:\xff": "1e999"})
    queue.client.rpush(keys.ready, b"\xc1 not a payload")
    queue.client.zadd(queue.global_keys.workers, {"w-forged": 1})
    queue.client.set(queue.global_keys.worker("w-forged"), b"\x93\x01")
    Schedules(queue).add("x", apptasks.scheduled, every=60)
    _rewritten(last_ms="x")(queue, Schedules(queue))
    text = generate_latest(registry_for(queue)).decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    ready = {s.labels["queue"]: s.value for s in families["rqueue_queue_ready"].samples}
    assert ready == {"default": 2.0}
    with served_dashboard(queue) as served:
        scraped = httpx.get(f"{served.url}/metrics")
        assert scraped.status_code == 200 and 'rqueue_queue_ready{queue="default"}' in scraped.text


def test_a_schedule_no_worker_serves_shows_overdue_not_active(
    config: Config, queue: RedisQueue, workers: Workers
) -> None:
    schedules = Schedules(queue)
    schedules.add("nobody", apptasks.scheduled, every=60, queue="unserved", misfire_grace=0)
    schedules.add("soon", apptasks.scheduled, every=60, queue="unserved-soon")
    now = schedules.now_ms()
    queue.client.zadd(queue.keys("unserved").schedules, {"nobody": now - 3_600_000})
    listed = cli(config, "schedule", "list")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert "overdue: no worker serves queue unserved" in rows["nobody"]
    assert "active (no worker serves queue unserved-soon)" in rows["soon"]
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as client:
        page = client.get("/schedules").text
        assert "overdue: no worker serves queue unserved" in page
        assert "active (no worker serves queue unserved-soon)" in page
    # A worker of the queue that does not fire schedules: still overdue, saying why.
    workers.start("unserved", "--no-schedule", "--log-level", "WARNING")
    wait_for(lambda: "unserved" in served_queues(queue), 30, "the worker to register")
    listed = cli(config, "schedule", "list")
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert "overdue: its workers do not fire it" in rows["nobody"]


def test_removing_a_schedule_declared_in_code_says_it_comes_back(
    config: Config, queue: RedisQueue
) -> None:
    declared = apptasks.declared_every_two_seconds
    Scheduler(queue, [declared.options.queue]).tick()  # as a worker importing it does
    assert Schedules(queue).get(declared.name).declared
    with served_dashboard(queue) as served:
        page = httpx.get(f"{served.url}/schedules").text
        assert "declared in code: removing it does not stop it" in page
    removed = cli(config, "schedule", "remove", declared.name)
    assert removed.returncode == 0, removed.stderr
    assert f"Removed schedule {declared.name}; it is declared in code" in removed.stdout
    assert "remove the cron= (or every=) from the task to stop it" in removed.stdout
    Scheduler(queue, [declared.options.queue]).tick()  # the next worker's start
    assert Schedules(queue).get(declared.name).declared  # back, as it said
    schedules = Schedules(queue)
    schedules.add("plain", apptasks.scheduled, every=60)
    plain = cli(config, "schedule", "remove", "plain")
    assert plain.stdout.strip() == "Removed schedule plain."


def test_an_unreadable_record_under_a_declared_name_is_declared_again(queue: RedisQueue) -> None:
    # The code is the authority on a declared schedule: garbage under its name (as an
    # unsigned definition) is replaced, not a reason never to declare it.
    declared = apptasks.declared_every_two_seconds
    where = declared.options.queue
    queue.client.hset(queue.global_keys.schedule_index, declared.name, where)
    queue.client.hset(queue.keys(where).schedule_defs, declared.name, b"\xc1garbage")
    Scheduler(queue, [where]).tick()
    found = Schedules(queue).get(declared.name)
    assert found.declared and found.unreadable is None and found.next_ms is not None
