"""Shared fixtures: a real redis-server per test process, flushed before every test.

The server is started by the suite itself on a free loopback port and stopped at
the end; nothing here ever talks to a user's Redis.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import Workers

from rqueue.config import Config
from rqueue.server import RedisServer
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue

TESTS_DIR = Path(__file__).parent


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
def config(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Config:
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    return Config.resolve(redis_url=redis_server.url)


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
    started = Workers(config, cwd=TESTS_DIR)
    yield started
    started.kill_all()


@pytest.fixture(autouse=True)
def _no_user_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    # A test that forgot the `config` fixture must fail, not reach localhost:6379.
    if "REDIS_URL" not in os.environ:
        monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
