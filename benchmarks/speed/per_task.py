"""One plain empty task's path through a worker child, alone: no round trip at all.

``hot_path.py`` measures the child's loop with its Redis calls, and on a machine whose
figures drift by 10-50% a change of one microsecond per task is lost in it. This script
calls the child's per-task entry (``Lifecycle.process``; ``ChildWorker._process`` in a
checkout from before the lifecycle) on one held payload, over and over, and reads the
CPU time: its acknowledgements pile up in memory and are dropped between rounds, so
the figure is the Python cost of admitting, running and settling one task. Best of
``--rounds`` rounds of ``--tasks`` calls, metrics off and on; and the function calls
one task makes, which a busy machine does not blur. ``--tree`` runs another
checkout's code (alternate the two, interleaved, in one sitting). ``--log-level info``
adds the line ``rqueue work`` logs per task by default, written to a file. ``--member``
adds a batch's member on the same terms (its count owed with its ack, dropped with it),
the same member every call (``workflows.py`` runs new ones, with their counts' calls):

    python benchmarks/speed/per_task.py
    PYTHONPATH=/tmp/before python benchmarks/speed/per_task.py --tree /tmp/before
    python benchmarks/speed/per_task.py --log-level info
    python benchmarks/speed/per_task.py --member
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]


def checkout(tree: Path) -> Callable[..., Any]:
    """The tree's ``in_process_child``, wherever it keeps it."""
    for folder in (tree / "benchmarks", tree / "benchmarks" / "support"):
        sys.path.insert(0, str(folder))
    try:
        from in_process import in_process_child
    except ImportError:  # before benchmarks/ was sorted by kind
        from hot_path import in_process_child
    return in_process_child


def per_task(url: str, metrics: bool, tasks: int, rounds: int, tree: Path, member: bool) -> str:
    """The child's per-task entry on one held payload (``member``: a batch's member's):
    the lowest CPU microseconds per call over ``rounds``, and the Python and C function
    calls each call makes (counted, so the same on a busy machine as on a quiet one)."""
    in_process_child = checkout(tree)
    from rqueue.store.header import header

    worker = in_process_child(url, 100, metrics)
    payload = member_payload(worker) if member else plain_payload()
    fixed = header(payload)
    worker.slot.hold(0, [fixed])
    lifecycle = getattr(worker, "lifecycle", None)
    run = lifecycle.process if lifecycle is not None else worker._process
    acks = held_acks(worker)
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(tasks):
            run(0, "default", payload, fixed, time.monotonic() + 100)
        best = min(best, (time.process_time() - start) / tasks * 1e6)
        acks.clear()
        drop_counts(worker)
    calls = Counter[str]()

    def count(frame: Any, event: str, arg: Any) -> None:
        calls[event] += 1

    counted = 1000
    sys.setprofile(count)
    for _ in range(counted):
        run(0, "default", payload, fixed, time.monotonic() + 100)
    sys.setprofile(None)
    acks.clear()
    drop_counts(worker)
    return (
        f"{best:.2f} us ({calls['call'] / counted:.0f} Python calls, "
        f"{calls['c_call'] / counted:.0f} C calls)"
    )


def plain_payload() -> bytes:
    """A plain empty task's payload, encoded by the tree's own code."""
    import bench_tasks

    job = bench_tasks.empty.make_job((), {}, None, task_id="0" * 32)
    encode = sys.modules[type(job).__module__].encode  # the tree's, wherever it is
    payload: bytes = encode(job, None)
    return payload


def member_payload(worker: Any) -> bytes:
    """The payload of an empty task that is a batch's member, as ``dispatch`` queued it."""
    import bench_tasks

    from rqueue import batch

    batch([bench_tasks.empty.pending()]).dispatch()
    payload: bytes = worker.store.client.lpop(worker.store.keys("default").ready)
    return payload


def drop_counts(worker: Any) -> None:
    """Forget the members' counts owed with the acks just dropped (none in a tree
    from before members were counted with their acks)."""
    pending = getattr(getattr(worker, "reservations", None), "pending", None)
    if pending is not None and hasattr(pending, "counts"):
        pending.counts = type(pending.counts)()


def held_acks(worker: Any) -> dict[str, list[bytes]]:
    """Where the tree's child holds its acks until a call carries them (``pending_acks.py``;
    before it, the reservations' or batches' own ``_acks``)."""
    owner = getattr(worker, "reservations", None) or worker.batches
    pending = getattr(owner, "pending", None)
    held: dict[str, list[bytes]] = pending.plain if pending is not None else owner._acks
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50_000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tree", type=Path, default=BENCH_DIR.parent, help="a checkout")
    parser.add_argument("--log-level", choices=("warning", "info"), default="warning")
    parser.add_argument("--member", action="store_true", help="also a batch's member")
    options = parser.parse_args()
    from rqueue.server import RedisServer
    from rqueue.worker import logs

    with tempfile.TemporaryFile("w") as log, RedisServer() as server:
        sys.stderr = log  # the handler writes where the worker's stderr would go
        logs.configure(options.log_level)
        sys.stderr = sys.__stderr__
        os.environ["REDIS_URL"] = server.url
        kinds = {"a plain task": False, "a batch member": True}
        figures = {
            kind: [
                per_task(server.url, metrics, options.tasks, options.rounds, options.tree, member)
                for metrics in (False, True)
            ]
            for kind, member in kinds.items()
            if options.member or not member
        }
    for kind, (off, on) in figures.items():
        print(
            f"{options.tree} at {options.log_level}: child CPU per task, {kind}, best of "
            f"{options.rounds} x {options.tasks:,}: metrics off {off}; on {on}"
        )


if __name__ == "__main__":
    main()
