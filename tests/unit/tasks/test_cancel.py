"""Cancelling tasks that have not started: ready, delayed; running and finished say so."""

from __future__ import annotations

from datetime import timedelta

import apptasks
import pytest
from support import Workers, cli, wait_for

from rqueue import CancelOutcome
from rqueue.settings.config import Config
from rqueue.store.cancel import cancel_anywhere
from rqueue.store.queue import RedisQueue


def done(queue: RedisQueue) -> list[str]:
    return [v.decode() for v in queue.client.lrange(apptasks.DONE, 0, -1)]


@pytest.mark.topology
def test_cancelled_ready_task_never_runs(queue: RedisQueue, workers: Workers) -> None:
    keep = apptasks.record.dispatch("keep-1")
    drop = apptasks.record.dispatch("drop")
    apptasks.record.dispatch("keep-2")
    assert drop.cancel() is CancelOutcome.CANCELLED
    assert drop.cancel() is CancelOutcome.ALREADY_CANCELLED
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    assert sorted(done(queue)) == ["keep-1", "keep-2"]
    # the dropped payload left the queue and the bookkeeping with it
    default = queue.keys("default")
    assert queue.client.llen(default.ready) == 0
    assert queue.client.scard(default.cancelled) == 0
    assert queue.client.scard(default.pending_ids) == 0
    assert keep.cancel() is CancelOutcome.NOT_PENDING  # finished: says so


@pytest.mark.topology
def test_cancelled_delayed_task_never_runs(queue: RedisQueue, workers: Workers) -> None:
    default = queue.keys("default")
    drop = apptasks.record.later(timedelta(seconds=1), "late-drop")
    apptasks.record.later(timedelta(seconds=1), "late-keep")
    assert drop.cancel()
    workers.start("--log-level", "WARNING")
    wait_for(lambda: done(queue) == ["late-keep"], 20, "the kept timer to run")
    wait_for(
        lambda: queue.client.zcard(default.delayed) == 0 and queue.client.llen(default.ready) == 0,
        10,
        "the cancelled timer to be dropped",
    )
    assert done(queue) == ["late-keep"]
    assert queue.client.scard(default.cancelled) == 0


@pytest.mark.topology
def test_cancel_of_a_running_task_stops_it(queue: RedisQueue, workers: Workers) -> None:
    handle = apptasks.blocks_until_released.dispatch("busy")
    workers.start("--log-level", "WARNING")
    wait_for(lambda: queue.client.llen("test:started"), 20, "the task to start")
    assert handle.cancel() is CancelOutcome.CANCELLING
    reserved = queue.keys("default").reserved
    wait_for(lambda: queue.client.zcard(reserved) == 0, 10, "it to be settled")
    queue.client.rpush("test:release", 1)  # nothing waits for it now
    assert done(queue) == []
    assert handle.cancel() is CancelOutcome.NOT_PENDING


def test_cancel_costs_constant_commands_whatever_the_queue_length(queue: RedisQueue) -> None:
    apptasks.record.dispatch_many([(i,) for i in range(5000)])
    target = apptasks.record.later(3600, "timer")
    apptasks.record.using(queue="other").dispatch_many([(i,) for i in range(100)])
    queue.client.config_resetstat()
    result = cancel_anywhere(queue, target.id)
    assert result.outcome is CancelOutcome.CANCELLED and result.queue == "default"
    stats = queue.client.info("commandstats")
    scans = {
        "cmdstat_lrange",
        "cmdstat_lrem",
        "cmdstat_lpos",
        "cmdstat_zrange",
        "cmdstat_zrangebyscore",
        "cmdstat_scan",
        "cmdstat_keys",
    }
    assert not scans & set(stats), stats  # no read of any queue's contents


@pytest.mark.topology
def test_cancel_cli(queue: RedisQueue, config: Config) -> None:
    handle = apptasks.record.later(3600, "cli")
    ok = cli(config, "cancel", handle.id)
    assert ok.returncode == 0, ok.stderr
    assert f"Task {handle.id} on queue default cancelled" in ok.stdout
    again = cli(config, "cancel", handle.id)
    assert again.returncode == 1 and "already cancelled" in again.stderr
    unknown = cli(config, "cancel", "0" * 32, "--queue", "default")
    assert unknown.returncode == 1 and "is not pending" in unknown.stderr
    missing_arg = cli(config, "cancel")
    assert missing_arg.returncode == 2 and "TASK_ID" in missing_arg.stderr


@pytest.mark.topology
def test_cancelled_timer_is_no_longer_counted_nor_waited_for(
    queue: RedisQueue, config: Config, workers: Workers
) -> None:
    """A cancelled delayed task is out of ``rqueue size`` at once, and
    ``--stop-when-drained`` stops instead of waiting for its due time (an hour)."""
    apptasks.record.dispatch("now")
    dropped = apptasks.record.later(3600, "in an hour")
    kept = apptasks.record.later(3600, "kept")
    assert dropped.cancel()
    assert queue.sizes(["default"])[0].delayed == 1  # kept still counts
    assert kept.cancel()
    size = queue.sizes(["default"])[0]
    assert (size.ready, size.delayed) == (1, 0)
    shown = cli(config, "size", "default")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[1].split()[:3] == ["default", "1", "0"]
    code, log = workers.run("--stop-when-drained", timeout=30)
    assert code == 0, log
    assert "queues are drained" in log
    assert done(queue) == ["now"]
