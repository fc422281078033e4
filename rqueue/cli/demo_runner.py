"""The runner behind ``rqueue demo``: the README's end-to-end run, on a throwaway Redis.

It dispatches the tasks of ``examples/tasks.py`` (quick, delayed, retried, failing,
timing out), runs a real ``rqueue work`` pool as a subprocess over them, shows
progress, stops the pool with SIGTERM (a warm shutdown) once every task has settled,
and prints a summary. Nothing is left behind: the embedded Redis is stopped and its
folder removed, or, on a Redis given by ``REDIS_URL``, the demo's keys (all under a
prefix of their own) are deleted.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any, TextIO

from rqueue.failed import FailedTasks
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import PendingDispatch, dispatch_many

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""The folder that holds the ``rqueue`` package: a checkout, in an editable install."""
QUEUES = ("emails", "default")
SETTLE_TIMEOUT = 120.0
"""Seconds the demo waits for every task to settle before giving up (it takes ~3 s)."""
STOP_TIMEOUT = 30.0
"""Seconds a warm shutdown may take: every task has settled, so it should take ~1 s."""


class DemoError(Exception):
    """Something the user can fix; printed as one line."""


@dataclass(frozen=True)
class Summary:
    dispatched: int
    completed: int
    retried: int
    failed: int
    timed_out: int


def find_examples() -> Path:
    """``examples/`` beside the package (an editable install), else in the current folder."""
    for candidate in (PACKAGE_ROOT / "examples", Path.cwd() / "examples"):
        if (candidate / "tasks.py").is_file():
            return candidate
    raise DemoError(
        "cannot find examples/tasks.py: run `rqueue demo` from a checkout of rqueue "
        "(git clone, cd into it, pip install -e '.[embedded]')"
    )


def run_demo(count: int, concurrency: int, out: TextIO | None = None) -> int:
    """Run the demo; return the exit code (0 when everything went as expected)."""
    stream = out or sys.stdout

    def say(text: str = "") -> None:
        print(text, file=stream, flush=True)

    started = time.monotonic()
    # A SIGTERM to the demo cleans up like Ctrl-C: the pool and Redis are ours to stop.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        examples = find_examples()
        with redis_for_demo(say) as config:
            summary = _run(config, examples, count, concurrency, say, started)
    except DemoError as exc:
        say(f"rqueue demo: {exc}")
        return 1
    except KeyboardInterrupt:
        say("\nrqueue demo: interrupted; cleaned up.")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    expected = Summary(count + 6, count + 4, 3, 2, 1)
    if summary != expected:
        say(f"rqueue demo: unexpected outcome {summary}, expected {expected}")
        return 1
    return 0


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextmanager
def redis_for_demo(say: Any) -> Iterator[Config]:
    """An embedded redis-server, or ``REDIS_URL`` with a prefix of our own, cleaned after."""
    url = os.environ.get("REDIS_URL")
    if url:
        config = Config.resolve(redis_url=url, prefix=f"rqueue-demo-{uuid.uuid4().hex[:8]}:")
        say(f"Using the Redis at {config.redacted_url()} (REDIS_URL), keys under {config.prefix}*")
        queue = RedisQueue(config)
        try:
            queue.ping()
        except Exception as exc:
            raise DemoError(f"cannot reach Redis at {config.redacted_url()}: {exc}") from None
        try:
            yield config
        finally:
            say(f"Cleaned up: deleted the demo's {queue.delete_everything()} key(s).")
        return
    from rqueue.server import RedisServer, RedisServerError

    server = RedisServer()
    try:
        server.start()
    except RedisServerError as exc:
        raise DemoError(str(exc)) from None
    say(f"Started an embedded Redis on {server.url} (set REDIS_URL to use your own).")
    try:
        yield Config.resolve(redis_url=server.url, prefix="")
    finally:
        server.cleanup()
        say("Cleaned up: embedded Redis stopped and its data folder removed.")


def _run(
    config: Config, examples: Path, count: int, concurrency: int, say: Any, started: float
) -> Summary:
    queue = RedisQueue(config)
    use(queue)
    tasks = _import_examples(examples)
    total = _dispatch(tasks, count, say)

    say(f"\nStarting a worker pool of {concurrency} in {examples}:")
    command = [
        "rqueue",
        "work",
        ",".join(QUEUES),
        "--concurrency",
        str(concurrency),
        "-A",
        "tasks",
        "--log-level",
        "WARNING",
        "--log-format",
        "json",
    ]
    say("  " + " ".join(command))
    worker = subprocess.Popen(
        [sys.executable, "-m", *command],
        cwd=examples,
        env=_worker_env(config),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    relay = threading.Thread(target=_relay_log, args=(worker.stderr, say), daemon=True)
    relay.start()
    try:
        counts = _wait_until_settled(tasks, queue, total, worker, say)
        say(f"All {total} tasks settled; sending SIGTERM to the pool (warm shutdown).")
        worker.send_signal(signal.SIGTERM)
        try:
            code = worker.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise DemoError(
                f"the worker pool did not stop within {STOP_TIMEOUT:g} s of SIGTERM"
            ) from None
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        relay.join(5)
    if code != 0:
        raise DemoError(f"the worker pool exited with code {code}")
    say(f"The pool exited with code {code}.")
    _report(queue, counts, say)
    say(f"  wall time  {time.monotonic() - started:5.1f} s   (Redis start to pool exit)")
    return Summary(
        total, counts["completed"], counts["retried"], counts["failed"], counts["timed_out"]
    )


def _import_examples(examples: Path) -> ModuleType:
    """Import ``tasks`` from ``examples/``, as the workers will (same task names)."""
    sys.path.insert(0, str(examples))
    module = importlib.import_module("tasks")
    if Path(module.__file__ or "").resolve().parent != examples.resolve():
        raise DemoError(f"a different module named 'tasks' is in the way: {module.__file__}")
    return module


def _dispatch(tasks: ModuleType, count: int, say: Any) -> int:
    say("\nDispatching the tasks of examples/tasks.py:")
    tasks.greet.dispatch_many((n,) for n in range(count))
    say(f"  {count:4d} x greet          now, in one round trip (dispatch_many)")
    in_two_seconds = datetime.now(timezone.utc) + timedelta(seconds=2)
    tasks.send_reminder.later(2, 1)
    tasks.send_reminder.later(timedelta(seconds=2), 2)
    tasks.send_reminder.later(in_two_seconds, 3)
    say("     3 x send_reminder  in 2 s, on 'emails' (later: seconds, timedelta, datetime)")
    calls: list[PendingDispatch] = [
        tasks.flaky_charge.pending(7),
        tasks.always_fails.pending(8),
        tasks.slow_report.pending(),
    ]
    dispatch_many(calls)  # several tasks, one round trip
    say("     1 x flaky_charge   fails twice, then succeeds (tries=3, backoff=[0.5, 1])")
    say("     1 x always_fails   raises every time (tries=2, backoff=0.5)")
    say("     1 x slow_report    sleeps past its 1 s timeout (timeout=1, tries=1)")
    return count + 6


def _worker_env(config: Config) -> dict[str, str]:
    env = dict(os.environ, REDIS_URL=config.redis_url, RQUEUE_PREFIX=config.prefix)
    # The pool runs from examples/; make sure it imports this very rqueue.
    paths = (str(PACKAGE_ROOT), env.get("PYTHONPATH"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def _relay_log(stream: TextIO | None, say: Any) -> None:
    """Show the pool's warnings and errors (retries, failures), one short line each."""
    if stream is None:
        return
    for line in stream:
        try:
            entry = json.loads(line)
            say(f"  worker {entry.get('pid', '?')}: {entry.get('message', '').strip()}")
        except ValueError:
            if line.strip():
                say(f"  worker: {line.rstrip()}")


def _wait_until_settled(
    tasks: ModuleType, queue: RedisQueue, total: int, worker: subprocess.Popen[str], say: Any
) -> dict[str, int]:
    """Poll the outcome counts the example listeners keep; print a line as they change."""
    started = time.monotonic()
    last: tuple[int, ...] = ()
    last_printed = 0.0
    while True:
        counts: dict[str, int] = tasks.stats(queue.client, queue.config.prefix)
        settled = counts["completed"] + counts["failed"]
        now = time.monotonic()
        state = (settled, counts["retried"])
        if state != last and (now - last_printed >= 0.5 or settled >= total):
            sizes = queue.sizes(list(QUEUES))
            say(
                f"  [{now - started:4.1f} s] {settled}/{total} settled: "
                f"{counts['completed']} completed, {counts['retried']} retried, "
                f"{counts['failed']} failed; delayed {sum(s.delayed for s in sizes)}"
            )
            last, last_printed = state, now
        if settled >= total:
            return counts
        if worker.poll() is not None:
            raise DemoError(f"the worker pool exited early with code {worker.returncode}")
        if now - started > SETTLE_TIMEOUT:
            raise DemoError(f"tasks still unsettled after {SETTLE_TIMEOUT:g} s: {counts}")
        time.sleep(0.1)


def _report(queue: RedisQueue, counts: dict[str, int], say: Any) -> None:
    sizes = queue.sizes(list(QUEUES))
    say(
        "Queues now: "
        f"ready {sum(s.ready for s in sizes)}, delayed {sum(s.delayed for s in sizes)}, "
        f"reserved {sum(s.reserved for s in sizes)}, failed {sum(s.failed for s in sizes)}"
    )
    say("\nFailed tasks (what `rqueue failed list` shows):")
    for failed in FailedTasks(queue).list(QUEUES):
        kind = "timed out" if failed.timed_out else "raised"
        say(
            f"  {failed.task:20s} {failed.attempts} attempt(s), {kind}: "
            f"{failed.exception}: {failed.message}"
        )
    raised = counts["failed"] - counts["timed_out"]
    say("\nSummary")
    say(f"  completed  {counts['completed']:5d}")
    say(f"  retried    {counts['retried']:5d}   attempts that failed and were queued again")
    say(f"  failed     {counts['failed']:5d}   ({raised} raised, {counts['timed_out']} timed out)")
    say(f"  timed out  {counts['timed_out']:5d}")
