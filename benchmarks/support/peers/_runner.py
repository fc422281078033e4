"""What every peer runner shares: enqueue, start the real workers, count INCRs, report.

Runs inside each peer's own virtualenv (``benchmarks/.venvs/<name>``), so it uses only
the standard library, redis-py (every peer brings it) and psutil (installed beside).
A runner prints one line ``RESULT {json}`` that compare.py reads.

Two workloads: ``incr`` (each task does one INCR) and ``io`` (each task waits
``IO_WAIT`` seconds, as a call to an HTTP API or a database would, then does the INCR),
where each peer runs its documented I/O-bound concurrency, ``--per-process`` tasks at
once in each worker process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import redis

SUPPORT_DIR = Path(__file__).resolve().parent.parent
"""benchmarks/support/, where the ``peers`` package lives: the workers' PYTHONPATH."""
LOG_DIR = SUPPORT_DIR.parent / ".venvs" / "logs"
COUNTER = "bench:done"
IO_WAIT = 0.02

_client: list[redis.Redis] = []


def client() -> redis.Redis:
    """A Redis client of this process, opened lazily (after any fork) from REDIS_URL."""
    if not _client:
        _client.append(redis.Redis.from_url(os.environ["REDIS_URL"]))
    return _client[0]


def arguments(variants: Sequence[str] = ("default",)) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--variant", choices=variants, default=variants[0])
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--workload", choices=("incr", "io"), default="incr")
    parser.add_argument(
        "--per-process", type=int, default=100, help="io: tasks at once per worker process"
    )
    parser.add_argument(
        "--enqueue-only",
        action="store_true",
        help="enqueue and exit, starting no worker (scale_memory.py: Redis bytes per task)",
    )
    args = parser.parse_args()
    os.environ["REDIS_URL"] = args.redis_url
    # Worker settings that are module attributes (arq, saq) read it at import; the
    # incr workload keeps each peer's default.
    os.environ.pop("BENCH_PER_PROCESS", None)
    if args.workload == "io":
        os.environ["BENCH_PER_PROCESS"] = str(args.per_process)
    return args


def per_process(default: int) -> int:
    """The io workload's tasks at once per process, as the runner was told (workers
    inherit it through the environment); ``default`` for the incr workload."""
    return int(os.environ.get("BENCH_PER_PROCESS", default))


def wait_then_incr_sync() -> None:
    """The io workload's task for sync peers: a blocking wait, then the INCR."""
    time.sleep(IO_WAIT)
    client().incr(COUNTER)


def version(*packages: str) -> str:
    """``redis 8.1.0, hiredis 3.5.0``; an optional one not installed reads ``no hiredis``."""
    found = []
    for package in packages:
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"no {package}")
    return ", ".join(found)


def worker_env() -> dict[str, str]:
    # compare.py put benchmarks/support/ first on PYTHONPATH; peers keep what else it holds.
    pythonpath = os.pathsep.join(p for p in (str(SUPPORT_DIR), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1"}


def run(
    system: str,
    versions: str,
    settings: str,
    enqueue: Callable[[int], None],
    commands: list[list[str]],
    args: argparse.Namespace,
    in_flight: int = 0,
) -> None:
    """Enqueue ``args.tasks`` INCR tasks, start ``commands``, time until all have run.

    ``in_flight``: the most tasks the workers run at once (io workload), reported so
    compare.py can set the rate beside what that many ``IO_WAIT`` waits allow.

    A system still busy after ``args.timeout`` seconds is stopped and its rate is
    reported over the tasks it did run (the result says how many).
    """
    counter = redis.Redis.from_url(args.redis_url)
    counter.flushall()
    started = time.perf_counter()
    enqueue(args.tasks)
    enqueue_rate = args.tasks / (time.perf_counter() - started)
    if args.enqueue_only:
        only = {"system": system, "versions": versions, "tasks": args.tasks}
        print("RESULT " + json.dumps({**only, "enqueue_rate": enqueue_rate}), flush=True)
        return
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_name = f"{system.split()[0].lower()}-{args.variant}-{args.workload}.log"
    log = open(LOG_DIR / log_name, "wb")  # noqa: SIM115
    started = time.perf_counter()
    workers = [
        subprocess.Popen(
            command,
            cwd=SUPPORT_DIR,
            env=worker_env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        for command in commands
    ]
    sampler = _RssSampler([w.pid for w in workers])
    first = done = 0.0
    count = 0
    deadline = started + args.timeout
    try:
        while time.perf_counter() < deadline:
            count = int(counter.get(COUNTER) or 0)
            now = time.perf_counter()
            if count and not first:
                first = now
            if count >= args.tasks:
                done = now
                break
            if all(w.poll() is not None for w in workers):
                break
            sampler.sample()
            time.sleep(0.005)
    finally:
        stopped = time.perf_counter()
        for worker in workers:
            _stop(worker)
        log.close()
    result: dict[str, Any] = {
        "system": system,
        "versions": versions,
        "settings": settings,
        "tasks": args.tasks,
        "done": count,
        "enqueue_rate": enqueue_rate,
        "from_start": count / ((done or stopped) - started),
        "steady": count / ((done or stopped) - first) if first else 0.0,
        "peak_rss_mb": sampler.peak_total / 2**20,
        "largest_process_mb": max(sampler.peaks.values(), default=0) / 2**20,
        "in_flight": in_flight,
        "workload": args.workload,
    }
    print("RESULT " + json.dumps(result), flush=True)


def _stop(worker: subprocess.Popen[bytes]) -> None:
    """Stop a worker and everything it forked (its own session)."""
    for signum, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(worker.pid, signum)
        except ProcessLookupError:
            return
        try:
            worker.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        with contextlib.suppress(ProcessLookupError):  # pool children may outlive the leader
            os.killpg(worker.pid, signal.SIGKILL)
        return


class _RssSampler:
    """Peak total RSS of the worker process trees, and each process's own peak (so the
    largest worker child can be quoted), if psutil is installed."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.peak_total = 0
        self.peaks: dict[int, int] = {}
        self._last = 0.0
        try:
            import psutil

            self._psutil: Any = psutil
        except ImportError:
            self._psutil = None

    def sample(self) -> None:
        if self._psutil is None or time.perf_counter() - self._last < 0.2:
            return
        self._last = time.perf_counter()
        total = 0
        for pid in self.pids:
            try:
                root = self._psutil.Process(pid)
                for process in [root, *root.children(recursive=True)]:
                    rss = process.memory_info().rss
                    total += rss
                    self.peaks[process.pid] = max(rss, self.peaks.get(process.pid, 0))
            except self._psutil.Error:
                continue
        self.peak_total = max(self.peak_total, total)


def python_bin(name: str) -> str:
    """A console script of the running virtualenv (``rq``, ``celery``, ...)."""
    return str(Path(sys.executable).parent / name)
