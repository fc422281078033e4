"""Why a worker parent stops by itself: its limits, its queues run dry, or a restart.

``--max-time``, ``--max-jobs``, ``--stop-when-empty``/``--stop-when-drained`` and
``rqueue restart`` are each a reason for a warm stop the parent asks about once a tick;
kept apart from the loop that acts on them, so each reads as the rule it is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from rqueue.store.queue import RedisQueue
from rqueue.worker.options import WorkerOptions
from rqueue.worker.scoreboard import Scoreboard, State

log = logging.getLogger("rqueue.worker")


@dataclass(frozen=True)
class Stop:
    """A reason to stop, and whether the worker starts afresh after it (a restart)."""

    reason: str
    reload: bool = False


class StopReasons:
    """The reasons one worker parent stops by itself, read from its options, its
    children's scoreboard slots and Redis."""

    def __init__(self, queue: RedisQueue, options: WorkerOptions, board: Scoreboard) -> None:
        self.queue = queue
        self.options = options
        self.board = board
        self.restart_marker = queue.restart_marker()
        """The marker ``rqueue restart`` writes, as it was when this worker started."""
        self._started = time.monotonic()

    def found(self, slots: Iterable[int]) -> Stop | None:
        """The first reason to stop now, given the scoreboard slots of live children."""
        options = self.options
        if options.max_time and time.monotonic() - self._started >= options.max_time:
            return Stop(f"ran for --max-time {options.max_time:g} s")
        processed = self.board.total_processed()
        if options.effective_max_jobs and processed >= options.effective_max_jobs:
            return Stop(f"processed {processed} tasks")
        if options.stops_when_idle and self._all_empty(slots):
            return Stop("queues are drained" if options.stop_when_drained else "queues are empty")
        if self.restart_requested():
            log.info("restart requested through Redis")
            return Stop("reloading", reload=True)
        return None

    def restart_requested(self) -> bool:
        """True once ``rqueue restart`` wrote a marker other than the one seen at start.

        A missing marker is no request: FLUSHALL, or a Redis restart without
        persistence, deletes it, and must not reload every worker. The same round trip
        re-adds this worker's queues to the registry, which those events empty too.
        """
        marker = self.queue.check_in(self.options.queues)
        return marker is not None and marker != self.restart_marker

    def _all_empty(self, slots: Iterable[int]) -> bool:
        views = [self.board.read(slot) for slot in slots]
        if len(views) < self.options.effective_concurrency:
            return False
        if any(v is None or v.state != State.EMPTY for v in views):
            return False
        migrations = self.queue.migrate_all(self.options.queues)
        if any(migration.moved or migration.notices for migration in migrations):
            return False
        # A paused queue's tasks cannot be worked: it counts as empty (Laravel's too).
        sizes = [s for s in self.queue.sizes(self.options.queues) if not s.paused]
        if self.options.stop_when_drained:  # retries in backoff, other workers' tasks in hand
            return all(s.ready == s.delayed == s.reserved == 0 for s in sizes)
        return all(s.ready == 0 for s in sizes)
