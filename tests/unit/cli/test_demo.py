"""``rqueue demo``, run as a user runs it: a subprocess, checked by its output and exit code."""

from __future__ import annotations

import os
import re
import subprocess

from support import RQUEUE

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue


def run_demo(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RQUEUE, "demo", *args], capture_output=True, text=True, timeout=90, env=env
    )


def figures(output: str) -> dict[str, int]:
    """The numbers of the demo's summary block."""
    summary = output.split("\nSummary\n", 1)[1]
    return {
        name: int(number)
        for name, number in re.findall(
            r"^  (completed|retried|failed|timed out) +(\d+)", summary, re.MULTILINE
        )
    }


def test_demo_on_embedded_redis_exits_0_with_the_expected_summary() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "RQUEUE_PREFIX")}
    result = run_demo(env, "--tasks", "20")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Started an embedded Redis" in result.stdout
    assert figures(result.stdout) == {"completed": 24, "retried": 3, "failed": 2, "timed out": 1}
    assert "Queues now: ready 0, delayed 0, reserved 0, failed 2" in result.stdout
    assert "The pool exited with code 0." in result.stdout
    assert "embedded Redis stopped" in result.stdout


def test_demo_uses_redis_url_and_deletes_its_keys_afterwards(
    config: Config, queue: RedisQueue
) -> None:
    queue.client.set("users:keep-me", "1")
    result = run_demo({**os.environ, "REDIS_URL": config.redis_url}, "--tasks", "5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert figures(result.stdout) == {"completed": 9, "retried": 3, "failed": 2, "timed out": 1}
    assert "Started an embedded Redis" not in result.stdout
    assert queue.client.keys("*") == [b"users:keep-me"]
