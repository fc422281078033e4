"""A workflow batch kept in memory, for the inline runner of ``sync()`` and fakes.

:class:`MemoryBatch` answers from memory what a worker's :class:`Batch` answers from
Redis, and counts its members by ``batch_counting.py``, the Python model of
``store/lua/batch_member.lua``. It knows its runner only through :class:`BatchRunner`
(``inline.py`` imports this module, not the other way round).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from rqueue.encoding.payload import Job, encode
from rqueue.errors import ResultTooLarge, RQueueError
from rqueue.settings.config import Config
from rqueue.store.batch_store import BatchState
from rqueue.tasks.definition import PendingDispatch
from rqueue.tasks.handles import TaskHandle
from rqueue.testing.batch_counting import MemberCounting
from rqueue.workflows.batch_results import decoded, over_limit, wants_results
from rqueue.workflows.batch_status import BatchCounts, BatchStatus, status_of
from rqueue.workflows.batches import GETS, Batch, callback_gets, member_id, member_job
from rqueue.workflows.nesting import after, continuation, members_of
from rqueue.workflows.shapes import is_batch_step
from rqueue.workflows.steps import Step, derived_id, step_job


def in_memory(job: Job, max_bytes: int | None) -> bytes:
    """``job``'s payload for a run in memory: an encrypted task's as a plain one's, since
    nothing reaches Redis here (so tests need no key)."""
    return encode(replace(job, encrypted=False) if job.encrypted else job, max_bytes)


class BatchRunner(Protocol):
    """What a batch in memory needs of the inline runner that opened it."""

    def encoded(self, job: Job, delay: float) -> tuple[bytes, TaskHandle[Any]]:
        """A member's payload (and its handle), made as a dispatch makes it."""
        ...

    def max_bytes(self) -> int | None:
        """The payload size limit."""
        ...

    def added(self, payloads: list[bytes]) -> None:
        """Members added to an open batch: run now, or when their turn comes."""
        ...

    def open_nested(self, batch_id: str, spec: dict[str, Any], follows: Step | None) -> list[bytes]:
        """Open a batch in memory (a member, or a chain's step); its members' payloads."""
        ...

    def count_member(self, batch_id: str, index: int, outcome: str) -> list[bytes]:
        """Count a member of a batch this runner opened; the payloads now due."""
        ...


class MemoryBatch(Batch):
    """A stand-in for :class:`Batch` that answers from memory what a worker's batch
    answers from Redis: ``status()``, ``cancel()``, ``cancelled()``, ``add()``. It is
    what a fake's or ``sync()``'s ``batch(...).dispatch()`` returns, and what its
    callbacks get first. ``retry()`` needs the failed list in Redis: not here."""

    def __init__(
        self, batch_id: str, spec: dict[str, Any], runner: BatchRunner, follows: Step | None
    ) -> None:
        self.id = batch_id
        self.connection = None
        self.spec = spec
        """Its batch step's content (workflows/shapes.py), as a worker would open it."""
        self.follows = follows
        """What follows it, if it is a chain's step or a batch's member (nesting.py)."""
        self.counting = MemberCounting(
            len(spec["members"]),
            spec["allow_failures"],
            "progress" in spec["callbacks"],
            Config.resolve().max_batch_results_bytes,  # as a worker would bound them
        )
        """Its members' outcomes, counted as batch_member.lua counts them."""
        self.wants_results = wants_results(spec["callbacks"])
        self.values: dict[int, bytes] = {}
        """The packed values its members sent (a callback gets the results)."""
        self.queues: set[str] = set()
        self.created_at = time.time()
        self.cancelled_at: float | None = None
        self.finished_at: float | None = None
        self._runner = runner

    @property
    def total(self) -> int:
        return self.counting.total

    @total.setter
    def total(self, total: int) -> None:
        self.counting.total = total

    def __repr__(self) -> str:
        return f"MemoryBatch(id={self.id!r}, total={self.total})"

    def status(self) -> BatchStatus:
        """Its status, built as a worker's batch builds it from the state it reads."""
        succeeded, failed, skipped = self._counts()
        outcomes = self.counting.outcomes.items()
        state = BatchState(
            id=self.id,
            name=self.spec["name"],
            total=self.total,
            succeeded=succeeded,
            failed=failed,
            skipped=skipped,
            allow_failures=self.spec["allow_failures"],
            created_at=self.created_at,
            finished_at=self.finished_at,
            cancelled_at=self.cancelled_at,
            failed_ids=tuple(member_id(self.id, i) for i, outcome in outcomes if outcome == "f"),
            queues=tuple(sorted(self.queues)),
            callbacks=b"",  # its callbacks stay with its spec, never encoded
        )
        return status_of(state)

    def progress(self) -> float:
        """As a worker's batch's (each finished member counts 1), from memory: a member
        run inline has finished before anyone outside it can ask, so the others count 0."""
        status = self.status()
        return 1.0 if not status.total else (status.processed + status.skipped) / status.total

    def _counts(self) -> tuple[int, int, int]:
        """Succeeded, failed, skipped."""
        counting = self.counting
        return counting.count_of("s"), counting.count_of("f"), counting.count_of("k")

    def cancel(self) -> bool:
        if self.cancelled_at is not None:
            return False
        self.cancelled_at = time.time()
        return True

    def cancelled(self) -> bool:
        return self.cancelled_at is not None

    def add(self, calls: Iterable[PendingDispatch]) -> list[str]:
        """Add members; they run after those already due (a fake: when ``run_all``
        reaches them; ``sync()``: at once)."""
        calls = list(calls)
        first, self.total = self.total, self.total + len(calls)
        payloads = self.member_payloads(calls, first)
        self._runner.added(payloads)
        return [member_id(self.id, first + offset) for offset in range(len(calls))]

    def retry(self) -> int:
        raise RQueueError("a batch run inline keeps no failed list to retry from")

    def member_payloads(self, calls: list[PendingDispatch], first: int) -> list[bytes]:
        """The payloads of members added (``add``)."""
        payloads = []
        for offset, call in enumerate(calls):
            job = member_job(call, self.id, first + offset, self.wants_results)
            self.queues.add(job.queue)
            payloads.append(self._runner.encoded(job, call.delay)[0])
        return payloads

    def opened(self) -> list[bytes]:
        """Its members' payloads as it opens, those of the batches among them first (as
        a worker opens them); for a batch of none, what its end makes due."""
        jobs, nested = members_of(self.id, self.spec, self.wants_results)
        payloads = []
        for inner in nested:
            payloads += self._runner.open_nested(inner.batch_id, inner.spec, inner.follows)
        for job, step in jobs:
            self.queues.add(job.queue)
            payloads.append(self._runner.encoded(job, float(step.get("delay") or 0))[0])
        if not self.total:  # nothing will complete: then and finally are due now
            payloads += self._due(0, ("then", "finally"), None)
        return payloads

    def refused(self, index: int, value: bytes) -> ResultTooLarge | None:
        """Why a success sending ``value`` fails instead, as batch_member.lua would say."""
        if not self.counting.over(index, len(value)):
            return None
        return over_limit(self.id, index, len(value), self.counting.most_bytes)

    def results(self) -> list[Any]:
        """Every member's result, as a callback that gets them is given them."""
        return [
            None if (raw := self.values.get(i)) is None else decoded(self.id, i, raw)
            for i in range(self.total)
        ]

    def count(
        self,
        index: int,
        outcome: str,
        failure: dict[str, str] | None = None,
        value: bytes | None = None,
    ) -> list[bytes]:
        """Count a member (``rqueue.testing.batch_counting``, the rule of
        store/lua/batch_member.lua), keeping a success's value, and return the payloads
        now due: callbacks, and what follows the batch if it is nested. A success over
        the bound of values is reported failed (:meth:`refused`)."""
        counted, due = self.counting.count(index, outcome, None if value is None else len(value))
        if counted and outcome == "s" and value is not None:
            self.values[index] = value
        if self.counting.cancelled and self.cancelled_at is None:
            self.cancelled_at = time.time()  # its first failure cancelled it
        if "finally" in due:
            self.finished_at = time.time()
        return self._due(index, due, failure)

    def _due(self, index: int, due: Sequence[str], failure: dict[str, str] | None) -> list[bytes]:
        payloads = self._callbacks(index, due)
        if self.follows is None:
            return payloads
        counts = BatchCounts(self.total, *self._counts())
        then = after(self.id, self.follows, due, counts, self.cancelled(), failure)
        if then.catch is not None:
            payloads.append(in_memory(then.catch[1], self._runner.max_bytes()))
        if then.next is not None:
            link, meta = then.next
            next_id = derived_id(self.id, "next")
            if is_batch_step(link):
                payloads += self._runner.open_nested(next_id, *continuation(link, meta))
            else:
                payloads.append(in_memory(step_job(link, next_id, meta), self._runner.max_bytes()))
        if then.outer is not None:
            outer_id, outer_index, outcome, _ = then.outer
            payloads += self._runner.count_member(outer_id, outer_index, outcome)
        return payloads

    def _callbacks(self, index: int, due: Iterable[str]) -> list[bytes]:
        payloads = []
        for name in due:
            step = self.spec["callbacks"].get(name)
            if step is None:
                continue
            what = f"progress:{index}" if name == "progress" else name
            counted = [self.total, *self._counts()]
            gets = callback_gets(self.id, counted, step)
            job = step_job(step, derived_id(self.id, what), {GETS: gets})
            payloads.append(in_memory(job, self._runner.max_bytes()))
        return payloads


class LaterBatch(Batch):
    """A chain's batch step run inline, before its turn: it is opened (in memory) when
    the step before it completes; until then its status is None."""

    def __init__(self, opened: dict[str, MemoryBatch], batch_id: str) -> None:
        self.id = batch_id
        self.connection = None
        self._opened = opened

    def status(self) -> BatchStatus | None:
        found = self._opened.get(self.id)
        return None if found is None else found.status()
