"""Queues a worker leaves alone for a moment because their Redis did not answer.

On Redis Cluster each queue lives on the shard that serves its slot, and one shard can
be down (a killed master, until its replica takes over: 2-3 s) while the others serve.
A worker that backed off as a whole at the first unreachable queue made every queue
wait out that shard's outage. So a connection error on one queue marks that queue
down for a back-off of its own (``backoff_delay``, growing while it keeps failing),
and the worker goes on to its other queues at once; when the back-off ends the queue
is tried again. A worker child (``worker/reservations.py``), its parent's tick that
moves due tasks (``worker/due_tasks.py``) and its scheduler (``schedules/scheduler.py``)
each keep one.

On one server every queue fails together: the caller sees that nothing answered and
backs off as a whole, as before. Keeping nothing here until a call fails, the hot
path pays one test of an empty dict.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TypeVar

from rqueue.store.retry import REDIS_ERRORS, backoff_delay

_Reply = TypeVar("_Reply")


class Outages:
    """Which queues are down, until when (monotonic), and how often in a row."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._failures: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self._until)

    def failed(self, name: str) -> None:
        """A call on ``name`` met an outage: leave it for its next back-off."""
        failures = self._failures[name] = self._failures.get(name, 0) + 1
        self._until[name] = time.monotonic() + backoff_delay(failures)

    def up(self, names: Sequence[str]) -> list[str]:
        """``names`` without those still in their back-off."""
        if not self._until:
            return list(names)
        return [name for name in names if not self.down(name)]

    def settle(
        self, names: Sequence[str], replies: Sequence[_Reply | Exception], cluster: bool
    ) -> list[_Reply | None]:
        """Note each queue's reply to a pipeline sent to all of ``names`` (each reply in
        its place, an error as its exception) and return them, None for a queue found
        down. Raised: an error that is not one shard's outage on a cluster, or the first
        outage when no queue answered (the caller backs off as a whole)."""
        settled: list[_Reply | None] = []
        outages: list[Exception] = []
        for name, reply in zip(names, replies, strict=True):
            if isinstance(reply, Exception):
                if not (cluster and isinstance(reply, REDIS_ERRORS)):
                    raise reply
                self.failed(name)
                outages.append(reply)
                settled.append(None)
                continue
            self.answered(name)
            settled.append(reply)
        if outages and len(outages) == len(settled):
            raise outages[0]
        return settled

    def answered(self, name: str) -> None:
        """A call on ``name`` went through: its back-off starts afresh next time."""
        if self._until:
            self._until.pop(name, None)
            self._failures.pop(name, None)

    def down(self, name: str) -> bool:
        """Whether ``name`` is still in its back-off (not to be called yet)."""
        until = self._until.get(name)
        return until is not None and time.monotonic() < until

    def next_try(self) -> float:
        """Seconds until the first back-off still running ends (inf with none). A queue
        whose back-off ended is tried like any other, and stays noted until a call on it
        answers: it must not wake anyone (a recovered queue with nothing to reserve
        made an idle child spin)."""
        if not self._until:
            return float("inf")
        now = time.monotonic()
        ahead = [until for until in self._until.values() if until > now]
        return min(ahead) - now if ahead else float("inf")
