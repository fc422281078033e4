"""``rqueue supervise`` run for real: pools started, scaled by load, stopped warmly."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import apptasks
import pool_tasks
import psutil
import pytest
from support import (
    RQUEUE,
    TASKS_DIR,
    WorkerProcess,
    cli,
    follow_log,
    kill_groups,
    logged,
    strings,
    wait_for,
)

from rqueue.metrics import list_workers
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.worker.pools.status import list_pools

Start = Callable[[str], tuple[WorkerProcess, list[str]]]


@pytest.fixture
def supervise(config: Config, tmp_path: Path) -> Iterator[Start]:
    """Start ``rqueue supervise`` on a pools file; at the end, kill what is left of it
    and of its pools' parents (each in its own process group)."""
    started: list[WorkerProcess] = []
    groups: set[int] = set()

    def start(pools: str) -> tuple[WorkerProcess, list[str]]:
        path = tmp_path / "rqueue.toml"
        path.write_text(pools)
        process = subprocess.Popen(
            [*RQUEUE, "supervise", "--config", str(path)],
            cwd=TASKS_DIR,
            env={**os.environ, "REDIS_URL": config.redis_url},
            text=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        started.append(WorkerProcess(process))
        return started[-1], follow_log(started[-1])

    def parents() -> None:
        for worker in started:
            with contextlib.suppress(psutil.NoSuchProcess):
                groups.update(c.pid for c in psutil.Process(worker.pid).children())

    yield start
    parents()
    kill_groups([worker.pid for worker in started] + sorted(groups))
    for worker in started:
        worker.process.wait(10)


def _processes(queue: RedisQueue) -> dict[str, int]:
    """Processes each running worker parent keeps, by its queues."""
    return {",".join(w.queues): w.processes for w in list_workers(queue)}


def test_supervise_starts_every_pool_and_sigterm_stops_them_warmly(
    config: Config, queue: RedisQueue, supervise: Start
) -> None:
    worker, log = supervise(
        """
[pools.main]
queues = ["default"]
balance = "off"
min_processes = 2
max_processes = 2
block_for = 0.5

[pools.mail]
queues = ["emails", "sms"]
max_processes = 3
"""
    )
    expected = {"default": 2, "emails": 1, "sms": 1}
    wait_for(lambda: _processes(queue) == expected, 20, "every pool's parents")
    wait_for(lambda: len(list_pools(queue)) == 2, 10, "the pools' status")
    shown = cli(config, "workers").stdout
    assert "mail" in shown and "emails: 1 (1); sms: 1 (1)" in shown, shown
    apptasks.blocks_until_released.dispatch("held")
    wait_for(lambda: strings(queue.client, "test:started"), 10, "the task to start")
    worker.signal(signal.SIGTERM)
    wait_for(lambda: logged(log, "warm shutdown of every pool"), 10, "the stop to begin")
    wait_for(
        lambda: "".join(log).count("SIGTERM: warm shutdown, finishing") == 3, 10, "every parent"
    )
    assert worker.process.poll() is None  # the task still runs
    queue.client.rpush("test:release", "go")
    assert worker.wait(20) == 0, "".join(log)
    assert strings(queue.client, apptasks.DONE) == ["held"]
    assert (queue.sizes(["default"])[0].ready, queue.sizes(["default"])[0].reserved) == (0, 0)
    assert list_pools(queue) == [] and list_workers(queue) == []


def test_a_burst_grows_its_queue_s_processes_to_max_then_back_with_each_task_run_once(
    queue: RedisQueue, supervise: Start
) -> None:
    worker, log = supervise(
        """
[pools.burst]
queues = ["burst", "quiet"]
max_processes = 4
balance = "auto"
balance_cooldown = 0.2
time_to_clear = 1
prefetch = 1
block_for = 0.5
"""
    )
    wait_for(lambda: _processes(queue) == {"burst": 1, "quiet": 1}, 20, "the pool")
    pool_tasks.gated.dispatch_many([(n,) for n in range(40)])
    # The quiet queue keeps its one process; the burst's grows to the rest, each child
    # up and running a task (held at the gate, so the backlog stays).
    wait_for(lambda: _processes(queue) == {"burst": 3, "quiet": 1}, 20, "the pool to grow")
    wait_for(lambda: sum(len(w.tasks) for w in list_workers(queue)) == 3, 20, "3 running")
    (status,) = list_pools(queue)
    assert status.parents[0][:2] == ("burst", 3) and status.parents[1][:2] == ("quiet", 1)
    assert "burst: " in status.why() and " ready" in status.why()
    queue.client.set(pool_tasks.GATE, 1)
    wait_for(lambda: len(strings(queue.client, pool_tasks.DONE)) == 40, 30, "the burst to run")
    wait_for(lambda: _processes(queue) == {"burst": 1, "quiet": 1}, 20, "the pool to shrink")
    # The scaler stopped the two extra children, warmly: none was interrupted.
    wait_for(lambda: "".join(log).count("stopped: the pool shrank") == 2, 10, "two stopped")
    done = strings(queue.client, pool_tasks.DONE)
    assert sorted(int(d.split(":")[0]) for d in done) == list(range(40))  # each once
    assert len({d.split(":")[1] for d in done}) >= 3  # run by the grown pool
    (size,) = queue.sizes(["burst"])
    assert (size.ready, size.reserved, size.delayed, size.failed) == (0, 0, 0, 0)
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0, "".join(log)


def test_a_pool_parent_that_dies_is_started_again(queue: RedisQueue, supervise: Start) -> None:
    worker, log = supervise('[pools.p]\nqueues = ["default"]\nblock_for = 0.5\n')
    (first,) = wait_for(lambda: list_workers(queue), 20, "the pool's parent")
    os.kill(first.pid, signal.SIGKILL)
    wait_for(lambda: logged(log, f"(pid {first.pid}) exited with code -9"), 10, "its exit")
    wait_for(lambda: [w for w in list_workers(queue) if w.pid != first.pid], 20, "a new parent")
    apptasks.record.dispatch("after")
    wait_for(lambda: strings(queue.client, apptasks.DONE) == ["after"], 10, "a task to run")
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0, "".join(log)


def test_rqueue_restart_reloads_each_parent_which_keeps_the_count_it_was_scaled_to(
    config: Config, queue: RedisQueue, supervise: Start
) -> None:
    worker, log = supervise(
        """
[pools.burst]
queues = ["burst"]
max_processes = 3
balance_cooldown = 0.2
time_to_clear = 1
prefetch = 1
block_for = 0.5
"""
    )
    (parent,) = wait_for(lambda: list_workers(queue), 20, "the pool's parent")
    pool_tasks.gated.dispatch_many([(n,) for n in range(30)])
    wait_for(lambda: _processes(queue) == {"burst": 3}, 20, "the pool to grow")
    wait_for(lambda: len(strings(queue.client, pool_tasks.STARTED)) == 3, 20, "3 running")
    assert cli(config, "restart").returncode == 0
    wait_for(lambda: logged(log, "restart requested through Redis"), 10, "the restart")
    # The 3 running tasks end: the parent reloads; the others wait at the gate.
    queue.client.sadd(pool_tasks.OPENED, *strings(queue.client, pool_tasks.STARTED))
    wait_for(lambda: logged(log, "reloading: starting a fresh worker process"), 20, "reload")
    # The same process, executed afresh with its first command line (--concurrency 1),
    # reads the count it was scaled to from its file.
    reloaded = wait_for(
        lambda: [w for w in list_workers(queue) if w.id != parent.id], 20, "the reloaded parent"
    )
    assert reloaded[0].pid == parent.pid
    after = "".join(log).rindex("reloading: starting a fresh worker process")
    wait_for(lambda: "scaling from 1 to 3 children" in "".join(log)[after:], 20, "it to grow")
    queue.client.set(pool_tasks.GATE, 1)
    wait_for(lambda: len(strings(queue.client, pool_tasks.DONE)) == 30, 30, "the burst to run")
    done = strings(queue.client, pool_tasks.DONE)
    assert sorted(int(d.split(":")[0]) for d in done) == list(range(30))
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0, "".join(log)


def test_a_parent_that_keeps_failing_at_start_is_started_again_ever_later(
    supervise: Start,
) -> None:
    worker, log = supervise('[pools.p]\nqueues = ["default"]\napp = ["no_such_module"]\n')
    wait_for(lambda: logged(log, "exited with code 2; starting it again in 1 s"), 20, "1 s")
    wait_for(lambda: logged(log, "exited with code 2; starting it again in 2 s"), 20, "2 s")
    assert logged(log, "-A/--app: no module named 'no_such_module'")
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0, "".join(log)
