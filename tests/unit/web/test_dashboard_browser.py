"""The dashboard in a real headless browser (Debian's chromium, driven by Playwright),
against the test Redis and real workers. Screenshots go to the test's tmp_path."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import apptasks
import pytest
from browser import chromium, served_dashboard
from playwright.sync_api import Browser, Dialog, Page, expect
from support import Workers, push_job, strings, wait_for

from rqueue.failed import PAGE, FailedTasks
from rqueue.metrics import list_workers
from rqueue.metrics.wait_limits import WaitLimits
from rqueue.store.queue import RedisQueue

FAST = ("--block-for", "0.2", "--log-level", "warning")
TOKEN = "browser-test-token-0123456789"
WAIT_MS = 20_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    dialogs: list[str] = []

    def dialog_opened(dialog: Dialog) -> None:  # alert() would mean Redis text ran as a script
        dialogs.append(dialog.message)
        dialog.dismiss()

    opened.on("dialog", dialog_opened)
    yield opened
    context.close()
    assert dialogs == []


def test_the_overview_charts_render_with_data_and_refresh_live(
    page: Page, queue: RedisQueue, workers: Workers, tmp_path: Path
) -> None:
    worker = workers.start("-c", "1", *FAST)
    with served_dashboard(queue) as served:
        page.goto(f"{served.url}/")
        expect(page.locator("svg.chart")).to_have_count(4)
        for value in range(10):
            apptasks.record.dispatch(value)
        apptasks.always_raises.using(tries=1).dispatch("boom")
        wait_for(lambda: len(strings(queue.client, apptasks.DONE)) == 11, 20, "the tasks run")
        # No reload: the page's script fetches the charts again until the data shows.
        paths = page.locator('svg.chart path.series[data-series="default"]')
        expect(paths).to_have_count(4, timeout=WAIT_MS)
        assert page.locator("[data-live][data-refreshed]").count() == 1
        drawn = paths.first.get_attribute("d") or ""
        assert drawn.startswith("M") and drawn.count("L") >= 1
        expect(page.locator(".summary")).to_contain_text("1 worker(s)")
        page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)
        assert (tmp_path / "overview.png").stat().st_size > 0
    worker.signal(15)
    assert worker.wait() == 0


def test_a_failed_task_is_found_by_search_retried_from_the_page_and_then_runs(
    page: Page, queue: RedisQueue, workers: Workers, tmp_path: Path
) -> None:
    apptasks.always_raises.using(tries=1).dispatch("<script>alert('pwned')</script>")
    handle = apptasks.fails_until.using(tries=1).dispatch("from-the-browser", 2)
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    assert FailedTasks(queue).find(handle.id) is not None
    queue.client.delete(apptasks.DONE)  # what the first attempts recorded
    with served_dashboard(queue) as served:
        page.goto(f"{served.url}/failed")
        expect(page.locator("tr.failed-task")).to_have_count(2)
        expect(page.locator("table.failed")).to_contain_text("<script>alert('pwned')</script>")
        page.fill('input[name="q"]', "attempt 1 fails")
        page.click("text=Search")
        row = page.locator("tr.failed-task")
        expect(row).to_have_count(1)
        expect(row).to_have_attribute("data-id", handle.id)
        page.screenshot(path=str(tmp_path / "failed-search.png"), full_page=True)
        row.locator("button.retry-one").click()
        expect(page.locator(".notice")).to_have_text("Retried 1 of 1 failed task(s).")
        expect(page.locator("tr.failed-task")).to_have_count(0)  # the search, run again
        page.screenshot(path=str(tmp_path / "failed-retried.png"), full_page=True)
    worker = workers.start("-c", "1", *FAST)
    wait_for(lambda: strings(queue.client, apptasks.DONE), 20, "the retried task to run")
    assert strings(queue.client, apptasks.DONE) == ["from-the-browser"]  # it ran, this time
    assert FailedTasks(queue).find(handle.id) is None
    worker.signal(15)
    assert worker.wait() == 0


def test_with_a_token_the_pages_need_the_login_form(
    page: Page, queue: RedisQueue, tmp_path: Path
) -> None:
    with served_dashboard(queue, token=TOKEN) as served:
        page.goto(f"{served.url}/queues")
        expect(page).to_have_url(f"{served.url}/login?next=%2Fqueues")
        page.fill('input[name="token"]', "not-the-token")
        page.click("button:has-text('Log in')")
        expect(page.locator("p.error")).to_have_text("That is not the token.")
        page.screenshot(path=str(tmp_path / "login-refused.png"))
        page.fill('input[name="token"]', TOKEN)
        page.click("button:has-text('Log in')")
        expect(page).to_have_url(f"{served.url}/queues")
        expect(page.locator("h1")).to_have_text("Queues")
        page.screenshot(path=str(tmp_path / "queues.png"), full_page=True)
        page.click("button:has-text('log out')")
        page.goto(f"{served.url}/failed")
        expect(page).to_have_url(f"{served.url}/login?next=%2Ffailed")


def test_a_queue_s_ready_list_pages_and_a_task_is_cancelled_from_its_page(
    page: Page, queue: RedisQueue, tmp_path: Path
) -> None:
    old = push_job(queue, "apptasks:record", "x", dispatched_at=time.time() - 600)  # the head
    handles = [apptasks.record.using(tags=["batch:7"]).dispatch(n) for n in range(PAGE + 1)]
    hostile = apptasks.record.using(tags=["<img src=x onerror=alert(1)>"]).dispatch("<script>")
    queue.client.rpush(queue.keys("default").ready, b"\x1b[2J not a task")
    with served_dashboard(queue, waits=WaitLimits(default=60)) as served:
        page.goto(f"{served.url}/queues")
        row = page.locator('tr[data-queue="default"]')
        expect(row).to_have_class("over")  # its head waited 600 s, over the 60 s limit
        expect(row.locator(".flag")).to_have_text("over 1 min 00 s")
        page.screenshot(path=str(tmp_path / "queues-over.png"), full_page=True)
        row.locator("td").nth(1).locator("a").click()
        expect(page.locator("h1")).to_have_text("Queue default: ready")
        expect(page.locator("tr.task")).to_have_count(PAGE)
        expect(page.locator("tr.task").first).to_have_attribute("data-id", old.id)
        expect(page.locator("tr.task").nth(1)).to_have_attribute("data-id", handles[0].id)
        expect(page.locator("tr.task .tag").first).to_have_text("batch:7")
        page.screenshot(path=str(tmp_path / "ready-list.png"), full_page=True)
        page.click("text=Next page")
        expect(page.locator("tr.task")).to_have_count(4)  # two, the hostile, one by hand
        expect(page.locator("tr.task.unreadable")).to_have_count(1)
        expect(page.locator(f'tr[data-id="{hostile.id}"] .tag')).to_have_text(
            "<img src=x onerror=alert(1)>"
        )
        page.screenshot(path=str(tmp_path / "ready-list-page-2.png"), full_page=True)
        page.click(f"text={hostile.id}")
        expect(page.locator("dd.state")).to_have_text("ready")
        expect(page.locator("code.args")).to_have_text("['<script>']")
        page.screenshot(path=str(tmp_path / "task-ready.png"), full_page=True)
        page.click("button:has-text('Cancel')")
        expect(page.locator(".notice")).to_have_text(
            f"Task {hostile.id} cancelled; it will not run."
        )
        expect(page.locator("dd.state")).to_have_text("cancelled")
        page.screenshot(path=str(tmp_path / "task-cancelled.png"), full_page=True)
    for name in ("queues-over", "ready-list", "ready-list-page-2", "task-ready", "task-cancelled"):
        assert (tmp_path / f"{name}.png").stat().st_size > 0


def test_the_running_and_finished_lists_and_a_task_name_page(
    page: Page, queue: RedisQueue, workers: Workers, tmp_path: Path
) -> None:
    kept = [apptasks.record.using(keep_result=60).dispatch(n) for n in range(3)]
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    apptasks.always_raises.using(keep_result=60, tries=1).dispatch("<b>boom</b>")
    code, output = workers.run("--stop-when-empty", *FAST)  # it finished last
    assert code == 0, output
    napping = apptasks.naps.dispatch(30)
    worker = workers.start("-c", "1", *FAST)
    with served_dashboard(queue) as served:
        # Running once the worker's heartbeat lists it (within a second or two).
        wait_for(lambda: [w for w in list_workers(queue) if w.tasks], 20, "the task to run")
        page.goto(f"{served.url}/queue/running/default")
        running = page.locator(f'tr.task[data-id="{napping.id}"]')
        expect(running).to_contain_text(f"pid {worker.pid}, child")
        page.screenshot(path=str(tmp_path / "running-list.png"), full_page=True)
        page.click("nav.lists >> text=finished")
        expect(page.locator("tr.task")).to_have_count(4)
        expect(page.locator("tr.task td.status").first).to_have_text("failed")
        expect(page.locator("tr.task").first).to_contain_text(
            "RuntimeError: raising on purpose: <b>boom</b>"
        )
        shown = page.locator("tr.task").evaluate_all("rows => rows.map(r => r.dataset.id)")
        assert set(shown[1:]) == {handle.id for handle in kept}
        page.screenshot(path=str(tmp_path / "finished-list.png"), full_page=True)
        page.locator("tr.task").first.locator("a", has_text="apptasks:always_raises").click()
        expect(page.locator("h1")).to_have_text("Task apptasks:always_raises")
        expect(page.locator("svg.chart")).to_have_count(4)
        expect(page.locator("tr.failed-task")).to_have_count(1)
        page.screenshot(path=str(tmp_path / "task-name.png"), full_page=True)
    worker.signal(9)
    worker.wait()
    for name in ("running-list", "finished-list", "task-name"):
        assert (tmp_path / f"{name}.png").stat().st_size > 0
