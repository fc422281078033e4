"""The dashboard's pages and actions over HTTP, against the test Redis and real workers:
what each page shows, and that each action changed what it says it changed."""

from __future__ import annotations

import re
from collections.abc import Iterator

import apptasks
import httpx
import pytest
from browser import served_dashboard
from prometheus_client.parser import text_string_to_metric_families
from support import Workers, strings, wait_for

from rqueue.encoding.payload import Job, encode, new_id
from rqueue.failed import FailedTasks, make_record
from rqueue.schedules import Schedules
from rqueue.store.queue import RedisQueue
from rqueue.web.failed_search import Match, retry_matching
from rqueue.web.pages.queues import MOST_SHOWN
from rqueue.workflows import batch, batch_of, chain

FAST = ("--block-for", "0.2", "--log-level", "warning")


@pytest.fixture
def client(queue: RedisQueue) -> Iterator[httpx.Client]:
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as client:
        yield client


def csrf(client: httpx.Client) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', client.get("/failed").text)
    assert found
    return found.group(1)


def fail(workers: Workers, *values: str) -> list[str]:
    """Ids of ``always_raises`` calls that failed for good in a real worker."""
    ids = [apptasks.always_raises.dispatch(value).id for value in values]
    code, output = workers.run("--tries", "1", "--stop-when-empty", *FAST)
    assert code == 0, output
    return ids


def test_the_queues_page_shows_counts_oldest_wait_and_pauses_a_queue(
    client: httpx.Client, queue: RedisQueue
) -> None:
    for value in range(3):
        apptasks.record.dispatch(value)
    apptasks.record.using(queue="later").later(600, "x")
    page = client.get("/queues").text
    row = re.search(r'<tr data-queue="default">(.*?)</tr>', page, re.DOTALL)
    assert row, page
    cells = [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td>(.*?)</td>", row.group(1))]
    assert cells[0] == "default"  # linked to its charts
    assert cells[1:5] == ["3", "0", "0", "0"]  # each linked to its list of tasks
    assert cells[6].endswith(" s") and cells[7] == "running"  # the oldest wait, in seconds
    assert '<tr data-queue="later">' in page
    done = client.post("/queues/pause", data={"csrf": csrf(client), "queue": "default"})
    assert done.status_code == 303 and queue.paused(["default", "later"]) == {"default"}
    page = client.get("/queues").text
    assert "Paused queue default." in page and "Resume" in page
    client.post("/queues/resume", data={"csrf": csrf(client), "queue": "default"})
    assert queue.paused(["default"]) == set()
    table = client.get("/queues/table?match=lat*").text  # the part the page refreshes
    assert 'data-queue="later"' in table and 'data-queue="default"' not in table


def test_failed_tasks_are_found_by_text_and_retried_or_forgotten_one_or_many(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    apple, pear, plum = fail(workers, "apple", "pear", "plum")
    found = client.get("/failed?q=PEAR").text  # case-insensitive, in the error text
    assert pear in found and apple not in found and plum not in found
    assert apple in client.get("/failed").text and "3 failed task(s)" in client.get("/failed").text
    detail = client.get(f"/failed/{pear}").text
    assert "Traceback" in detail and "raising on purpose: pear" in detail
    assert "[&#39;pear&#39;]" in detail  # its arguments
    token = csrf(client)
    client.post("/failed/forget", data={"csrf": token, "one": plum, "ids": [apple, pear]})
    assert {f.id for f in FailedTasks(queue).list()} == {apple, pear}  # only the row's own
    done = client.post("/failed/retry", data={"csrf": token, "ids": [apple, pear]})
    assert done.status_code == 303
    assert "Retried 2 of 2 failed task(s)." in client.get(done.headers["location"]).text
    assert FailedTasks(queue).list() == [] and queue.sizes(["default"])[0].ready == 2


def test_past_the_queues_page_s_rows_the_failed_page_asks_for_a_queue_s_name(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    """It listed every known queue as an option: ten thousand made a page of megabytes."""
    (task_id,) = fail(workers, "one")
    assert '<select name="queue"' in client.get("/failed").text
    queue.remember_queues([f"tenant-{n}" for n in range(MOST_SHOWN)])
    page = client.get("/failed").text
    assert '<select name="queue"' not in page and "tenant-7" not in page
    assert '<input name="queue" value=""' in page
    assert task_id in client.get("/failed?queue=default").text
    assert task_id not in client.get("/failed?queue=tenant-7").text


def test_retry_all_matching_retries_every_match_and_only_them(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    values = [f"match-{n}" for n in range(12)] + [f"other-{n}" for n in range(5)]
    fail(workers, *values)
    form = {"csrf": csrf(client), "scope": "matching", "q": "match-", "queue": ""}
    done = client.post("/failed/retry", data=form)
    assert "Retried 12 failed task(s) matching" in client.get(done.headers["location"]).text
    left = sorted(f.message for f in FailedTasks(queue).list())
    assert left == [f"raising on purpose: other-{n}" for n in range(5)]
    assert queue.sizes(["default"])[0].ready == 12


def test_an_action_on_every_match_steps_over_none_of_them_as_records_shift(
    queue: RedisQueue,
) -> None:
    # Removing records while reading the list newest first moves the ones not read yet:
    # matches over more than two windows (250 each), between records that do not
    # match, prove the repeated scan finds them all. Records as a worker writes them.
    records = []
    for n in range(900):
        value = f"{'many' if n % 3 else 'few'}-{n}"
        job = Job(new_id(), "apptasks:always_raises", (value,), {}, "default")
        error = f"raising on purpose: {value}"
        records.append(make_record("default", encode(job), "RuntimeError", error, job=job))
    queue.client.rpush(queue.keys("default").failed, *records)
    queue.remember_queues(["default"])
    assert retry_matching(FailedTasks(queue), Match("many-")) == 600
    assert FailedTasks(queue).page().total == 300 == queue.sizes(["default"])[0].ready / 2


def test_the_schedules_page_shows_next_runs_and_pauses_resumes_and_runs_one_now(
    client: httpx.Client, queue: RedisQueue
) -> None:
    Schedules(queue).add("hourly", apptasks.record, every=3600, args=["tick"])
    page = client.get("/schedules").text
    assert '<tr data-schedule="hourly">' in page and "every 3600 s" in page
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z<br>", page)  # the next runs
    token = csrf(client)
    client.post("/schedules/pause", data={"csrf": token, "name": "hourly"})
    assert Schedules(queue).get("hourly").paused
    assert '<td class="state">paused</td>' in client.get("/schedules").text
    client.post("/schedules/resume", data={"csrf": token, "name": "hourly"})
    assert not Schedules(queue).get("hourly").paused
    ran = client.post("/schedules/run-now", data={"csrf": token, "name": "hourly"})
    assert "Enqueued hourly now as task" in client.get(ran.headers["location"]).text
    assert queue.sizes(["default"])[0].ready == 1
    missing = client.post("/schedules/pause", data={"csrf": token, "name": "nope"})
    assert "Could not pause nope" in client.get(missing.headers["location"]).text


def test_batches_and_a_task_by_id_show_their_state_and_a_batch_can_be_cancelled(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    kept = apptasks.record.using(keep_result=600).dispatch("kept <b>value</b>")
    started = batch([apptasks.record.pending(n) for n in range(3)]).name("nightly").dispatch()
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    task_page = client.get(f"/tasks/{kept.id}").text
    assert "succeeded" in task_page and "&#39;kept &lt;b&gt;value&lt;/b&gt;&#39;" in task_page
    assert client.get("/tasks/no-such-task").status_code == 404
    lookup = client.get(f"/tasks?id={kept.id}")
    assert lookup.headers["location"] == f"/tasks/{kept.id}"
    listed = client.get("/batches").text
    assert started.id in listed and "nightly" in listed and "finished" in listed
    second = batch([apptasks.record.pending("x")]).dispatch()
    page = client.get(f"/batches/{second.id}").text
    assert "in progress" in page and "Cancel" in page
    client.post(f"/batches/{second.id}/cancel", data={"csrf": csrf(client)})
    assert batch_of(second.id, queue).cancelled()
    assert client.get("/batches/" + "f" * 32).status_code == 404


def test_a_batch_page_shows_the_tree_of_its_workflow(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    inner = batch([apptasks.record.pending("inner")])
    outer = batch([inner, chain(apptasks.record.pending("a"), apptasks.record.pending("b"))])
    started = outer.dispatch()
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    status = started.status()
    assert status is not None and len(status.nested) == 1
    nested_id = status.nested[0][1]
    page = client.get(f"/batches/{started.id}").text
    assert "Nested batches" in page and f'href="/batches/{nested_id}"' in page
    nested = client.get(f"/batches/{nested_id}").text
    assert "part of" in nested and f'href="/batches/{started.id}"' in nested


def test_the_overview_charts_the_minutes_workers_reported(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    assert "no data in this window" in client.get("/").text
    for value in range(5):
        apptasks.record.dispatch(value)
    worker = workers.start("-c", "1", *FAST)
    wait_for(lambda: len(strings(queue.client, apptasks.DONE)) == 5, 20, "five tasks done")
    charts = wait_for(
        lambda: (page := client.get("/overview/charts").text).count('class="series"') >= 4 and page,
        15,
        "the workers' metrics to reach the charts",
    )
    assert 'data-series="default"' in charts and "1 worker(s)" in charts
    day = client.get("/?window=day").text
    assert "last day" in day and 'class="series"' in day
    worker.signal(15)
    assert worker.wait() == 0


def test_metrics_are_served_in_prometheus_s_text_format(
    client: httpx.Client, workers: Workers
) -> None:
    fail(workers, "one")
    scraped = client.get("/metrics")
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(scraped.text)}
    failed = [s for s in families["rqueue_tasks_failed"].samples if s.name.endswith("_total")]
    assert [(s.labels, s.value) for s in failed] == [
        ({"queue": "default", "task": "apptasks:always_raises"}, 1.0)
    ]
    assert families["rqueue_queue_failed"].samples[0].value == 1.0


def test_the_workers_page_shows_what_each_child_runs_now_and_for_how_long(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    assert "No worker is running" in client.get("/workers").text
    handle = apptasks.naps.dispatch(30)
    workers.start("-c", "2", "--timeout", "60", *FAST)
    table = wait_for(
        lambda: "apptasks:naps" in (text := client.get("/workers/table").text) and text,
        20,
        "the worker to name its running task",
    )
    assert 'data-worker="' in table and "2 process(es)" in table and "default" in table
    row = re.search(r"<tr>\s*<td>\d+</td>\s*<td>apptasks:naps</td>(.*?)</tr>", table, re.DOTALL)
    assert row and handle.id in row.group(1)
    assert re.search(r"<td>\d+\.\d{3} s</td>", row.group(1))  # running for, so far
    # The sleeping task ends with the worker's process group (the fixture kills it).
