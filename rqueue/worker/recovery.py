"""Giving back the tasks of a child that died, from what its scoreboard slot says.

The parent runs this once per dead child. Tasks the child finished are acknowledged
(batch members counted first: the child counts them with their acks),
tasks it never started go back to the front of the queue with their attempt
returned, and the task it was running is retried or failed as if it had raised:
a timeout if the parent killed it for overrunning, ``WorkerLost`` otherwise.
Reservations are matched by task id and attempt count against the reserved set, so
only this child's exact reservations are touched.

A child in concurrent mode (``async def`` tasks, ``--threads``) had many tasks running
at once, each entry of its slot saying what became of it: each running one is settled
the same way, as a timeout if the parent killed the child for a deadline that entry had
passed, else as ``WorkerLost`` (a coroutine that blocked the loop costs its siblings an attempt too,
so that a poison task cannot loop for ever).

Those retries and failures are counted in the metrics here, the child that would
have counted them being dead.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections import defaultdict
from dataclasses import dataclass

from rqueue.encoding.payload import Job, decode
from rqueue.errors import InvalidPayload
from rqueue.failed import make_record
from rqueue.metrics.collector import UNREGISTERED, NoMetrics
from rqueue.store.header import payload_attempts, payload_id
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import Persist
from rqueue.tasks.names import malformed_name
from rqueue.worker import parent_failures
from rqueue.worker.member_counts import count_finished
from rqueue.worker.options import WorkerOptions
from rqueue.worker.outcomes import (
    CANCEL_REQUESTED,
    complete_failure,
    file_failure,
    release_for_retry,
    retry_delay,
    settle_cancelled,
)
from rqueue.worker.participants import Metrics, Roster
from rqueue.worker.scoreboard import Entry, Held, SlotView, State

log = logging.getLogger("rqueue.worker")


@dataclass(frozen=True, slots=True)
class Death:
    """How a child died, which decides what becomes of the task it was running."""

    how: str
    """What happened to it, for the ``WorkerLost`` message ("killed by signal 9")."""
    killed_for_timeout: bool
    """The parent killed it for overrunning a deadline: its running task timed out."""
    cold: bool
    """The operator stopped the worker at once: its running tasks are given back whole."""
    cancelled: frozenset[str]
    """The ids of the tasks it was killed for ignoring the cancel of: settled as cancelled."""


class Recovery:
    """Settles a dead child's tasks; ``persist`` retries each change until Redis takes it."""

    def __init__(
        self,
        queue: RedisQueue,
        options: WorkerOptions,
        persist: Persist,
        metrics: Metrics | NoMetrics,
    ) -> None:
        self.queue = queue
        self.options = options
        self.persist = persist
        self.participants = Roster(queue, persist, metrics)
        """Told of each outcome settled here, as a child tells them (metrics included)."""

    def recover(
        self,
        view: SlotView | None,
        claims: str,
        how: str,
        killed_for_timeout: bool,
        cold: bool,
        cancelled: frozenset[str] = frozenset(),
    ) -> None:
        """``view`` is None when the child died halfway through writing its slot.
        ``cancelled``: the ids of the tasks it was killed for ignoring the cancel of
        (``cancels.py``), settled as cancelled.

        Nothing in the slot can be trusted then, so nothing is acknowledged or retried
        from it: its tasks come back when their reservations expire (a finished one may
        run again, none is lost), and its claims key is given back whole.
        """
        if view is None:
            log.warning(
                "a worker died while writing its scoreboard slot; its tasks come "
                "back when their reservations expire"
            )
        else:
            self._settle_slot(view, Death(how, killed_for_timeout, cold, cancelled))
        self._give_back_claims(view.held if view is not None else (), claims)

    def _give_back_claims(self, held_tasks: tuple[Held, ...], claims: str) -> None:
        """Give back a batch the child had reserved but not taken into its slot yet.

        The child reserves its next batch while it runs the current one (reservations.py),
        and every reserve call records its batch under the child's claims key. Tasks
        there that the slot does not hold never started; release.lua moves only those
        still reserved with these exact bytes, and deletes the key in the same step.
        """
        held = set(held_tasks)
        for name in self.options.queues:
            claimed = self.persist(functools.partial(self.queue.claimed, name, claims))
            if not claimed:
                continue
            unstarted = [
                p for p in claimed if Held(payload_id(p) or "", payload_attempts(p)) not in held
            ]
            release = functools.partial(
                self.queue.release, name, unstarted, unstarted=True, claims=claims
            )
            self.persist(release)

    def _settle_slot(self, view: SlotView, death: Death) -> None:
        """Acknowledge what the child finished, give back what it never started, settle
        the task it was running."""
        if not view.held or view.state in (State.WAITING, State.EMPTY, State.STARTING):
            return
        if view.state == State.CONCURRENT:
            self._settle_entries(view, death)
            return
        name = self.options.queues[view.queue_index]
        running = view.held[view.current] if view.state == State.RUNNING else None
        first_unstarted = view.current + (1 if running else 0)
        members = self._reserved_by_key(name)

        def exact(held: tuple[Held, ...]) -> list[bytes]:
            return [m for h in held if (m := members.get((h.id, h.attempts))) is not None]

        self._acknowledge(name, exact(view.held[: view.current]))
        self.persist(
            lambda: self.queue.release(name, exact(view.held[first_unstarted:]), unstarted=True)
        )
        if running is not None:
            member = members.get((running.id, running.attempts))
            if member is not None:
                self._settle_running(name, member, death)

    def _settle_entries(self, view: SlotView, death: Death) -> None:
        """A concurrent-mode child: settle each entry by its own state, queue by queue."""
        now = time.monotonic()
        by_queue: dict[int, dict[Entry, list[tuple[Held, float]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for entry in view.entries:
            if entry.state != Entry.FREE and entry.queue_index < len(self.options.queues):
                by_queue[entry.queue_index][entry.state].append((entry.held, entry.deadline))
        for index, states in by_queue.items():
            name = self.options.queues[index]
            members = self._reserved_by_key(name)

            def exact(entries: list[tuple[Held, float]]) -> list[bytes]:
                return [m for h, _ in entries if (m := members.get(h)) is not None]  # noqa: B023

            done, unstarted = exact(states[Entry.DONE]), exact(states[Entry.UNSTARTED])
            self._acknowledge(name, done)
            self.persist(lambda: self.queue.release(name, unstarted, unstarted=True))  # noqa: B023
            for held, deadline in states[Entry.RUNNING]:
                member = members.get(held)
                if member is not None:
                    overran = death.killed_for_timeout and 0 < deadline <= now
                    self._settle_running(
                        name, member, dataclasses.replace(death, killed_for_timeout=overran)
                    )

    def _acknowledge(self, name: str, done: list[bytes]) -> None:
        """Acknowledge the tasks the child finished: batch members are counted first,
        their counts having waited for these acks (member_counts.py); a member whose
        return value went with its count runs again instead, its value lost."""
        again = self.persist(lambda: count_finished(self.queue, name, done))
        acked = [payload for payload in done if payload not in again]
        self.persist(lambda: self.queue.ack(name, acked))
        if again:
            self.persist(lambda: self.queue.release(name, again, unstarted=True))

    def _settle_running(self, name: str, member: bytes, death: Death) -> None:
        """A child died mid-task: retry or fail the task, as if it had raised; one it
        was killed for ignoring the cancel of, or whose cancel was asked, is cancelled."""
        killed_for_timeout = death.killed_for_timeout
        if death.cold:  # the operator stopped it: give the attempt back, run it again at once
            self.persist(lambda: self.queue.release(name, [member], unstarted=True))
            return
        try:
            job = decode(member)
        except InvalidPayload:
            job = None
        if job is not None and job.id in death.cancelled:
            self._settle_cancelled(name, member, job)
            return
        tries = (job.tries if job else None) or self.options.tries
        if killed_for_timeout:
            timeout = (job.timeout if job else None) or self.options.timeout
            kind = "TaskTimeout"
            message = f"task timed out after {timeout:g} s and did not stop; its worker was killed"
        else:
            kind, message = "WorkerLost", f"the worker running the task was {death.how}"
        attempts = payload_attempts(member)
        # A lost worker or a timeout is not an exception: max_exceptions does not count it.
        delay = None if job is None else retry_delay(job, attempts, tries, killed_for_timeout)
        if job is not None and delay is not None:
            log.warning(
                "%s %s %s attempt %d: %s; will retry", name, job.task, job.id, attempts, message
            )
            released = release_for_retry(self.queue, self.persist, name, member, job, delay, kind)
            if released is CANCEL_REQUESTED:
                self._settle_cancelled(name, member, job)
                return
            if released:
                for participant in self.participants.of(job):
                    participant.after_retried(name, job, None)
                return
        # Failed for good (or Redis refused its release: failed all the same).
        log.error(
            "%s %s %s: %s; failed", name, job.task if job else "-", payload_id(member), message
        )
        record = make_record(name, member, kind, message, job=job, timed_out=killed_for_timeout)
        kept = None
        if job is not None:  # a workflow goes on from here, as if the task had raised
            kept = complete_failure(self.queue, self.persist, job, member, kind, message, "", 0.0)
        file_failure(self.queue, self.persist, name, member, job, record, kept)
        for participant in self.participants.of(job):  # metrics, count, lock
            participant.after_failed(name, job, None)
        if job is not None:  # after_failed and listeners run in a child
            parent_failures.queue_report(self.queue, name, record)

    def _settle_cancelled(self, name: str, member: bytes, job: Job) -> None:
        """Its cancel stopped it: settled as cancelled (its hook and listeners ran in
        no child: the child that would call them is gone)."""
        log.warning("%s %s %s: cancelled; its worker was killed", name, job.task, job.id)
        settle_cancelled(self.queue, self.persist, name, member, job, None)
        for participant in self.participants.of(job):
            participant.after_cancelled(name, job, None)

    def _reserved_by_key(self, name: str) -> dict[tuple[str, int], bytes]:
        members = self.persist(lambda: self.queue.reserved_payloads(name))
        return {
            (pid, payload_attempts(m)): m for m in members if (pid := payload_id(m)) is not None
        }


def counted_by_parent(job: Job | None) -> str:
    """The name a settled task is counted under. The parent has not imported the
    tasks, so unlike a child (``outcomes.counted_name``) it cannot ask the registry;
    but a child had started this task, which it does only once the payload passed
    admission (its signature too, when signing is on): its name is taken as written,
    unless it is not a task name at all."""
    if job is None or malformed_name(job.task) is not None:
        return UNREGISTERED
    return job.task
