"""A task's page over HTTP, against the test Redis and real workers: where the task is,
its arguments and trace id, and the actions that fit it (cancel a queued one, retry or
forget a failed one), each checked by what it changed in Redis."""

from __future__ import annotations

import re
from collections.abc import Iterator

import apptasks
import httpx
import pytest
from browser import served_dashboard
from support import Workers, strings, wait_for

from rqueue.encoding.payload import Job, new_id
from rqueue.failed import FailedTasks
from rqueue.store.queue import RedisQueue
from rqueue.web.task_lists import trace_id

FAST = ("--block-for", "0.2", "--log-level", "warning")
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def client(queue: RedisQueue) -> Iterator[httpx.Client]:
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as client:
        yield client


def csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


def field(html: str, name: str) -> str:
    found = re.search(rf"<dt>{name}</dt><dd[^>]*>(.*?)</dd>", html, re.DOTALL)
    assert found, f"no {name} on the page"
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def test_a_queued_task_shows_its_arguments_and_is_cancelled_from_its_page(
    client: httpx.Client, queue: RedisQueue
) -> None:
    others = [apptasks.record.dispatch(n) for n in range(3)]
    handle = apptasks.record.dispatch("<i>me</i>")
    page = client.get(f"/tasks/{handle.id}?queue=default&at=3").text
    assert field(page, "state") == "ready" and field(page, "queue") == "default"
    assert field(page, "args") == "[&#39;&lt;i&gt;me&lt;/i&gt;&#39;]"
    assert field(page, "task") == "apptasks:record"
    # Found without the hints too: its queue from its pending id.
    assert field(client.get(f"/tasks/{handle.id}").text, "state") == "ready"
    done = client.post(f"/tasks/{handle.id}/cancel", data={"csrf": csrf(page), "queue": "default"})
    assert done.status_code == 303
    after = client.get(done.headers["location"]).text
    assert f"Task {handle.id} cancelled; it will not run." in after
    assert field(after, "state") == "cancelled" and "/cancel" not in after
    assert queue.sizes(["default"])[0].ready == len(others)  # sizes count it out


def test_a_failed_task_is_retried_or_forgotten_from_its_page(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    retried = apptasks.fails_until.using(tries=1).dispatch("again", 2)
    forgotten = apptasks.always_raises.using(tries=1).dispatch("gone")
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    page = client.get(f"/tasks/{retried.id}").text
    assert field(page, "state") == "failed" and "/retry" in page and "/forget" in page
    token = csrf(page)
    done = client.post(f"/tasks/{retried.id}/retry", data={"csrf": token})
    assert f"Retried task {retried.id}." in client.get(done.headers["location"]).text
    assert FailedTasks(queue).find(retried.id) is None
    client.post(f"/tasks/{forgotten.id}/forget", data={"csrf": token})
    assert FailedTasks(queue).find(forgotten.id) is None
    again = client.post(f"/tasks/{forgotten.id}/forget", data={"csrf": token})
    assert "is not failed" in client.get(again.headers["location"]).text
    queue.client.delete(apptasks.DONE)
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    assert strings(queue.client, apptasks.DONE) == ["again"]  # the retry ran, and passed


def test_a_running_task_shows_as_running_and_is_cancelled_from_its_page(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    napping = apptasks.naps.using(keep_result=60).dispatch(30)
    workers.start("-c", "1", *FAST)

    def running() -> str:
        page = client.get(f"/tasks/{napping.id}?queue=default").text
        return page if field(page, "state") == "running" else ""

    page = wait_for(running, 20, "the task to run")
    assert "reserved until" in page and f"/tasks/{napping.id}/cancel" in page
    done = client.post(f"/tasks/{napping.id}/cancel", data={"csrf": csrf(page), "queue": "default"})
    assert "stops it within a second" in client.get(done.headers["location"]).text
    wait_for(lambda: napping.status() == "cancelled", 5, "its worker to stop it")


def test_the_trace_id_is_read_from_a_valid_traceparent_only() -> None:
    def job(traceparent: str) -> Job:
        return Job(
            new_id(), "apptasks:record", (), {}, "default", headers={"traceparent": traceparent}
        )

    assert trace_id(job(f"00-{TRACE}-00f067aa0ba902b7-01")) == TRACE
    assert trace_id(job(f"01-{TRACE}-00f067aa0ba902b7-01-future")) == TRACE
    for forged in (
        f"ff-{TRACE}-00f067aa0ba902b7-01",  # a version that may not be
        f"00-{'0' * 32}-00f067aa0ba902b7-01",  # the all-zero (invalid) trace
        f"00-{TRACE}-00f067aa0ba902b7-01-more",  # version 00 has four fields
        "00-<script>-x-01",
        f"00-{TRACE.upper()}-00f067aa0ba902b7-01",
    ):
        assert trace_id(job(forged)) is None, forged
    assert trace_id(None) is None


def test_a_payload_that_does_not_decode_is_shown_as_such(
    client: httpx.Client, queue: RedisQueue
) -> None:
    handle = apptasks.record.dispatch("x")
    ready = queue.keys("default").ready
    [payload] = queue.client.lrange(ready, 0, 0)
    queue.client.lset(ready, 0, payload[:40])  # its header, then half a payload
    page = client.get(f"/tasks/{handle.id}?queue=default").text
    assert field(page, "state") == "ready"
    assert field(page, "payload").startswith("does not decode:")
    assert client.get("/tasks/" + "0" * 32).status_code == 404


def test_a_running_task_s_page_shows_its_progress_and_its_events(
    client: httpx.Client, queue: RedisQueue, workers: Workers
) -> None:
    import progress_tasks

    handle = progress_tasks.steps.dispatch("resized <b>4</b> of 10")
    workers.start("-c", "1", "--events", *FAST)
    wait_for(handle.progress, 10, "the first report")
    page = client.get(f"/tasks/{handle.id}?queue=default").text
    assert field(page, "progress").startswith("25%: resized &lt;b&gt;4&lt;/b&gt; of 10 (")
    queue.client.rpush(progress_tasks.GO, 1)
    assert handle.result(10) == "done"
    page = client.get(f"/tasks/{handle.id}?queue=default").text
    rows = re.findall(r"<tr><td>[^<]*</td><td>(\w+)</td><td>(\d+)</td>", page)
    assert rows == [
        ("dispatched", "0"),
        ("started", "1"),
        ("progress", "1"),
        ("progress", "1"),
        ("succeeded", "1"),
    ] or rows == [  # dispatched only once the worker's marker is up: started first
        ("started", "1"),
        ("progress", "1"),
        ("progress", "1"),
        ("succeeded", "1"),
    ], rows
