"""Releases (issue 26): logged at INFO naming who released; a task's own Release uses
an attempt, so one that releases itself on every try fails after its last."""

from __future__ import annotations

import pytest
import result_tasks as tasks
from support import Workers, follow_log, logged, wait_for

from rqueue.failed import FailedTasks
from rqueue.store.queue import RedisQueue


def ran(queue: RedisQueue) -> list[str]:
    return [v.decode() for v in queue.client.lrange(tasks.RAN, 0, -1)]


@pytest.mark.parametrize("mode", [(), ("--threads", "2")], ids=["process", "threads"])
def test_a_task_that_releases_itself_fails_after_its_last_try(
    queue: RedisQueue, workers: Workers, mode: tuple[str, ...]
) -> None:
    tasks.release_self.dispatch(0)
    worker = workers.start("--sleep", "0.05", *mode)
    lines = follow_log(worker)
    wait_for(lambda: FailedTasks(queue).list(["default"]), 20, "the task to fail")
    [record] = FailedTasks(queue).list(["default"])
    assert record.exception == "MaxAttemptsExceeded"
    assert record.message.startswith("released by the task itself on its last try (2 of 2)")
    assert "raise Release(delay)" in record.traceback  # where it released itself
    assert ran(queue) == ["release_self", "release_self"]
    wait_for(lambda: logged(lines, "released by the task itself for 0 s, attempt 1 of 2 used"), 5)
    assert not logged(lines, "released by its middleware")


def test_a_release_from_a_helper_of_the_task_is_the_tasks_own(
    queue: RedisQueue, workers: Workers
) -> None:
    tasks.release_via_helper.dispatch()
    workers.start("--sleep", "0.05")
    wait_for(lambda: FailedTasks(queue).list(["default"]), 20, "the task to fail")
    assert ran(queue) == ["release_via_helper"] * 3


def test_a_middleware_release_is_logged_at_info_naming_it_and_uses_no_attempt(
    queue: RedisQueue, workers: Workers
) -> None:
    tasks.held.dispatch("a")  # tries=1: had the release used the attempt, it could not run
    worker = workers.start("--sleep", "0.05")
    lines = follow_log(worker)
    wait_for(lambda: ran(queue) == ["held:a"], 20, "the held task to run")
    wait_for(lambda: logged(lines, "attempt 1: released by its middleware HoldOnce for 0 s"), 5)
    assert FailedTasks(queue).list(["default"]) == []
