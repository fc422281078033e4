"""Helpers for tests: bounded waits, the real CLI in a subprocess, worker processes."""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import psutil
import pytest
import redis

from rqueue.encoding.payload import Job, encode, new_id
from rqueue.failed import FailedTasks
from rqueue.settings.config import Config
from rqueue.store.cluster import ClusterClient
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import Task

T = TypeVar("T")

RQUEUE = [sys.executable, "-m", "rqueue"]

TASKS_DIR = Path(__file__).parent / "tasks"
"""The task modules of the tests (``apptasks``, ...): the working directory of every worker
the tests start, so ``-A apptasks`` and task names like ``apptasks:add`` import from there."""


def wait_for(condition: Callable[[], T], timeout: float = 10.0, message: str = "") -> T:
    """Poll ``condition`` until it is truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message or condition}")
        time.sleep(0.01)


def cli(
    config: Config,
    *args: str,
    timeout: float = 30.0,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``rqueue ARGS`` against the test Redis and return the finished process."""
    full_env = {**os.environ, "REDIS_URL": config.redis_url, **(env or {})}
    return subprocess.run(
        [*RQUEUE, *args], capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd
    )


class WorkerProcess:
    """A running ``rqueue work`` parent."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process

    @property
    def pid(self) -> int:
        return self.process.pid

    def children(self) -> list[psutil.Process]:
        """The forked worker children (named ``rqueue: ...``), not helper subprocesses
        that imports may run at start-up (``platform.architecture()`` runs ``file``)."""
        try:
            found = psutil.Process(self.pid).children()
        except psutil.NoSuchProcess:
            return []
        return [c for c in found if title(c.pid).startswith("rqueue:")]

    def wait_for_children(self, count: int, timeout: float = 10.0) -> list[psutil.Process]:
        return wait_for(
            lambda: len(self.children()) == count and self.children(),
            timeout,
            f"{count} worker children",
        )

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = 20.0) -> int:
        return self.process.wait(timeout)

    def output(self) -> str:
        """Everything the worker logged; call after it exited."""
        assert self.process.stderr is not None
        return self.process.stderr.read()


class Workers:
    def __init__(self, config: Config, cwd: Path) -> None:
        self.config = config
        self.cwd = cwd
        self.started: list[WorkerProcess] = []

    def start(self, *args: str, env: dict[str, str] | None = None) -> WorkerProcess:
        full_env = {**os.environ, "REDIS_URL": self.config.redis_url, **(env or {})}
        process = subprocess.Popen(
            [*RQUEUE, "work", *args],
            cwd=self.cwd,
            env=full_env,
            text=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        worker = WorkerProcess(process)
        self.started.append(worker)
        return worker

    def run(
        self, *args: str, timeout: float = 30.0, env: dict[str, str] | None = None
    ) -> tuple[int, str]:
        """Run a worker that exits by itself (``--stop-when-empty``, ``--once``)."""
        worker = self.start(*args, env=env)
        code = worker.wait(timeout)
        return code, worker.output()

    def kill_all(self) -> None:
        # The whole group, even when its parent is gone already (a test that killed it):
        # its children may live on, finish a task in the next test and write into its keys.
        kill_groups([worker.pid for worker in self.started])
        for worker in self.started:
            worker.process.wait(10)
            if worker.process.stderr is not None:
                worker.process.stderr.close()


def kill_groups(groups: list[int]) -> None:
    """SIGKILL every process of these process groups, and wait until each has died (its
    sockets closed; reaped or not): SIGKILL lands when a process is next scheduled, and
    a worker child still blocked on a queue's notify list took the next test's push."""
    doomed = _in_groups(set(groups))
    for group in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    wait_for(lambda: not any(map(_alive, doomed)), 10, "the killed processes dead")


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _in_groups(groups: set[int]) -> list[psutil.Process]:
    """The processes of these process groups now."""
    members = []
    for process in psutil.process_iter():
        with contextlib.suppress(ProcessLookupError, psutil.Error):
            if os.getpgid(process.pid) in groups:
                members.append(process)
    return members


# -- added for the core test suite (issue 2) --------------------------------------


def strings(client: redis.Redis, key: str) -> list[str]:
    """A Redis list of what tasks recorded, as text."""
    return [v.decode() for v in client.lrange(key, 0, -1)]


def title(pid: int) -> str:
    """A process's title as ``ps`` shows it (setproctitle rewrites the command line)."""
    try:
        return " ".join(psutil.Process(pid).cmdline()).strip()
    except psutil.NoSuchProcess:
        return ""


def push_job(connection: RedisQueue, task: str, *args: Any, **fields: Any) -> Job:
    """Push a payload built by hand, as another producer (or an attacker) could."""
    job = Job(
        id=new_id(), task=task, args=args, kwargs={}, queue=fields.pop("queue", "default"), **fields
    )
    connection.push(job.queue, [encode(job)])
    return job


def follow_log(worker: WorkerProcess) -> list[str]:
    """Collect a running worker's log lines as they come, to wait for one of them.

    Call right after starting the worker; ``WorkerProcess.output()`` is then empty and
    the returned list (filled by a thread) holds everything instead.
    """
    lines: list[str] = []
    stream = worker.process.stderr
    assert stream is not None

    def read() -> None:
        with contextlib.suppress(ValueError, OSError):  # the stream closed under us
            for line in stream:
                lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def logged(lines: list[str], text: str) -> bool:
    return any(text in line for line in list(lines))


def ready(queue: RedisQueue, name: str = "default") -> list[bytes]:
    """The payloads waiting in queue ``name``, oldest first, read by the store's own key
    name: the same test then runs on one Redis, a cluster (``queues:{default}``) and
    Sentinel (``pytest -m topology``)."""
    payloads: list[bytes] = queue.client.lrange(queue.keys(name).ready, 0, -1)  # type: ignore[assignment]
    return payloads


def nodes(queue: RedisQueue) -> list[redis.Redis]:
    """A client for each server holding queues: the primaries of a cluster, else one
    (to read every server's ``INFO`` on any topology)."""
    client = queue.client
    return client.slots.primaries() if isinstance(client, ClusterClient) else [client]


def load_scripts(queue: RedisQueue) -> None:
    """Load every script first, so that a test counting EVALSHA calls meets no NOSCRIPT
    reply (a script's first call on a server sends it whole)."""
    for script in queue.scripts.all():
        queue.client.script_load(script.source)


def scripts_run(queue: RedisQueue) -> int:
    """EVALSHA calls (reserve.lua, ...) since the last ``CONFIG RESETSTAT``, all nodes."""
    stats = [node.info("commandstats").get("cmdstat_evalsha", {}) for node in nodes(queue)]
    return sum(int(stat.get("calls", 0)) for stat in stats)


def settled(queue: RedisQueue, name: str = "default") -> bool:
    """Nothing of queue ``name`` ready, delayed or reserved."""
    size = queue.sizes([name])[0]
    return size.ready == size.delayed == size.reserved == 0


def one_of_ten_ended(
    queue: RedisQueue,
    workers: Workers,
    held: Task[[int], Any],
    started: str,
    release: str,
    *args: str,
) -> WorkerProcess:
    """40 ``held`` tasks (each counts itself in ``started``, then runs until a token comes
    on ``release``) on one child running 10 at once (``args``: ``--threads 10`` or
    ``--slots 10``): all ten run, then one ends, as tasks that end a few at a time do.
    Returns once the child has started the next and holds a fifth of ten more reserved,
    which have not started."""
    held.dispatch_many([(n,) for n in range(40)])
    worker = workers.start("-c", "1", *args)
    wait_for(lambda: int(queue.client.get(started) or 0) == 10, 10, "ten running")
    queue.client.rpush(release, "go")
    wait_for(lambda: int(queue.client.get(started) or 0) == 11, 10, "the next one started")
    wait_for(lambda: queue.sizes(["default"])[0].reserved == 12, 10, "10 running, 2 read ahead")
    assert int(queue.client.get(started) or 0) == 11  # held, not started
    return worker


def failures(queue: RedisQueue, name: str = "default") -> list[str]:
    """``task exception`` of each failed task of queue ``name``, newest first."""
    return [f"{r.task} {r.exception}" for r in FailedTasks(queue).list([name])]


def run_machine(machine: Any, config: Config, examples: int, steps: int) -> None:
    """Run a hypothesis state machine against the test Redis: the machine reads its
    connection from the class attribute ``connection``; Redis is emptied after."""
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    connection = RedisQueue(config)
    machine.connection = connection
    try:
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=examples,
                stateful_step_count=steps,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        connection.client.flushall()
        connection.client.close()


def in_threads(count: int, action: Callable[[], object]) -> list[object]:
    """Run ``action`` in ``count`` threads released together; their results."""
    start = threading.Barrier(count)
    results: list[object] = []

    def run() -> None:
        start.wait(10)
        results.append(action())

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == count
    return results


def task_module(
    name: str, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ModuleType]:
    """A fixture's body: ``source`` written as module ``name`` in ``tmp_path`` (a worker
    started there imports it by name with ``-A``), imported here, forgotten after."""
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module(name)
    sys.modules.pop(name, None)
