"""Pausing a queue: workers take nothing from it until it is resumed; dispatch goes on."""

from __future__ import annotations

import apptasks
import pytest
from support import Workers, cli

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue


def done(queue: RedisQueue) -> list[str]:
    return [v.decode() for v in queue.client.lrange(apptasks.DONE, 0, -1)]


@pytest.mark.topology
def test_paused_queue_is_passed_over_until_resumed(
    config: Config, queue: RedisQueue, workers: Workers
) -> None:
    paused = cli(config, "pause", "default")
    assert paused.returncode == 0, paused.stderr
    assert "Queue default paused." in paused.stdout
    apptasks.record.dispatch("held")
    apptasks.record.using(queue="other").dispatch("free")

    # The worker serves both; it runs the other queue's task and finds nothing else.
    code, output = workers.run("default,other", "--stop-when-empty")
    assert code == 0, output
    assert done(queue) == ["free"]
    sizes = {s.name: s for s in queue.sizes(["default", "other"])}
    assert (sizes["default"].ready, sizes["default"].paused) == (1, True)
    assert not sizes["other"].paused
    listed = cli(config, "size", "default", "other")
    rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}
    assert rows["default"][-1] == "paused" and rows["other"][-1] != "paused"

    resumed = cli(config, "resume", "default")
    assert "Queue default resumed." in resumed.stdout
    assert "was already resumed" in cli(config, "resume", "default").stdout
    code, output = workers.run("default", "--stop-when-empty")
    assert code == 0, output
    assert done(queue) == ["free", "held"]


@pytest.mark.topology
def test_pause_is_reported_once_and_wakes_no_one(queue: RedisQueue) -> None:
    assert queue.pause("default") is True
    assert queue.pause("default") is False
    assert queue.paused(["default", "other"]) == {"default"}
    keys = queue.keys("default")
    apptasks.record.dispatch("x")
    queue.client.delete(keys.notify)
    assert queue.resume("default") is True
    # Resuming a queue with ready tasks pushes the wake-up token blocked workers wait on.
    assert queue.client.llen(keys.notify) == 1
    assert queue.resume("default") is False


def test_pause_refuses_a_bad_queue_name(config: Config) -> None:
    result = cli(config, "pause", "a b")
    assert result.returncode == 2
    assert "invalid queue name" in result.stderr


def test_pausing_a_queue_no_one_named_warns_of_a_typo(config: Config, queue: RedisQueue) -> None:
    """``rqueue pause emial`` paused a queue nobody uses, and said only that it had."""
    apptasks.record.using(queue="emails").dispatch("x")
    typo = cli(config, "pause", "emial")
    assert typo.returncode == 0, typo.stderr
    assert "Queue emial paused." in typo.stdout
    assert "unknown queue emial" in typo.stderr and "known queues: emails" in typo.stderr
    meant = cli(config, "pause", "emails")
    assert "Queue emails paused." in meant.stdout and "unknown queue" not in meant.stderr
