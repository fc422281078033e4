"""One worker child run in this process: no parent, no fork, no other child.

speed/hot_path.py measures the child's loop this way, and speed/middleware.py and
scale/scale_due.py reuse its pieces: a queue is filled beforehand, then the child
works through it and the caller reads the CPU time it used.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.tasks.current import Runner, set_runner
from rqueue.worker.child import ChildWorker
from rqueue.worker.options import WorkerOptions
from rqueue.worker.scoreboard import Scoreboard
from rqueue.worker.timeouts import TimeLimit


def in_process_child(url: str, prefetch: int = 100, metrics: bool = True) -> ChildWorker:
    """One worker child in this process (no parent, no fork), ready to ``_step()``."""
    options = WorkerOptions(prefetch=prefetch, metrics=metrics)
    board = Scoreboard(1, options.held_limit)
    worker = ChildWorker(
        options, Config.resolve(redis_url=url), board.slot(0), 1, os.getppid(), "hot"
    )
    use(worker.store)
    worker.time_limit = TimeLimit()
    # As ChildWorker.run(): what it hears of batches' cancellation is remembered.
    set_runner(Runner(worker.store, options.timeout, options.kill_grace, {}))
    return worker


def fill(dispatch: Callable[[int], object], tasks: int) -> None:
    """Queue ``tasks`` (``dispatch(count)`` queues ``count`` more), 1,000 at a time."""
    for start in range(0, tasks, 1000):
        dispatch(min(1000, tasks - start))


def drain(worker: ChildWorker, tasks: int) -> tuple[float, float]:
    """Run ``tasks`` more tasks: (child CPU seconds, wall seconds)."""
    target = worker.slot.processed + tasks
    cpu, wall = time.process_time(), time.perf_counter()
    while worker.slot.processed < target:
        worker._step()
    return time.process_time() - cpu, time.perf_counter() - wall
