"""The ``rqueue`` command driven through real subprocesses."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import socket
import subprocess
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import apptasks
import pytest
import redis
from support import RQUEUE, TASKS_DIR, cli, strings

from rqueue.failed import FailedTasks, make_record
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.timing import moment

UNREACHABLE = "redis://127.0.0.1:1/0"


def rows(output: str) -> dict[str, list[str]]:
    """A printed table as {first column: other columns}."""
    lines = output.strip().splitlines()
    return {line.split()[0]: line.split()[1:] for line in lines[1:]}


def test_help_lists_every_command(config: Config) -> None:
    result = cli(config, "--help")
    assert result.returncode == 0
    for command in ("work", "size", "clear", "restart", "failed", "server", "demo"):
        assert command in result.stdout
    failed_help = cli(config, "failed", "--help")
    for command in ("list", "show", "retry", "forget", "flush"):
        assert command in failed_help.stdout
    assert cli(config, "--version").returncode == 0


@pytest.mark.topology
def test_work_runs_tasks_and_stops_when_empty(queue: RedisQueue, config: Config) -> None:
    apptasks.record.dispatch_many([(i,) for i in range(5)])
    result = cli(
        config, "work", "--stop-when-empty", "-c", "2", "--block-for", "0.5", cwd=TASKS_DIR
    )
    assert result.returncode == 0, result.stderr
    assert sorted(strings(queue.client, apptasks.DONE)) == ["0", "1", "2", "3", "4"]
    assert "stopping: queues are empty" in result.stderr


@pytest.mark.topology
def test_size_shows_ready_delayed_reserved_and_failed(queue: RedisQueue, config: Config) -> None:
    apptasks.record.dispatch_many([(1,), (2,)])
    apptasks.record.later(60, 3)
    queue.reserve("default", 1, 60_000, 0, 0)
    apptasks.always_fails.dispatch("x")
    (reserved,) = queue.reserve("emails", 1, 60_000, 0, 0).payloads
    queue.fail("emails", reserved, make_record("emails", reserved, "E", "m"))
    result = cli(config, "size")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0].split() == [
        "queue",
        "ready",
        "delayed",
        "reserved",
        "failed",
    ]
    assert rows(result.stdout) == {"default": ["1", "1", "1", "0"], "emails": ["0", "0", "0", "1"]}
    only = cli(config, "size", "emails")
    assert rows(only.stdout) == {"emails": ["0", "0", "0", "1"]}


@pytest.mark.topology
def test_size_of_nothing(queue: RedisQueue, config: Config) -> None:
    result = cli(config, "size")
    assert result.returncode == 0 and "(none)" in result.stdout


@pytest.mark.topology
def test_clear_deletes_pending_tasks_of_one_queue(queue: RedisQueue, config: Config) -> None:
    apptasks.record.dispatch_many([(1,), (2,)])
    apptasks.record.later(60, 3)
    apptasks.record.on_queue("other").dispatch(4)
    result = cli(config, "clear", "default", "--force")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Cleared 3 task(s) from queue default."
    default, other = queue.sizes(["default", "other"])
    assert (default.ready, default.delayed, other.ready) == (0, 0, 1)


@pytest.mark.topology
def test_restart_sets_the_restart_key(queue: RedisQueue, config: Config) -> None:
    result = cli(config, "restart")
    assert result.returncode == 0, result.stderr
    assert "Restart requested" in result.stdout
    first = queue.client.get(queue.global_keys.restart)
    assert first is not None
    cli(config, "restart")
    assert queue.client.get(queue.global_keys.restart) != first  # every call is a new request


@pytest.mark.topology
def test_prefix_option_and_environment(queue: RedisQueue, config: Config) -> None:
    prefixed = RedisQueue(replace(config, prefix="app1:"))
    apptasks.record.using(connection=prefixed).dispatch(1)
    assert rows(cli(config, "size", "--prefix", "app1:").stdout) == {
        "default": ["1", "0", "0", "0"]
    }
    by_env = cli(config, "size", env={"RQUEUE_PREFIX": "app1:"})
    assert rows(by_env.stdout) == {"default": ["1", "0", "0", "0"]}
    assert "(none)" in cli(config, "size").stdout
    cleared = cli(config, "clear", "default", "--prefix", "app1:", "--force")
    assert cleared.stdout.strip() == "Cleared 1 task(s) from queue default."
    prefixed.client.close()


@pytest.mark.parametrize(
    "args",
    [
        ["work", "--concurrency", "0"],
        ["work", "--timeout", "abc"],
        ["work", "--tries", "0"],
        ["work", "--log-level", "LOUD"],
        ["work", "bad queue"],
        ["work", "a,,b"],
        ["work", "--no-such-option"],
        ["work", "-A", "no_such_module_anywhere"],
        ["size", "bad queue"],
        ["clear"],
        ["clear", "a,b"],
        ["failed", "retry"],
        ["failed", "retry", "abc", "--all"],
        ["failed", "retry", "abc", "--queue", "default"],
        ["failed", "list", "--queue", "a b"],
        ["failed", "show"],
        ["size", "--redis-url", "http://localhost"],
        ["size", "--redis-url", "redis://127.0.0.1:notaport/0"],
        ["no-such-command"],
    ],
)
def test_bad_options_are_usage_errors_without_a_traceback(
    queue: RedisQueue, config: Config, args: list[str]
) -> None:
    result = cli(config, *args)
    assert result.returncode == 2, result.stderr
    assert "Usage:" in result.stderr and "Error:" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_preloaded_module_that_raises_is_one_usage_line(config: Config, tmp_path: Path) -> None:
    (tmp_path / "raises_on_import.py").write_text("raise RuntimeError('boom \\x1b[31m')\n")
    result = cli(config, "work", "-A", "raises_on_import", "--once", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "-A/--app raises_on_import: importing it raised RuntimeError: boom" in result.stderr
    assert "Traceback" not in result.stderr and "\x1b" not in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["size"],
        ["clear", "default"],
        ["restart"],
        ["work", "--stop-when-empty"],
        ["failed", "list"],
        ["failed", "show", "abc"],
        ["failed", "retry", "--all"],
        ["failed", "flush"],
    ],
)
def test_unreachable_redis_is_one_clear_line(config: Config, args: list[str]) -> None:
    result = cli(config, *args, env={"REDIS_URL": UNREACHABLE}, cwd=TASKS_DIR, timeout=60)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"rqueue: cannot reach Redis at {UNREACHABLE}")


def test_a_password_in_the_url_is_never_printed(config: Config) -> None:
    result = cli(config, "size", "--redis-url", "redis://user:s3cret@127.0.0.1:1/0")
    assert result.returncode == 1
    assert "s3cret" not in result.stderr and "user:***@127.0.0.1:1" in result.stderr


@pytest.mark.topology
def test_redis_url_option_overrides_the_environment(queue: RedisQueue, config: Config) -> None:
    apptasks.record.dispatch(1)
    result = cli(config, "size", "--redis-url", config.redis_url, env={"REDIS_URL": UNREACHABLE})
    assert result.returncode == 0, result.stderr
    assert rows(result.stdout) == {"default": ["1", "0", "0", "0"]}


def test_size_and_failed_list_never_scan_the_keyspace(queue: RedisQueue, config: Config) -> None:
    apptasks.record.dispatch(1)
    apptasks.always_fails.dispatch(2)
    queue.client.config_resetstat()
    assert cli(config, "size").returncode == 0
    assert cli(config, "failed", "list").returncode == 0
    stats = queue.client.info("commandstats")
    assert "cmdstat_keys" not in stats and "cmdstat_scan" not in stats
    assert stats["cmdstat_sscan"]["calls"] >= 2  # the set of known queues, a step at a time


@pytest.mark.topology
def test_log_level_hides_task_lines_below_it(queue: RedisQueue, config: Config) -> None:
    handle = apptasks.record.dispatch("quiet")
    result = cli(config, "work", "--stop-when-empty", "--log-level", "WARNING", cwd=TASKS_DIR)
    assert result.returncode == 0, result.stderr
    assert strings(queue.client, apptasks.DONE) == ["quiet"]
    assert handle.id not in result.stderr and "INFO" not in result.stderr


def test_server_runs_an_embedded_redis_until_stopped(config: Config, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data = tmp_path / "data"
    env = {**os.environ, "REDIS_URL": UNREACHABLE}
    process = subprocess.Popen(
        [*RQUEUE, "server", "--port", str(port), "--dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert "Redis ready at redis://" in ready and f":{port}" in ready, ready
        client = redis.Redis(port=port)
        assert client.ping()
        client.set("kept", "1")
        client.close()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(15)
    assert data.is_dir() and any(data.iterdir())  # persistence in the data folder
    with socket.socket() as probe:  # the redis-server went away with it
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_a_fresh_worker_calls_only_undeclared_queues_unknown(
    queue: RedisQueue, config: Config
) -> None:
    """On an empty Redis, ``default`` and the queues the ``-A`` modules' tasks declare
    are not typos; only a queue nothing names is (issue #26, item 15)."""
    plain = cli(config, "work", "--stop-when-empty", cwd=TASKS_DIR, timeout=60)
    assert plain.returncode == 0, plain.stderr
    assert "unknown queue" not in plain.stderr
    args = ("work", "-A", "apptasks", "default,emails,declared,emial", "--stop-when-empty")
    declared = cli(config, *args, cwd=TASKS_DIR, timeout=60)
    assert declared.returncode == 0, declared.stderr
    assert "unknown queue emial: " in declared.stderr


def test_size_and_failed_list_warn_of_a_queue_nothing_names(
    queue: RedisQueue, config: Config
) -> None:
    """``rqueue size emial`` and ``rqueue failed list --queue emial`` answered nothing but
    zeros; a queue with data, or in the registry, is not called unknown."""
    apptasks.always_fails.dispatch(1)  # on "emails": known, with a failure once run
    typo = cli(config, "size", "emial")
    assert typo.returncode == 0, typo.stderr
    assert "unknown queue emial" in typo.stderr and "known queues: emails" in typo.stderr
    assert rows(typo.stdout) == {"emial": ["0", "0", "0", "0"]}
    meant = cli(config, "size", "emails", "default")
    assert meant.returncode == 0 and "unknown queue" not in meant.stderr, meant.stderr
    listed = cli(config, "failed", "list", "--queue", "emial")
    assert listed.returncode == 0, listed.stderr
    assert "unknown queue emial" in listed.stderr and "(none)" in listed.stdout
    queue.client.delete(queue.global_keys.known_queues)  # the registry lost; the task is there
    assert "unknown queue" not in cli(config, "failed", "list", "--queue", "emails").stderr
    assert "unknown queue" not in cli(config, "size", "emails").stderr


def clear_on(config: Config, answer: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    """``rqueue clear ARGS`` with stdin a terminal that types ``answer``, or (None) with
    no terminal at all: a script's stdin."""
    env = {**os.environ, "REDIS_URL": config.redis_url}
    if answer is None:
        return subprocess.run(
            [*RQUEUE, "clear", *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
    main, terminal = pty.openpty()
    try:
        os.write(main, answer.encode() + b"\n")
        return subprocess.run(
            [*RQUEUE, "clear", *args],
            stdin=terminal,
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
    finally:
        os.close(main)
        os.close(terminal)


def test_clear_asks_on_a_terminal_and_needs_force_without_one(
    queue: RedisQueue, config: Config
) -> None:
    """``rqueue clear`` deleted at once, tasks running included (issue #26, item 22)."""
    apptasks.record.dispatch_many([(1,), (2,)])
    apptasks.record.later(60, 3)
    script = clear_on(config, None, "default")
    assert script.returncode == 2, script.stderr
    assert "2 ready, 1 delayed and 0 reserved" in script.stderr
    assert "pass --force" in script.stderr
    declined = clear_on(config, "n", "default")
    assert declined.returncode == 1, declined.stderr
    assert "Delete 2 ready, 1 delayed and 0 reserved" in declined.stdout
    assert "Nothing deleted." in declined.stdout
    size = queue.sizes(["default"])[0]
    assert (size.ready, size.delayed) == (2, 1)  # nothing lost by asking
    accepted = clear_on(config, "y", "default")
    assert accepted.returncode == 0, accepted.stderr
    assert "Cleared 3 task(s) from queue default." in accepted.stdout
    size = queue.sizes(["default"])[0]
    assert (size.ready, size.delayed) == (0, 0)
    empty = clear_on(config, None, "default")  # nothing to delete: nothing to ask
    assert empty.returncode == 0 and "Cleared 0 task(s)" in empty.stdout, empty.stderr


ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
"""How every time a person reads is shown (docs/worker.md, "Times"): UTC, ISO 8601, ``Z``."""
CHICAGO = {"TZ": "America/Chicago"}  # Django's default TIME_ZONE, and not UTC


def test_failed_list_and_show_print_utc_times_with_their_zone(
    queue: RedisQueue, config: Config
) -> None:
    """``rqueue failed list`` printed local time with no zone (issue #26, item 19)."""
    apptasks.always_fails.dispatch("x")
    (reserved,) = queue.reserve("emails", 1, 60_000, 0, 0).payloads
    queue.fail("emails", reserved, make_record("emails", reserved, "E", "m"))
    (record,) = FailedTasks(queue).list(["emails"])
    expected = moment(record.failed_at)
    assert ISO_UTC.fullmatch(expected)
    listed = cli(config, "failed", "list", env=CHICAGO)
    assert listed.returncode == 0, listed.stderr
    assert rows(listed.stdout)[record.id][3] == expected
    shown = cli(config, "failed", "show", record.id, env=CHICAGO)
    assert f"failed at: {expected}\n" in shown.stdout, shown.stdout


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_worker_logs_utc_times_whatever_the_local_zone(
    queue: RedisQueue, config: Config, log_format: str
) -> None:
    """The Django example's worker logged Chicago time with no zone: TZ must not move it."""
    apptasks.record.dispatch("x")
    before = time.time()
    args = ("work", "--stop-when-empty", "--log-format", log_format)
    result = cli(config, *args, cwd=TASKS_DIR, timeout=60, env=CHICAGO)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) >= 3, result.stderr  # started, the task, stopped
    for line in lines:
        stamp = json.loads(line)["time"] if log_format == "json" else line.split(" ", 1)[0]
        assert ISO_UTC.fullmatch(stamp), line
        logged_at = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        assert before - 1 <= logged_at <= time.time() + 1, line  # UTC, not Chicago's wall time
