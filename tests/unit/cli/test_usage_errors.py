"""Bad values at the edge, and what a new user hit (issue #10, items 12, 14, 15, 18, 21).

Item 20's regression test is the manage.py example of docs/schedules.md, which
tests/integration/test_docs.py now runs: its worker must not re-run the script's side effects.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
from pathlib import Path

import apptasks
import pytest
import redis
from support import RQUEUE, TASKS_DIR, Workers, cli, strings
from topologies import listen_port

from rqueue.server import RedisServer, RedisServerError
from rqueue.settings.config import Config, ConfigError
from rqueue.store.queue import RedisQueue
from rqueue.worker.options import LIMITS, WorkerOptions

FAST = ("--kill-grace", "0.5", "--block-for", "0.5")


# -- 12: every number a worker or a command takes is checked against its range ---------

OUT_OF_RANGE = [
    ("--timeout", "inf"),
    ("--timeout", "nan"),
    ("--timeout", "1e12"),
    ("--timeout", "1e300"),
    ("--timeout", "0"),
    ("--kill-grace", "inf"),
    ("--kill-grace", "-1"),
    ("--sleep", "nan"),
    ("--block-for", "inf"),
    ("--max-time", "inf"),
    ("--rest", "1e300"),
    ("--concurrency", "0"),
    ("--concurrency", "100000"),
    ("--tries", "0"),
    ("--tries", "10000000000"),
    ("--max-jobs", "-1"),
    ("--memory", "-1"),
    ("--prefetch", "1001"),
]


@pytest.mark.parametrize(("option", "value"), OUT_OF_RANGE)
def test_a_worker_option_out_of_range_is_a_usage_error_naming_it_and_its_range(
    config: Config, option: str, value: str
) -> None:
    result = cli(config, "work", option, value, "--stop-when-empty", cwd=TASKS_DIR, timeout=20)
    assert result.returncode == 2, result.stderr
    assert re.search(
        f"Error: {option} must be a (whole )?number from [0-9.]+ to [0-9.]+", result.stderr
    )
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("field", sorted(LIMITS))
def test_worker_options_refuse_nan_inf_and_huge_values_in_every_numeric_field(
    field: str,
) -> None:
    for bad in (math.nan, math.inf, -math.inf, 1e300, -1):
        with pytest.raises(ConfigError, match=f"^{field} must be a .* from "):
            WorkerOptions(**{field: bad})
    limit = LIMITS[field]
    WorkerOptions(**{field: limit.low})  # the bounds themselves are valid
    WorkerOptions(**{field: limit.high})


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RQUEUE_SOCKET_TIMEOUT", "-1"),
        ("RQUEUE_SOCKET_TIMEOUT", "nan"),
        ("RQUEUE_SOCKET_TIMEOUT", "0"),
        ("RQUEUE_SOCKET_TIMEOUT", "inf"),
        ("RQUEUE_MAX_PAYLOAD_BYTES", "abc"),
        ("RQUEUE_MAX_PAYLOAD_BYTES", "0"),
        ("RQUEUE_MAX_PAYLOAD_BYTES", "1e3"),
        ("RQUEUE_CLUSTER", "maybe"),
    ],
)
def test_a_bad_setting_in_the_environment_is_a_usage_error_naming_the_variable(
    config: Config, variable: str, value: str
) -> None:
    # Every command resolves its Config the same way; `rqueue work` is where it hurt.
    result = cli(config, "work", "--stop-when-empty", env={variable: value}, cwd=TASKS_DIR)
    assert result.returncode == 2, result.stderr
    assert f"Error: {variable} must be " in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_config_checks_its_settings_from_the_environment_and_from_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RQUEUE_SOCKET_TIMEOUT", "nan")
    with pytest.raises(ConfigError, match=r"^RQUEUE_SOCKET_TIMEOUT must be a number from 0\.1 to"):
        Config.resolve()
    monkeypatch.setenv("RQUEUE_SOCKET_TIMEOUT", "")  # empty is unset: the default
    assert Config.resolve().socket_timeout == Config().socket_timeout
    with pytest.raises(ConfigError, match=r"^max_payload_bytes must be a whole number from 1 "):
        Config(max_payload_bytes=0)
    with pytest.raises(ConfigError, match=r"^dispatch_retry must be a number from 0 "):
        Config(dispatch_retry=math.inf)


def test_the_demo_refuses_a_bad_setting_before_it_starts_anything(config: Config) -> None:
    result = cli(config, "demo", env={"RQUEUE_SOCKET_TIMEOUT": "nan"}, timeout=20)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "RQUEUE_SOCKET_TIMEOUT must be" in result.stderr
    assert "Started an embedded Redis" not in result.stdout


# -- 14, 15: rqueue server -------------------------------------------------------------


def test_server_with_its_default_relative_dir_starts(config: Config, tmp_path: Path) -> None:
    port = listen_port()
    process = subprocess.Popen(
        [*RQUEUE, "server", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert f"Redis ready at redis://127.0.0.1:{port}/0" in ready, ready + process.stderr.read()
        assert redis.Redis(port=port).ping()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(15)
    assert (tmp_path / ".rqueue" / "redis" / "redis.log").is_file()


def test_server_on_a_port_in_use_fails_and_says_so(
    config: Config, redis_server: RedisServer, tmp_path: Path
) -> None:
    port = str(redis_server.port)
    result = cli(config, "server", "--port", port, "--dir", str(tmp_path), timeout=30)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"port {port} is already in use" in result.stderr
    assert "Address already in use" in result.stderr  # redis-server's own words
    assert "Redis ready" not in result.stdout
    assert redis.Redis(port=redis_server.port).ping()  # the server already there is unharmed


def test_embedded_server_on_a_port_in_use_raises(redis_server: RedisServer, tmp_path: Path) -> None:
    with pytest.raises(RedisServerError, match=f"port {redis_server.port} is already in use"):
        RedisServer(redis_server.port, tmp_path).start()


def test_a_server_that_does_not_start_shows_redis_servers_own_error(tmp_path: Path) -> None:
    server = RedisServer(data_dir=tmp_path, extra_args=("--no-such-directive", "1"))
    with pytest.raises(RedisServerError, match=r"(?s)did not start.*no-such-directive"):
        server.start()


def test_a_bad_redis_server_binary_is_named(config: Config, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-redis-server")
    result = cli(config, "server", "--dir", str(tmp_path), env={"RQUEUE_REDIS_SERVER": missing})
    assert result.returncode == 1, result.stderr
    assert "RQUEUE_REDIS_SERVER=" in result.stderr and "Traceback" not in result.stderr


# -- 18: a queue nobody knows is named at start ------------------------------------------


def test_a_worker_warns_about_an_unknown_queue_and_lists_the_known_ones(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.record.dispatch("a")
    apptasks.always_fails.dispatch("b")  # on "emails"
    code, output = workers.run("emial", "--stop-when-empty", *FAST)
    assert code == 0, output
    assert "unknown queue emial" in output and "known queues: default, emails" in output


def test_a_known_or_non_empty_queue_is_not_called_unknown(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.record.dispatch("a")
    queue.client.delete(queue.global_keys.known_queues)  # the registry lost, a task is there
    code, output = workers.run("default", "--stop-when-empty", *FAST)
    assert code == 0, output
    assert strings(queue.client, apptasks.DONE) == ["a"]
    code, output = workers.run("default", "--stop-when-empty", *FAST)  # empty, and known now
    assert code == 0, output
    assert "unknown queue" not in output


# -- 21: --stop-when-drained waits for retries in backoff --------------------------------


def test_stop_when_drained_waits_for_a_retry_in_backoff(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.fails_until.using(backoff=0.5).dispatch("retried", 2)
    code, output = workers.run("--stop-when-drained", *FAST)
    assert code == 0, output
    assert strings(queue.client, apptasks.DONE) == ["retried"]
    assert "stopping: queues are drained" in output
    size = queue.sizes(["default"])[0]
    assert (size.ready, size.delayed, size.reserved, size.failed) == (0, 0, 0, 0)


def test_stop_when_empty_keeps_laravels_meaning_and_leaves_a_retry_in_backoff(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.fails_until.using(backoff=600).dispatch("later", 2)
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    assert strings(queue.client, apptasks.DONE) == []
    assert queue.sizes(["default"])[0].delayed == 1


def test_stop_when_drained_is_in_the_help(config: Config) -> None:
    result = cli(config, "work", "--help")
    assert "--stop-when-drained" in result.stdout and "backoff" in result.stdout
