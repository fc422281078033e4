"""The parent's watch for cancels of running tasks: find the child, signal it, enforce
the grace.

``handle.cancel()`` (``rqueue cancel``, the dashboard, ``Batch.cancel()``) of a running
task leaves a request in its queue's ``cancelling`` hash (cancel.lua). The parent,
idle most of the time, looks there only while one of its children runs a task (its
scoreboard says so: no Redis call at all while they wait), every ``POLL`` seconds, in
one pipelined read for the queues of the tasks running. For each running task whose
id was asked for it writes the id beside the task's scoreboard entry and sends its
child SIGUSR1 (``Scoreboard.request_cancel``; ``child.py`` and ``concurrent.py``
deliver it: ``TaskCancelled`` raised in the task, its coroutine cancelled, or
``current_job().cancelled`` set for a thread). It signals again on each poll until the
task stops, since a signal that lands before the task is called is ignored.

A task still running ``--kill-grace`` seconds after its first signal has ignored it:
its child is killed, and recovery (``recovery.py``) settles that task as cancelled
from :meth:`CancelWatch.killed_for`. Requests that none of this worker's children can
deliver are pruned at most once a second (prune_cancelling.lua drops those whose task
is no longer reserved at all: it finished first).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Iterable

from rqueue.store import cancel as cancel_requests
from rqueue.store.queue import RedisQueue
from rqueue.worker.scoreboard import Entry, Held, Scoreboard, State

log = logging.getLogger("rqueue.worker")

POLL = 0.2
"""Seconds between the parent's reads of the cancel requests while a child runs a task:
the longest a cancel waits for its delivery when its token (cancel.lua pushes one to
the queue's timer list) woke another worker's parent, not this one."""
_PRUNE_EVERY = 1.0

Running = tuple[int, int, int, str, str]
"""A running task as the scoreboard says: child pid, slot index, entry, task id, queue."""


class CancelWatch:
    """One worker parent's deliveries of cancels to its children."""

    def __init__(
        self,
        store: RedisQueue,
        queues: tuple[str, ...],
        board: Scoreboard,
        kill_grace: float,
    ) -> None:
        self.store = store
        self.queues = queues
        self.board = board
        self.kill_grace = kill_grace
        self._signalled: dict[tuple[int, str], float] = {}
        """(child pid, task id) -> when its first signal went (monotonic)."""
        self._killed: dict[int, set[str]] = {}
        """Children killed for ignoring a cancel: the ids recovery settles as cancelled."""
        self._pruned_at = 0.0

    def tick(self, children: Iterable[tuple[int, int]]) -> float:
        """Deliver the cancels asked for the tasks ``children`` (pid, slot index) run;
        seconds until the next look (``POLL`` while any runs, else a long while). A Redis
        error is the caller's to ride out, as any of its tick's are."""
        running = list(self._running(children))
        if not running:
            self._signalled.clear()
            return 3600.0
        asked = cancel_requests.requests(self.store, sorted({r[4] for r in running}))
        now = time.monotonic()
        delivering = [r for r in running if r[3] in asked.get(r[4], ())]
        self._signalled = {
            (pid, task_id): self._signalled.get((pid, task_id), now)
            for pid, _, _, task_id, _ in delivering
        }
        overdue: dict[int, set[str]] = {}
        for pid, index, entry, task_id, _ in delivering:
            if now - self._signalled[pid, task_id] >= self.kill_grace:
                overdue.setdefault(pid, set()).add(task_id)
                continue
            self.board.request_cancel(index, entry, task_id)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)
        for pid, ids in overdue.items():
            if pid in self._killed:
                continue  # killed already: reaped on the next tick
            log.warning(
                "worker pid %d ignored the cancel of task %s for %g s; killing it",
                pid,
                ", ".join(sorted(ids)),
                self.kill_grace,
            )
            self._killed[pid] = ids
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        undelivered = {t for ids in asked.values() for t in ids} - {r[3] for r in delivering}
        if undelivered and now - self._pruned_at >= _PRUNE_EVERY:
            self._pruned_at = now
            cancel_requests.prune(self.store, list(asked))
        return POLL

    def killed_for(self, pid: int) -> frozenset[str]:
        """The ids of the tasks child ``pid`` was killed for ignoring the cancel of
        (recovery settles them as cancelled); forgotten once asked."""
        return frozenset(self._killed.pop(pid, ()))

    def _running(self, children: Iterable[tuple[int, int]]) -> Iterable[Running]:
        queues = self.queues
        for pid, index in children:
            view = self.board.read(index)
            if view is None:
                continue
            if view.state == State.CONCURRENT:
                for entry, found in enumerate(view.entries):
                    if found.state == Entry.RUNNING and found.queue_index < len(queues):
                        queue = queues[found.queue_index]
                        yield pid, index, entry, found.held.id, queue
            elif view.state == State.RUNNING and _holds(view.current, view.held):
                held = view.held[view.current]
                if view.queue_index < len(queues):
                    yield pid, index, view.current, held.id, queues[view.queue_index]


def _holds(entry: int, held: tuple[Held, ...]) -> bool:
    return 0 <= entry < len(held)
