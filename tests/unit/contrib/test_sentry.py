"""rqueue.contrib.sentry against real workers, with a transport that records what Sentry
sends (tests/tasks/sentry_tasks.py): one event for a task's final failure (none for a
success, none from rqueue's own log line, retries only when asked), its arguments
scrubbed unless PII is on, the trace carried from the producer's transaction, and a
schedule's cron check-ins. The worker sets Sentry up in its ``-A`` module, before fork."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import sentry_sdk
import sentry_tasks as st
from support import Workers, ready

from rqueue import chain, schedules
from rqueue.contrib.sentry import RqueueIntegration
from rqueue.encoding.payload import decode
from rqueue.store.queue import RedisQueue

RUN = ("-A", "sentry_app", "--stop-when-empty", "--block-for", "0.2", "--log-level", "warning")
MODES = {"process": (), "threads": ("--threads", "2"), "slots": ("--slots", "4")}

Item = dict[str, Any]


def captured(queue: RedisQueue, kind: str) -> list[Item]:
    items = (json.loads(raw) for raw in queue.client.lrange(st.CAPTURED, 0, -1))
    return [item["payload"] for item in items if item["type"] == kind]


@pytest.fixture
def producer() -> Iterator[None]:
    """Sentry in the test process too, with the same transport."""
    sentry_sdk.init(
        dsn="https://public@sentry.example.com/1",
        transport=st.RedisTransport,
        traces_sample_rate=1.0,
        integrations=[RqueueIntegration()],
    )
    yield
    sentry_sdk.get_client().close()
    sentry_sdk.init()  # no DSN: off again


@pytest.mark.parametrize("mode", MODES)
def test_a_final_failure_is_one_event_with_its_task_and_scrubbed_arguments(
    mode: str, queue: RedisQueue, workers: Workers
) -> None:
    task = st.fails_async if mode == "slots" else st.fails
    handle = task.dispatch("4242-4242", amount=12)
    st.succeeds.dispatch(1)
    code, output = workers.run(*MODES[mode], *RUN)
    assert code == 0, output
    assert "declined 12" in output  # rqueue's own log line was written ...
    [event] = captured(queue, "event")  # ... and is no second event; the success none
    [exception] = event["exception"]["values"]
    assert exception["type"] == "ValueError" and exception["value"] == "declined 12"
    assert exception["mechanism"] == {"type": "rqueue", "handled": False}
    assert event["level"] == "error"
    assert event["tags"]["rqueue.task"] == task.name
    assert event["tags"]["rqueue.queue"] == "default"
    attempts = task.options.tries
    assert event["contexts"]["rqueue"] == {
        "queue": "default",
        "task": task.name,
        "id": handle.id,
        "attempt": attempts,
        "args": "[Filtered]",
        "kwargs": "[Filtered]",
    }
    assert event["transaction"] == task.name
    # Nor in the locals of rqueue's frames (the payload, the job) or the task's.
    assert exception["stacktrace"]["frames"][-1]["function"] == task.fn.__name__
    assert "4242-4242" not in json.dumps(event)
    transactions = captured(queue, "transaction")
    assert len(transactions) == attempts + 1  # each attempt, and the success
    failed = [t for t in transactions if t["transaction"] == task.name]
    assert {t["contexts"]["trace"]["status"] for t in failed} == {"internal_error"}
    assert event["contexts"]["trace"]["span_id"] == failed[-1]["contexts"]["trace"]["span_id"]
    assert failed[-1]["contexts"]["trace"]["op"] == "queue.process"
    assert failed[-1]["contexts"]["trace"]["data"]["messaging.message.id"] == handle.id


def test_retries_are_captured_when_asked_and_arguments_with_pii_on(
    queue: RedisQueue, workers: Workers
) -> None:
    st.fails.dispatch("4242-4242", amount=3)
    env = {"TEST_SENTRY_RETRIES": "1", "TEST_SENTRY_PII": "1"}
    code, output = workers.run(*RUN, env=env)
    assert code == 0, output
    retried, failed = captured(queue, "event")
    assert (retried["level"], retried["tags"]["rqueue.retried"]) == ("warning", "yes")
    assert (failed["level"], failed["tags"]["rqueue.retried"]) == ("error", "no")
    assert [e["contexts"]["rqueue"]["attempt"] for e in (retried, failed)] == [1, 2]
    assert failed["contexts"]["rqueue"]["args"] == ["4242-4242"]
    assert failed["contexts"]["rqueue"]["kwargs"] == {"amount": 3}
    own = failed["exception"]["values"][0]["stacktrace"]["frames"][-1]
    assert own["vars"] == {"card": "'4242-4242'", "amount": "3"}


def test_the_trace_goes_from_the_producers_transaction_to_the_attempt(
    queue: RedisQueue, workers: Workers, producer: None
) -> None:
    with sentry_sdk.start_transaction(name="POST /orders", op="http.server"):
        handle = st.fails.using(tries=1).dispatch("card")
    carried = decode(ready(queue)[0]).headers
    assert set(carried) == {"sentry-trace", "baggage"}
    code, output = workers.run(*RUN)
    assert code == 0, output
    request = next(t for t in captured(queue, "transaction") if t["transaction"] == "POST /orders")
    [publish] = [s for s in request["spans"] if s["op"] == "queue.publish"]
    assert publish["description"] == st.fails.name
    assert publish["data"]["messaging.destination.name"] == "default"
    assert publish["data"]["messaging.message.id"] == handle.id
    assert publish["data"]["messaging.system"] == "rqueue"
    assert carried["sentry-trace"].split("-")[:2] == [publish["trace_id"], publish["span_id"]]
    process = next(t for t in captured(queue, "transaction") if t["transaction"] == st.fails.name)
    trace = process["contexts"]["trace"]
    assert (trace["trace_id"], trace["parent_span_id"]) == (publish["trace_id"], publish["span_id"])
    [event] = captured(queue, "event")
    assert event["contexts"]["trace"]["trace_id"] == publish["trace_id"]


def test_a_schedules_run_reports_cron_check_ins(queue: RedisQueue, workers: Workers) -> None:
    schedules.add("nightly report", st.nightly, cron="0 3 * * *", timezone="Europe/Paris")
    schedules.run_now("nightly report")
    code, output = workers.run(*RUN, "--no-schedule")
    assert code == 0, output
    started, done = captured(queue, "check_in")
    assert started["monitor_slug"] == done["monitor_slug"] == "nightly-report"
    assert (started["status"], done["status"]) == ("in_progress", "ok")
    assert done["check_in_id"] == started["check_in_id"]
    assert started["monitor_config"] == {
        "schedule": {"type": "crontab", "value": "0 3 * * *"},
        "timezone": "Europe/Paris",
    }
    assert done["duration"] > 0


def test_a_failing_schedule_run_checks_in_as_an_error(queue: RedisQueue, workers: Workers) -> None:
    schedules.add("hourly charge", st.fails.using(tries=1), every=3600, args=("card",))
    schedules.run_now("hourly charge")
    code, output = workers.run(*RUN, "--no-schedule")
    assert code == 0, output
    started, done = captured(queue, "check_in")
    assert (started["status"], done["status"]) == ("in_progress", "error")
    assert started["monitor_config"] == {
        "schedule": {"type": "interval", "value": 60, "unit": "minute"},
        "timezone": "UTC",
    }
    assert len(captured(queue, "event")) == 1


def test_a_chains_next_step_is_published_from_its_steps_transaction(
    queue: RedisQueue, workers: Workers
) -> None:
    chain(st.succeeds.pending(1), st.succeeds.pending(2)).dispatch()
    code, output = workers.run(*RUN)
    assert code == 0, output
    first, second = captured(queue, "transaction")
    [publish] = [s for s in first["spans"] if s["op"] == "queue.publish"]
    assert (
        publish["data"]["messaging.message.id"]
        != first["contexts"]["trace"]["data"]["messaging.message.id"]
    )
    trace = second["contexts"]["trace"]
    assert (trace["trace_id"], trace["parent_span_id"]) == (publish["trace_id"], publish["span_id"])
    assert trace["data"]["messaging.message.id"] == publish["data"]["messaging.message.id"]


def test_an_sdk_it_was_not_written_for_is_named_at_import(tmp_path: Any) -> None:
    """sentry-sdk 3 has no transactions: the import says which version is installed and
    which one it needs, not which constant it missed."""
    sdk = tmp_path / "sentry_sdk"
    sdk.mkdir()
    (sdk / "__init__.py").write_text('VERSION = "3.0.0"\n')
    (sdk / "_types.py").write_text('SENSITIVE_DATA_SUBSTITUTE = "[Filtered]"\n')
    (sdk / "consts.py").write_text("OP = SPANDATA = None\n")
    imported = subprocess.run(
        [sys.executable, "-c", "import rqueue.contrib.sentry"],
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert imported.returncode != 0
    assert "works with sentry-sdk 2.x, and 3.0.0 is installed" in imported.stderr
