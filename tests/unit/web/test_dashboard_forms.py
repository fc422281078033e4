"""The dashboard's forms and what a page offers: every form posts where a route takes
its method, Enter in the failed page's action form presses nothing, the login page
shows nothing of the inside, and a finished batch offers no Cancel (and refuses one).

The real app served by uvicorn (tests/browser.py), with httpx, and with Debian's
headless chromium where only a browser says what a key press does.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import apptasks
import httpx
import pytest
from browser import chromium, served_dashboard
from playwright.sync_api import Request as BrowserRequest
from starlette.routing import Match
from support import Workers, cli

from rqueue.errors import RQueueError
from rqueue.failed import FailedTasks
from rqueue.schedules import Schedules
from rqueue.settings.config import Config
from rqueue.store.batch_store import BatchStore
from rqueue.store.queue import RedisQueue
from rqueue.web import create_app
from rqueue.workflows import batch, batch_of

FAST = ("--block-for", "0.2", "--log-level", "warning")
TOKEN = "a-token-long-enough-for-the-forms"


class Forms(HTMLParser):
    """Every ``(method, action)`` a page's forms and their buttons submit to."""

    def __init__(self, page_url: str) -> None:
        super().__init__()
        self.page_url = page_url
        self.found: list[tuple[str, str]] = []
        self._form: tuple[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        given = {name: value or "" for name, value in attrs}
        if tag == "form":
            method = given.get("method", "get").upper()
            action = urljoin(self.page_url, given.get("action") or self.page_url)
            self._form = (method, action)
            self.found.append(self._form)
        elif tag in ("button", "input") and self._form and "formaction" in given:
            self.found.append((self._form[0], urljoin(self.page_url, given["formaction"])))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None


def answers(app: object, method: str, path: str) -> bool:
    """Whether one of the app's routes takes ``method`` at ``path``."""
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    return any(route.matches(scope)[0] is Match.FULL for route in app.routes)  # type: ignore[attr-defined]


@pytest.fixture
def filled(queue: RedisQueue, workers: Workers) -> dict[str, str]:
    """A failed task, a schedule, a finished batch and one in progress."""
    failed = apptasks.always_raises.dispatch("x").id
    done = batch([apptasks.record.pending(n) for n in range(2)]).dispatch()
    code, output = workers.run("--tries", "1", "--stop-when-empty", *FAST)
    assert code == 0, output
    Schedules(queue).add("nightly", apptasks.record, every=3600, args=["n"])
    running = batch([apptasks.record.pending("later")]).dispatch()
    return {"failed": failed, "finished": done.id, "running": running.id}


def test_every_form_posts_where_a_route_takes_its_method(
    queue: RedisQueue, filled: dict[str, str]
) -> None:
    app = create_app(queue, token=TOKEN)
    pages = [
        "/login",
        "/",
        "/queues",
        "/workers",
        "/failed",
        "/failed?q=x",
        f"/failed/{filled['failed']}",
        f"/tasks/{filled['failed']}",
        "/schedules",
        "/batches",
        f"/batches/{filled['finished']}",
        f"/batches/{filled['running']}",
    ]
    submitted: set[tuple[str, str]] = set()
    with served_dashboard(queue, token=TOKEN) as served, httpx.Client(base_url=served.url) as c:
        login = c.get("/login").text  # before login, the login form is the one page
        forms = Forms(served.url + "/login")
        forms.feed(login)
        submitted.update(forms.found)
        csrf = re.search(r'name="csrf" value="([^"]+)"', login)
        assert csrf
        c.post("/login", data={"csrf": csrf.group(1), "token": TOKEN})
        for path in pages[1:]:
            page = c.get(path)
            assert page.status_code == 200, path
            forms = Forms(served.url + path)
            forms.feed(page.text)
            assert forms.found, path
            submitted.update(forms.found)
    for method, action in sorted(submitted):
        path = urlsplit(action).path
        assert answers(app, method, path), f"a form sends {method} {action}: no route takes it"
    posted = {urlsplit(a).path for m, a in submitted if m == "POST"}
    assert {"/failed/retry", "/failed/forget", "/schedules/pause", "/logout"} <= posted


def test_enter_in_the_failed_page_s_action_form_presses_no_button(
    queue: RedisQueue, workers: Workers
) -> None:
    failed = apptasks.always_raises.dispatch("y").id
    code, output = workers.run("--tries", "1", "--stop-when-empty", *FAST)
    assert code == 0, output
    with chromium() as browser, served_dashboard(queue) as served:
        page = browser.new_page()
        sent: list[tuple[str, str]] = []

        def on_request(request: BrowserRequest) -> None:
            if request.resource_type == "document":
                sent.append((request.method, urlsplit(request.url).path))

        page.goto(f"{served.url}/failed")
        page.on("request", on_request)
        page.check(f'input[name="ids"][value="{failed}"]')
        page.focus(f'input[name="ids"][value="{failed}"]')
        page.keyboard.press("Enter")
        page.wait_for_timeout(500)  # a submission would have left by now
        assert sent == []  # not "Retry ticked", not a POST to /failed (405)
        assert FailedTasks(queue).find(failed) is not None
        page.fill('input[name="q"]', "raising")
        page.focus('input[name="q"]')
        with page.expect_navigation():
            page.keyboard.press("Enter")  # the search box: Enter searches
        assert sent == [("GET", "/failed")]
        assert page.locator("tr.failed-task").count() == 1


def test_the_login_page_shows_no_navigation_and_no_task_search(queue: RedisQueue) -> None:
    with served_dashboard(queue, token=TOKEN) as served, httpx.Client(base_url=served.url) as c:
        login = c.get("/login").text
        assert "<nav>" not in login and 'action="/tasks"' not in login
        assert 'href="/failed"' not in login and "log out" not in login
        missing = c.get("/static/nothing.css")  # an error page before login: nothing either
        assert missing.status_code == 404 and "<nav>" not in missing.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', login)
        assert csrf
        c.post("/login", data={"csrf": csrf.group(1), "token": TOKEN})
        inside = c.get("/queues").text
        assert "<nav>" in inside and 'action="/tasks"' in inside and "log out" in inside
        bearer = httpx.get(f"{served.url}/queues", headers={"Authorization": f"Bearer {TOKEN}"})
        assert "<nav>" in bearer.text
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as c:
        assert "<nav>" in c.get("/").text  # no token: no login, the links show


def test_a_finished_batch_offers_no_cancel_and_refuses_one(
    queue: RedisQueue, filled: dict[str, str]
) -> None:
    finished, running = filled["finished"], filled["running"]
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as c:
        page = c.get(f"/batches/{finished}").text
        assert "finished" in page and f"/batches/{finished}/cancel" not in page
        assert f"/batches/{running}/cancel" in c.get(f"/batches/{running}").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', c.get("/failed").text)
        assert csrf
        refused = c.post(f"/batches/{finished}/cancel", data={"csrf": csrf.group(1)})
        assert refused.status_code == 303
        shown = c.get(refused.headers["location"]).text
        assert "The batch has finished: there is nothing left to cancel." in shown
        assert not batch_of(finished, queue).cancelled()
        c.post(f"/batches/{running}/cancel", data={"csrf": csrf.group(1)})
        assert batch_of(running, queue).cancelled()


def test_a_batch_whose_state_does_not_read_is_shown_as_such(
    queue: RedisQueue, filled: dict[str, str]
) -> None:
    broken = filled["finished"]
    state = BatchStore(queue).keys(broken).state
    queue.client.hset(state, "total", "abc")  # as someone wrote it by hand
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as c:
        listed = c.get("/batches")
        assert listed.status_code == 200 and filled["running"] in listed.text
        assert "unreadable" in listed.text
        page = c.get(f"/batches/{broken}")
        assert page.status_code == 200 and "does not read" in page.text
        assert f"/batches/{broken}/cancel" not in page.text


def test_a_finished_batch_is_refused_by_every_way_to_cancel_it(
    queue: RedisQueue, config: Config, filled: dict[str, str]
) -> None:
    finished = filled["finished"]
    with pytest.raises(RQueueError, match="has finished: nothing is left to cancel"):
        batch_of(finished, queue).cancel()
    result = cli(config, "batches", "cancel", finished)
    assert result.returncode == 1 and "has finished" in result.stderr, result
    assert not batch_of(finished, queue).cancelled()
    assert batch_of(filled["running"], queue).cancel()


def test_retrying_or_cancelling_a_batch_that_does_not_read_says_so_without_a_500(
    queue: RedisQueue, filled: dict[str, str]
) -> None:
    state = BatchStore(queue).keys(filled["finished"]).state
    queue.client.hset(state, "total", "abc")
    wrong_type = BatchStore(queue).keys(filled["running"]).state
    queue.client.delete(wrong_type)
    queue.client.set(wrong_type, "not a hash")
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as c:
        csrf = re.search(r'name="csrf" value="([^"]+)"', c.get("/failed").text)
        assert csrf
        for batch_id in (filled["finished"], filled["running"]):
            for action in ("retry", "cancel"):
                answer = c.post(f"/batches/{batch_id}/{action}", data={"csrf": csrf.group(1)})
                assert answer.status_code == 303, (batch_id, action, answer.text[:300])
