"""Dependencies (``using(after=[...])``): what a dependant costs beside a plain task.

One redis-server, one worker child in this process (as ``hot_path.py`` runs it: no
parent, no fork), and the parent's part (applying the notices) called here as the
parent calls it on its tick. Three kinds, in turn within each round (each goes first
once):

- ``plain``: an empty task, dispatched one at a time, run by the child;
- ``keep_result``: the same task keeping its result (what a task others wait for
  must do), nobody waiting for it;
- ``dependant``: an empty task dispatched ``after=[d]``, ``d`` a ``keep_result``
  task dispatched just before it: the dependant's dispatch, the child running ``d``
  (its ack leaves the notice), the parent applying the notices, the child running
  the dependant. Per dependant, so ``d``'s own cost (a ``keep_result`` task) is in it.

For each: the producer's, child's and parent's CPU per task and their requests (round
trips, counted on the client's side: one per command or pipeline) per task.

    python benchmarks/speed/dependencies.py            # 5,000 tasks per kind, 3 rounds
    python benchmarks/speed/dependencies.py --tasks 500 --rounds 1
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
from common import Requests, machine_summary, median, table
from in_process import drain, in_process_child

from rqueue.server import RedisServer
from rqueue.workflows.dependencies import drain as apply_notices

KINDS = ("plain", "keep_result", "dependant")
KEEP_SECONDS = 3600


class Meter:
    """CPU seconds and requests of one phase, added up over a round."""

    def __init__(self, requests: Requests) -> None:
        self.requests = requests
        self.cpu = 0.0
        self.sent = 0

    def measure(self, phase: Callable[[], object]) -> None:
        sent, cpu = self.requests.sent, time.process_time()
        phase()
        self.cpu += time.process_time() - cpu
        self.sent += self.requests.sent - sent


def run_kind(kind: str, tasks: int, requests: Requests, worker: object) -> dict[str, Meter]:
    """One kind's round: meters of the producer, the child and the parent."""
    meters = {role: Meter(requests) for role in ("producer", "child", "parent")}
    kept = bench_tasks.empty.using(keep_result=KEEP_SECONDS)
    child = worker

    def dispatch() -> None:
        for _ in range(tasks):
            if kind == "plain":
                bench_tasks.empty.dispatch()
            elif kind == "keep_result":
                kept.dispatch()
            else:
                bench_tasks.empty.using(after=[kept.dispatch()]).dispatch()

    def run(count: int) -> Callable[[], object]:
        def ran() -> None:
            drain(child, count)  # type: ignore[arg-type]
            child.reservations.flush()  # type: ignore[attr-defined]

        return ran

    def parent() -> None:
        while apply_notices(child.store, "default"):  # type: ignore[attr-defined]
            pass

    meters["producer"].measure(dispatch)
    meters["child"].measure(run(tasks))  # the dependencies only, for a dependant
    if kind == "dependant":
        meters["parent"].measure(parent)
        meters["child"].measure(run(tasks))
    return meters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5_000, help="tasks per kind and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.getLogger("rqueue").setLevel(logging.WARNING)
    figures: dict[str, dict[str, list[float]]] = {kind: {} for kind in KINDS}
    with Requests() as requests, RedisServer() as server:
        os.environ["REDIS_URL"] = server.url
        worker = in_process_child(server.url)
        print(machine_summary(worker.store.client))
        for number in range(args.rounds):
            for kind in KINDS[number % 3 :] + KINDS[: number % 3]:
                meters = run_kind(kind, args.tasks, requests, worker)
                for role, meter in meters.items():
                    cpu = figures[kind].setdefault(f"{role} cpu", [])
                    cpu.append(meter.cpu / args.tasks * 1e6)
                    trips = figures[kind].setdefault(f"{role} trips", [])
                    trips.append(meter.sent / args.tasks)
    roles = ("producer", "child", "parent")
    table(
        (
            "kind",
            *(f"{role} CPU us/task" for role in roles),
            *(f"{role} round trips/task" for role in roles),
        ),
        [
            (
                kind,
                *(f"{median(figures[kind][f'{role} cpu']):.1f}" for role in roles),
                *(f"{median(figures[kind][f'{role} trips']):.3f}" for role in roles),
            )
            for kind in KINDS
        ],
        f"Per task, medians of {args.rounds} round(s) of {args.tasks}: one child in-process, "
        "the parent's drain called here; a dependant's figures include its dependency's",
    )


if __name__ == "__main__":
    main()
