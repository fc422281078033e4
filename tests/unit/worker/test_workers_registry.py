"""The worker registry: real ``rqueue work`` processes list themselves and what they run;
a dead one's entry vanishes; ``rqueue workers`` prints them escaped."""

from __future__ import annotations

import json
import os
import signal

import apptasks
import msgpack
import pytest
from support import Workers, cli, wait_for

from rqueue.metrics import WorkerInfo, list_workers
from rqueue.metrics.registry import ENTRY_TTL, RunningTask
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

FAST = ("--kill-grace", "0.5", "--block-for", "0.5")


def _listed(queue: RedisQueue, pid: int) -> WorkerInfo | None:
    return next((w for w in list_workers(queue) if w.pid == pid), None)


@pytest.mark.topology  # registry keys, on every topology
def test_a_running_worker_is_listed_with_the_task_its_child_runs(
    queue: RedisQueue, workers: Workers, config: Config
) -> None:
    worker = workers.start("default,emails", "-c", "2", *FAST)
    dispatched = apptasks.blocks_until_released.dispatch("held")
    wait_for(lambda: queue.client.llen("test:started"), 15, "the task to start")

    def running_named() -> WorkerInfo | None:
        found = _listed(queue, worker.pid)
        if found and any(t.task == "apptasks:blocks_until_released" for t in found.tasks):
            return found
        return None

    info = wait_for(running_named, 15, "the worker listed with its named task")
    (task,) = info.tasks
    assert (task.id, task.queue) == (dispatched.id, "default")
    assert info.queues == ("default", "emails") and info.processes == 2
    assert info.threads == 0 and info.heartbeat >= info.started > 0
    assert 1 <= task.child <= 2 and task.started >= info.started

    table = cli(config, "workers")
    assert table.returncode == 0, table.stderr
    assert str(worker.pid) in table.stdout and "apptasks:blocks_until_released" in table.stdout
    assert dispatched.id in table.stdout
    listed = json.loads(cli(config, "workers", "--json").stdout)
    (entry,) = [w for w in listed if w["pid"] == worker.pid]
    assert entry["tasks"][0]["id"] == dispatched.id and entry["processes"] == 2

    queue.client.rpush("test:release", 1)
    wait_for(lambda: (w := _listed(queue, worker.pid)) and not w.tasks, 15, "no task running")


@pytest.mark.parametrize("mode", [(), ("--threads", "2")], ids=["process", "threads"])
def test_a_running_task_is_named_from_the_first_heartbeat_that_lists_it(
    queue: RedisQueue, workers: Workers, mode: tuple[str, ...]
) -> None:
    worker = workers.start(*FAST, *mode)
    apptasks.blocks_until_released.dispatch("held")

    def listed_tasks() -> tuple[RunningTask, ...]:
        found = _listed(queue, worker.pid)
        return found.tasks if found else ()

    (task,) = wait_for(listed_tasks, 15, "the task listed")
    assert task.task == "apptasks:blocks_until_released"  # not "?" for a beat or two
    queue.client.rpush("test:release", 1)


# Not marked topology: an entry's expiry is Redis's own TTL, the same on every topology,
# and waiting it out costs ten seconds a run.
def test_a_killed_workers_entry_vanishes(queue: RedisQueue, workers: Workers) -> None:
    worker = workers.start(*FAST)
    wait_for(lambda: _listed(queue, worker.pid), 15, "the worker listed")
    os.killpg(worker.pid, signal.SIGKILL)  # no goodbye: its entry must expire by itself
    worker.wait(10)
    wait_for(lambda: _listed(queue, worker.pid) is None, ENTRY_TTL + 10, "the entry gone")
    assert queue.client.zcard(queue.global_keys.workers) == 0  # its id dropped too


@pytest.mark.topology  # registry keys, on every topology
def test_a_stopped_worker_leaves_the_registry_at_once(queue: RedisQueue, workers: Workers) -> None:
    worker = workers.start(*FAST)
    wait_for(lambda: _listed(queue, worker.pid), 15, "the worker listed")
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    assert _listed(queue, worker.pid) is None


@pytest.mark.topology  # registry keys, on every topology
def test_hostile_entries_are_left_out_or_printed_escaped(queue: RedisQueue, config: Config) -> None:
    keys = queue.global_keys
    evil = {
        "id": "e" * 32,
        "host": "\x1b]52;c;cHduZWQ=\x07host\n",
        "pid": 42,
        "queues": ["default"],
        "processes": 1,
        "slots": 100,
        "threads": 0,
        "started": 1.0,
        "heartbeat": 2.0,
        "tasks": [["id", "\x1b[2Jtask", "default", 1, 1.5], "not a row"],
    }
    garbage = {
        "a" * 32: b"\xc1 not msgpack",
        "b" * 32: msgpack.packb({**evil, "pid": "42"}),
        "c" * 32: msgpack.packb({**evil, "started": float("nan")}),
        "d" * 32: msgpack.packb([1, 2, 3]),
        "e" * 32: msgpack.packb(evil),
    }
    for worker_id, entry in garbage.items():
        queue.client.set(keys.worker(worker_id), entry, px=60_000)
        queue.client.zadd(keys.workers, {worker_id: 1})
    queue.client.zadd(keys.workers, {"f" * 32: 1})  # an id whose entry expired

    (only,) = list_workers(queue)
    assert only.host == evil["host"] and only.tasks[0].task == "\x1b[2Jtask"
    assert len(only.tasks) == 1  # the row that is not one is left out
    assert queue.client.zscore(keys.workers, "f" * 32) is None  # dropped on listing

    for args in (("workers",), ("workers", "--json")):
        result = cli(config, *args)
        assert result.returncode == 0, result.stderr
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout
        assert "task" in result.stdout and "host" in result.stdout


def test_a_worker_with_metrics_off_is_not_listed(queue: RedisQueue, workers: Workers) -> None:
    worker = workers.start("--no-metrics", *FAST)
    apptasks.blocks_until_released.dispatch("unlisted")
    wait_for(lambda: queue.client.llen("test:started"), 15, "the task to start")
    assert list_workers(queue) == [] and queue.client.zcard(queue.global_keys.workers) == 0
    queue.client.rpush("test:release", 1)
    wait_for(lambda: queue.client.llen(apptasks.DONE), 15, "the task to finish")
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0
