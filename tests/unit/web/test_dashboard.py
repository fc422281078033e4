"""The dashboard's safety over HTTP: the token, the login, CSRF, read-only, escaping.

The real app served by uvicorn on a loopback port (tests/browser.py), driven with
httpx against the test Redis; failed tasks come from a real worker.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator
from html.parser import HTMLParser

import apptasks
import httpx
import msgpack
import pytest
from browser import Served, served_dashboard
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from support import Workers

from rqueue.encoding.payload import new_id
from rqueue.failed import FailedTasks
from rqueue.metrics.collector import Collector
from rqueue.schedules import Schedules
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.web import create_app
from rqueue.web.auth import COOKIE
from rqueue.workflows import batch

TOKEN = "s3cret-token-for-the-tests"
HOSTILE = "<script>alert('x')</script>\x1b[2J\x1b]52;c;cHduZWQ=\x07\u202e"
"""HTML, a screen clear, an OSC 52 clipboard write and a bidi override."""


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)


def fail_hostile_task(queue: RedisQueue, workers: Workers) -> str:
    """A task that really failed in a worker, its argument and error hostile text."""
    handle = apptasks.always_raises.dispatch(HOSTILE)
    code, output = workers.run("--tries", "1", "--stop-when-empty", "--log-level", "warning")
    assert code == 0, output
    assert FailedTasks(queue).find(handle.id) is not None
    return handle.id


@pytest.fixture
def guarded(queue: RedisQueue) -> Iterator[Served]:
    with served_dashboard(queue, token=TOKEN) as served:
        yield served


def test_text_from_redis_is_escaped_on_every_page_that_shows_it(
    queue: RedisQueue, workers: Workers
) -> None:
    task_id = fail_hostile_task(queue, workers)
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as client:
        for path in ("/failed", f"/failed/{task_id}", f"/tasks/{task_id}", "/failed?q=alert"):
            page = client.get(path)
            assert page.status_code == 200, path
            assert "raising on purpose" in page.text, path  # the error is on the page...
            assert "<script>alert" not in page.text, path  # ...as text, not as a script
            assert "&lt;script&gt;alert(" in page.text, path
            assert "\x1b" not in page.text and "\u202e" not in page.text, path
            assert r"\x1b[2J" in page.text and r"\u202e" in page.text, path
        detail = client.get(f"/failed/{task_id}").text
        assert "Traceback" in detail and r"\x1b]52;c;cHduZWQ=\x07" in detail
        assert "default-src" not in detail  # the policy is a header, not in the page
        policy = client.get("/failed").headers["content-security-policy"]
        assert "default-src 'self'" in policy and "unsafe-inline" not in policy.split(";")[0]


def test_hostile_names_on_the_other_pages_are_escaped_too(queue: RedisQueue) -> None:
    """A worker's entry, a schedule, a batch, a metrics series and the queue registry
    each carry hostile text: every page that lists them shows it as inert text."""
    entry = {
        "id": "f" * 32,
        "host": HOSTILE,
        "pid": 1,
        "queues": [HOSTILE],
        "processes": 1,
        "slots": 0,
        "threads": 0,
        "started": time.time(),
        "heartbeat": time.time(),
        "tasks": [["e" * 32, HOSTILE, HOSTILE, 1, time.time()]],
    }
    queue.client.set(queue.global_keys.worker("f" * 32), msgpack.packb(entry))
    queue.client.zadd(queue.global_keys.workers, {"f" * 32: round(time.time() * 1000)})
    Schedules(queue).add(HOSTILE, apptasks.record, every=60, args=[HOSTILE])
    started = batch([apptasks.record.pending(1)]).name(HOSTILE).dispatch()
    metrics = Collector(queue)
    metrics.failed("default", HOSTILE, None, None)
    metrics.flush()
    queue.client.sadd(queue.global_keys.known_queues, HOSTILE)
    pages = ("/", "/?window=day", "/overview/charts", "/queues", "/workers")
    shown_on = (*pages, "/schedules", "/batches", f"/batches/{started.id}")
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as client:
        for path in shown_on:
            page = client.get(path)
            assert page.status_code == 200, path
            assert "<script>alert" not in page.text, path
            text = visible_text(page.text)
            assert "\x1b" not in text and "\u202e" not in text, path
        for path in ("/workers", "/schedules", "/batches", f"/batches/{started.id}"):
            assert "<script>alert('x')</script>\\x1b[2J" in visible_text(client.get(path).text)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def visible_text(html: str) -> str:
    """A page's text as a browser shows it. (A form's hidden value carries a name
    exactly, to act on it: only HTML-escaped, which is right there.)"""
    parser = _Text()
    parser.feed(html)
    return "".join(parser.parts)


def test_without_the_token_nothing_is_shown_and_a_browser_is_sent_to_log_in(
    guarded: Served,
) -> None:
    with httpx.Client(base_url=guarded.url) as client:
        for path in ("/", "/queues", "/failed", "/workers", "/tasks/abc", "/metrics"):
            refused = client.get(path)
            assert refused.status_code == 401, path
            assert refused.headers["www-authenticate"] == "Bearer"
        browser = client.get("/failed?q=x", headers={"Accept": "text/html"})
        assert browser.status_code == 303
        assert browser.headers["location"] == "/login?next=%2Ffailed%3Fq%3Dx"
        assert client.post("/failed/retry", data={"one": "x"}).status_code == 401
        assert client.get("/login").status_code == 200  # the form itself is open
        assert client.get("/static/dashboard.css").status_code == 200


def test_the_bearer_token_is_accepted_and_a_wrong_one_is_not(guarded: Served) -> None:
    with httpx.Client(base_url=guarded.url) as client:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert client.get("/queues", headers=bearer).is_success
        scraped = client.get("/metrics", headers=bearer)  # a scraper: no redirect, no login
        assert scraped.status_code == 200 and "# TYPE rqueue_queue_ready gauge" in scraped.text
        for wrong in (f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN, ""):
            refused = client.get("/queues", headers={"Authorization": wrong})
            assert refused.status_code == 401, wrong


def test_the_login_form_sets_a_signed_session_and_logging_out_ends_it(
    guarded: Served,
) -> None:
    with httpx.Client(base_url=guarded.url) as client:
        form = client.get("/login?next=/failed")
        csrf = csrf_of(form.text)
        wrong = client.post("/login", data={"csrf": csrf, "token": "nope", "next": "/failed"})
        assert wrong.status_code == 401 and "not the token" in wrong.text
        assert client.get("/queues").status_code == 401
        right = client.post("/login", data={"csrf": csrf, "token": TOKEN, "next": "/failed"})
        assert right.status_code == 303 and right.headers["location"] == "/failed"
        cookie = right.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie
        page = client.get("/queues")
        assert page.status_code == 200 and "log out" in page.text
        assert csrf_of(page.text) != csrf  # a fresh CSRF token once logged in
        client.post("/logout", data={"csrf": csrf_of(page.text)})
        assert client.get("/queues").status_code == 401


def test_login_needs_its_csrf_token_and_goes_nowhere_but_the_dashboard(
    guarded: Served,
) -> None:
    with httpx.Client(base_url=guarded.url) as client:
        csrf = csrf_of(client.get("/login").text)
        assert client.post("/login", data={"token": TOKEN}).status_code == 403
        for target in ("//evil.example/", "https://evil.example/", "/\\evil.example"):
            moved = client.post("/login", data={"csrf": csrf, "token": TOKEN, "next": target})
            assert moved.status_code == 303 and moved.headers["location"] == "/", target
            client.post("/logout", data={"csrf": csrf_of(client.get("/queues").text)})
            csrf = csrf_of(client.get("/login").text)


def test_a_forged_or_altered_session_cookie_is_not_a_login(
    queue: RedisQueue, guarded: Served
) -> None:
    with httpx.Client(base_url=guarded.url) as client:
        csrf = csrf_of(client.get("/login").text)
        client.post("/login", data={"csrf": csrf, "token": TOKEN})
        signed = client.cookies[COOKIE]
        body, _, signature = signed.rpartition(".")
        forged = {
            "a made-up cookie": "eyJhdXRoIjogdHJ1ZX0.deadbeef",
            "not ASCII": f"{body}.{'é' * len(signature)}",
            "another signature": f"{body}.{'0' * len(signature)}",
            "no signature": body,
        }
        for what, value in forged.items():
            cookie = f"{COOKIE}={value}".encode()  # as bytes: httpx sends ASCII only
            with httpx.Client(base_url=guarded.url) as other:
                assert other.get("/queues", headers={"Cookie": cookie}).status_code == 401, what
        with (
            served_dashboard(queue, token=TOKEN + "2") as other,
            httpx.Client(base_url=other.url, cookies={COOKIE: signed}) as stranger,
        ):
            assert stranger.get("/queues").status_code == 401  # another token's cookie


def test_every_action_refuses_a_post_without_the_session_s_csrf_token(
    queue: RedisQueue,
) -> None:
    app = create_app(queue)
    actions = [
        route.path.replace("{batch_id}", "b" * 32)
        for route in app.routes
        if isinstance(route, Route) and "POST" in (route.methods or ())
    ]
    assert {"/failed/retry", "/queues/pause", "/schedules/run-now", "/logout"} <= set(actions)
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as client:
        csrf = csrf_of(client.get("/failed").text)
        for path in actions:
            for data in ({}, {"csrf": ""}, {"csrf": csrf + "x"}, {"csrf": "é" * len(csrf)}):
                refused = client.post(path, data={**data, "queue": "default", "one": "x"})
                assert refused.status_code == 403, (path, data)
        with httpx.Client(base_url=served.url) as stranger:  # another visitor's token
            stranger.get("/failed")
            assert (
                stranger.post("/queues/pause", data={"csrf": csrf, "queue": "a"}).status_code == 403
            )
        assert queue.paused(["default", "a"]) == set()
        paused = client.post("/queues/pause", data={"csrf": csrf, "queue": "default"})
        assert paused.status_code == 303 and queue.paused(["default"]) == {"default"}


def test_read_only_shows_no_action_and_refuses_every_one(
    queue: RedisQueue, workers: Workers
) -> None:
    task_id = fail_hostile_task(queue, workers)
    with served_dashboard(queue, token=TOKEN, read_only=True) as served:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=served.url, headers=bearer) as client:
            for path in ("/failed", f"/failed/{task_id}", "/queues", "/schedules"):
                page = client.get(path)
                assert page.status_code == 200 and "read-only" in page.text, path
                assert 'method="post"' not in page.text.split("</header>")[1], path
            csrf = csrf_of(client.get("/login").text)
            for path in ("/failed/retry", "/failed/forget", "/queues/pause"):
                data = {"csrf": csrf, "one": task_id, "queue": "default", "scope": "matching"}
                assert client.post(path, data=data).status_code == 403, path
    assert FailedTasks(queue).find(task_id) is not None
    assert queue.paused(["default"]) == set()


def test_mounted_in_another_app_its_links_and_cookie_stay_under_the_mount(
    queue: RedisQueue,
) -> None:
    outer = Starlette(routes=[Mount("/ops/rqueue", create_app(queue, token=TOKEN))])
    with Served(outer) as served, httpx.Client(base_url=served.url) as client:
        moved = client.get("/ops/rqueue/queues", headers={"Accept": "text/html"})
        assert moved.status_code == 303
        assert moved.headers["location"] == "/ops/rqueue/login?next=%2Fqueues"
        assert "Path=/ops/rqueue" in moved.headers["set-cookie"]
        form = client.get("/ops/rqueue/login")
        assert 'action="/ops/rqueue/login"' in form.text
        assert 'href="/ops/rqueue/static/dashboard.css"' in form.text
        logged_in = client.post(
            "/ops/rqueue/login",
            data={"csrf": csrf_of(form.text), "token": TOKEN, "next": "/queues"},
        )
        assert logged_in.headers["location"] == "/ops/rqueue/queues"
        page = client.get("/ops/rqueue/queues")
        assert page.status_code == 200 and 'href="/ops/rqueue/failed"' in page.text


def test_garbage_written_to_rqueue_s_keys_leaves_every_page_standing(
    queue: RedisQueue,
) -> None:
    keys = queue.keys("default")
    queue.remember_queues(["default"])
    queue.client.rpush(keys.failed, b"\x00not a record <script>alert(1)</script>")
    forged = new_id()
    queue.client.set(keys.result(forged), b"\xc1<script>")  # not msgpack at all
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as client:
        for path in ("/", "/queues", "/workers", "/failed", "/schedules", "/batches"):
            page = client.get(path)
            assert page.status_code == 200, path
            assert "<script>alert" not in page.text, path
        assert "1 failed task(s)" in client.get("/failed").text  # counted, not shown
        page = client.get(f"/tasks/{forged}")
        assert page.status_code == 200 and "Its record does not read" in page.text


def test_processes_sharing_rqueue_secret_accept_each_other_s_csrf_tokens(
    config: Config, queue: RedisQueue
) -> None:
    # Behind several processes (gunicorn workers) a form may post to another process.
    signed = RedisQueue(dataclasses.replace(config, secret="shared-secret-of-the-app"))
    with (
        served_dashboard(signed) as first,
        served_dashboard(signed) as second,
        served_dashboard(queue) as stranger,
        httpx.Client() as client,
    ):
        token = csrf_of(client.get(f"{first.url}/failed").text)
        moved = client.post(f"{second.url}/queues/pause", data={"csrf": token, "queue": "a"})
        assert moved.status_code == 303 and queue.paused(["a"]) == {"a"}
        refused = client.post(f"{stranger.url}/queues/pause", data={"csrf": token, "queue": "b"})
        assert refused.status_code == 403 and queue.paused(["b"]) == set()
