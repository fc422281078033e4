"""The two no-queue ceilings of #30, on a redis-server of its own, a few times in a row.

What ``../shared/bench/ceiling_incr.py`` and ``ceiling_io.py`` measure, reproduced by the
repository (benchmarks/support/ceilings.py, which compare.py and throughput.py use):

    python benchmarks/speed/ceilings.py                       # both, 3 rounds
    python benchmarks/speed/ceilings.py --tasks 20000 --io-tasks 3000 --rounds 5

Run it right before and after a queue's run, with the interpreter the workers use
(hiredis or not: the first line says which), and quote the queue beside the higher.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import redis
from ceilings import bare_incr_rate, bare_io_rate
from common import machine_summary, median, table

from rqueue.server import RedisServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000, help="CPU-light: INCRs in all")
    parser.add_argument("--io-tasks", type=int, default=3_000, help="I/O-bound: tasks in all")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--per-process", type=int, default=100, help="I/O-bound: at once each")
    parser.add_argument("--wait-ms", type=float, default=20.0, help="I/O-bound: each task's wait")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    incr: list[float] = []
    io: list[float] = []
    with RedisServer() as server:
        print(machine_summary(redis.Redis.from_url(server.url)))
        for _ in range(args.rounds):
            incr.append(bare_incr_rate(server.url, args.tasks, args.processes))
            io.append(
                bare_io_rate(
                    server.url, args.io_tasks, args.processes, args.per_process, args.wait_ms / 1000
                )
            )
    table(
        ("ceiling", "work", "median /s", "best /s", "rounds /s"),
        [
            (
                "CPU-light",
                f"{args.tasks:,} INCRs over {args.processes} redis-py processes",
                median(incr),
                max(incr),
                ", ".join(f"{r:,.0f}" for r in incr),
            ),
            (
                "I/O-bound",
                f"{args.io_tasks:,} x (wait {args.wait_ms:g} ms, INCR), {args.processes} "
                f"asyncio processes x {args.per_process} at a time",
                median(io),
                max(io),
                ", ".join(f"{r:,.0f}" for r in io),
            ),
        ],
        "No-queue ceilings, first INCR to last",
    )


if __name__ == "__main__":
    main()
