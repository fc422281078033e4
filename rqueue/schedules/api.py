"""Schedules: recurring tasks kept in Redis, fired by every worker, each trigger once.

``from rqueue import schedules`` then ``schedules.add("cleanup", cleanup, every=300)``.
Here a change is validated, its next fire time computed and its definition encoded;
:class:`~rqueue.store.schedule_store.ScheduleStore` keeps it in Redis, as a
compare-and-set that wakes the queue's workers, so they see it at their next tick.
Time is Redis ``TIME``; nothing here reads this machine's clock. Firing lives in
scheduler.py.
"""

from __future__ import annotations

import builtins
import contextlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rqueue.encoding.payload import lane_of
from rqueue.encoding.sealing import KEYS_SETTING, EncryptionUnavailable, Keyring
from rqueue.errors import InvalidSchedule, RQueueError
from rqueue.schedules.builder import (
    Builder,
    ScheduleOptions,
    call_options,
    checked,
    next_fire,
    resolve_task,
    timing_fields,
)
from rqueue.schedules.record import Schedule
from rqueue.store.default import default_queue
from rqueue.store.schedule_calls import Saving
from rqueue.store.schedule_store import ScheduleStore, StoredSchedule
from rqueue.store.signing import InvalidSignature
from rqueue.tasks import observers
from rqueue.tasks.decorator import registered
from rqueue.timing import seconds, to_ms

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from rqueue.store.queue import RedisQueue
    from rqueue.tasks.definition import Task


_SAVE_ATTEMPTS = 20


class ScheduleNotFound(RQueueError, LookupError):
    """No schedule has that name."""


class ScheduleExists(InvalidSchedule):
    """``add`` of a name that is already taken (use ``update``)."""


class Schedules:
    """The schedules on one Redis: add, change and inspect them."""

    def __init__(self, queue: RedisQueue) -> None:
        self.queue = queue
        self.store = ScheduleStore(queue)

    def now_ms(self, queue: str = "default") -> int:
        """Redis's clock, the only one rqueue trusts: on Redis Cluster, that of the node
        holding ``queue``, the clock its schedules fire by."""
        return self.store.now_ms(queue)

    # -- changing ----------------------------------------------------------------------

    def add(
        self, name: str, task: Task[Any, Any] | str, **options: Unpack[ScheduleOptions]
    ) -> Schedule:
        """Create a schedule; ``ScheduleExists`` if the name is taken. ``options`` are
        :meth:`Builder.build`'s (``cron``, ``every``, ``args``, ``queue``, ...).

        Everything is validated first: on any error nothing is stored.
        """
        self._add([Builder(self.now_ms).build(name, task, **options)])
        return self.get(name)

    def add_many(self, entries: Iterable[Mapping[str, Any]]) -> builtins.list[Schedule]:
        """Create many schedules at once: each entry holds :meth:`add`'s arguments
        (``{"name": "s1", "task": cleanup, "every": 300, ...}``). Returns them, in order.

        Every entry is validated first, as ``add`` does; an error names the entry (its
        place and name), and nothing is stored. So is a name taken already or given
        twice (``ScheduleExists``). Then the schedules are stored a few thousand to a
        round trip (``add`` stores one in several): 10^5 take seconds, not minutes.
        """
        builder = Builder(self.now_ms)  # reads each queue's clock and task's options once
        built: builtins.list[Schedule] = []
        for place, entry in enumerate(entries):
            try:
                built.append(builder.build(**entry))
            except RQueueError as exc:
                raise type(exc)(f"entry {place} ({entry.get('name')!r}): {exc}") from exc
            except TypeError as exc:  # not a mapping, or not add()'s arguments
                raise InvalidSchedule(f"entry {place}: {exc}") from None
        return self._add(built)

    def _add(self, schedules: Sequence[Schedule]) -> builtins.list[Schedule]:
        """Store new schedules: claim their names, then save them; ScheduleExists, and
        nothing stored, if a name is taken."""
        names = [s.name for s in schedules]
        twice = sorted(name for name, count in Counter(names).items() if count > 1)
        if twice:
            raise ScheduleExists(f"schedule names given twice: {_named(twice)}")
        keyring = self.queue.config.keyring
        taken = self.store.claim_names([(s.name, s.queue) for s in schedules])
        if taken:
            raise _exists(taken)
        try:
            saved = self.store.save(
                [Saving(s.queue, s.name, b"", s.encode(keyring), s.next_ms) for s in schedules]
            )
        except BaseException:
            self.store.release_names(names)
            raise
        refused = [s.name for s, ok in zip(schedules, saved, strict=True) if not ok]
        if refused:  # a definition without its index entry: left alone, as add does
            self.store.release_names(refused)
            raise _exists(refused)
        return builtins.list(schedules)

    def update(self, name: str, **changes: Any) -> Schedule:
        """Change any of cron, every, args, kwargs, timezone, start, end, misfire,
        misfire_grace, task; the next fire time is recomputed from now."""
        allowed = {
            "cron",
            "every",
            "args",
            "kwargs",
            "timezone",
            "start",
            "end",
            "misfire",
            "misfire_grace",
            "task",
        }
        unknown = set(changes) - allowed
        if unknown:
            raise InvalidSchedule(f"cannot update {', '.join(sorted(unknown))} of a schedule")

        def change(current: Schedule, now: int) -> Schedule:
            timing: dict[str, Any] = {}
            if "cron" in changes and changes["cron"] is not None:
                timing.update(cron=changes["cron"], every_ms=None)
            if "every" in changes and changes["every"] is not None:
                every = timing_fields(None, changes["every"], "UTC", None, None)
                timing = {"cron": None, "every_ms": every["every_ms"]}
                timing["anchor_ms"] = current.start_ms if current.start_ms is not None else now
            if "timezone" in changes:
                timing["timezone"] = changes["timezone"]
            for key in ("start", "end"):
                if key in changes:
                    moment = changes[key]
                    timing[f"{key}_ms"] = None if moment is None else to_ms(moment)
            if "start" in changes and timing.get("start_ms") is not None:
                timing["anchor_ms"] = timing["start_ms"]
            values: dict[str, Any] = {}
            if "misfire" in changes:
                values["misfire"] = changes["misfire"]
            if "args" in changes:
                values["args"] = tuple(changes["args"])
            if "kwargs" in changes:
                values["kwargs"] = dict(changes["kwargs"] or {})
            if "misfire_grace" in changes:
                grace = seconds(changes["misfire_grace"], "misfire_grace")
                values["misfire_grace_ms"] = round(grace * 1000)
            # A run's options follow its task; its tags may follow its arguments too,
            # worked out again if this process has its task (updating never imports one).
            found = (
                resolve_task(changes["task"])
                if "task" in changes
                else registered().get(current.task)
                if {"args", "kwargs"} & changes.keys()
                else None
            )
            if found is not None:
                args = values.get("args", current.args)
                kwargs = values.get("kwargs", current.kwargs)
                values.update(task=found.name, **call_options(found, args, kwargs))
            return checked(
                replace(
                    current,
                    **values,
                    timing=replace(current.timing, **timing),
                    finished=False,
                    declared=False,
                )
            )

        return self._change(name, change)

    def pause(self, name: str) -> Schedule:
        return self._change(name, lambda s, now: replace(s, paused=True))

    def resume(self, name: str) -> Schedule:
        """Continue from now: triggers that fell in the pause are not caught up."""
        return self._change(name, lambda s, now: replace(s, paused=False))

    def remove(self, name: str) -> Schedule | None:
        """Delete a schedule (also one half-written by a crashed ``add``, or one that
        does not read); returns it as it was (None if half-written), so the caller can
        say when it was declared in code (:meth:`Schedule.removal_note`)."""
        stored = self.store.get(name)
        if not self.store.remove(name):
            raise ScheduleNotFound(f"no schedule named {name!r}")
        return None if stored is None else _read(stored, self.queue.config.keyring)

    def run_now(self, name: str) -> str:
        """Enqueue one run at once, outside the timeline; returns the task id."""
        schedule = _trusted(self.get(name))  # the push signs it: only what was signed
        if schedule.hidden:
            raise EncryptionUnavailable(
                f"schedule {name!r} is encrypted: running it needs its key ({KEYS_SETTING})"
            )
        now = self.now_ms(schedule.queue)
        job = schedule.job(now, now)
        job = replace(job, meta={**job.meta, "manual": True})
        config = self.queue.config
        payload = observers.encoded(job, config.max_payload_bytes, config.keyring)
        self.queue.push(
            job.queue,
            [payload],
            lane=lane_of(job.meta),
        )
        return job.id

    def declare(
        self, task: Task[Any, Any], cron: str | None, every: float | None, timezone: str
    ) -> None:
        """Make the schedule declared by ``@task(cron=...)`` match the code (idempotent)."""
        stored = self.store.get(task.name)
        current = None if stored is None else _read(stored, self.queue.config.keyring)
        if current is not None and (not current.trusted or current.unreadable is not None):
            # The code is the authority on a declared schedule: an unsigned, altered or
            # unreadable definition under its name (from before signing, forged, or
            # garbage) is replaced.
            self.store.remove(task.name)
            current = None
        if current is None:
            with contextlib.suppress(ScheduleExists):  # another worker declared it first
                self.add(task.name, task, cron=cron, every=every, timezone=timezone, declared=True)
            return
        every_ms = None if every is None else round(every * 1000)
        changes: dict[str, Any] = {}
        if (current.cron, current.every_ms, current.timezone) != (cron, every_ms, timezone):
            changes.update(cron=cron, every=every, timezone=timezone)
        options = call_options(task, current.args, current.kwargs)
        if any(getattr(current, k) != v for k, v in options.items()):
            changes["task"] = task  # its options changed in the code (say, keep_result)
        if changes and current.declared:
            self.update(task.name, **changes)
            self._change(task.name, lambda s, now: replace(s, declared=True))

    # -- reading -----------------------------------------------------------------------

    def get(self, name: str) -> Schedule:
        """The schedule ``name``; InvalidSchedule saying why if its record does not read."""
        stored = self.store.get(name)
        if stored is None:
            raise ScheduleNotFound(f"no schedule named {name!r}")
        found = _read(stored, self.queue.config.keyring)
        if found.unreadable is not None:
            raise InvalidSchedule(
                f"schedule {name!r} is unreadable ({found.unreadable}): remove it "
                "(`rqueue schedule remove`) and add it again"
            )
        return found

    def list(self) -> builtins.list[Schedule]:
        """Every schedule, by name. One whose record does not read (garbage written to
        Redis, a field of the wrong type, a queue that is not one) is listed with
        ``unreadable`` set to why, its name and queue only, so it neither hides the
        others nor fails the listing; the scheduler shelves it when it is due."""
        keyring = self.queue.config.keyring
        found = [_read(stored, keyring) for stored in self.store.all()]
        return sorted(found, key=lambda s: s.name)

    # -- saving ------------------------------------------------------------------------

    def _change(self, name: str, change: Callable[[Schedule, int], Schedule]) -> Schedule:
        for _ in range(_SAVE_ATTEMPTS):
            current = self.get(name)
            read = self.store.definition(current.queue, name)
            if read is None:
                raise ScheduleNotFound(f"no schedule named {name!r}")
            trusted = self.store.trusted(current.queue, name, read)
            # Never sign a change on top of what nobody signed: that would launder it.
            keyring = self.queue.config.keyring
            current = _trusted(Schedule.decode(read, current.next_ms, trusted, keyring))
            now = self.now_ms(current.queue)
            if self._save(change(current, now), read, now):
                return self.get(name)
        raise RQueueError(f"schedule {name!r} kept changing under this update; try again")

    def _save(self, schedule: Schedule, read: bytes, now: int) -> bool:
        """Store a definition and its next fire time if nobody changed it since ``read``."""
        next_ms = next_fire(schedule.timing, schedule.paused, now)
        if next_ms is None and not schedule.paused:
            schedule = replace(schedule, finished=True)
        encoded = schedule.encode(self.queue.config.keyring)
        saving = Saving(schedule.queue, schedule.name, read, encoded, next_ms)
        return self.store.save([saving])[0]


def _named(names: Sequence[str]) -> str:
    shown = ", ".join(map(repr, names[:5]))
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _exists(names: Sequence[str]) -> ScheduleExists:
    if len(names) == 1:
        return ScheduleExists(f"a schedule named {names[0]!r} exists already; use update")
    return ScheduleExists(f"schedules named {_named(names)} exist already; use update")


def _read(stored: StoredSchedule, keyring: Keyring | None) -> Schedule:
    """A stored record as a Schedule (an encrypted one's arguments opened with
    ``keyring``, else ``hidden``), or as an unreadable one saying why (arguments sealed
    with a key ``keyring`` does not hold too)."""
    if stored.problem is not None:
        return Schedule.unreadable_record(stored.name, stored.queue, stored.problem)
    try:
        return Schedule.decode(stored.definition, stored.next_ms, stored.trusted, keyring)
    except InvalidSchedule as exc:
        return Schedule.unreadable_record(stored.name, stored.queue, str(exc))


def _trusted(schedule: Schedule) -> Schedule:
    if not schedule.trusted:
        raise InvalidSignature(
            f"schedule {schedule.name!r} is not signed with this RQUEUE_SECRET (written "
            "without it, or altered in Redis), so workers do not fire it; check it with "
            f"`rqueue schedule show {schedule.name}`, then remove it and add it again"
        )
    return schedule


def _default() -> Schedules:
    return Schedules(default_queue())


# The module-level API, on the default connection (see ``rqueue.use``).


def add(name: str, task: Task[Any, Any] | str, **options: Unpack[ScheduleOptions]) -> Schedule:
    return _default().add(name, task, **options)


def add_many(entries: Iterable[Mapping[str, Any]]) -> builtins.list[Schedule]:
    return _default().add_many(entries)


def update(name: str, **changes: Any) -> Schedule:
    return _default().update(name, **changes)


def pause(name: str) -> Schedule:
    return _default().pause(name)


def resume(name: str) -> Schedule:
    return _default().resume(name)


def remove(name: str) -> Schedule | None:
    return _default().remove(name)


def get(name: str) -> Schedule:
    return _default().get(name)


def list() -> builtins.list[Schedule]:  # the pinned name
    return _default().list()


def run_now(name: str) -> str:
    return _default().run_now(name)
