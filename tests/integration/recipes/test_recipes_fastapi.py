"""The FastAPI recipe (examples/fastapi_app, docs/integrations.md), run for real: the
app under uvicorn, a real ``rqueue work``, the dashboard mounted in the app."""

from __future__ import annotations

import sys

import httpx
from recipes import EXAMPLES, assert_counts_words, assert_quotes_its_examples, serving
from support import Workers

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

APP = EXAMPLES / "fastapi_app"
UVICORN = [sys.executable, "-m", "uvicorn", "app:app", "--port", "0"]
TOKEN = "fastapi-recipe-test-token"


def test_a_route_dispatches_and_another_awaits_the_workers_result(
    config: Config, queue: RedisQueue
) -> None:
    env = {"REDIS_URL": config.redis_url, "RQUEUE_DASHBOARD_TOKEN": TOKEN}
    workers = Workers(config, cwd=APP)
    try:
        with serving(UVICORN, APP, env) as base, httpx.Client(base_url=base, timeout=30) as client:
            assert_counts_words(client, queue, workers)
            assert client.get("/words/not-an-id").status_code == 422
    finally:
        workers.kill_all()


def test_the_mounted_dashboard_asks_for_the_token(config: Config, queue: RedisQueue) -> None:
    env = {"REDIS_URL": config.redis_url, "RQUEUE_DASHBOARD_TOKEN": TOKEN}
    with serving(UVICORN, APP, env) as base, httpx.Client(base_url=base) as client:
        assert client.get("/rqueue/").status_code == 401
        browser = client.get("/rqueue/queues", headers={"accept": "text/html"})
        assert browser.status_code == 303  # to the login form, under the mount's prefix
        assert browser.headers["location"].startswith("/rqueue/login?")
        page = client.get("/rqueue/", headers={"authorization": f"Bearer {TOKEN}"})
        assert page.status_code == 200, page.text
        assert "rqueue" in page.text.lower()


def test_the_docs_quote_the_fastapi_example() -> None:
    assert_quotes_its_examples("FastAPI")
