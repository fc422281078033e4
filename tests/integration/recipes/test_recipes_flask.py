"""The Flask recipe (examples/flask_app, docs/integrations.md), run for real: the app
under Flask's own server, a real ``rqueue work``."""

from __future__ import annotations

import sys

import httpx
from recipes import EXAMPLES, assert_counts_words, assert_quotes_its_examples, serving
from support import Workers

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

APP = EXAMPLES / "flask_app"
FLASK = [sys.executable, "-m", "flask", "--app", "app", "run", "--port", "0"]


def test_a_route_dispatches_and_another_waits_for_the_workers_result(
    config: Config, queue: RedisQueue
) -> None:
    workers = Workers(config, cwd=APP)
    try:
        env = {"REDIS_URL": config.redis_url}
        with serving(FLASK, APP, env) as base, httpx.Client(base_url=base, timeout=30) as client:
            assert_counts_words(client, queue, workers)
            assert client.get("/words/%3Cb%3Enot-an-id").status_code == 404
    finally:
        workers.kill_all()


def test_the_docs_quote_the_flask_example() -> None:
    assert_quotes_its_examples("Flask")
