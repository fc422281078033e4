"""Signals to a running ``rqueue work``: warm and cold shutdown, reload, pause and resume."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import apptasks
import psutil
import pytest
from support import WorkerProcess, Workers, cli, follow_log, logged, ready, strings, title, wait_for

from rqueue.encoding.payload import decode
from rqueue.settings.config import Config
from rqueue.store.header import payload_attempts
from rqueue.store.queue import RedisQueue

pytestmark = pytest.mark.topology  # every test here runs on Cluster and Sentinel as well

FAST = ("--kill-grace", "0.5", "--block-for", "0.5")


def done(queue: RedisQueue) -> list[str]:
    return strings(queue.client, apptasks.DONE)


def started(queue: RedisQueue) -> list[str]:
    return strings(queue.client, "test:started")


def exit_code(worker: WorkerProcess, log: list[str], timeout: float = 15) -> int:
    """Wait for the worker to exit; on a timeout, fail with its log and its processes."""
    try:
        return worker.wait(timeout)
    except subprocess.TimeoutExpired:
        processes = [(c.pid, c.status(), title(c.pid)) for c in worker.children()]
        message = f"worker did not exit; children {processes}; log:\n{''.join(log)}"
        raise AssertionError(message) from None


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_warm_shutdown_finishes_the_running_task_and_loses_nothing(
    queue: RedisQueue, workers: Workers, signum: int
) -> None:
    worker = workers.start(*FAST)
    log = follow_log(worker)
    (child,) = worker.wait_for_children(1)
    # One push: the child's first batch is "first" alone, its second the other four.
    apptasks.dispatch_first_then_blocking("w", 3)
    wait_for(lambda: started(queue) == [f"{child.pid}:w"], 10, "the task to start")
    worker.signal(signum)
    wait_for(lambda: logged(log, "warm shutdown"), 10, "the worker to begin stopping")
    assert worker.process.poll() is None and child.is_running()  # the task still runs
    assert queue.sizes(["default"])[0].reserved == 4
    queue.client.rpush("test:release", "go")
    assert worker.wait(15) == 0, "".join(log)
    assert done(queue) == ["first", "w"]
    # Tasks the child had prefetched but not started are back, attempts returned.
    remaining = [decode(p) for p in ready(queue)]
    assert [(j.args, j.attempts) for j in remaining] == [((i,), 0) for i in range(3)]
    assert queue.sizes(["default"])[0].reserved == 0


def test_warm_shutdown_of_an_idle_worker_is_prompt(queue: RedisQueue, workers: Workers) -> None:
    worker = workers.start("-c", "2", "--block-for", "5")
    worker.wait_for_children(2)
    time.sleep(0.3)  # let the children settle into their blocking waits
    sent = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(10) == 0
    assert time.monotonic() - sent < 2.5


def test_cold_shutdown_kills_children_and_releases_their_tasks_at_once(
    queue: RedisQueue, workers: Workers
) -> None:
    worker = workers.start("-c", "2", *FAST)
    log = follow_log(worker)
    children = worker.wait_for_children(2)
    apptasks.blocks_until_released.dispatch("a")
    wait_for(lambda: len(started(queue)) == 1, 10, "the first task to start")
    apptasks.blocks_until_released.dispatch("b")
    wait_for(lambda: len(started(queue)) == 2, 10, "the second task to start")
    worker.signal(signal.SIGTERM)
    wait_for(lambda: logged(log, "warm shutdown"), 10, "the first signal to be handled")
    sent = time.monotonic()
    worker.signal(signal.SIGTERM)
    code = worker.wait(10)
    assert time.monotonic() - sent < 3, "".join(log)
    assert code == 0, "".join(log)
    assert all(not c.is_running() or c.status() == psutil.STATUS_ZOMBIE for c in children)
    # Released back at once (not after their reservation expires), attempts returned.
    released = ready(queue)
    assert sorted(decode(p).args[0] for p in released) == ["a", "b"]
    assert [payload_attempts(p) for p in released] == [0, 0]
    size = queue.sizes(["default"])[0]
    assert (size.reserved, size.delayed, size.failed) == (0, 0, 0)
    # And they complete on the next worker.
    queue.client.rpush("test:release", "go", "go")
    code, output = workers.run("-c", "2", "--stop-when-empty", *FAST)
    assert code == 0, output
    assert sorted(done(queue)) == ["a", "b"]


def test_sighup_reloads_children_after_their_current_task(
    queue: RedisQueue, workers: Workers
) -> None:
    worker = workers.start("-c", "2", *FAST)
    log = follow_log(worker)
    old = {c.pid for c in worker.wait_for_children(2)}
    apptasks.blocks_until_released.dispatch("r")
    wait_for(lambda: started(queue), 10, "the task to start")
    running = int(started(queue)[0].split(":")[0])
    worker.signal(signal.SIGHUP)
    wait_for(lambda: logged(log, "SIGHUP"), 10, "the reload to begin")
    assert psutil.Process(running).is_running()  # not cut short
    queue.client.rpush("test:release", "go")
    wait_for(lambda: done(queue) == ["r"], 10, "the running task to finish")
    new = wait_for(
        lambda: (
            {c.pid for c in worker.children()}
            if len(worker.children()) == 2 and not ({c.pid for c in worker.children()} & old)
            else None
        ),
        15,
        "two fresh children",
    )
    assert worker.process.poll() is None  # the same parent process, re-executed
    wait_for(lambda: title(worker.pid) == "rqueue: master default", 10, "the master title")
    apptasks.record.dispatch_many([(i,) for i in range(5)])
    wait_for(lambda: len(done(queue)) == 6, 10, "the reloaded worker to run tasks")
    assert {c.pid for c in worker.children()} == new
    assert queue.sizes(["default"])[0].failed == 0


def test_rqueue_restart_reloads_every_worker(
    queue: RedisQueue, workers: Workers, config: Config
) -> None:
    first = workers.start("-c", "2", *FAST)
    second = workers.start("-c", "1", *FAST)
    old = {c.pid for c in first.wait_for_children(2)} | {c.pid for c in second.wait_for_children(1)}
    result = cli(config, "restart")
    assert result.returncode == 0, result.stderr
    for worker, count in ((first, 2), (second, 1)):
        wait_for(
            lambda w=worker, n=count: (
                len(w.children()) == n and not ({c.pid for c in w.children()} & old)
            ),
            15,
            "fresh children",
        )
        assert worker.process.poll() is None
    apptasks.record.dispatch_many([(i,) for i in range(6)])
    wait_for(lambda: len(done(queue)) == 6, 10, "the reloaded workers to run tasks")


def test_sigusr2_pauses_and_sigcont_resumes(queue: RedisQueue, workers: Workers) -> None:
    worker = workers.start("-c", "2", *FAST)
    children = worker.wait_for_children(2)
    worker.signal(signal.SIGUSR2)
    for child in children:
        wait_for(lambda c=child: title(c.pid).endswith(": paused"), 10, "the children to pause")
    apptasks.record.dispatch_many([(i,) for i in range(3)])
    time.sleep(1.0)  # an absence can only be observed over a while
    assert done(queue) == []
    assert queue.sizes(["default"])[0].ready == 3
    worker.signal(signal.SIGCONT)
    wait_for(lambda: len(done(queue)) == 3, 10, "the tasks to run after resuming")
    assert worker.process.poll() is None


def test_a_paused_worker_still_stops_on_sigterm(queue: RedisQueue, workers: Workers) -> None:
    worker = workers.start(*FAST)
    (child,) = worker.wait_for_children(1)
    worker.signal(signal.SIGUSR2)
    wait_for(lambda: title(child.pid).endswith(": paused"), 10, "the child to pause")
    worker.signal(signal.SIGTERM)
    assert worker.wait(10) == 0


def test_ctrl_c_to_the_whole_process_group_is_one_warm_shutdown(
    queue: RedisQueue, workers: Workers
) -> None:
    worker = workers.start("-c", "2", *FAST)
    log = follow_log(worker)
    worker.wait_for_children(2)
    apptasks.blocks_until_released.dispatch("c")
    wait_for(lambda: started(queue), 10, "the task to start")
    os.killpg(worker.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
    wait_for(lambda: logged(log, "warm shutdown"), 10, "the worker to begin stopping")
    queue.client.rpush("test:release", "go")
    assert exit_code(worker, log) == 0, "".join(log)
    assert done(queue) == ["c"]
    assert not logged(log, "cold shutdown")
    assert queue.sizes(["default"])[0].reserved == 0


def test_a_child_whose_parent_died_finishes_its_task_and_gives_back_the_rest(
    queue: RedisQueue, workers: Workers
) -> None:
    worker = workers.start(*FAST)
    (child,) = worker.wait_for_children(1)
    # The first batch is "first" alone; the second holds the other four.
    apptasks.dispatch_first_then_blocking("orphan", 3)
    wait_for(lambda: started(queue), 10, "the task to start")
    began = time.monotonic()
    assert queue.sizes(["default"])[0].reserved == 4  # the child prefetched them all
    worker.process.kill()
    worker.wait(10)
    assert child.is_running()
    wait_for(lambda: child.ppid() != worker.pid, 10, "the child to be orphaned")
    # A child asks the kernel for its parent at most twice a second (worker/child.py).
    time.sleep(max(0.0, 0.6 - (time.monotonic() - began)))
    queue.client.rpush("test:release", "go")
    child.wait(10)
    assert done(queue) == ["first", "orphan"]
    size = queue.sizes(["default"])[0]
    assert (size.ready, size.reserved) == (3, 0)  # acknowledged, and the rest given back
    assert [payload_attempts(p) for p in ready(queue)] == [0] * 3


def test_a_stop_taken_by_another_thread_during_a_fork_reaches_the_new_child(
    workers: Workers,
) -> None:
    """With the parent's signals held in its main thread across fork(), a stop goes to
    another thread, and its handler runs before the new child is recorded: that child
    was never told to stop, and the parent waited for it for ever (seen with the
    Sentinel watcher's thread). ``fork_signal`` sends it from inside the first fork."""
    worker = workers.start("-c", "2", "--app", "fork_signal", *FAST)
    assert worker.wait(20) == 0
    assert "SIGTERM: warm shutdown" in worker.output()


def test_a_stop_signal_while_children_are_being_forked_stops_them_all(
    queue: RedisQueue, workers: Workers
) -> None:
    for _ in range(3):
        worker = workers.start("-c", "4", *FAST)
        # Signal as soon as the first child exists: the others are still being forked.
        deadline = time.monotonic() + 10
        while not any(title(c.pid).startswith("rqueue: ") for c in worker.children()):
            assert time.monotonic() < deadline, "no child started"
        worker.signal(signal.SIGTERM)
        assert worker.wait(10) == 0
