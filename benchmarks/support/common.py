"""Shared pieces of the benchmarks: the worker command, watching a run, Redis stats.

Benchmarks print figures; they never assert. Everything here talks to a Redis the
benchmark started itself (``rqueue.server.RedisServer``), so a run never touches
a Redis someone else is using.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil
import redis
from redis.connection import AbstractConnection

SUPPORT_DIR = Path(__file__).resolve().parent
"""This folder: the code the entry points share, and the task modules workers import."""
BENCH_DIR = SUPPORT_DIR.parent
COUNTER = "bench:done"


# -- printing -------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "") -> None:
    """Print a plain table that reads well in a terminal and pastes into Markdown."""
    cells = [[str(h) for h in headers]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    if title:
        print(f"\n{title}")
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in cells
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print("\n".join(lines), flush=True)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def machine_summary(redis_client: redis.Redis | None = None) -> str:
    parts = [
        platform.platform(terse=True),
        f"{os.cpu_count()} CPUs",
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB",
        f"Python {platform.python_version()}",
        f"redis-py {redis.__version__}",
    ]
    try:
        import hiredis

        parts.append(f"hiredis {hiredis.__version__}")
    except ImportError:
        parts.append("no hiredis")
    if redis_client is not None:
        server = redis_client.info("server")
        if "valkey_version" in server:  # Valkey says 7.2.4 as its redis_version
            parts.append(f"Valkey {server['valkey_version']}")
        else:
            parts.append(f"Redis {server['redis_version']}")
    load = os.getloadavg()
    parts.append(f"load {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}")
    return ", ".join(parts)


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


# -- Redis statistics -------------------------------------------------------------------


def command_calls(client: redis.Redis) -> dict[str, int]:
    """Calls per command so far (commands run inside scripts included)."""
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def script_usec(client: redis.Redis) -> int:
    """Microseconds Redis spent running scripts so far (the commands they called too)."""
    stats = client.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("usec", 0))


def command_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0) > 0}


# -- processes ---------------------------------------------------------------------------


@dataclass
class MemorySampler:
    """Peak RSS of a process and of each of its children, sampled in a thread."""

    pid: int
    interval: float = 0.1
    peaks: dict[int, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> MemorySampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        try:
            root = psutil.Process(self.pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        for process in processes:
            try:
                rss = process.memory_info().rss
            except psutil.NoSuchProcess:
                continue
            self.peaks[process.pid] = max(rss, self.peaks.get(process.pid, 0))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def summary(self) -> str:
        """``parent 30.1 MB; children 28.0, 28.2 MB``."""
        parent = self.peaks.get(self.pid, 0) / 2**20
        children = [v / 2**20 for k, v in sorted(self.peaks.items()) if k != self.pid]
        listed = ", ".join(f"{c:.1f}" for c in children)
        return f"parent {parent:.1f} MB; children {listed} MB"


def rqueue_work(
    redis_url: str,
    concurrency: int,
    *extra: str,
    queue: str = "default",
    env: dict[str, str] | None = None,
    stderr: IO[bytes] | None = None,
) -> subprocess.Popen[bytes]:
    """Start the real ``rqueue work`` CLI, importing tasks from this folder and from the
    running entry point's own (a task defined in the script, such as
    ``workflows:record_then``, is named after its file: the worker's directory).
    ``env`` adds to its environment (a ``PYTHONPATH`` there comes before this process's
    own, which comes before this folder: ``PYTHONPATH=<tree> python benchmarks/...`` runs
    that tree's worker, not the installed one); ``stderr``, a file for its log (by
    default this process's own)."""
    added = dict(env or {})
    inherited = os.environ.get("PYTHONPATH", "")
    path = os.pathsep.join(filter(None, (added.pop("PYTHONPATH", ""), inherited, str(SUPPORT_DIR))))
    env = {**os.environ, **added, "REDIS_URL": redis_url, "PYTHONPATH": path}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rqueue",
            "work",
            queue,
            "--concurrency",
            str(concurrency),
            "--log-level",
            "WARNING",
            *extra,
        ],
        cwd=Path(sys.argv[0]).resolve().parent,
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=stderr,
    )


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.01) -> float:
    """Poll until ``condition`` holds; return the moment it did (``time.perf_counter``)."""
    deadline = time.perf_counter() + timeout
    while True:
        if condition():
            return time.perf_counter()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"gave up after {timeout:.0f} s")
        time.sleep(interval)


# -- processes let go at once ---------------------------------------------------------


def run_at_once(
    target: Callable[..., None], argsets: Sequence[tuple[Any, ...]], timeout: float = 600
) -> float:
    """Run ``target(*args, ready, go, done)`` in a forked process per argset, all let go
    at once when every one has said ``ready``; seconds from then until the last one put
    its ``time.perf_counter()`` end in ``done``. Start-up then counts for none of them."""
    started, ends = let_go_at_once(target, argsets, timeout)
    return max(float(end) for end in ends) - started


def let_go_at_once(
    target: Callable[..., None],
    argsets: Sequence[tuple[Any, ...]],
    timeout: float = 600,
    on_ready: Callable[[list[int]], None] | None = None,
) -> tuple[float, list[Any]]:
    """As :func:`run_at_once`: the moment they were let go, and what each put in ``done``.
    ``on_ready`` is given their pids once all are ready, before they are let go."""
    context = multiprocessing.get_context("fork")
    ready, go, done = context.Semaphore(0), context.Event(), context.Queue()
    processes = [context.Process(target=target, args=(*args, ready, go, done)) for args in argsets]
    for process in processes:
        process.start()
    for _ in processes:
        ready.acquire()
    if on_ready is not None:
        on_ready([process.pid for process in processes if process.pid is not None])
    started = time.perf_counter()
    go.set()
    puts = [done.get(timeout=timeout) for _ in processes]
    for process in processes:
        process.join()
    return started, puts


class Requests:
    """Counts the requests this process writes to Redis while in use: one per command
    or pipeline.

    Both of the child's paths to Redis (its wire and redis-py's pool) send through
    ``AbstractConnection.send_packed_command``, so counting its calls counts round
    trips, which ``INFO commandstats`` cannot tell apart from commands run in scripts.
    """

    def __init__(self) -> None:
        self.sent = 0
        self._send = AbstractConnection.send_packed_command

    def __enter__(self) -> Requests:
        send = self._send

        def counted(
            connection: AbstractConnection, command: Any, check_health: bool = True
        ) -> None:
            self.sent += 1
            send(connection, command, check_health)  # type: ignore[no-untyped-call]

        AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc_info: object) -> None:
        AbstractConnection.send_packed_command = self._send  # type: ignore[method-assign]
