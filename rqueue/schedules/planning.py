"""Firings planned ahead of their trigger, so the trigger costs one round trip.

A burst (5,000 schedules due at one instant) cost a parent about 50 µs of CPU per
schedule to read, decode, check and turn into a payload, all after the trigger: the
last of them was enqueued a third of a second late. So a tick that finds triggers
within :data:`PLAN_AHEAD` reads them then, and builds each firing as a tick at the
trigger would (``now`` = the trigger), signed and packed; at the trigger the scheduler
only sends them (:meth:`ScheduleStore.send`).

A plan changes nothing that fires. fire_schedules.lua fires nothing before its trigger
by Redis's ``TIME`` (the worker's clock may be ahead: those come back as early and are
sent again), and each firing stays a compare-and-set on the score and definition the
plan read: a schedule changed, paused or removed meanwhile, or fired by another
worker, is not fired from the plan, and the next tick reads it afresh. A firing also
holds only until its ``fire_by``: past the misfire grace, or past the schedule's next
trigger, a tick at that time would have fired something else (a missed run, two
triggers), so the late firing is refused and a tick fires it by the misfire policy.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from typing import NamedTuple

from rqueue.store.schedule_calls import Firing, Prepared
from rqueue.store.schedule_store import ScheduleStore

PLAN_AHEAD = 1.0
"""Seconds before a trigger that a tick plans its firings: enough to plan a few
thousand on a busy machine. Planned, a parent sleeps to the trigger as before."""
PLAN_PAGE = 1000
"""Most timeline entries one planning read takes (a bounded call)."""
PLAN_SLICE = 0.05
"""Seconds between a tick's planning reads while a plan holds: each plans the
triggers that came within PLAN_AHEAD since the last."""
PLAN_LIMIT = 10_000
"""Most firings planned per queue; any more due at that time fire once due."""


def holds_until(trigger_ms: int, grace_ms: int, next_ms: int | None) -> int:
    """The last Redis time a firing planned for ``trigger_ms`` holds for: a tick then
    would still fire just this trigger (inside the misfire grace, before the next)."""
    last = trigger_ms + grace_ms
    return last if next_ms is None else min(last, next_ms - 1)


class Group(NamedTuple):
    """Firings of one queue due at one instant, ready to send."""

    at: float
    """When they are due, on this process's monotonic clock (as the queue's node's
    clock read when they were planned): they are sent from then on."""
    queue: str
    instant: int
    """Their trigger, in ms by the queue's node's clock."""
    prepared: Prepared


class Plan:
    """The planned groups of one scheduler, soonest first."""

    def __init__(self) -> None:
        self._groups: list[Group] = []

    def __bool__(self) -> bool:
        return bool(self._groups)

    def add(self, group: Group) -> None:
        bisect.insort(self._groups, group, key=lambda g: g.at)

    def clear(self) -> None:
        self._groups.clear()

    def wait(self) -> float:
        """Seconds until the soonest group is due (0 if it is)."""
        return max(0.0, self._groups[0].at - time.monotonic()) if self._groups else 0.0

    def bounds(self) -> dict[str, str]:
        """Per queue with firings planned, the bound (as ZRANGEBYSCORE takes it) of
        what a tick reads of its timeline while this plan holds: up to its first
        planned trigger, excluded (unplanned entries at it fire once the plan has)."""
        first: dict[str, int] = {}
        for group in self._groups:
            first[group.queue] = min(first.get(group.queue, group.instant), group.instant)
        return {queue: f"({instant}" for queue, instant in first.items()}

    def take_due(self) -> list[Group]:
        """The groups due by this process's clock, taken out of the plan."""
        now = time.monotonic()
        split = bisect.bisect_right(self._groups, now, key=lambda g: g.at)
        due, self._groups = self._groups[:split], self._groups[split:]
        return due


def send_due(plan: Plan, store: ScheduleStore) -> Iterator[tuple[Firing, bool]]:
    """Send the plan's due groups in one round trip; yield each firing and whether
    this worker fired it. The early ones (Redis's clock behind this process's) go
    back into the plan, due when Redis's clock reaches them."""
    due = plan.take_due()
    if not due:
        return
    for group, sent in zip(due, store.send([g.prepared for g in due]), strict=True):
        firings = group.prepared.firings
        if sent.early:
            again = store.prepare([firings[i] for i in sent.early])
            plan.add(group._replace(at=time.monotonic() + sent.wait, prepared=again))
        yield from zip(firings, sent.won, strict=True)
