"""``rqueue schedule ...`` through a subprocess, including its errors."""

from __future__ import annotations

import json

import pytest
from support import TASKS_DIR, cli

from rqueue import schedules
from rqueue.schedules.api import Schedules
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

pytestmark = pytest.mark.topology  # every test here runs on Cluster and Sentinel as well


def run(config: Config, *args: str):  # type: ignore[no-untyped-def]
    return cli(config, "schedule", *args, cwd=TASKS_DIR)


def test_add_list_show_update_pause_resume_run_now_remove(
    queue: RedisQueue, config: Config
) -> None:
    added = run(
        config,
        "add",
        "nightly",
        "apptasks:scheduled",
        "--cron",
        "0 3 * * *",
        "--timezone",
        "Europe/Berlin",
        "--args",
        '["n"]',
        "--start",
        "2030-01-01T00:00:00Z",
        "--end",
        "2030-06-30T00:00:00+00:00",
    )
    assert added.returncode == 0, added.stderr
    assert "nightly: apptasks:scheduled on default" in added.stdout
    assert "next run 2030-01-01T02:00:00.000Z" in added.stdout  # 03:00 in Berlin
    stored = schedules.get("nightly")
    assert stored.args == ("n",) and stored.timezone == "Europe/Berlin"

    every = run(
        config,
        "add",
        "often",
        "apptasks:scheduled",
        "--every",
        "300",
        "--kwargs",
        json.dumps({"label": "k"}),
        "--queue",
        "reports",
        "--misfire",
        "all",
    )
    assert every.returncode == 0, every.stderr
    assert schedules.get("often").queue == "reports"

    listed = run(config, "list")
    assert listed.returncode == 0
    header, *rows = listed.stdout.splitlines()
    assert header.split()[:4] == ["name", "task", "timing", "window"]
    assert rows[0].startswith("nightly") and "2030-01-01T00:00:00.000Z..2030-06-30" in rows[0]
    assert rows[1].startswith("often") and "every 300 s" in rows[1] and "active" in rows[1]

    shown = run(config, "show", "nightly", "-n", "3")
    assert shown.returncode == 0
    assert shown.stdout.splitlines()[-3:] == [
        "  2030-01-01T02:00:00.000Z",
        "  2030-01-02T02:00:00.000Z",
        "  2030-01-03T02:00:00.000Z",
    ]

    updated = run(config, "update", "often", "--cron", "*/10 * * * *", "--args", '["u"]')
    assert updated.returncode == 0, updated.stderr
    assert schedules.get("often").cron == "*/10 * * * *" and schedules.get("often").args == ("u",)

    assert "paused" in run(config, "pause", "often").stdout
    assert schedules.get("often").paused
    assert "active" in run(config, "resume", "often").stdout
    assert not schedules.get("often").paused

    now = run(config, "run-now", "often")
    assert now.returncode == 0 and "Enqueued often now as task" in now.stdout
    assert queue.client.llen(queue.keys("reports").ready) == 1

    removed = run(config, "remove", "often")
    assert removed.returncode == 0 and "Removed schedule often." in removed.stdout
    assert [s.name for s in schedules.list()] == ["nightly"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["add", "x", "apptasks:scheduled", "--cron", "99 * * * *"], 1, "invalid cron expression"),
        (
            ["add", "x", "apptasks:scheduled", "--cron", "* * * * *", "--timezone", "Moon/Base"],
            1,
            "unknown time zone",
        ),
        (
            [
                "add",
                "x",
                "apptasks:scheduled",
                "--every",
                "60",
                "--start",
                "2030-02-01T00:00:00Z",
                "--end",
                "2030-01-01T00:00:00Z",
            ],
            1,
            "is before start",
        ),
        (["add", "x", "apptasks:nothing", "--every", "60"], 1, "not registered with @task"),
        (["add", "x", "apptasks:scheduled"], 2, "exactly one of --cron or --every"),
        (
            ["add", "x", "apptasks:scheduled", "--every", "60", "--cron", "* * * * *"],
            2,
            "exactly one of --cron or --every",
        ),
        (["add", "x", "apptasks:scheduled", "--every", "60", "--args", "{}"], 2, "JSON array"),
        (["add", "x", "apptasks:scheduled", "--every", "60", "--args", "[1"], 2, "not valid JSON"),
        (
            ["add", "x", "apptasks:scheduled", "--every", "60", "--start", "2030-01-01T00:00"],
            2,
            "no time zone",
        ),
        (["add", "x", "apptasks:scheduled", "--every", "60", "--misfire", "never"], 2, "never"),
        (["update", "x", "--cron", "* * * * *"], 1, "no schedule named 'x'"),
        (["update", "x"], 2, "nothing to update"),
        (["pause", "x"], 1, "no schedule named 'x'"),
        (["resume", "x"], 1, "no schedule named 'x'"),
        (["remove", "x"], 1, "no schedule named 'x'"),
        (["run-now", "x"], 1, "no schedule named 'x'"),
        (["show", "x"], 1, "no schedule named 'x'"),
        (["frobnicate"], 2, "No such command"),
    ],
)
def test_cli_errors_are_clear_and_store_nothing(
    queue: RedisQueue, config: Config, args: list[str], code: int, message: str
) -> None:
    result = run(config, *args)
    assert result.returncode == code, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert queue.client.keys("*schedule*") == []


def test_duplicate_add_and_bad_update_are_refused(queue: RedisQueue, config: Config) -> None:
    assert run(config, "add", "d", "apptasks:scheduled", "--every", "60").returncode == 0
    again = run(config, "add", "d", "apptasks:scheduled", "--every", "30")
    assert again.returncode == 1 and "exists already" in again.stderr
    bad = run(config, "update", "d", "--timezone", "Nowhere/At-All")
    assert bad.returncode == 1 and "unknown time zone" in bad.stderr
    for grace in ("nan", "inf"):  # a traceback (ValueError, OverflowError)
        bad = run(config, "update", "d", "--misfire-grace", grace)
        assert bad.returncode == 2 and "'--misfire-grace'" in bad.stderr
        bad = run(config, "update", "d", "--every", grace)
        assert bad.returncode == 2 and "'--every'" in bad.stderr
    assert schedules.get("d").every_ms == 60_000 and schedules.get("d").timezone == "UTC"


def test_empty_list_and_unreachable_redis(queue: RedisQueue, config: Config) -> None:
    empty = run(config, "list")
    assert empty.returncode == 0 and "(none)" in empty.stdout
    down = cli(config, "schedule", "list", "--redis-url", "redis://127.0.0.1:1/0")
    assert down.returncode == 1 and "cannot reach Redis" in down.stderr


def test_a_failed_scheduled_run_shows_its_schedule_and_trigger(
    queue: RedisQueue, config: Config
) -> None:
    from datetime import datetime, timedelta, timezone

    from rqueue.schedules.scheduler import Scheduler, trigger_id

    start = datetime.now(timezone.utc) - timedelta(days=1)
    schedules.add("failing", "apptasks:always_raises", every=60, args=["boom"], start=start)
    due = schedules.get("failing").timing.next_after(Schedules(queue).now_ms() - 61_000)
    assert due is not None
    queue.client.zadd(queue.keys("default").schedules, {"failing": due})
    Scheduler(queue, ["default"]).tick()
    worker = cli(config, "work", "--stop-when-empty", "--tries", "1", cwd=TASKS_DIR)
    assert worker.returncode == 0, worker.stderr
    shown = cli(config, "failed", "show", trigger_id("failing", due))
    assert shown.returncode == 0, shown.stderr
    assert "'schedule': 'failing'" in shown.stdout and f"'trigger_ms': {due}" in shown.stdout
