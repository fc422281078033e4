"""Live events: ``rqueue work --events`` records each task's events in its queue's
stream, in the scripts that change its state; ``rqueue events`` (a real subprocess)
and ``handle.events()`` follow them; a worker without ``--events`` writes no stream;
hostile entries are skipped or escaped, never a crash; batches add up their members'
progress; the options are checked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import progress_tasks as pt
import pytest
from support import RQUEUE, TASKS_DIR, Workers, cli, wait_for

from rqueue.settings.config import Config
from rqueue.store.live_events import LiveEvent
from rqueue.store.queue import RedisQueue
from rqueue.workflows.pending_batch import batch

FAST = ("--block-for", "0.5", "--log-level", "warning")


class Follower:
    """``rqueue events ARGS`` running, its stdout lines gathered as they come."""

    def __init__(self, config: Config, *args: str) -> None:
        env = {**os.environ, "REDIS_URL": config.redis_url}
        self.process = subprocess.Popen(
            [*RQUEUE, "events", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=TASKS_DIR,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines]

    def stop(self) -> tuple[int, str]:
        """Ctrl-C: exit 0, nothing on stderr; every line it printed is in ``lines`` then
        (the reader thread has met the end of its output)."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(10)
        self._reader.join(10)
        assert self.process.stderr is not None
        return code, self.process.stderr.read()


@pytest.fixture
def follow(config: Config) -> Iterator[Any]:
    started: list[Follower] = []

    def start(*args: str) -> Follower:
        follower = Follower(config, *args)
        started.append(follower)
        return follower

    yield start
    for follower in started:
        if follower.process.poll() is None:
            follower.process.kill()
            follower.process.wait(10)


def following(queue: RedisQueue) -> bool:
    """Whether some client is blocked in XREAD (the follower has found "now")."""
    return any(c.get("cmd") == "xread" for c in queue.client.client_list())


def of(events: list[dict[str, Any]], task_id: str) -> list[tuple[Any, ...]]:
    return [
        (e["event"], e["attempt"], e.get("fraction"), e.get("message"), e.get("error"))
        for e in events
        if e["id"] == task_id
    ]


def test_rqueue_events_follows_a_workers_events_as_they_happen(
    config: Config, queue: RedisQueue, workers: Workers, follow: Any
) -> None:
    workers.start("-c", "1", "--events", *FAST)
    keys = queue.keys("default")
    wait_for(lambda: queue.client.exists(keys.events_on), 10, "the worker's events marker")
    follower = follow("--json", "default")
    wait_for(lambda: following(queue), 10, "the follower's first XREAD")
    steps = pt.steps.dispatch("4 of 10")
    wait_for(steps.progress, 10, "the first report")
    queue.client.rpush(pt.GO, 1)
    flaky = pt.flaky.dispatch()
    later = pt.quick.later(3600, 0.5)
    assert later.cancel()
    # Each task's final event, the cancel's too: on a busy machine the worker may have
    # run flaky to its failure before this process cancelled `later`.
    finals = {(steps.id, "succeeded"), (flaky.id, "failed"), (later.id, "cancelled")}
    wait_for(
        lambda: finals <= {(e["id"], e["event"]) for e in follower.events()},
        20,
        "the success, the failure and the cancel",
    )
    code, errors = follower.stop()
    assert (code, errors) == (0, "")
    seen = follower.events()
    assert of(seen, steps.id) == [
        ("dispatched", 0, None, None, None),
        ("started", 1, None, None, None),
        ("progress", 1, 0.25, "4 of 10", None),
        ("progress", 1, 0.5, None, None),
        ("succeeded", 1, None, None, None),
    ]
    assert of(seen, flaky.id) == [
        ("dispatched", 0, None, None, None),
        ("started", 1, None, None, None),
        ("progress", 1, 0.1, "trying", None),
        ("retried", 1, None, None, "ValueError"),
        ("started", 2, None, None, None),
        ("progress", 2, 0.1, "trying", None),
        ("failed", 2, None, None, "ValueError"),
    ]
    assert of(seen, later.id) == [
        ("dispatched", 0, None, None, None),
        ("cancelled", 0, None, None, None),
    ]
    first = next(e for e in seen if e["id"] == steps.id)
    assert first["task"] == "progress_tasks:steps" and first["queue"] == "default"
    assert abs(first["time"] - float(queue.client.time()[0])) < 60
    # The same, one task's, through its handle: from the stream's start to its end.
    assert [e.event for e in steps.events(timeout=5)] == [
        "dispatched",
        "started",
        "progress",
        "progress",
        "succeeded",
    ]


def test_a_worker_without_events_writes_no_stream(queue: RedisQueue, workers: Workers) -> None:
    handle = pt.quick.dispatch(0.5)
    flaky = pt.flaky.dispatch()
    workers.run("--stop-when-empty", *FAST)
    assert handle.progress() is not None  # the task ran and reported
    assert flaky.status() == "failed"
    keys = queue.keys("default")
    assert not queue.client.exists(keys.events, keys.events_on)
    assert list(handle.events(timeout=0.2)) == []


def test_hostile_stream_entries_are_skipped_or_escaped(
    config: Config, queue: RedisQueue, follow: Any
) -> None:
    stream = queue.keys("default").events
    queue.client.xadd(
        stream,
        {
            "event": "started",
            "id": "ab" * 16,
            "task": "evil\x1b[2J\nname",
            "attempt": "99999999999999999999",
        },
    )
    queue.client.xadd(stream, {"event": "nonsense", "id": "x"})
    queue.client.xadd(stream, {"no": "event"})
    queue.client.xadd(
        stream,
        {b"event": b"progress", b"id": b"\xff\xfe", b"fraction": b"nan", b"message": b"\x07bell"},
    )
    queue.client.xadd(stream, {"event": "failed", "id": "cd" * 16, "error": "E\x1b]0;t\x07"})
    text = follow("--from-start", "default")
    wait_for(lambda: len(text.lines) == 3, 10, "the three events")
    code, errors = text.stop()
    assert (code, errors) == (0, "")
    assert not any(c in "".join(text.lines) for c in "\x1b\x07\r")
    assert "evil\\x1b[2J\\nname  attempt 0" in text.lines[0]
    assert "progress" in text.lines[1] and "\\x07bell" in text.lines[1]
    assert "failed" in text.lines[2] and "E\\x1b]0;t\\x07" in text.lines[2]
    as_json = follow("--from-start", "--json", "default")
    wait_for(lambda: len(as_json.lines) == 3, 10, "the three events as JSON")
    as_json.stop()
    assert not any(c in "".join(as_json.lines) for c in "\x1b\x07\r")
    garbled = as_json.events()[1]
    assert "fraction" not in garbled  # NaN is no fraction
    assert garbled["message"] == "\x07bell"  # kept as it was, escaped by the encoding


def test_a_stream_key_of_another_type_loses_events_not_tasks(
    config: Config, queue: RedisQueue, workers: Workers, follow: Any
) -> None:
    keys = queue.keys("default")
    queue.client.set(keys.events, "not a stream")
    handle = pt.quick.dispatch(1.0)
    workers.run("--stop-when-empty", "--events", *FAST)
    assert handle.status() == "succeeded"
    follower = follow("--from-start", "default")
    wait_for(lambda: following(queue) or follower.process.poll() is not None, 10, "a poll")
    assert follower.stop() == (0, "")


def test_a_batch_adds_up_its_members_progress(queue: RedisQueue, workers: Workers) -> None:
    b = batch([pt.quick.pending(0.5), pt.steps.pending("running"), pt.steps.pending("too")])
    handle = b.dispatch()
    assert handle.progress() == 0.0
    workers.start("-c", "1", "--threads", "3", *FAST)
    # quick finished (1), both steps report a quarter while they wait: 1.5 of 3
    wait_for(lambda: handle.progress() == 0.5, 10, "1 + 0.25 + 0.25 of 3")
    queue.client.rpush(pt.GO, 1, 1)
    wait_for(lambda: handle.progress() == 1.0, 10, "every member finished")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--events-length", "100"), "give --events"),
        (("--events", "--events-length", "0"), "--events-length must be a whole number"),
        (("--events", "--events-length", "99999999999"), "--events-length must be a whole number"),
    ],
)
def test_event_options_are_checked(config: Config, args: tuple[str, ...], says: str) -> None:
    done = cli(config, "work", *args, "--once")
    assert done.returncode == 2
    assert says in done.stderr


def test_rqueue_events_refuses_a_bad_queue_name(config: Config) -> None:
    done = cli(config, "events", "bad queue")
    assert done.returncode == 2 and "invalid queue name" in done.stderr


def test_an_event_reads_back_as_a_task_event() -> None:
    from rqueue.store.live_events import parse

    event = parse("q", b"1700000000000-0", {b"event": b"retried", b"id": b"ab", b"error": b"E"})
    assert event == LiveEvent("retried", "ab", "", "q", 0, 1700000000.0, error="E")
    assert parse("q", b"garbage", {b"event": b"started", b"id": b"ab"}) is None
    assert parse("q", b"1-0", [b"not", b"a dict"]) is None


def test_rqueue_events_in_a_workers_environment_turns_events_on(
    config: Config, queue: RedisQueue, workers: Workers
) -> None:
    handle = pt.quick.dispatch(1.0)
    code, _ = workers.run("--stop-when-empty", *FAST, env={"RQUEUE_EVENTS": "100"})
    assert code == 0
    assert [e.event for e in handle.events(timeout=5)] == ["started", "progress", "succeeded"]
    refused = cli(config, "work", "--once", env={"RQUEUE_EVENTS": "nan"})
    assert refused.returncode == 2
    assert "RQUEUE_EVENTS must be a whole number from 0 to 10000000" in refused.stderr


def test_a_chains_steps_have_their_events_too(
    config: Config, queue: RedisQueue, workers: Workers
) -> None:
    from rqueue.workflows.chains import chain

    workers.start("-c", "1", "--events", *FAST)
    wait_for(lambda: queue.client.exists(queue.keys("default").events_on), 10, "the marker")
    first, second = chain(pt.quick.pending(0.5), pt.quick.pending(1.0)).dispatch().steps
    assert second.result(10) is None
    # The first step's success is acknowledged with the second's push (push_once.lua).
    assert [e.event for e in first.events(timeout=5)] == [
        "dispatched",
        "started",
        "progress",
        "succeeded",
    ]
    assert [e.event for e in second.events(timeout=5)] == [
        "dispatched",
        "started",
        "progress",
        "succeeded",
    ]
