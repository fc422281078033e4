"""``rqueue monitor``: sizes and the oldest wait, exit 1 over a limit (for cron alerts)."""

from __future__ import annotations

import json
import time

import apptasks
import pytest
from support import cli, push_job

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

pytestmark = pytest.mark.topology  # the real command, on every topology


def test_under_the_limit_exits_0_and_prints_every_queue(queue: RedisQueue, config: Config) -> None:
    apptasks.record.dispatch_many([(1,), (2,)])
    apptasks.record.later(60, 3)
    result = cli(config, "monitor", "default,emails", "--max", "2")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "queue",
        "ready",
        "delayed",
        "reserved",
        "failed",
        "oldest",
        "wait",
        "status",
    ]
    default, emails = (line.split() for line in lines[1:])
    assert default[:5] == ["default", "2", "1", "0", "0"] and default[-1] == "ok"
    assert emails[:5] == ["emails", "0", "0", "0", "0"] and emails[-2:] == ["-", "ok"]


def test_over_max_exits_1_naming_the_queue(queue: RedisQueue, config: Config) -> None:
    apptasks.record.dispatch_many([(1,), (2,), (3,)])
    result = cli(config, "monitor", "emails,default", "--max", "2")
    assert result.returncode == 1
    assert "default" in result.stderr and "emails" not in result.stderr
    assert "--max 2" in result.stderr
    assert [line.split()[-1] for line in result.stdout.splitlines()[1:]] == ["ok", "OVER"]


def test_json_reports_sizes_and_the_real_oldest_wait(queue: RedisQueue, config: Config) -> None:
    push_job(queue, "apptasks:record", "old", dispatched_at=time.time() - 300)
    apptasks.record.dispatch("new")
    result = cli(config, "monitor", "default", "--max", "10", "--json")
    assert result.returncode == 0, result.stderr
    (report,) = json.loads(result.stdout)
    assert report["queue"] == "default" and report["ready"] == 2 and report["over"] is False
    assert 300 <= report["oldest_wait"] < 400  # the head's age, not an estimate

    over = cli(config, "monitor", "default", "--max-wait", "120", "--json")
    assert over.returncode == 1
    assert json.loads(over.stdout)[0]["over"] is True and "--max-wait 120" in over.stderr
    assert cli(config, "monitor", "default", "--max-wait", "3600").returncode == 0


def test_a_head_that_is_not_a_task_shows_no_wait(queue: RedisQueue, config: Config) -> None:
    queue.client.rpush(queue.keys("default").ready, b"\x1b[2J\x1b]0;owned\x07")
    result = cli(config, "monitor", "default", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)[0]["oldest_wait"] is None


def test_wait_limits_per_queue_flag_the_queues_that_wait_too_long(
    queue: RedisQueue, config: Config
) -> None:
    push_job(queue, "apptasks:record", "old", dispatched_at=time.time() - 120)
    push_job(queue, "apptasks:record", "old", queue="emails", dispatched_at=time.time() - 120)
    args = ("monitor", "default,emails", "--wait", "emails=300", "--wait", "60")
    result = cli(config, *args)
    assert result.returncode == 1
    statuses = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert statuses["default"].endswith("OVER (waits)") and statuses["emails"].endswith("ok")
    assert "--wait emails=300, --wait 60): default" in result.stderr
    report = {r["queue"]: r for r in json.loads(cli(config, *args, "--json").stdout)}
    assert report["default"]["waits_too_long"] is True and report["default"]["wait_limit"] == 60
    assert report["emails"]["over"] is False and report["emails"]["wait_limit"] == 300
    assert cli(config, "monitor", "default", "--wait", "default=300").returncode == 0


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("default", "--max", "-1"), "--max"),
        (("default", "--max-wait", "-5"), "--max-wait"),
        (("default", "--max-wait", "nan"), "--max-wait"),  # accepted: an alert never fired
        (("default", "--max-wait", "inf"), "--max-wait"),
        (("default", "--wait", "default=never"), "--wait"),
        (("default", "--wait", "bad name=5"), "--wait"),
        (("default", "--wait", "5", "--max-wait", "6"), "--wait"),
        (("bad name",), "invalid queue name"),
        (("default,x:notify",), "reserved"),
    ],
)
def test_bad_settings_are_usage_errors_naming_them(
    config: Config, args: tuple[str, ...], named: str
) -> None:
    result = cli(config, "monitor", *args)
    assert result.returncode == 2
    assert named in result.stderr
