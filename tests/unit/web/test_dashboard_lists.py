"""A queue's task lists on the dashboard over HTTP (ready, delayed, running, finished,
failed), against the test Redis and real workers: what each shows, its paging, and
entries that are no tasks shown as such, never a failed page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import quote

import apptasks
import httpx
import msgpack
import pytest
from browser import served_dashboard
from support import Workers, push_job, wait_for

from rqueue.failed import PAGE
from rqueue.store.header import raw_id
from rqueue.store.queue import RedisQueue

FAST = ("--block-for", "0.2", "--log-level", "warning")


@pytest.fixture
def client(queue: RedisQueue) -> Iterator[httpx.Client]:
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as client:
        yield client


def listed_ids(html: str) -> list[str]:
    return re.findall(r'<tr class="task[^"]*" data-id="([^"]*)"', html)


def test_the_ready_list_pages_through_the_queue_head_first(
    client: httpx.Client, queue: RedisQueue
) -> None:
    dispatched = [apptasks.record.dispatch(n).id for n in range(PAGE + 5)]
    page = client.get("/queue/ready/default")
    assert page.status_code == 200
    assert listed_ids(page.text) == dispatched[:PAGE]
    assert "[0]" in page.text  # the first one's arguments
    assert f'href="?offset={PAGE}"' in page.text
    second = client.get(f"/queue/ready/default?offset={PAGE}").text
    assert listed_ids(second) == dispatched[PAGE:]
    assert "Next page" not in second and "Previous page" in second
    queues = client.get("/queues").text  # the count links to the list
    assert f'href="/queue/ready/default">{PAGE + 5}</a>' in queues


def test_the_ready_list_runs_through_the_priority_levels_in_the_order_workers_take(
    client: httpx.Client, queue: RedisQueue
) -> None:
    levels = [9, None, 0, 9, None, 0] * 10  # more than a page
    ids = [apptasks.record.using(priority=p).dispatch(n).id for n, p in enumerate(levels)]
    ranked = sorted(range(len(ids)), key=lambda n: (5 if levels[n] is None else levels[n], n))
    expected = [ids[n] for n in ranked]
    pages = [client.get(f"/queue/ready/default?offset={at}").text for at in (0, PAGE)]
    assert listed_ids(pages[0]) + listed_ids(pages[1]) == expected
    assert "Ready by priority level (5: without a priority): 0=20 5=20 9=20." in pages[0]
    assert 'title="by priority level: 0=20 5=20 9=20"' in client.get("/queues").text
    last = client.get(f"/tasks/{expected[-1]}?queue=default&at={len(ids) - 1}").text
    assert '<dd class="state">ready</dd>' in last


def test_the_delayed_list_is_in_due_order_and_shows_cancelled_tasks(
    client: httpx.Client, queue: RedisQueue
) -> None:
    late = apptasks.record.using(queue="timers").later(900, "late")
    soon = apptasks.record.using(queue="timers").later(60, "soon")
    assert late.cancel()
    page = client.get("/queue/delayed/timers").text
    assert listed_ids(page) == [soon.id, late.id]
    assert re.search(rf'class="task cancelled" data-id="{late.id}"', page)


def test_the_running_list_names_the_worker_that_runs_each_task(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    napping = apptasks.naps.dispatch(30)
    worker = workers.start("-c", "1", *FAST)

    def shown_with_its_worker() -> str:
        page = client.get("/queue/running/default").text
        return page if napping.id in listed_ids(page) and " pid " in page else ""

    page = wait_for(shown_with_its_worker, 20, "the running task and its worker")
    assert f"pid {worker.pid}, child" in page
    worker.signal(9)
    worker.wait()


def test_the_finished_list_shows_kept_results_newest_first(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    ok = apptasks.record.using(keep_result=60).dispatch("fine")
    code, output = workers.run("-c", "1", "--stop-when-empty", *FAST)
    assert code == 0, output
    bad = apptasks.always_raises.using(keep_result=60, tries=1).dispatch("<b>boom</b>")
    code, output = workers.run("-c", "1", "--stop-when-empty", *FAST)
    assert code == 0, output
    page = client.get("/queue/finished/default").text
    assert listed_ids(page) == [bad.id, ok.id]
    assert '<td class="status">succeeded</td>' in page and '<td class="status">failed</td>' in page
    assert "&lt;b&gt;boom&lt;/b&gt;" in page and "<b>boom</b>" not in page
    failed = client.get("/queue/failed/default").text
    assert listed_ids(failed) == [bad.id]


def test_entries_that_are_no_tasks_show_as_unreadable_in_every_list(
    client: httpx.Client, queue: RedisQueue
) -> None:
    keys = queue.keys("default")
    queue.client.rpush(keys.ready, b"<script>alert(1)</script>")
    queue.client.zadd(keys.delayed, {b"\x93\x01\x02\x03": 1e12})
    queue.client.zadd(keys.reserved, {b"\xc1": 5})
    queue.client.zadd(keys.finished, {b"short": 5, raw_id("ab" * 16): 7})
    queue.client.set(keys.result("ab" * 16), msgpack.packb({"state": 1}))
    queue.client.lpush(keys.failed, b"not a record")
    queue.client.sadd(queue.global_keys.known_queues, "default")
    for which, shown in (
        ("ready", "unreadable: not an rqueue payload"),
        ("delayed", "unreadable: not an rqueue payload"),
        ("running", "unreadable: not an rqueue payload"),
        ("finished", "has the wrong shape"),
        ("failed", "No tasks here"),  # a failed record that does not read is left out
    ):
        page = client.get(f"/queue/{which}/default")
        assert page.status_code == 200, which
        assert shown in page.text, which
    assert "<script>alert(1)</script>" not in client.get("/queue/ready/default").text


def test_an_unknown_list_or_a_name_no_queue_can_have_is_not_found(client: httpx.Client) -> None:
    assert client.get("/queue/sideways/default").status_code == 404
    assert client.get("/queue/ready/no%20spaces").status_code == 404
    assert client.get("/queue/ready/x:delayed").status_code == 404


def test_tags_show_escaped_and_the_failed_page_searches_by_tag(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    hostile = "<b>order</b>:42"
    tagged = apptasks.always_raises.using(tags=[hostile, "vip"], tries=1).dispatch("a")
    untagged = apptasks.always_raises.using(tries=1).dispatch("b")
    waiting = apptasks.record.using(tags=["vip"]).dispatch("c")
    ready = client.get("/queue/ready/default").text
    assert listed_ids(ready) == [tagged.id, untagged.id, waiting.id]
    assert 'href="/failed?tag=vip"' in ready and "<b>order</b>" not in ready
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    found = client.get("/failed", params={"tag": hostile}).text
    rows = re.findall(r'<tr class="failed-task" data-id="([^"]+)"', found)
    assert rows == [tagged.id] and "&lt;b&gt;order&lt;/b&gt;:42" in found
    assert "<b>order</b>" not in found
    task_page = client.get(f"/tasks/{tagged.id}").text
    assert '<a class="tag" href="/failed?tag=vip"' in task_page
    token = re.search(r'name="csrf" value="([^"]+)"', found)
    assert token
    data = {"csrf": token.group(1), "scope": "matching", "tag": "vip", "q": "", "queue": ""}
    done = client.post("/failed/forget", data=data)
    assert done.headers["location"] == "/failed?tag=vip"
    assert "Forgot 1 failed task(s) matching the search." in client.get("/failed").text
    assert re.findall(r'data-id="([^"]+)"', client.get("/failed").text) == [untagged.id]


def test_a_task_name_page_charts_it_and_lists_its_recent_failures(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    failing = apptasks.always_raises.using(tries=1).dispatch("x")
    apptasks.always_raises.using(tries=1, queue="emails").dispatch("y")
    apptasks.record.dispatch("fine")
    code, output = workers.run("default,emails", "--stop-when-empty", *FAST)
    assert code == 0, output
    page = client.get("/task-names/apptasks:always_raises")
    assert page.status_code == 200
    assert page.text.count("<svg") == 4
    assert '<tr data-queue="default">' in page.text and '<tr data-queue="emails">' in page.text
    failures = re.findall(r'<tr class="failed-task" data-id="([^"]+)"', page.text)
    assert len(failures) == 2 and failing.id in failures
    other = client.get("/task-names/apptasks:record").text
    assert re.findall(r'<tr class="failed-task" data-id="([^"]+)"', other) == []
    assert "<td>1</td><td>0</td><td>0</td>" in other  # processed, failed, retried
    nothing = client.get("/task-names/no.such:task").text
    assert "No metrics for this task" in nothing


def test_a_hostile_task_name_is_escaped_in_the_lists_and_on_its_own_page(
    client: httpx.Client, queue: RedisQueue
) -> None:
    name = "<script>alert('x')</script>\x1b[2J"
    job = push_job(queue, name, "arg")
    page = client.get("/queue/ready/default").text
    assert listed_ids(page) == [job.id]
    assert (
        "<script>alert" not in page
        and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;\\x1b[2J" in page
    )
    own = client.get("/task-names/" + quote(name, safe=""))
    assert own.status_code == 200 and "<script>alert" not in own.text
