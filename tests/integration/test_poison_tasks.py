"""A poison task never stalls a queue, and bad values are refused at dispatch (issue 10).

Items 5 to 8, 13, 16 and 17: importing a task's module is part of its attempt and
only project modules are imported by a name read from Redis; a payload whose fields
do not decode fails alone; reporting an outcome never fails; what encode accepts,
decode gives back; options, names and functions that cannot work are refused where
they are written.
"""

from __future__ import annotations

import math
import os
import site
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import apptasks
import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import Workers, follow_log, logged, push_job, strings, wait_for

from rqueue import task
from rqueue.encoding.payload import Job, decode, encode, new_id
from rqueue.errors import (
    InvalidPayload,
    InvalidSchedule,
    InvalidTaskOption,
    TaskImportFailed,
    TaskNotRegistered,
    UnserializableArgument,
)
from rqueue.failed import FailedTask, FailedTasks
from rqueue.store.queue import RedisQueue
from rqueue.tasks import registry
from rqueue.tasks.definition import PendingDispatch, dispatch_many

FAST = ("--kill-grace", "0.5", "--block-for", "0.5")


def failed(queue: RedisQueue) -> dict[str, FailedTask]:
    return {f.task or f.id: f for f in FailedTasks(queue).list(["default"])}


def done(queue: RedisQueue) -> list[str]:
    return strings(queue.client, apptasks.DONE)


def on_path(folder: Path) -> dict[str, str]:
    """A worker's environment with ``folder`` on PYTHONPATH, in front of what is there."""
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    }


# -- item 5: importing a task's module is part of its attempt --------------------------------


def test_a_module_that_exits_at_import_uses_its_tries_and_never_stalls_the_queue(
    queue: RedisQueue, workers: Workers, tmp_path: Path
) -> None:
    (tmp_path / "exiting_tasks.py").write_text("import sys\nsys.exit('DATABASE_URL is not set')\n")
    (tmp_path / "dying_tasks.py").write_text("import os\nos._exit(3)\n")
    apptasks.record.dispatch("before")
    push_job(queue, "exiting_tasks:run", tries=2)
    push_job(queue, "dying_tasks:run", tries=2)
    apptasks.record.dispatch("after")
    code, output = workers.run("--stop-when-empty", "-c", "1", *FAST, env=on_path(tmp_path))
    assert code == 0, output
    assert done(queue) == ["before", "after"]
    records = failed(queue)
    exiting, dying = records["exiting_tasks:run"], records["dying_tasks:run"]
    assert (exiting.exception, exiting.attempts) == ("TaskImportFailed", 2)
    assert "SystemExit: DATABASE_URL is not set" in exiting.message
    # A child that dies importing has used up an attempt: two, then it is failed.
    assert (dying.exception, dying.attempts) == ("WorkerLost", 2)
    sizes = queue.sizes(["default"])[0]
    assert (sizes.ready, sizes.delayed, sizes.reserved) == (0, 0, 0)


@pytest.mark.parametrize(
    "name",
    ["unittest.__main__:x", "venv.__main__:x", "this:x", "json.tool:main", "msgpack.fallback:x"],
)
def test_a_module_outside_the_project_is_never_imported_by_a_name_from_redis(
    name: str,
) -> None:
    module = name.partition(":")[0]
    assert module not in sys.modules
    with pytest.raises(TaskNotRegistered) as refused:
        registry.lookup(name)
    assert type(refused.value) is TaskNotRegistered  # final: not worth a retry
    assert module not in sys.modules, "the module was imported"
    assert "-A" in str(refused.value) or "__main__" in str(refused.value)


def test_installed_packages_under_the_project_directory_are_not_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project's own .venv or .tox lies under its directory: still not the project."""
    installed = tmp_path / ".venv" / "site-packages"
    (installed / "fake_installed").mkdir(parents=True)
    (installed / "fake_installed" / "__init__.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(installed)])
    with pytest.raises(TaskNotRegistered, match="not in the project"):
        registry.lookup("fake_installed:x")
    assert "fake_installed" not in sys.modules


def test_the_worker_refuses_stdlib_modules_and_runs_what_follows(
    queue: RedisQueue, workers: Workers
) -> None:
    names = ["unittest.__main__:x", "venv.__main__:x", "this:x"]
    for name in names:
        push_job(queue, name)
    apptasks.record.dispatch("after")
    code, output = workers.run("--stop-when-empty", "-c", "1", *FAST)
    assert code == 0, output
    assert done(queue) == ["after"]
    records = failed(queue)
    assert {n: (records[n].exception, records[n].attempts) for n in names} == {
        n: ("TaskNotRegistered", 1) for n in names
    }
    assert "The Zen of Python" not in output and "crashed" not in output


def test_a_worker_started_with_app_imports_no_other_module_by_a_name_from_redis(
    tmp_path: Path, queue: RedisQueue, workers: Workers
) -> None:
    """With -A the allow-list is the -A modules: a project module is not imported either."""
    marker = tmp_path / "imported"
    (tmp_path / "side_effects.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    )
    push_job(queue, "side_effects:x")
    apptasks.record.dispatch("after")
    code, output = workers.run(
        "-A",
        "apptasks",
        "--stop-when-empty",
        "-c",
        "1",
        *FAST,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert code == 0, output
    assert done(queue) == ["after"]
    record = failed(queue)["side_effects:x"]
    assert record.exception == "TaskNotRegistered"
    assert "-A modules (apptasks)" in record.message
    assert not marker.exists(), "a module off the -A allow-list was imported"


def test_a_half_imported_module_registers_none_of_its_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "half_tasks.py").write_text(
        "from rqueue import task\n\n@task\ndef first() -> None: ...\n\n"
        "raise RuntimeError('settings missing')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # in the project, as for a worker
    with pytest.raises(TaskImportFailed, match="settings missing"):
        registry.lookup("half_tasks:first")
    with pytest.raises(TaskImportFailed):  # tried again, not found half-registered
        registry.lookup("half_tasks:first")


# -- item 17: a missing module says what to do, and is retried within the tries ------------


def test_a_module_deployed_after_the_first_attempt_runs_on_a_retry(
    queue: RedisQueue, workers: Workers, tmp_path: Path
) -> None:
    push_job(queue, "deployed_later:run", "x", tries=3, backoff=(2.0,))
    worker = workers.start(*FAST, env=on_path(tmp_path))
    lines = follow_log(worker)
    wait_for(lambda: logged(lines, "will retry"), 20, "the first attempt to fail")
    line = next(line for line in lines if "will retry" in line)
    assert "PYTHONPATH" in line and "-A" in line and "project's directory" in line
    (tmp_path / "deployed_later.py").write_text(
        "from apptasks import DONE, redis\nfrom rqueue import task\n\n"
        "@task\ndef run(value: str) -> None:\n    redis().rpush(DONE, 'deployed:' + value)\n"
    )
    wait_for(lambda: done(queue) == ["deployed:x"], 20, "the retry to run the deployed task")
    assert failed(queue) == {}


def _run_python(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=30, cwd=tmp_path
    )


@pytest.mark.parametrize("how", ["-c", "-m"])
def test_a_task_defined_in_main_is_refused_at_dispatch_with_a_hint(
    queue: RedisQueue, tmp_path: Path, how: str
) -> None:
    code = (
        "from rqueue import task\n\n@task\ndef greet(name: str) -> str:\n    return name\n\n"
        "assert greet('inline') == 'inline'\ngreet.dispatch('queued')\n"
    )
    if how == "-c":
        result = _run_python(tmp_path, "-c", code)
    else:
        (tmp_path / "app").mkdir()
        (tmp_path / "app" / "__init__.py").write_text("")
        (tmp_path / "app" / "__main__.py").write_text(code)
        result = _run_python(tmp_path, "-m", "app")
    assert result.returncode == 1
    assert "TaskNotRegistered" in result.stderr and "__main__" in result.stderr
    assert "move the task to a module" in result.stderr
    assert queue.client.keys("queues:*") == []


# -- item 6: a payload whose fields do not decode fails alone ----------------------------------


def _with_fields(job: Job, **fields: Any) -> bytes:
    """``job``'s payload with entries appended: a later duplicate key wins in msgpack."""
    data = encode(job)
    count = int.from_bytes(data[1:3], "big") + len(fields)
    extra = b"".join(msgpack.packb(k) + msgpack.packb(v) for k, v in fields.items())
    return data[:1] + count.to_bytes(2, "big") + data[3:] + extra


BAD_FIELDS: list[dict[str, Any]] = [
    {"timeout_ms": math.inf},
    {"timeout_ms": -math.inf},
    {"attempts": math.inf},
    {"attempts": 7},  # disagrees with the fixed header the scripts read
    {"id": "0" * 32},
    {"tries": math.inf},
    {"tries": -math.inf},
    {"tries": 0},
    {"tries": True},
    {"tries": 10**19},
    {"backoff": [math.nan]},
    {"backoff": [math.inf]},
    {"backoff": [1e300]},
    {"backoff": "30"},
    {"backoff": [-1]},
    {"dispatched_at": math.nan},
    {"dispatched_at": "yesterday"},
    {"meta": [["a", 1]]},
    {"meta": {1: 2}},
    {"kwargs": {"a": {(1,): 2}}},
]


@pytest.mark.parametrize("fields", BAD_FIELDS, ids=lambda f: f"{next(iter(f))}={f}")
def test_a_field_out_of_type_or_range_is_an_invalid_payload(fields: dict[str, Any]) -> None:
    data = _with_fields(Job(new_id(), "apptasks:record", (1,), {}, "default"), **fields)
    with pytest.raises(InvalidPayload):
        decode(data)


def test_undecodable_payloads_fail_alone_and_their_batch_mates_run(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.record.dispatch("first")
    bad = [
        _with_fields(Job(new_id(), "apptasks:record", (i,), {}, "default"), **fields)
        for i, fields in enumerate(BAD_FIELDS)
    ]
    queue.push("default", bad)
    apptasks.record.dispatch("last")
    code, output = workers.run("--stop-when-empty", "-c", "1", *FAST)
    assert code == 0, output
    assert done(queue) == ["first", "last"]
    records = FailedTasks(queue).list(["default"])
    assert len(records) == len(bad)
    assert {r.exception for r in records} == {"InvalidPayload"}
    assert "unexpected error" not in output
    sizes = queue.sizes(["default"])[0]
    assert (sizes.ready, sizes.reserved) == (0, 0)


# -- item 7: reporting an outcome never fails --------------------------------------------------


def test_exceptions_that_cannot_be_printed_and_sys_exit_are_reported_as_failures(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.raises_unprintable.dispatch()
    apptasks.raises_undecodable_text.dispatch()
    apptasks.exits.dispatch("leaving")
    apptasks.with_exiting_hook.dispatch("hooked")
    apptasks.record.dispatch("after")
    code, output = workers.run("--stop-when-empty", "-c", "1", *FAST)
    assert code == 0, output
    assert done(queue) == ["hooked", "after"]
    records = failed(queue)
    unprintable = records["apptasks:raises_unprintable"]
    assert unprintable.exception == "Unprintable"
    assert "Unprintable('the real error')" in unprintable.message
    assert "str() failed" in unprintable.message
    undecodable = records["apptasks:raises_undecodable_text"]
    assert (undecodable.exception, undecodable.message) == (
        "ValueError",
        "bad byte \\udcff in a file name",
    )
    exited = records["apptasks:exits"]
    assert (exited.exception, exited.message) == ("SystemExit", "leaving")
    assert len(records) == 3
    assert "crashed" not in output and "WorkerLost" not in output


# -- item 8: whatever encode accepts, decode gives back ----------------------------------------


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("args", "path", "why"),
    [
        (({(1, 2): "pair"},), "args[0] key (1, 2)", "cannot be a key"),
        (([{"a": {(1,): 2}}],), "args[0][0]['a'] key (1,)", "cannot be a key"),
        (({math.nan: 1},), "args[0] key nan", "NaN"),
        (({frozenset(): 1},), "args[0] key frozenset()", "frozenset"),
        (({1, 2},), "args[0]", "set"),
        ((_nested(1_500),), "args[0]", "deeper than 500"),
        ((_nested(501),), "args[0]", "deeper than 500"),
    ],
)
def test_arguments_a_worker_could_not_decode_are_refused_at_dispatch(
    queue: RedisQueue, args: tuple[Any, ...], path: str, why: str
) -> None:
    with pytest.raises(UnserializableArgument) as refused:
        apptasks.record.dispatch(*args)
    assert path in str(refused.value) and why in str(refused.value)
    assert "apptasks:record" in str(refused.value)
    with pytest.raises(UnserializableArgument):
        dispatch_many([apptasks.record.pending(*args)])
    assert queue.client.keys("queues:*") == []


def test_five_hundred_levels_of_nesting_still_round_trip(queue: RedisQueue) -> None:
    apptasks.record.dispatch(_nested(500))
    (payload,) = queue.client.lrange("queues:default", 0, -1)
    assert decode(payload).args == (_nested(500),)


@pytest.mark.parametrize(
    "call",
    [
        PendingDispatch(apptasks.record, "ab", {}),  # type: ignore[arg-type]
        PendingDispatch(apptasks.record, (), {1: "x"}),  # type: ignore[dict-item]
    ],
)
def test_pending_calls_built_by_hand_are_checked_too(queue: RedisQueue, call: Any) -> None:
    with pytest.raises(UnserializableArgument, match=r"args|kwargs"):
        dispatch_many([call])
    assert queue.client.keys("queues:*") == []


keys = st.none() | st.booleans() | st.integers(-5, 5) | st.floats() | st.text(max_size=3)
keys = keys | st.tuples(keys) | st.frozensets(st.integers(0, 3), max_size=2)
values = st.recursive(
    st.none() | st.integers(-5, 5) | st.floats() | st.text(max_size=3) | st.binary(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(args=st.lists(values, max_size=3))
def test_encode_either_refuses_or_decode_gives_it_back(args: list[Any]) -> None:
    job = Job(new_id(), "apptasks:record", tuple(args), {}, "default")
    try:
        data = encode(job)
    except UnserializableArgument:
        return
    assert len(decode(data).args) == len(args)


# -- item 13: options, names and times that cannot work ---------------------------------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"backoff": "30"}, "backoff"),
        ({"backoff": b"30"}, "backoff"),
        ({"backoff": [1e300]}, "backoff"),
        ({"backoff": True}, "backoff"),
        ({"backoff": [math.nan]}, "backoff"),
        ({"backoff": [-1]}, "backoff"),
        ({"tries": 10**20}, "tries"),
        ({"tries": True}, "tries"),
        ({"tries": 0}, "tries"),
        ({"tries": 2.0}, "tries"),
        ({"tries": math.nan}, "tries"),
        ({"timeout": True}, "timeout"),
        ({"timeout": "30"}, "timeout"),
        ({"timeout": math.nan}, "timeout"),
        ({"timeout": math.inf}, "timeout"),
        ({"timeout": -1}, "timeout"),
        ({"timeout": 1e12}, "timeout"),
    ],
)
def test_bad_task_options_are_refused_naming_the_option(
    queue: RedisQueue, options: dict[str, Any], named: str
) -> None:
    with pytest.raises(InvalidTaskOption, match=named):
        task(**options)(_plain)
    with pytest.raises(InvalidTaskOption, match=named):
        apptasks.record.using(**options)
    assert queue.client.keys("queues:*") == []


def _plain() -> None:
    """A module-level function to decorate in the tests above."""


@pytest.mark.parametrize(
    "when",
    [10**400, -(10**400), datetime(1, 1, 1), datetime.max, timedelta.max, "60", None],
    ids=repr,
)
def test_later_refuses_times_that_cannot_be_converted(queue: RedisQueue, when: Any) -> None:
    with pytest.raises(InvalidSchedule, match="later\\(when\\)"):
        apptasks.record.later(when, 1)
    assert queue.client.keys("queues:*") == []


@pytest.mark.parametrize("every", [math.inf, math.nan, "60", True, 10**400])
def test_a_declared_schedule_with_a_bad_interval_is_refused(every: Any) -> None:
    with pytest.raises(InvalidSchedule, match="every="):
        task(every=every)(_plain)


@pytest.mark.parametrize(
    "name", ["send_email", "a b:c", "billing:", ":charge", "billing:charge()", "__main__:f", 42]
)
def test_a_task_name_a_worker_cannot_import_is_refused_at_decoration(name: Any) -> None:
    with pytest.raises(InvalidTaskOption, match="name="):
        task(name=name)(_plain)


def test_an_explicit_module_and_function_name_is_accepted() -> None:
    assert task(name="billing.v2:charge")(_plain).name == "billing.v2:charge"


# -- item 16: async (and generator) functions would run none of their body ---------------------


async def _coroutine() -> None:
    """A task (async mode awaits it) and a hook (awaited too): accepted in both places."""


async def _async_generator() -> AsyncIterator[int]:
    yield 1


def _generator() -> Iterator[int]:
    yield 1


@pytest.mark.parametrize("function", [_coroutine, _async_generator, _generator])
def test_functions_whose_body_a_call_does_not_run_are_refused(function: Any) -> None:
    if function is _coroutine:  # workers await an async def task or hook
        assert task(name="poison:coroutine")(function).fn is function
        assert task(after_succeeded=function)(_plain).options.after_succeeded is function
        assert task(after_failed=function)(_plain).options.after_failed is function
        return
    with pytest.raises(InvalidTaskOption, match=r"async|generator"):
        task(function)
    with pytest.raises(InvalidTaskOption, match="after_succeeded"):
        task(after_succeeded=function)(_plain)
    with pytest.raises(InvalidTaskOption, match="after_failed"):
        task(after_failed=function)(_plain)
