"""Workflows at the edges: signing, hostile meta, tasks the parent had to fail."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import apptasks
import httpx
import pytest
import redis
import workflow_tasks as flows
from browser import served_dashboard
from support import Workers, cli, push_job, strings, wait_for

from rqueue import TaskFailed, batch, chain, result_of, use
from rqueue.failed import FailedTasks
from rqueue.settings.config import Config
from rqueue.store.batch_store import BatchStore, MemberCount
from rqueue.store.queue import RedisQueue
from rqueue.workflows import listed_batches

SECRET = "a-long-random-secret-for-workflows"


def flow(queue: RedisQueue) -> list[str]:
    return strings(queue.client, flows.DONE)


def test_with_a_secret_every_step_and_callback_is_signed_and_runs(
    config: Config, queue: RedisQueue, workers: Workers
) -> None:
    signing = RedisQueue(replace(config, secret=SECRET))
    use(signing)
    chain(flows.note.pending("a"), flows.note.pending("b")).dispatch()
    batch([flows.member.pending(i) for i in range(3)]).then(
        flows.batch_callback.pending("then")
    ).dispatch()
    workers.start(env={"RQUEUE_SECRET": SECRET})
    wait_for(lambda: "then:3/0/3" in flow(queue), 20)
    wait_for(lambda: "note:b" in flow(queue), 20)
    assert FailedTasks(queue).list() == []


def test_a_malformed_chain_step_fails_that_task_alone(queue: RedisQueue, workers: Workers) -> None:
    push_job(queue, "workflow_tasks:note", "poisoned", meta={"chain": [{"task": "x;rm"}]})
    apptasks.record.dispatch("after")
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    assert strings(queue.client, apptasks.DONE) == ["after"]
    [failed] = FailedTasks(queue).list()
    assert failed.exception == "InvalidPayload" and "workflow step" in failed.message
    assert flow(queue) == []  # refused before it ran


@pytest.mark.parametrize(
    "meta",
    [
        {"keep": -5},
        {"keep": "forever"},
        {"batch": "not-a-batch"},
        {"gets": ["batch", "../../etc"]},
        {"gets": ["failure", {"id": 1}]},
        {"catch": "nope"},
        {"chain": "nope"},
    ],
)
def test_hostile_workflow_entries_are_refused_with_a_clear_error(
    queue: RedisQueue, workers: Workers, meta: dict[str, object]
) -> None:
    push_job(queue, "workflow_tasks:note", "poisoned", meta=meta)
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    [failed] = FailedTasks(queue).list()
    assert failed.exception == "InvalidPayload"
    assert flow(queue) == []


def test_a_plain_task_that_appends_to_its_chain_starts_one(
    queue: RedisQueue, workers: Workers
) -> None:
    flows.grow_chain.dispatch("plain")
    workers.start()
    wait_for(lambda: len(flow(queue)) == 2, 20)
    assert flow(queue) == ["note:prepended-after-plain", "note:appended-after-plain"]


def test_a_member_the_parent_fails_is_counted_failed_and_its_result_says_why(
    queue: RedisQueue, workers: Workers
) -> None:
    """A member that swallows its timeout is killed by the parent, which fails it: the
    batch counts it, catch fires, and its kept result is the TaskTimeout."""
    kept = apptasks.swallows_timeout.using(keep_result=60)
    b = batch([kept.pending()]).catch(flows.batch_callback.pending("catch")).dispatch()
    workers.start()
    wait_for(lambda: any(s.startswith("catch") for s in flow(queue)), 30)
    status = b.status()
    assert status is not None and (status.failed, status.total) == (1, 1)
    with pytest.raises(TaskFailed) as raised:
        result_of(status.failed_ids[0]).result(timeout=5)
    assert raised.value.exception == "TaskTimeout"


def test_a_batch_whose_state_was_overwritten_fails_its_member_alone(
    queue: RedisQueue, workers: Workers
) -> None:
    b = batch([flows.member.pending(0)]).dispatch()
    state = queue.client.keys(f"*batches*{b.id}*")
    for key in state:
        queue.client.delete(key)
    queue.client.set(min(state, key=len), "not a hash")  # WRONGTYPE for every script
    apptasks.record.dispatch("after")
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    assert strings(queue.client, apptasks.DONE) == ["after"]
    [failed] = FailedTasks(queue).list()
    assert "WRONGTYPE" in failed.message


@pytest.mark.parametrize(
    ("field", "value"), [("succeeded", "abc"), ("failed", "1.5"), ("skipped", "")]
)
def test_a_batch_whose_counts_are_garbage_refuses_a_count_before_changing_anything(
    queue: RedisQueue, field: str, value: str
) -> None:
    """batch_member.lua reads the counts once per call: one that is not an integer is
    refused before any member's bit is set, so the bits still say who was counted."""
    b = batch([flows.member.pending(0), flows.member.pending(1)]).dispatch()
    store = BatchStore(queue)
    keys = store.keys(b.id)
    queue.client.hset(keys.state, field, value)
    members: list[MemberCount] = [(0, "s", b.id, None), (1, "f", b.id, None)]
    with pytest.raises(redis.ResponseError, match="the batch counts are not integers"):
        store.count(b.id, members)
    assert [queue.client.getbit(key, 0) for key in (keys.succeeded, keys.failed)] == [0, 0]
    assert queue.client.hget(keys.state, field) == value.encode()


def test_garbage_callbacks_are_logged_and_the_member_still_counts(
    queue: RedisQueue, workers: Workers
) -> None:
    b = batch([flows.member.pending(0)]).then(flows.batch_callback.pending("then")).dispatch()
    state = min(queue.client.keys(f"*batches*{b.id}*"), key=len)
    queue.client.hset(state, "callbacks", b"\xc1\xc1")
    code, output = workers.run("--stop-when-empty")
    assert code == 0
    status = b.status()
    assert status is not None and status.succeeded == 1
    assert "callbacks are unreadable" in output
    assert FailedTasks(queue).list() == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("total", "abc"),
        ("total", "-3"),
        ("succeeded", "nan"),
        ("created_at", "inf"),
        ("finished_at", "1e400"),
        ("cancelled_at", "-inf"),
        (None, "not a hash"),
    ],
)
def test_an_unreadable_batch_shows_as_such_and_the_rest_are_served(
    config: Config, queue: RedisQueue, field: str | None, value: str
) -> None:
    good = batch([flows.member.pending(0)]).name("good").dispatch()
    bad = batch([flows.member.pending(1)]).name("bad").dispatch()
    state = BatchStore(queue).keys(bad.id).state
    if field is None:
        queue.client.delete(state)
        queue.client.set(state, value)  # WRONGTYPE for every read
    else:
        queue.client.hset(state, field, value)
    status = bad.status()
    assert status is not None and status.state == "unreadable" and status.unreadable
    assert dict(listed_batches(10, queue)) == {bad.id: None, good.id: good.status()}
    shown = cli(config, "batches", "show", bad.id)
    assert shown.returncode == 1 and f"rqueue: the state of batch {bad.id} is" in shown.stderr
    assert "Traceback" not in shown.stderr
    listed = cli(config, "batches", "list")
    assert listed.returncode == 0 and "good" in listed.stdout and "unreadable" in listed.stdout
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as client:
        assert client.get(f"/batches/{bad.id}").status_code == 200
        assert "good" in client.get("/batches").text


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (
            lambda: batch([flows.note]),
            "batch() takes pending calls like note.pending(42); got the task note itself",
        ),
        (lambda: batch(flows.note), "batch() takes a list of pending calls"),
        (lambda: batch([flows.note.pending(1), print]), "got <built-in function print>"),
        (lambda: chain(flows.note, flows.note.pending(1)), "chain() takes pending calls like"),
        (lambda: chain(flows.note.pending(1)).catch(print), "catch() takes a task"),
        (lambda: batch([]).catch(print), "catch() takes a task (a function decorated with @task)"),
        (lambda: batch([]).then(len), "then() takes a task"),
        (lambda: batch([]).progress("x"), "progress() takes a task"),
    ],
)
def test_a_workflow_built_wrong_says_what_was_expected_at_once(
    queue: RedisQueue, build: Callable[[], object], expected: str
) -> None:
    with pytest.raises(TypeError) as raised:
        build()
    assert expected in str(raised.value)
    assert queue.client.dbsize() == 0  # nothing was sent


def test_a_dispatched_handle_is_not_a_pending_call(queue: RedisQueue) -> None:
    handle = flows.note.dispatch("sent")
    with pytest.raises(TypeError, match="which was dispatched already"):
        batch([handle])
    with pytest.raises(TypeError, match="which was dispatched already"):
        chain(flows.note.pending(1)).catch(handle)
    b = batch([flows.member.pending(0)]).dispatch()
    with pytest.raises(TypeError, match=r"Batch.add\(\) takes pending calls like note"):
        b.add([flows.note])
