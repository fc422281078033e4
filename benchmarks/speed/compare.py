"""rqueue beside its Python peers: the same INCR workload through each, on one Redis.

Each peer (RQ, Celery, Dramatiq, arq, Huey, saq) is installed from PyPI into its own
virtualenv under ``benchmarks/.venvs/`` (gitignored; rqueue never depends on them),
then ``benchmarks/support/peers/<name>.py`` enqueues the tasks, starts the peer's documented
worker with the same total concurrency and counts the INCRs until all have run.
Right before each system, two plain redis-py processes doing only the INCR measure
the ceiling again, and each system is quoted as a fraction of its own ceiling: this
machine's speed drifts over the minutes a run takes. That ceiling is the median of
``--ceiling-runs`` runs (3): a single run lands in one of two speeds on a 2-CPU VM
(docs/benchmarks.md, "CPU-light: where the two CPUs go"), 27,000 or 36,000 INCR/s a
minute apart, which alone moved a ratio from 0.8 to 0.6.

``--workload io``: each task waits 20 ms (``time.sleep`` in sync peers and rqueue's
sync task, ``await asyncio.sleep`` in arq, saq and rqueue's ``async def`` task), as a
call to an HTTP API would, then does the INCR. Every peer runs 2 processes with its
documented concurrency for I/O-bound work, ``--per-process`` tasks at once in each
(RQ has processes only); rqueue runs in process mode, then in thread mode
(``--threads``, the sync task) and async mode (``--slots``, the ``async def`` task) where
``rqueue work`` has them. Its ceiling, measured right before each system, is the same
work with no queue: as many asyncio loops, each running as many coroutines at a time
that wait 20 ms then INCR through ``redis.asyncio`` (benchmarks/support/ceilings.py);
each row is also set beside what its tasks in flight allow (in flight / 20 ms).

    python benchmarks/speed/compare.py                # 20,000 tasks, concurrency 2
    python benchmarks/speed/compare.py --tasks 2000 --only rqueue,huey
    python benchmarks/speed/compare.py --workload io  # 2,000 tasks, ~3 min
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import redis
from ceilings import bare_incr_rate, bare_io_rate
from common import SUPPORT_DIR, machine_summary, table
from peer_envs import PEERS, install, peer_pythonpath, python_of
from peers._runner import IO_WAIT

from rqueue.server import RedisServer
from rqueue.tasks.definition import Task


def run_one(
    python: str, module: str, variant: str, url: str, args: argparse.Namespace
) -> dict[str, Any] | None:
    env = {**os.environ, "REDIS_URL": url, "PYTHONPATH": peer_pythonpath()}
    try:
        finished = subprocess.run(
            [
                python,
                "-m",
                f"peers.{module}",
                "--redis-url",
                url,
                "--tasks",
                str(args.tasks),
                "--concurrency",
                str(args.concurrency),
                "--variant",
                variant,
                "--timeout",
                str(args.timeout),
                "--workload",
                args.workload,
                "--per-process",
                str(args.per_process),
            ],
            cwd=SUPPORT_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=args.timeout + 300,
        )
    except subprocess.TimeoutExpired:
        print(f"  ! {module} {variant}: runner timed out", flush=True)
        return None
    for line in finished.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
            return result
    print(f"  ! {module} {variant} failed:\n{finished.stderr[-2000:]}", flush=True)
    return None


def _note(result: dict[str, Any]) -> str:
    done, tasks = result["done"], result["tasks"]
    if done < tasks:
        return f"stopped after {done:,} tasks"
    if done > tasks:
        return f"{done - tasks} task(s) ran twice"
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("incr", "io"), default="incr")
    parser.add_argument("--tasks", type=int, help="default 20,000 (incr), 2,000 (io)")
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes per system")
    parser.add_argument(
        "--per-process",
        type=int,
        default=100,
        help="io: tasks at once per worker process (threads, greenlets, jobs, slots)",
    )
    parser.add_argument("--only", default="", help="comma-separated: rqueue,rq,celery,...")
    parser.add_argument(
        "--ceiling-runs", type=int, default=3, help="the ceiling before each system: median of"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        help="seconds of processing per system, default 120 (incr), 40 (io); a slower "
        "one is stopped and its rate taken over the tasks it ran",
    )
    args = parser.parse_args()
    if args.ceiling_runs < 1:
        parser.error("--ceiling-runs must be at least 1")
    io = args.workload == "io"
    if args.tasks is None:
        args.tasks = 2_000 if io else 20_000
    if args.timeout is None:
        args.timeout = 40.0 if io else 120.0
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    peers = [p for p in PEERS if not only or p.name in only]

    for peer in peers:
        install(peer)

    results: list[dict[str, Any]] = []
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        print(machine_summary(client))
        kind = "wait-20-ms-then-INCR" if io else "INCR"
        print(f"{args.tasks:,} {kind} tasks, concurrency {args.concurrency}", flush=True)
        runs = [(sys.executable, "rqueue", v) for v in _rqueue_variants(args.workload, only)]
        runs += [(str(python_of(p)), p.name, v) for p in peers for v in p.variants]
        for python, module, variant in runs:
            client.flushall()
            # The ceiling is measured again right before each system: this machine's
            # speed drifts over a run of minutes, and a ratio should not carry that.
            bare = _ceiling(server.url, args)
            result = run_one(python, module, variant, server.url, args)
            if result is None:
                continue
            results.append(result)
            result["bare"] = bare
            print(
                f"  {result['system']}: {result['steady']:,.0f} tasks/s "
                f"({result['done']:,} done; no-queue ceiling just before: {bare:,.0f}/s, "
                f"median of {args.ceiling_runs})",
                flush=True,
            )

    results.sort(key=lambda r: r["steady"], reverse=True)
    if io:
        _io_table(results, args)
        return
    ours = next((r for r in results if r["system"] == "rqueue"), None)
    table(
        (
            "system",
            "versions",
            "workers",
            "tasks/s",
            "tasks/s incl. startup",
            "bare INCR/s just before",
            "x bare INCR",
            "rqueue is x faster",
            "same, x bare INCR ratios",
            "enqueue/s",
            "peak RSS MB",
            "note",
        ),
        [_row(r, ours) for r in results],
        f"{args.tasks:,} tasks each doing one Redis INCR, {args.concurrency} worker processes' "
        "worth of concurrency (tasks/s: first task started to last done; bare INCR: "
        f"{args.concurrency} plain redis-py processes doing only the INCR, the median of "
        f"{args.ceiling_runs} runs right before each system)",
    )


def _ceiling(url: str, args: argparse.Namespace) -> float:
    """The same work with no queue, at the same concurrency (benchmarks/support/ceilings.py):
    the median of ``--ceiling-runs`` runs."""
    if args.workload == "io":
        measure = functools.partial(
            bare_io_rate, url, args.tasks, args.concurrency, args.per_process, IO_WAIT
        )
    else:
        measure = functools.partial(bare_incr_rate, url, args.tasks, args.concurrency)
    return statistics.median(measure() for _ in range(args.ceiling_runs))


def _has_option(option: str) -> bool:
    """Whether ``rqueue work`` in this checkout has ``option``."""
    return option in _work_usage()


@functools.cache
def _work_usage() -> str:
    """``rqueue work --help`` of this checkout."""
    usage = subprocess.run(
        [sys.executable, "-m", "rqueue", "work", "--help"], capture_output=True, text=True
    )
    return usage.stdout


def _modes_available() -> list[str]:
    """The execution modes of ``rqueue work`` in this checkout, beside process mode:
    ``threads`` (``--threads``) and ``async`` (``--slots``, where ``@task`` takes
    bench_tasks' ``async def`` task: it stays a plain function where refused)."""
    import bench_tasks

    modes = ["threads"] if _has_option("--threads") else []
    if _has_option("--slots") and isinstance(bench_tasks.wait_then_incr_async, Task):
        modes.append("async")
    return modes


def _rqueue_variants(workload: str, only: set[str]) -> list[str]:
    """rqueue's runs: one for the incr workload; for the io workload process mode, then
    thread and async mode where this checkout has them. Each again with ``--no-pin-cpus``
    where it has that (its children free to move; by default they are pinned where there
    is one for every CPU), not process mode's io run: 40 s of one task per child at a time."""
    if only and "rqueue" not in only:
        return []
    modes = ["default"] if workload == "incr" else _modes_available()
    free = [f"{mode}-unpinned" for mode in modes] if _has_option("--no-pin-cpus") else []
    return [*(["sync"] if workload == "io" else []), *modes, *free]


def _io_table(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """The io workload's table: each rate beside its no-queue ceiling, the best peer's
    and what its tasks in flight allow, with the largest process's RSS (a worker child's, for
    rqueue; the goal there is under 60 MB with 100 slots)."""
    peers = [r["steady"] for r in results if not r["system"].startswith("rqueue")]
    best = max(peers, default=0.0)
    rows = []
    for r in results:
        allowed = r["in_flight"] / IO_WAIT
        rows.append(
            (
                r["system"],
                r["versions"],
                r["settings"],
                r["in_flight"],
                r["steady"],
                r["from_start"],
                r["bare"],
                f"{r['steady'] / r['bare']:.2f}",
                f"{r['steady'] / best:.2f}" if best else "-",
                f"{r['steady'] / allowed:.2f}" if allowed else "-",
                r["enqueue_rate"],
                f"{r['peak_rss_mb']:.0f}",
                f"{r['largest_process_mb']:.0f}",
                _note(r),
            )
        )
    table(
        (
            "system",
            "versions",
            "workers",
            "tasks at once",
            "tasks/s",
            "tasks/s incl. startup",
            "no-queue tasks/s just before",
            "x no-queue",
            "x best peer",
            "x in flight / 20 ms",
            "enqueue/s",
            "peak RSS MB, all",
            "largest process MB",
            "note",
        ),
        rows,
        f"{args.tasks:,} tasks each waiting {IO_WAIT * 1000:.0f} ms then doing one Redis INCR, "
        f"{args.concurrency} worker processes per system, up to {args.per_process} tasks at "
        "once in each where the system runs more than one (tasks/s: first task started to "
        "last done; no-queue: as many asyncio loops running as many such coroutines at a "
        f"time through redis.asyncio, the median of {args.ceiling_runs} runs right before each "
        f"system, {args.per_process} "
        "coroutines at a time in each; x best peer: beside the fastest non-rqueue row)",
    )


def _row(result: dict[str, Any], ours: dict[str, Any] | None) -> tuple[Any, ...]:
    """One system's row; the last ratio compares each side's fraction of its own ceiling.
    Both compare a peer with rqueue's default run: none is given for rqueue's other runs
    (``--no-pin-cpus``)."""
    steady, bare = result["steady"], result["bare"]
    faster = corrected = "-"
    other_rqueue = result is not ours and result["system"].startswith("rqueue")
    if ours is not None and steady and not other_rqueue:
        faster = f"{ours['steady'] / steady:.1f}"
        corrected = f"{(ours['steady'] / ours['bare']) / (steady / bare):.1f}"
    return (
        result["system"],
        result["versions"],
        result["settings"],
        steady,
        result["from_start"],
        bare,
        f"{steady / bare:.2f}",
        faster,
        corrected,
        result["enqueue_rate"],
        f"{result['peak_rss_mb']:.0f}",
        _note(result),
    )


if __name__ == "__main__":
    main()
