"""The scheduler tick every ``rqueue work`` parent runs: fire due schedules, once each.

There is no leader. Every parent reads the earliest schedules of its queues, the due
ones' definitions and Redis's clock in one round trip, computes each due schedule's
triggers and next fire time in Python, and sends one fire_schedules.lua per queue for
all its due schedules (up to ``BATCH``): per schedule a compare-and-set on the score
and definition it read, so when several parents race for a trigger exactly one
enqueues it. One call per schedule cost a parent firing 5,000 at one instant about
twice the CPU (docs/benchmarks.md). The tick returns the seconds until the next
schedule is due, which the parent folds into its blocking wait on the queues' timer
lists (a schedule change pushes there, so the parent wakes early). Triggers within
``PLAN_AHEAD`` are planned: their firings built before the trigger and sent at it
(:mod:`rqueue.schedules.planning`), so a burst is enqueued in one round trip.

With a secret, a definition is fired only if it is signed for its queue and name
(:meth:`ScheduleStore.check`): the parent signs the payloads it enqueues, so without
that check whoever can write a definition to Redis could have any task signed. A
definition that cannot fire (unsigned, altered, unreadable, an invalid timing) is
logged and shelved: taken off the timeline, definition untouched, still listed, so it
neither fires nor is retried on every tick (a few hundred of them would otherwise keep
the scheduler busy and starve the rest); ``update`` or ``resume`` puts it back.

Missed triggers (every worker down) are ones later than the schedule's misfire
grace. ``skip`` fires one run for all of them (the first missed trigger), ``all``
fires each, at most ``CATCH_UP_LIMIT``; triggers inside the grace always fire.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Sequence
from typing import NamedTuple

from rqueue.encoding.sealing import KEYS_SETTING
from rqueue.errors import InvalidSchedule, RQueueError
from rqueue.schedules.api import Schedules
from rqueue.schedules.planning import (
    PLAN_AHEAD,
    PLAN_LIMIT,
    PLAN_PAGE,
    PLAN_SLICE,
    Group,
    Plan,
    holds_until,
    send_due,
)
from rqueue.schedules.record import Schedule
from rqueue.store.outages import Outages
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import REDIS_ERRORS
from rqueue.store.schedule_calls import Firing, Read
from rqueue.store.schedule_store import MAX_MS, ScheduleStore
from rqueue.tasks import observers
from rqueue.tasks.decorator import registered
from rqueue.timing import iso

log = logging.getLogger("rqueue.scheduler")

BATCH = 200
"""Most due schedules one tick fires per queue; with more, the next tick comes at once."""
_READ_GROWTH = 8
CATCH_UP_LIMIT = 100
"""Most missed triggers the ``all`` policy enqueues for one outage; older ones are skipped."""
ON_TIME_LIMIT = 1000
IDLE = 60.0
PRECISE_WAIT = 0.2
"""The last seconds before a trigger that the parent sleeps locally instead of in BLPOP."""
_PRECISE_ROUNDS = 5
RETRY_AFTER_ERROR = 1.0


_CANNOT_FIRE = (RQueueError, ValueError, TypeError, ArithmeticError, OSError)
"""What building a firing raises for a definition that cannot fire. OverflowError,
OSError: a time no clock holds, found while walking a cron; shelved like the rest,
or it would fail every tick for ever."""


def _fired(firing: Firing, won: bool) -> None:
    if won and firing.payloads:
        name = firing.name.decode(errors="replace")
        log.debug("schedule %s: enqueued %d trigger(s)", name, len(firing.payloads))


def trigger_id(name: str, trigger_ms: int) -> str:
    """The task id of one trigger: the same on every worker, so a run is recognisable."""
    return hashlib.sha256(f"{name}\0{trigger_ms}".encode()).hexdigest()[:32]


def plan(schedule: Schedule, score: int, now: int) -> tuple[list[int], int | None]:
    """The triggers to enqueue now and the next fire time (None: finished)."""
    timing = schedule.timing.checked()
    cutoff = now - schedule.misfire_grace_ms
    late: list[int] = []
    first_on_time: int | None = score
    if score < cutoff:
        if schedule.misfire == "all":
            late = timing.between(score, cutoff - 1, CATCH_UP_LIMIT + 1)
            if len(late) > CATCH_UP_LIMIT:
                late = late[:CATCH_UP_LIMIT]
                log.warning(
                    "schedule %s: more than %d missed triggers; enqueued the first %d "
                    "and skipped the rest",
                    schedule.name,
                    CATCH_UP_LIMIT,
                    CATCH_UP_LIMIT,
                )
        else:
            late = [score]
        log.warning(
            "schedule %s missed triggers since %s (workers down?); policy %s: enqueueing %d",
            schedule.name,
            iso(score),
            schedule.misfire,
            len(late),
        )
        first_on_time = timing.next_after(cutoff - 1)
    on_time: list[int] = []
    if first_on_time is not None and first_on_time <= now:
        on_time = timing.between(first_on_time, now, ON_TIME_LIMIT)
    triggers = late + on_time
    after = max(now, triggers[-1]) if triggers else now
    return triggers, timing.next_after(after)


class Due(NamedTuple):
    """A schedule due to fire, and the clock of its queue's node when that was read."""

    queue: str
    member: bytes
    score: float
    """As read from the timeline: a time in ms, or hostile (``-inf``), then shelved."""
    now: int
    definition: bytes | None
    """Read with the score; None if the schedule was removed meanwhile."""


class Scheduler:
    """Fires the schedules of ``queues`` on behalf of one worker parent."""

    def __init__(self, queue: RedisQueue, queues: Sequence[str], enabled: bool = True) -> None:
        self.queue = queue
        self.queues = list(queues)
        self.enabled = enabled
        self.schedules = Schedules(queue)
        self.store = ScheduleStore(queue)
        self._declared: set[str] = set()
        self._reads = dict.fromkeys(self.queues, 1)
        """Per queue, how many timeline entries the next tick reads: one more than were
        due last time, eightfold (up to BATCH) while all it read were due. Reading BATCH
        each time cost a parent with 10^5 schedules most of its CPU in parsing entries
        not yet due; now a tick reads what is due and one more (docs/benchmarks.md)."""
        self._plan = Plan()
        self.outages = Outages()
        self._planned_until: dict[str, int] = {}
        """Per queue, the fire time (ms) up to which the plan holds what is due."""
        self._replan_at = 0.0

    def tick(self) -> float:
        """Fire what is due; return seconds until the next schedule is due.

        An outage propagates (the parent backs off and retries): a lost connection, a
        timeout, or a transient refusal such as a failover's ``MASTERDOWN``. Any other
        error is logged and retried a second later, never taking the worker down.
        Either way the plan is dropped: the next tick reads the timeline afresh.
        """
        if not self.enabled:
            return IDLE
        try:
            for _ in range(_PRECISE_ROUNDS):
                wait = self._tick()
                if wait > PRECISE_WAIT:
                    # Wake a little early: a blocking pop's timeout is only noticed on
                    # Redis's next cron tick (up to 1/hz = 100 ms late), so the last
                    # stretch before a trigger is slept here, precisely.
                    return wait - PRECISE_WAIT
                time.sleep(wait)
            return 0.0
        except REDIS_ERRORS:
            self._plan.clear()
            raise
        except Exception:
            self._plan.clear()
            log.exception("scheduler tick failed; retrying in %g s", RETRY_AFTER_ERROR)
            return RETRY_AFTER_ERROR

    def _tick(self) -> float:
        """Send the planned firings now due, fire what is due unplanned, plan what comes
        within PLAN_AHEAD; return seconds until the next of these is to be done."""
        self._declare()
        for firing, won in send_due(self._plan, self.store):
            _fired(firing, won)
        due: list[Due] = []
        upcoming = min(IDLE, self.outages.next_try())  # a down queue: tried after its back-off
        bounds = self._plan.bounds()
        reads = [
            Read(q, self._reads[q], high=bounds.get(q, "+inf"))
            for q in self.outages.up(self.queues)
        ]
        clocks: dict[str, tuple[int, float]] = {}
        for read, timeline in zip(reads, self._earliest(reads), strict=True):
            if timeline is None:
                continue  # its shard is down
            (now, entries), name, count = timeline, read.queue, read.limit
            clocks[name] = (now, time.monotonic())
            before = len(due)
            for member, score, definition in entries:
                if score <= now:
                    due.append(Due(name, member, score, now, definition))
                else:
                    upcoming = min(upcoming, (score - now) / 1000)
                    break
            else:
                if len(entries) >= count:  # every entry read was due: more may be
                    upcoming = 0.0
            found = len(due) - before
            self._reads[name] = min(BATCH, count * _READ_GROWTH if found == count else found + 1)
        if due:
            upcoming = min(upcoming, self._fire(due))
        if upcoming <= 0:
            return 0.0
        rolling = bool(self._plan) and time.monotonic() >= self._replan_at
        if rolling or (not self._plan and upcoming <= PLAN_AHEAD):
            self._plan_ahead(clocks)
        if self._plan:
            return min(upcoming, self._plan.wait())
        if PLAN_AHEAD < upcoming < IDLE:  # wake in time to plan it
            return upcoming - PLAN_AHEAD
        return upcoming

    def _fire(self, due: list[Due]) -> float:
        """Fire each due schedule; return seconds until the soonest next fire time among
        them (each by the clock of its queue's node)."""
        firings: list[Firing] = []
        soonest = IDLE
        for queue_name, member, score, now, data in due:
            if data is None:
                continue  # removed since the read; its timeline entry goes with it
            try:
                firing = self._firing(queue_name, member, score, data, now)
            except _CANNOT_FIRE as exc:
                if self.store.shelve(queue_name, member, score, data):
                    log.error(
                        "schedule %s on queue %s cannot fire, taken off the timeline until "
                        "it is updated or resumed: %s",
                        member.decode(errors="replace"),
                        queue_name,
                        exc,
                    )
                continue
            if firing.next_ms is not None:
                soonest = min(soonest, (firing.next_ms - now) / 1000)
            firings.append(firing)
        if firings:
            for firing, won in zip(firings, self.store.fire(firings), strict=True):
                _fired(firing, won)
        return soonest

    def _earliest(
        self, reads: Sequence[Read]
    ) -> list[tuple[int, list[tuple[bytes, float, bytes | None]]] | None]:
        """:meth:`ScheduleStore.earliest`, None for a queue whose shard is down (left
        for a back-off, ``store/outages.py``): on Redis Cluster the other shards'
        schedules fire on time while one is down."""
        names = [read.queue for read in reads]
        return self.outages.settle(names, self.store.earliest(reads), self.queue.config.cluster)

    def _plan_ahead(self, clocks: dict[str, tuple[int, float]]) -> None:
        """Plan the firings due within PLAN_AHEAD of each queue's clock (``clocks``: as
        read, and when, on this process's monotonic clock) and not planned yet,
        PLAN_PAGE entries a queue and round trip, until PLAN_LIMIT a queue or the first
        planned trigger comes. One that cannot fire is not planned: a tick shelves it
        once due. While a plan holds, each tick plans only what came within PLAN_AHEAD
        since the last (at most every PLAN_SLICE): planning a whole second of triggers
        at once held up the ones due meanwhile."""
        if not self._plan:
            self._planned_until.clear()
        ahead = int(PLAN_AHEAD * 1000)
        low = {q: max(now, self._planned_until.get(q, now)) for q, (now, _) in clocks.items()}
        groups: dict[tuple[str, int], list[Firing]] = {}
        pending = list(clocks)
        first = time.monotonic() + self._plan.wait() if self._plan else math.inf
        for skip in range(0, PLAN_LIMIT, PLAN_PAGE):
            reads = [
                Read(q, PLAN_PAGE, f"({low[q]}", str(clocks[q][0] + ahead), skip, ahead)
                for q in pending
            ]
            pending = []
            for read, found in zip(reads, self._earliest(reads), strict=True):
                if found is None:
                    continue  # down since the tick's read: planned once it is back
                entries, (now, read_at) = found[1], clocks[read.queue]
                self._planned_until[read.queue] = now + ahead
                for member, score, data in entries:
                    firing = self._planned(read.queue, member, score, data)
                    if firing is not None:
                        instant = int(firing.read_ms)
                        groups.setdefault((read.queue, instant), []).append(firing)
                        first = min(first, read_at + (instant - now) / 1000)
                if len(entries) == PLAN_PAGE:
                    pending.append(read.queue)
                    # Those after the last read, if not planned on, fire once due.
                    self._planned_until[read.queue] = int(entries[-1][1])
            if not pending or time.monotonic() >= first:
                break
        for (queue, instant), firings in groups.items():
            now, read_at = clocks[queue]
            at = read_at + (instant - now) / 1000
            self._plan.add(Group(at, queue, instant, self.store.prepare(firings)))
        self._replan_at = time.monotonic() + PLAN_SLICE

    def _planned(
        self, queue: str, member: bytes, score: float, data: bytes | None
    ) -> Firing | None:
        """The firing of a timeline entry, as a tick at its trigger would build it, and
        holding until then; None if it cannot fire (a tick shelves it once due)."""
        if data is None:
            return None
        try:
            return self._firing(queue, member, score, data, int(score), ahead=True)
        except _CANNOT_FIRE:
            return None

    def _firing(
        self,
        queue_name: str,
        member: bytes,
        score: float,
        data: bytes,
        now: int,
        ahead: bool = False,
    ) -> Firing:
        """The firing of a schedule read at ``score`` with definition ``data``, as due
        by ``now`` (``ahead``: planned for its trigger, ``now`` = the trigger). Raises
        one of _CANNOT_FIRE if it cannot fire."""
        self.store.check(queue_name, member, data)  # before anything reads it
        if not (math.isfinite(score) and 0 <= score <= MAX_MS):
            raise InvalidSchedule(f"its place on the timeline ({score!r}) is not a time")
        schedule = Schedule.decode(data, int(score), keyring=self.queue.config.keyring)
        if schedule.hidden:
            raise InvalidSchedule(
                f"it is encrypted and this worker has no key to decrypt its arguments: set "
                f"{KEYS_SETTING}"
            )
        triggers, next_ms = plan(schedule, int(score), now)
        return Firing(
            queue=queue_name,
            name=member,
            read_ms=int(score),
            read=data,
            next_ms=next_ms,
            definition=schedule.fired(
                triggers[-1] if triggers else schedule.last_ms, next_ms is None
            ),
            payloads=[self._payload(schedule, t, now) for t in triggers],
            fire_by=holds_until(now, schedule.misfire_grace_ms, next_ms) if ahead else None,
        )

    def _payload(self, schedule: Schedule, trigger_ms: int, now: int) -> bytes:
        job = schedule.job(trigger_ms, now, trigger_id(schedule.name, trigger_ms))
        config = self.queue.config
        return observers.encoded(job, config.max_payload_bytes, config.keyring)

    def _declare(self) -> None:
        """Keep schedules declared with ``@task(cron=...)`` in line with the imported code."""
        for name, found in registered().items():
            declared = getattr(found, "schedule", None)
            if declared is None or name in self._declared:
                continue
            if found.options.queue in self.queues:
                cron, every, tz = declared
                try:
                    self.schedules.declare(found, cron, every, tz)
                except RQueueError as exc:
                    log.error("schedule declared on task %s is invalid: %s", name, exc)
            self._declared.add(name)
