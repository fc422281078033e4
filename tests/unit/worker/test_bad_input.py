"""Bad input gets a clear error and loses nothing (issue 3).

Bytes a worker cannot run go to ``:failed`` with the reason while the worker keeps
serving; bad calls, names, options and URLs are refused with one clear message.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import apptasks
import msgpack
import pytest
from support import cli, strings

from rqueue import task
from rqueue.encoding.payload import Job, encode, new_id
from rqueue.errors import (
    InvalidQueueName,
    InvalidSchedule,
    PayloadTooLarge,
    UnserializableArgument,
)
from rqueue.failed import FailedTasks
from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.header import with_attempts
from rqueue.store.queue import RedisQueue
from rqueue.worker.options import WorkerOptions


def _job(task_name: str, *args: Any) -> Job:
    return Job(id=new_id(), task=task_name, args=args, kwargs={}, queue="default")


def _wrong_shape_with_header() -> bytes:
    """A payload with rqueue's header whose ``args`` is nil instead of a list."""
    data = encode(_job("apptasks:record"))
    assert data.endswith(b"\x90\x80\x80")  # args, kwargs, options: all empty
    return data[:-3] + b"\xc0\x80\x80"


def _failed_by_payload(queue: RedisQueue) -> dict[bytes, tuple[str, str]]:
    """Failed records by their payload as pushed (the reserve counted one attempt in it)."""
    return {
        with_attempts(f.payload, 0): (f.exception, f.message)
        for f in FailedTasks(queue).list(["default"])
    }


def test_bytes_that_are_not_a_runnable_task_go_to_failed_and_the_worker_goes_on(
    queue: RedisQueue, workers: Any
) -> None:
    bad = {
        b"\x00\xffnot msgpack at all": "not an rqueue payload",
        msgpack.packb([1, 2, 3]): "not an rqueue payload",
        msgpack.packb({"task": "apptasks:record", "args": [1]}): "not an rqueue payload",
        _wrong_shape_with_header(): "wrong shape",
        encode(_job("apptasks:record", "x" * 50))[:-10]: "not valid msgpack",
    }
    apptasks.record.dispatch("before")
    for data in bad:
        queue.client.rpush("queues:default", data)
    apptasks.record.dispatch("after")
    code, output = workers.run("--stop-when-empty")
    assert code == 0, output
    assert strings(queue.client, apptasks.DONE) == ["before", "after"]
    failed = _failed_by_payload(queue)
    for data, reason in bad.items():
        kind, message = failed[data]
        assert kind == "InvalidPayload" and reason in message, (data, kind, message)
    sizes = queue.sizes(["default"])[0]
    assert (sizes.ready, sizes.delayed, sizes.reserved, sizes.failed) == (0, 0, 0, len(bad))
    assert "Traceback" not in output


def test_unknown_tasks_and_modules_that_raise_on_import_fail_with_the_reason(
    queue: RedisQueue, workers: Any, tmp_path: Path
) -> None:
    (tmp_path / "exploding_tasks.py").write_text(
        "raise RuntimeError('this module refuses to import')\n"
    )
    names = {
        "apptasks:no_such_task": ("TaskNotRegistered", "not registered with @task"),
        "apptasks:DONE": ("TaskNotRegistered", "not registered with @task"),  # not a task
        "no_such_module_anywhere:run": ("TaskImportFailed", "no module named"),
        "exploding_tasks:run": ("TaskImportFailed", "this module refuses to import"),
        "no-colon-here": ("TaskNotRegistered", "malformed task name"),
    }
    for name in names:
        queue.push("default", [encode(_job(name))])
    apptasks.record.dispatch("still served")
    worker = workers.start("--stop-when-empty", env={"PYTHONPATH": str(tmp_path)})
    assert worker.wait(30) == 0
    assert strings(queue.client, apptasks.DONE) == ["still served"]
    failed = {f.task: (f.exception, f.message) for f in FailedTasks(queue).list(["default"])}
    assert set(failed) == set(names)
    for name, expected in names.items():
        kind, message = failed[name]
        assert kind == expected[0] and expected[1] in message, (name, message)


def test_unencodable_nested_argument_is_named_by_its_path(queue: RedisQueue) -> None:
    user = {"name": "ada", "address": {"street": "x", "geo": complex(1, 2)}}
    with pytest.raises(UnserializableArgument, match=r"kwargs\['value'\]\['address'\]\['geo'\]"):
        apptasks.record.dispatch(value=user)
    with pytest.raises(UnserializableArgument, match=r"args\[0\]\[2\]"):
        apptasks.record.dispatch([1, b"ok", {3}])
    assert queue.client.keys("queues:*") == []


def test_payload_size_limit_is_configurable_and_checked_after_encoding(config: Config) -> None:
    tiny = RedisQueue(replace(config, max_payload_bytes=300))
    tiny.client.flushall()
    bound = apptasks.record.using(connection=tiny)
    bound.dispatch("small")
    with pytest.raises(PayloadTooLarge, match="300"):
        bound.dispatch({"blob": b"\x00" * 400})
    with pytest.raises(PayloadTooLarge):
        bound.later(5, "y" * 400)
    assert tiny.sizes(["default"])[0].ready == 1
    assert tiny.sizes(["default"])[0].delayed == 0
    tiny.client.close()


@pytest.mark.parametrize(
    "when",
    [
        float("-inf"),
        float("nan"),
        timedelta.max,
        datetime.max.replace(tzinfo=timezone.utc),
        10**30,
        "soon",
    ],
)
def test_later_refuses_nan_infinite_and_absurd_times(queue: RedisQueue, when: Any) -> None:
    with pytest.raises((InvalidSchedule, OverflowError)) as raised:
        apptasks.record.later(when, 1)
    assert isinstance(raised.value, InvalidSchedule), f"{when!r} gave {raised.value!r}"
    assert queue.client.keys("queues:*") == []


BAD_QUEUE_NAMES = [
    "",
    " ",
    "two words",
    "tab\there",
    "{braced}",
    "a{b",
    "nul\x00",
    "bell\x07",
    "new\nline",
    "comma,list",
    "x" * 201,
]


@pytest.mark.parametrize("name", BAD_QUEUE_NAMES)
def test_bad_queue_names_are_refused_everywhere(name: str) -> None:
    with pytest.raises(InvalidQueueName, match="invalid queue name"):
        task(queue=name)(lambda: None)
    with pytest.raises(InvalidQueueName):
        apptasks.record.using(queue=name)
    with pytest.raises(InvalidQueueName):
        WorkerOptions(queues=(name,))


@pytest.mark.parametrize("name", ["two words", "{braced}", "bell\x07", "new\nline"])
def test_bad_queue_names_on_the_command_line_are_usage_errors(config: Config, name: str) -> None:
    for args in (("work", name), ("work", f"default,{name}"), ("size", name), ("clear", name)):
        result = cli(config, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr
        assert "invalid queue name" in result.stderr


BAD_OPTIONS = [
    ("--bogus",),
    ("no-such-command",),
    ("work", "--concurrency", "0"),
    ("work", "--concurrency", "many"),
    ("work", "--timeout", "-1"),
    ("work", "--tries", "0"),
    ("work", "--sleep", "-2"),
    ("work", "--prefetch", "0"),
    ("work", "--prefetch", "5000"),
    ("work", "--memory", "-5"),
    ("work", "--max-jobs", "x"),
    ("work", "--log-level", "LOUD"),
    ("work", "--log-format", "xml"),
    ("work", "--bogus"),
    ("work", "a", "b"),
    ("size", "--bogus"),
    ("clear",),
    ("clear", "a", "b"),
    ("restart", "extra"),
    ("failed", "nope"),
    ("failed", "list", "--bogus"),
    ("failed", "show"),
    ("failed", "retry"),
    ("failed", "retry", "abc", "--all"),
    ("failed", "retry", "abc", "--queue", "default"),
    ("failed", "forget"),
    ("failed", "flush", "--bogus"),
    ("server", "--port", "0"),
    ("server", "--port", "http"),
    ("demo", "--tasks", "0"),
    ("demo", "--concurrency", "0"),
]


@pytest.mark.parametrize("args", BAD_OPTIONS, ids=" ".join)
def test_every_command_with_bad_options_is_a_usage_error(
    config: Config, args: tuple[str, ...]
) -> None:
    result = cli(config, *args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "Usage:" in result.stderr or "Error:" in result.stderr


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:1/0", "cannot reach Redis at redis://127.0.0.1:1/0"),
        ("http://127.0.0.1:6379/0", "invalid --redis-url"),
        ("not a url", "invalid --redis-url"),
        ("redis://127.0.0.1:notaport/0", "invalid --redis-url"),
    ],
)
def test_a_wrong_or_unreachable_redis_url_is_one_clear_line(
    config: Config, url: str, expected: str
) -> None:
    for args in (("size",), ("failed", "list"), ("clear", "default"), ("work", "--once")):
        result = cli(config, *args, "--redis-url", url, timeout=60)
        assert result.returncode != 0, (args, result.stdout)
        assert "Traceback" not in result.stderr, (args, result.stderr)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) <= 3 and expected in result.stderr, (args, result.stderr)


def test_a_wrong_password_is_one_clear_line_without_the_password(config: Config) -> None:
    with RedisServer(password="right-horse-battery") as server:
        wrong = server.url.replace("right-horse-battery", "wrong-staple")
        for args in (("size",), ("work", "--once"), ("failed", "list")):
            result = cli(config, *args, "--redis-url", wrong)
            assert result.returncode == 1, (args, result.stderr)
            assert "Traceback" not in result.stderr
            assert result.stderr.startswith("rqueue: cannot log in to Redis"), result.stderr
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert "wrong-staple" not in result.stderr and "***" in result.stderr
