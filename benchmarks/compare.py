"""rqueue beside its Python peers: the same INCR workload through each, on one Redis.

Each peer (RQ, Celery, Dramatiq, arq, Huey, saq) is installed from PyPI into its own
virtualenv under ``benchmarks/.venvs/`` (gitignored; rqueue never depends on them),
then ``benchmarks/peers/<name>.py`` enqueues the tasks, starts the peer's documented
worker with the same total concurrency and counts the INCRs until all have run.
Right before each system, two plain redis-py processes doing only the INCR measure
the ceiling again, and each system is quoted as a fraction of its own ceiling: this
machine's speed drifts over the minutes a run takes.

    python benchmarks/compare.py                        # 20,000 tasks, concurrency 2
    python benchmarks/compare.py --tasks 2000 --only rqueue,huey
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from common import BENCH_DIR, bare_incr_rate, machine_summary, table

from rqueue.server import RedisServer

VENVS = BENCH_DIR / ".venvs"


@dataclass(frozen=True)
class Peer:
    name: str
    packages: tuple[str, ...]
    variants: tuple[str, ...] = ("default",)


PEERS = (
    Peer("rq", ("rq", "hiredis"), ("fork", "simple")),
    Peer("celery", ("celery[redis]", "hiredis")),
    Peer("dramatiq", ("dramatiq[redis]", "hiredis")),
    Peer("arq", ("arq", "hiredis")),
    Peer("huey", ("huey", "redis", "hiredis")),
    # saq imports typing_extensions without declaring it (0.26).
    Peer("saq", ("saq[redis,hiredis]", "typing_extensions")),
)


def python_of(peer: Peer) -> Path:
    return VENVS / peer.name / "bin" / "python"


def install(peer: Peer) -> None:
    """Create the peer's virtualenv and install it from PyPI, unless already done."""
    wanted = "\n".join((*peer.packages, "psutil"))
    marker = VENVS / peer.name / "installed.txt"
    if python_of(peer).exists() and marker.exists() and marker.read_text() == wanted:
        return
    print(f"installing {peer.name} into {VENVS / peer.name} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENVS / peer.name)], check=True)
    subprocess.run(
        [
            str(python_of(peer)),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *peer.packages,
            "psutil",
        ],
        check=True,
    )
    marker.write_text(wanted)


def run_one(
    python: str, module: str, url: str, tasks: int, concurrency: int, variant: str, timeout: float
) -> dict[str, Any] | None:
    env = {**os.environ, "REDIS_URL": url, "PYTHONPATH": str(BENCH_DIR)}
    try:
        finished = subprocess.run(
            [
                python,
                "-m",
                f"peers.{module}",
                "--redis-url",
                url,
                "--tasks",
                str(tasks),
                "--concurrency",
                str(concurrency),
                "--variant",
                variant,
                "--timeout",
                str(timeout),
            ],
            cwd=BENCH_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout + 300,
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
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes per system")
    parser.add_argument("--only", default="", help="comma-separated: rqueue,rq,celery,...")
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds of processing per system; a slower one is stopped and "
        "its rate taken over the tasks it ran",
    )
    args = parser.parse_args()
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    peers = [p for p in PEERS if not only or p.name in only]

    for peer in peers:
        install(peer)

    results: list[dict[str, Any]] = []
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        print(machine_summary(client))
        print(f"{args.tasks:,} INCR tasks, concurrency {args.concurrency}", flush=True)
        runs = [(sys.executable, "rqueue", "default")] if not only or "rqueue" in only else []
        runs += [(str(python_of(p)), p.name, v) for p in peers for v in p.variants]
        for python, module, variant in runs:
            # The ceiling is measured again right before each system: this machine's
            # speed drifts over a run of minutes, and a ratio should not carry that.
            client.flushall()
            bare = bare_incr_rate(server.url, args.tasks, args.concurrency)
            result = run_one(
                python, module, server.url, args.tasks, args.concurrency, variant, args.timeout
            )
            if result is not None:
                result["bare"] = bare
                results.append(result)
                print(
                    f"  {result['system']}: {result['steady']:,.0f} tasks/s "
                    f"({result['done']:,} done; bare INCR just before: {bare:,.0f}/s)",
                    flush=True,
                )

    results.sort(key=lambda r: r["steady"], reverse=True)
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
        f"{args.concurrency} plain redis-py processes doing only the INCR, measured right "
        "before each system)",
    )


def _row(result: dict[str, Any], ours: dict[str, Any] | None) -> tuple[Any, ...]:
    """One system's row; the last ratio compares each side's fraction of its own ceiling."""
    steady, bare = result["steady"], result["bare"]
    faster = corrected = "-"
    if ours is not None and steady:
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
