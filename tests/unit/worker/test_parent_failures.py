"""Hooks and listeners still hear of tasks the parent had to fail itself."""

from __future__ import annotations

import apptasks
from support import Workers, wait_for

from rqueue.store.queue import RedisQueue


def test_after_failed_runs_for_a_task_killed_for_swallowing_its_timeout(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.swallows_timeout_with_hook.dispatch()
    workers.start("--kill-grace", "0.5", "--log-level", "WARNING")
    wait_for(
        lambda: queue.client.lrange(apptasks.HOOKS, 0, -1) == [b"failed:TaskTimeout:1"],
        20,
        "after_failed with the timeout",
    )
    assert queue.sizes(["default"])[0].failed == 1


def test_after_failed_runs_for_a_task_whose_worker_died(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.dies_with_hook.dispatch()
    workers.start("--log-level", "WARNING")
    wait_for(
        lambda: queue.client.lrange(apptasks.HOOKS, 0, -1) == [b"failed:WorkerLost:1"],
        20,
        "after_failed with WorkerLost",
    )
    assert queue.sizes(["default"])[0].failed == 1
