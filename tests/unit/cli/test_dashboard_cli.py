"""``rqueue dashboard``, the real command: where it binds, when it refuses to start,
and the token it then asks for; and the charts' SVG on data no chart should trust."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import httpx
from support import RQUEUE, cli, push_job, wait_for
from topologies import listen_port

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.web.charts import line_chart

TOKEN = "a-token-long-enough-for-the-test"


def test_a_non_loopback_host_is_refused_without_a_token(config: Config) -> None:
    env = {"RQUEUE_DASHBOARD_TOKEN": ""}
    for host in ("0.0.0.0", "::", "192.0.2.1", "dashboard.example"):
        result = cli(config, "dashboard", "--host", host, env=env)
        assert result.returncode == 2, result.stderr
        assert "--host" in result.stderr and "RQUEUE_DASHBOARD_TOKEN" in result.stderr
    short = cli(config, "dashboard", "--host", "0.0.0.0", env={"RQUEUE_DASHBOARD_TOKEN": "short"})
    assert short.returncode == 2 and "RQUEUE_DASHBOARD_TOKEN is too short" in short.stderr
    port = cli(config, "dashboard", "--port", "70000")
    assert port.returncode == 2 and "--port" in port.stderr


def test_unreachable_redis_is_one_line_not_a_server(config: Config) -> None:
    result = cli(
        config, "dashboard", "--port", str(listen_port()), "--redis-url", "redis://127.0.0.1:1"
    )
    assert result.returncode == 1 and "cannot reach Redis" in result.stderr
    assert "Traceback" not in result.stderr


class Command(NamedTuple):
    """A running ``rqueue dashboard``: its URL, and the process (stdout piped)."""

    url: str
    process: subprocess.Popen[str]


@contextmanager
def dashboard_command(config: Config, *args: str, token: str = "") -> Iterator[Command]:
    """``rqueue dashboard ARGS`` on a free loopback port, once it answers; stopped at
    the end. ``token``: its RQUEUE_DASHBOARD_TOKEN ("": none)."""
    port = listen_port()
    env = {**os.environ, "REDIS_URL": config.redis_url, "RQUEUE_DASHBOARD_TOKEN": token}
    process = subprocess.Popen(
        [*RQUEUE, "dashboard", "--port", str(port), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"

        def answers() -> httpx.Response | None:
            try:
                return httpx.get(f"{url}/static/dashboard.css")
            except httpx.ConnectError:
                return None

        wait_for(answers, 15, "the dashboard to answer")
        yield Command(url, process)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(15)
        for stream in (process.stdout, process.stderr):
            assert stream is not None
            stream.close()


def test_the_command_serves_on_loopback_and_asks_for_its_token(
    config: Config, queue: RedisQueue
) -> None:
    with dashboard_command(config, "--read-only", token=TOKEN) as (url, process):
        assert httpx.get(f"{url}/queues").status_code == 401
        # Printed before it serves: read only now, so that no read can block unbounded.
        assert process.stdout is not None
        announced = process.stdout.readline()
        assert f"Dashboard (read-only) at {url}/" in announced
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        page = httpx.get(f"{url}/queues", headers=bearer)
        assert page.status_code == 200 and "read-only" in page.text
        assert httpx.post(f"{url}/queues/pause", headers=bearer).status_code == 403


def test_the_command_answers_its_allowed_hosts_only(config: Config, queue: RedisQueue) -> None:
    # Without a token: loopback Hosts and --allowed-host only (DNS rebinding).
    wrong = cli(config, "dashboard", "--allowed-host", "http://x.example/")
    assert wrong.returncode == 2 and "--allowed-host" in wrong.stderr, wrong.stderr
    with dashboard_command(config, "--allowed-host", "dash.example") as (url, _):
        assert httpx.get(f"{url}/queues").status_code == 200
        named = httpx.get(f"{url}/queues", headers={"Host": "dash.example:8080"})
        assert named.status_code == 200
        assert httpx.get(f"{url}/metrics", headers={"Host": "evil.example"}).status_code == 400


def test_a_chart_draws_one_path_per_series_and_skips_what_is_not_a_number() -> None:
    series = {
        "<b>q</b>": [(0.0, 1.0), (60.0, math.nan), (120.0, 3.0)],
        "other": [(0.0, math.inf), (60.0, -5.0), (9e99, 1.0)],
        "emails": [(30.0, 2.0), (90.0, 0.0)],
    }
    svg = str(line_chart("Processed <per> minute", series, 0.0, 120.0))
    assert svg.count('class="series"') == 2  # "other" has no point worth drawing
    assert "<b>" not in svg and "&lt;b&gt;q&lt;/b&gt;" in svg and "&lt;per&gt;" in svg
    assert 'd="M48.0,' in svg and "nan" not in svg.lower() and "inf" not in svg.lower()
    assert ">5<" in svg  # the y axis ends at a round number above the highest point
    empty = str(line_chart("Nothing", {}, 0.0, 60.0))
    assert "no data in this window" in empty and 'class="series"' not in empty


def test_without_the_extras_the_commands_name_what_to_install(config: Config) -> None:
    # The real command in a Python where the web stack cannot be imported (None in
    # sys.modules makes an import fail as if the package were not installed).
    for blocked, command, extra in (
        ("uvicorn", "dashboard", "rqueue[web]"),
        ("prometheus_client", "metrics", "rqueue[metrics]"),
    ):
        code = (
            f"import sys; sys.modules[{blocked!r}] = None; "
            f"from rqueue.cli import main; main([{command!r}])"
        )
        env = {**os.environ, "REDIS_URL": config.redis_url}
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env
        )
        assert result.returncode == 1, result.stderr
        assert f"pip install '{extra}'" in result.stderr
        assert "Traceback" not in result.stderr


def test_the_command_flags_queues_whose_oldest_task_waits_past_their_limit(
    config: Config, queue: RedisQueue
) -> None:
    for bad in (
        ("--wait", "emails=soon"),
        ("--wait", "emails=-1"),
        ("--wait", "emails=nan"),
        ("--wait", "x:delayed=5"),  # no queue can have that name
        ("--wait", "emails=5", "--wait", "emails=6"),
        ("--wait", "5", "--wait", "6"),
    ):
        refused = cli(config, "dashboard", *bad)
        assert refused.returncode == 2 and "--wait" in refused.stderr, (bad, refused.stderr)
    push_job(queue, "apptasks:record", "old", dispatched_at=time.time() - 120)
    push_job(queue, "apptasks:record", "old", queue="emails", dispatched_at=time.time() - 120)
    with dashboard_command(config, "--wait", "emails=300", "--wait", "60") as (url, _):
        page = httpx.get(f"{url}/queues").text
    assert '<tr data-queue="default" class="over">' in page  # 120 s, over the 60 s default
    assert '<tr data-queue="emails">' in page  # 120 s, under its own 300 s
    assert "over 1 min 00 s" in page
