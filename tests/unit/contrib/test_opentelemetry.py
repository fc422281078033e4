"""rqueue.contrib.opentelemetry with the real SDK against real workers: a send span in
the producing process, a process span per attempt in the worker child (process mode,
``--threads``, ``async def`` tasks on the slots), parented across Redis by the
``traceparent`` the payload carries; chains and batch callbacks continue the trace;
with nothing configured, no span and no header. The spans are read from the Redis
list the task module's exporter writes (tests/tasks/traced_tasks.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import traced_tasks as tt
from support import Workers, push_job, ready, wait_for

from rqueue import batch, chain, schedules
from rqueue.contrib.opentelemetry import instrument, uninstrument
from rqueue.encoding.payload import decode
from rqueue.store.queue import RedisQueue

RUN = ("--stop-when-empty", "--block-for", "0.2", "--log-level", "warning")
MODES = {"process": (), "threads": ("--threads", "2"), "slots": ("--slots", "4")}

Span = dict[str, Any]


@pytest.fixture
def instrumented() -> Iterator[None]:
    instrument()
    yield
    uninstrument()


def spans(queue: RedisQueue) -> list[Span]:
    return [json.loads(raw) for raw in queue.client.lrange(tt.SPANS, 0, -1)]


def named(found: list[Span], name: str) -> list[Span]:
    return [span for span in found if span["name"] == name]


def seen(queue: RedisQueue) -> dict[str, tuple[str, str]]:
    rows = (json.loads(raw) for raw in queue.client.lrange(tt.SEEN, 0, -1))
    return {name: (trace_id, span_id) for name, trace_id, span_id in rows}


def of_task(found: list[Span], task: Any) -> Span:
    [span] = [s for s in found if s["attributes"]["messaging.rqueue.task"] == task.name]
    return span


def child_of(span: Span, parent: Span) -> bool:
    same_trace = span["context"]["trace_id"] == parent["context"]["trace_id"]
    return same_trace and span["parent_id"] == parent["context"]["span_id"]


@pytest.mark.parametrize("mode", MODES)
def test_an_attempt_is_a_process_span_child_of_its_send_in_every_mode(
    mode: str, queue: RedisQueue, workers: Workers, instrumented: None
) -> None:
    task = tt.traced_async if mode == "slots" else tt.traced
    handle = task.dispatch(7)
    carried = decode(ready(queue)[0]).headers
    assert set(carried) >= {"traceparent"}
    code, output = workers.run("--otel", *MODES[mode], *RUN)
    assert code == 0, output
    found = spans(queue)
    [send] = named(found, "send default")
    [process] = named(found, "process default")
    assert send["kind"] == "SpanKind.PRODUCER" and process["kind"] == "SpanKind.CONSUMER"
    assert child_of(process, send)
    assert carried["traceparent"].split("-")[2] == send["context"]["span_id"][2:]
    assert send["attributes"] == {
        "messaging.system": "rqueue",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": "default",
        "messaging.message.id": handle.id,
        "messaging.rqueue.task": task.name,
    }
    assert process["attributes"] == {
        "messaging.system": "rqueue",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "default",
        "messaging.message.id": handle.id,
        "messaging.rqueue.task": task.name,
        "messaging.rqueue.attempt": 1,
    }
    assert process["status"]["status_code"] == "UNSET"
    # Current while the function ran, in its thread or coroutine.
    name = f"{task.name.partition(':')[2]}:7"
    assert seen(queue)[name] == (process["context"]["trace_id"], process["context"]["span_id"])


def test_an_async_task_with_middleware_runs_in_its_process_span(
    queue: RedisQueue, workers: Workers, instrumented: None
) -> None:
    tt.traced_async_stacked.dispatch(2)
    code, output = workers.run("--otel", *MODES["slots"], *RUN)
    assert code == 0, output
    [send] = named(spans(queue), "send default")
    [process] = named(spans(queue), "process default")
    assert child_of(process, send)
    current = (process["context"]["trace_id"], process["context"]["span_id"])
    assert seen(queue)["traced_async_stacked:2"] == current


def test_a_failure_is_recorded_on_its_process_span(
    queue: RedisQueue, workers: Workers, instrumented: None
) -> None:
    tt.broken.dispatch(3)
    code, output = workers.run("--otel", *RUN)
    assert code == 0, output
    [process] = named(spans(queue), "process default")
    assert process["status"] == {"status_code": "ERROR", "description": "ValueError: broken 3"}
    [event] = process["events"]
    assert event["name"] == "exception"
    assert event["attributes"]["exception.type"] == "ValueError"
    assert event["attributes"]["exception.message"] == "broken 3"


def test_an_attempt_that_puts_itself_back_ends_its_span_without_an_error(
    queue: RedisQueue, workers: Workers, instrumented: None
) -> None:
    tt.releases_once.dispatch()
    code, output = workers.run("--otel", *RUN)
    assert code == 0, output
    processes = named(spans(queue), "process default")
    assert [p["attributes"]["messaging.rqueue.attempt"] for p in processes] == [1, 2]
    assert {p["status"]["status_code"] for p in processes} == {"UNSET"}


def test_a_chain_and_what_a_task_dispatches_continue_the_trace(
    queue: RedisQueue, workers: Workers, instrumented: None
) -> None:
    chain(tt.dispatching.pending(1), tt.traced.pending(10)).dispatch()
    code, output = workers.run(*RUN, env={"RQUEUE_OTEL": "1"})  # as --otel
    assert code == 0, output
    found = spans(queue)
    sends, processes = named(found, "send default"), named(found, "process default")
    assert len(sends) == 3 and len(processes) == 3  # the chain, its next step, the dispatch
    assert len({span["context"]["trace_id"] for span in found}) == 1
    first = of_task(processes, tt.dispatching)
    root = next(s for s in sends if s["parent_id"] is None)
    assert child_of(first, root)
    # The next step and the task's own dispatch are both sent from the first step's
    # attempt: children of its process span, each the parent of its own attempt.
    followers = [s for s in sends if child_of(s, first)]
    assert len(followers) == 2
    for send in followers:
        assert sum(child_of(process, send) for process in processes) == 1


def test_a_batch_callback_continues_the_trace_of_the_member_that_finished_it(
    queue: RedisQueue, workers: Workers, instrumented: None
) -> None:
    batch([tt.traced.pending(1), tt.traced.pending(2)]).then(tt.finished).dispatch()
    code, output = workers.run("--otel", *RUN)
    assert code == 0, output
    found = spans(queue)
    [members] = named(found, "send default")[:1]
    assert members["attributes"]["messaging.batch.message_count"] == 2
    processes = named(found, "process default")
    assert len(processes) == 3
    callback = of_task(processes, tt.finished)
    [callback_send] = [s for s in named(found, "send default") if child_of(callback, s)]
    last_member = [p for p in processes if child_of(callback_send, p)]
    assert len(last_member) == 1 and child_of(last_member[0], members)


def test_with_link_the_attempt_starts_a_trace_linked_to_its_send(
    queue: RedisQueue, workers: Workers, instrumented: None
) -> None:
    tt.traced.dispatch(5)
    code, output = workers.run("-A", "traced_linked", *RUN)  # instrument(link=True) there
    assert code == 0, output
    found = spans(queue)
    [send] = named(found, "send default")
    [process] = named(found, "process default")
    assert process["parent_id"] is None
    assert process["context"]["trace_id"] != send["context"]["trace_id"]
    [link] = process["links"]
    assert link["context"]["span_id"] == send["context"]["span_id"]


def test_a_schedules_trigger_is_sent_from_the_worker_parent_with_otel(
    queue: RedisQueue, workers: Workers
) -> None:
    """``--otel`` instruments the parent too: the trigger it fires is a trace's root."""
    schedules.add("tick", tt.traced, every=1, args=(4,))
    workers.start("-A", "traced_tasks", "--otel", "--block-for", "0.2", "--log-level", "warning")
    wait_for(lambda: named(spans(queue), "process default"), 20, "a trigger's attempt")
    found = spans(queue)
    process = named(found, "process default")[0]
    [send] = [s for s in named(found, "send default") if child_of(process, s)]
    assert send["parent_id"] is None
    assert (
        send["attributes"]["messaging.message.id"] == process["attributes"]["messaging.message.id"]
    )


def test_a_forged_traceparent_starts_a_trace_of_its_own(
    queue: RedisQueue, workers: Workers
) -> None:
    """Headers come from Redis: one that is not a trace context parents nothing."""
    forged = {"traceparent": "00-\x1b[31mnot-a-trace\x1b[0m-01", "tracestate": "=" * 500}
    job = push_job(queue, tt.traced.name, 8, headers=forged)
    code, output = workers.run("--otel", *RUN)
    assert code == 0, output
    [process] = named(spans(queue), "process default")
    assert process["parent_id"] is None
    assert process["attributes"]["messaging.message.id"] == job.id
    assert "traced:8" in seen(queue)


def test_with_nothing_configured_no_span_and_no_header(queue: RedisQueue, workers: Workers) -> None:
    tt.traced.dispatch(1)
    assert decode(ready(queue)[0]).headers is None
    code, output = workers.run(*RUN)
    assert code == 0, output
    wait_for(lambda: "traced:1" in seen(queue), 5, "the task's run")
    assert spans(queue) == []
    assert seen(queue)["traced:1"] == ("0x" + "0" * 32, "0x" + "0" * 16)  # no span current


def test_instrument_is_idempotent_and_uninstrument_undoes_it(queue: RedisQueue) -> None:
    instrument()
    instrument()
    try:
        tt.traced.dispatch(1)
    finally:
        uninstrument()
    tt.traced.dispatch(2)
    assert len(named(spans(queue), "send default")) == 1
    assert [decode(p).headers is not None for p in ready(queue)] == [True, False]
