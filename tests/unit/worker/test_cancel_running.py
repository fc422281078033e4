"""Cancelling a running task, in every mode, on real workers: ``handle.cancel()``
(``rqueue cancel``, ``Batch.cancel()``) reaches it within a second, and it ends as
``cancelled``: not retried, not failed unless asked, its hook and listener called."""

from __future__ import annotations

import time

import cancel_tasks as ct
import pytest
from support import Workers, cli, failures, strings, wait_for

from rqueue import batch, chain
from rqueue.settings.config import Config
from rqueue.store.cancel import CancelOutcome
from rqueue.store.queue import RedisQueue
from rqueue.tasks.handles import Dispatched

FAST = ("-c", "1", "--kill-grace", "5", "--block-for", "0.5", "--log-level", "warning")
MODES = {
    "process": (ct.sleeps, ()),
    "threads": (ct.polls, ("--threads", "2")),
    "slots": (ct.awaits, ("--slots", "10")),
}


def started(queue: RedisQueue, value: str) -> None:
    wait_for(lambda: value in strings(queue.client, ct.STARTED), 20, f"{value} to start")


def cancelled(handle: Dispatched, timeout: float = 5.0) -> float:
    """Cancel a running task; seconds until its status read cancelled."""
    asked = time.monotonic()
    assert handle.cancel() is CancelOutcome.CANCELLING
    wait_for(lambda: handle.status() == "cancelled", timeout, "its status to read cancelled")
    return time.monotonic() - asked


def left_behind(queue: RedisQueue) -> tuple[int, int]:
    keys = queue.keys("default")
    return queue.client.zcard(keys.reserved), queue.client.hlen(keys.cancelling)


def nothing_queued(queue: RedisQueue) -> bool:
    """No retry, nor a next step: nothing ready or delayed (their only places)."""
    keys = queue.keys("default")
    return queue.client.llen(keys.ready) == 0 == queue.client.zcard(keys.delayed)


@pytest.mark.topology
@pytest.mark.parametrize("mode", MODES)
def test_a_running_task_is_cancelled_within_a_second(
    queue: RedisQueue, workers: Workers, mode: str
) -> None:
    task, options = MODES[mode]
    workers.start(*FAST, *options)
    handle = task.using(keep_result=60).dispatch(mode)
    started(queue, mode)
    assert cancelled(handle) < 1.0
    wait_for(lambda: f"{mode} stopped" in strings(queue.client, ct.ENDED), 5, "it to stop")
    hooked = {f"hook {mode}", f"listener {mode}"}
    wait_for(lambda: hooked <= set(strings(queue.client, ct.HOOKED)), 5, "hook and listener")
    wait_for(lambda: left_behind(queue) == (0, 0), 5, "nothing left reserved or requested")
    assert failures(queue) == []  # not failed: cancelled
    assert nothing_queued(queue)  # not retried
    assert strings(queue.client, ct.STARTED) == [mode]


@pytest.mark.topology
@pytest.mark.parametrize("threads", [(), ("--threads", "2")], ids=["process", "threads"])
def test_a_task_that_ignores_its_cancel_is_killed_after_the_grace(
    queue: RedisQueue, workers: Workers, threads: tuple[str, ...]
) -> None:
    worker = workers.start("-c", "1", "--kill-grace", "1", "--block-for", "0.5", *threads)
    child = worker.wait_for_children(1)[0]
    handle = ct.ignores.using(keep_result=60).dispatch("stubborn")
    started(queue, "stubborn")
    assert cancelled(handle, timeout=10) > 1.0  # the grace went by first
    if not threads:  # TaskCancelled reached it, and it swallowed it
        assert "stubborn ignored" in strings(queue.client, ct.ENDED)
    wait_for(lambda: [c.pid for c in worker.children()] not in ([], [child.pid]), 10, "a new child")
    wait_for(lambda: left_behind(queue) == (0, 0), 5, "nothing left reserved or requested")
    assert failures(queue) == []
    assert strings(queue.client, ct.STARTED) == ["stubborn"]  # never retried
    after = ct.quick.using(keep_result=60).dispatch("after")
    assert after.result(timeout=10) == "after"  # the new child works


def test_a_cancel_the_task_wraps_in_another_error_still_ends_cancelled(
    queue: RedisQueue, workers: Workers
) -> None:
    """Decided by the run's state: its dont_retry_for (RuntimeError) does not file it."""
    workers.start(*FAST)
    handle = ct.wraps.using(keep_result=60).dispatch("wrapped")
    started(queue, "wrapped")
    cancelled(handle)
    wait_for(lambda: left_behind(queue) == (0, 0), 5, "it to be settled")
    assert "wrapped stopped" in strings(queue.client, ct.ENDED)
    assert failures(queue) == []  # cancelled, not failed at once
    assert nothing_queued(queue)  # nor retried


def test_rqueue_cancel_exits_0_once_delivered_and_fail_files_it(
    config: Config, queue: RedisQueue, workers: Workers
) -> None:
    workers.start(*FAST, "--events")
    handle = ct.sleeps.using(keep_result=60).dispatch("cli")
    started(queue, "cli")
    done = cli(config, "cancel", handle.id, "--fail")
    assert done.returncode == 0, done.stderr
    assert "stops it within a second" in done.stdout
    wait_for(lambda: handle.status() == "cancelled", 5, "it to be cancelled")
    wait_for(lambda: failures(queue) == [f"{ct.sleeps.name} TaskCancelled"], 5, "its record")
    assert "cancelled" in cli(config, "status", handle.id).stdout
    assert [e.event for e in handle.events(timeout=5)][-1] == "cancelled"
    finished = cli(config, "cancel", handle.id)
    assert finished.returncode == 1 and "not pending" in finished.stderr


def test_a_cancelled_step_stops_its_chain(queue: RedisQueue, workers: Workers) -> None:
    workers.start(*FAST)
    steps = chain(ct.sleeps.pending("step-1"), ct.quick.pending("step-2")).dispatch()
    started(queue, "step-1")
    assert steps.steps[0].cancel() is CancelOutcome.CANCELLING
    wait_for(lambda: "step-1 stopped" in strings(queue.client, ct.ENDED), 5, "it to stop")
    wait_for(lambda: left_behind(queue) == (0, 0), 5, "it to be settled")
    assert nothing_queued(queue)  # no next step
    assert "step-2 finished" not in strings(queue.client, ct.ENDED)


@pytest.mark.topology
def test_a_batch_counts_a_cancelled_member_and_batch_cancel_reaches_running_ones(
    queue: RedisQueue, workers: Workers
) -> None:
    workers.start(*FAST[:1], "2", *FAST[2:])
    members = [ct.sleeps.pending("member-1"), ct.sleeps.pending("member-2")]
    dispatched = batch([*members, ct.quick.pending("member-3")]).dispatch()
    started(queue, "member-1")
    started(queue, "member-2")
    assert dispatched.cancel() is True
    wait_for(lambda: (s := dispatched.status()) is not None and s.finished, 5, "it to finish")
    status = dispatched.status()
    assert status is not None
    # The two running members stopped, the third never started: all three skipped.
    assert (status.skipped, status.failed, status.cancelled) == (3, 0, True)
    assert {"member-1 stopped", "member-2 stopped"} <= set(strings(queue.client, ct.ENDED))
    assert failures(queue) == []
