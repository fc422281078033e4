"""``async def`` hooks and listeners are awaited: run to their end in process mode, on
the child's one event loop; scheduled on the running loop in async mode, and waited for
by a warm stop. One that raises is logged and changes nothing. Real ``rqueue work``,
real Redis; the hooks and listeners are in tests/tasks/async_hook_tasks.py.
"""

from __future__ import annotations

import signal

import async_hook_tasks as ht
import pytest
from support import Workers, strings, wait_for

from rqueue.failed import FailedTasks
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import Task

FAST = ("-c", "1", "--kill-grace", "0.5", "--block-for", "0.5", "--log-level", "warning")


def test_async_hooks_and_listeners_of_sync_and_async_tasks_are_awaited_on_one_loop(
    queue: RedisQueue, workers: Workers
) -> None:
    ht.plain.dispatch("plain-ok")
    ht.plain.dispatch("plain-bad", fail=True)
    ht.awaited.dispatch("async-ok")
    ht.awaited.dispatch("async-bad", fail=True)
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    # Serial 1 everywhere: the child's one loop, async mode's and the hooks' alike.
    assert sorted(strings(queue.client, ht.HOOKED)) == [
        "failed async-bad 1",
        "failed plain-bad 1",
        "succeeded async-ok 1",
        "succeeded plain-ok 1",
    ]
    assert sorted(strings(queue.client, ht.HEARD)) == [
        "failed async-bad 1",
        "failed plain-bad 1",
        "processed async-ok 1",
        "processed plain-ok 1",
    ]
    assert "Traceback" not in output, output  # no hook or listener raised


@pytest.mark.parametrize(
    "broken", [ht.plain_broken, ht.awaited_broken], ids=["process mode", "async mode"]
)
def test_an_async_hook_that_raises_is_logged_and_the_outcome_stands(
    queue: RedisQueue, workers: Workers, broken: Task[[str], str]
) -> None:
    handle = broken.dispatch("x")
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    assert "async hook is broken" in output
    assert f"of task {broken.name} ({handle.id}) raised; the task's outcome stands" in output
    assert handle.status() == "succeeded"
    assert FailedTasks(queue).list(["default"]) == []


def test_a_warm_stop_waits_for_a_slow_async_hook(queue: RedisQueue, workers: Workers) -> None:
    ht.awaited_slow.dispatch()
    worker = workers.start(*FAST)
    wait_for(lambda: strings(queue.client, ht.SLOW) == ["start"], 10, "the slow hook's start")
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0, worker.output()
    assert strings(queue.client, ht.SLOW) == ["start", "end"]
