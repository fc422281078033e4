"""When a schedule fires: pure timing logic, no Redis, no clock.

Every function takes "now" as an argument (the caller reads it from Redis ``TIME``),
so the same inputs always give the same trigger times, on every worker.

Cron expressions are parsed and walked by croniter. They are matched against
*wall-clock* time in the schedule's time zone, and each matching wall-clock time is
mapped to one instant:

- a wall time that does not exist (skipped by a spring-forward change, e.g. 02:30 on
  the last Sunday of March in Europe/Berlin) fires once, at the first instant after
  the gap (03:00 local);
- a wall time that happens twice (a fall-back change) fires once, at its first
  occurrence. The repeated hour fires nothing the first pass already fired, so a
  ``*/5`` cron is quiet for that hour; use ``every=`` or UTC for strictly periodic work.

Intervals (``every=``) are plain elapsed time from an anchor and ignore time zones.
"""

from __future__ import annotations

import math
from dataclasses import InitVar, dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from rqueue.encoding.ranges import MAX_DELAY_SECONDS
from rqueue.errors import InvalidSchedule

if TYPE_CHECKING:
    from croniter import croniter

UTC = timezone.utc
_MAX_STEPS = 1000
"""Cron candidates examined for one answer; a valid expression needs a handful."""


@dataclass(frozen=True)
class Timing:
    """What decides a schedule's trigger times. Times are Unix milliseconds."""

    cron: str | None = None
    every_ms: int | None = None
    timezone: str = "UTC"
    start_ms: int | None = None
    end_ms: int | None = None
    anchor_ms: int = 0
    """Interval triggers are ``anchor_ms + k * every_ms``: the start, else creation."""
    check: InitVar[bool] = True
    """False for a timing read back from Redis: it is checked by :meth:`checked` when
    used, so a stored schedule that this version refuses can still be read."""

    def __post_init__(self, check: bool) -> None:
        if check:
            validate(self)

    def checked(self) -> Timing:
        """This timing, once :func:`validate` accepts it (for one built with ``check=False``)."""
        validate(self)
        return self

    def next_after(self, after_ms: int) -> int | None:
        """The first trigger strictly after ``after_ms`` inside the window, or None."""
        floor = after_ms
        if self.start_ms is not None and self.start_ms - 1 > floor:
            floor = self.start_ms - 1
        found: int | None
        if self.every_ms is not None:
            steps = 0 if floor < self.anchor_ms else (floor - self.anchor_ms) // self.every_ms + 1
            found = self.anchor_ms + steps * self.every_ms
        else:
            assert self.cron is not None
            found = _cron_after(self.cron, zone(self.timezone), floor)
        if found is None or (self.end_ms is not None and found > self.end_ms):
            return None
        return found

    def between(self, first_ms: int, last_ms: int, limit: int) -> list[int]:
        """Triggers ``first_ms <= t <= last_ms``, at most ``limit`` of them."""
        found: list[int] = []
        current = self.next_after(first_ms - 1)
        while current is not None and current <= last_ms and len(found) < limit:
            found.append(current)
            current = self.next_after(current)
        return found

    def next_runs(self, after_ms: int, count: int) -> list[int]:
        runs: list[int] = []
        current: int | None = after_ms
        while len(runs) < count and current is not None:
            current = self.next_after(current)
            if current is not None:
                runs.append(current)
        return runs


def validate(timing: Timing) -> None:
    """Raise InvalidSchedule for anything that could never fire correctly."""
    if (timing.cron is None) == (timing.every_ms is None):
        raise InvalidSchedule("give exactly one of cron= or every=")
    if timing.every_ms is not None and not 1000 <= timing.every_ms <= MAX_DELAY_SECONDS * 1000:
        raise InvalidSchedule(
            f"every= must be from 1 second to ten years, got {timing.every_ms / 1000:g} s"
        )
    zone(timing.timezone)
    if timing.cron is not None:
        check_cron(timing.cron)
    if (
        timing.start_ms is not None
        and timing.end_ms is not None
        and timing.end_ms < timing.start_ms
    ):
        raise InvalidSchedule(
            f"end ({iso(timing.end_ms)}) is before start ({iso(timing.start_ms)})"
        )


def check_cron(expression: str) -> None:
    """Five fields, or six with seconds first (as Quartz and Spring write them)."""
    if not isinstance(expression, str) or len(expression.split()) not in (5, 6):
        raise InvalidSchedule(
            f"invalid cron expression {expression!r}: use 5 fields (minute hour day month "
            "weekday) or 6 with seconds first"
        )
    try:
        _walker(expression, datetime(2000, 1, 1))
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidSchedule(f"invalid cron expression {expression!r}: {exc}") from None


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidSchedule(
            f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin' or 'UTC'"
        ) from None


def to_ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise InvalidSchedule(f"{moment!r} is naive: attach a time zone (e.g. tzinfo=UTC)")
    return round(moment.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def iso(ms: int) -> str:
    """``2026-11-27T23:41:12.345Z``: how rqueue shows a person any moment (see :func:`moment`)."""
    return from_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def moment(seconds: object) -> str:
    """A Unix time (seconds) as people read it from rqueue, in the CLI, the worker's logs
    and the dashboard alike: UTC, ISO 8601, to the millisecond, with ``Z`` (:func:`iso`).
    One rule, whatever the machine's or a framework's time zone (Django sets ``TZ``), so
    lines from hosts in different zones sort and compare as they are. A value no date
    can hold (a hostile record's ``1e20``, NaN, text) reads as itself, never an error."""
    try:
        return iso(round(float(seconds) * 1000))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        return f"{seconds!r} (out of range)"


def wall_to_ms(wall: datetime, tz: ZoneInfo) -> int:
    """The instant a naive wall-clock time stands for, by the rules in the module doc."""
    first = wall.replace(tzinfo=tz, fold=0)
    instant = to_ms(first)
    if from_ms(instant).astimezone(tz).replace(tzinfo=None) == wall:
        return instant  # exists (the first occurrence if it is repeated)
    # Skipped by a spring-forward change: fold=1 reads it with the offset after the
    # change (an instant before the gap), fold=0 with the one before (after the gap);
    # the change itself lies between.
    return _change_between(to_ms(wall.replace(tzinfo=tz, fold=1)), instant, tz)


def _change_between(low: int, high: int, tz: ZoneInfo) -> int:
    """The instant (to the second) the UTC offset changes between ``low`` and ``high``."""
    low, high = min(low, high), max(low, high)
    before = from_ms(low).astimezone(tz).utcoffset()
    while high - low > 1000:
        middle = (low + high) // 2
        if from_ms(middle).astimezone(tz).utcoffset() == before:
            low = middle
        else:
            high = middle
    return high - high % 1000


def _after_repeated_stretch(wall: datetime, tz: ZoneInfo) -> datetime | None:
    """If ``wall`` happens twice (fall-back), the wall time just past the repeated stretch."""
    first, second = to_ms(wall.replace(tzinfo=tz, fold=0)), to_ms(wall.replace(tzinfo=tz, fold=1))
    if first == second:
        return None
    change = from_ms(_change_between(first, second, tz)).astimezone(tz)
    return change.replace(tzinfo=None) + timedelta(milliseconds=abs(second - first))


def _walker(expression: str, start: datetime) -> croniter:
    # Imported here: croniter's import runs `file -b` (platform.architecture) and costs
    # ~70 ms, which every `rqueue` command and worker start would otherwise pay.
    from croniter import croniter

    return croniter(expression, start, second_at_beginning=True)


def _cron_after(expression: str, tz: ZoneInfo, after_ms: int) -> int | None:
    wall = from_ms(after_ms).astimezone(tz).replace(tzinfo=None)
    walker = _walker(expression, wall)
    for _ in range(_MAX_STEPS):
        candidate = walker.get_next(datetime)
        instant = wall_to_ms(candidate, tz)
        if instant > after_ms:
            return instant
        # In the second pass of a repeated hour every candidate maps back to the first
        # pass: jump to the end of the stretch instead of walking through it.
        end = _after_repeated_stretch(candidate, tz)
        if end is not None:
            walker = _walker(expression, end - timedelta(seconds=1))
    return None


def seconds(value: float | timedelta, what: str = "a duration") -> float:
    """A finite number of seconds from a number or a timedelta, else InvalidSchedule.

    Never ``float()`` of anything else: ``"60"`` or ``True`` are mistakes to name, and
    an int too big for a float must not escape as an OverflowError.
    """
    try:
        if isinstance(value, timedelta):
            result = value.total_seconds()
        elif type(value) in (int, float):
            result = float(value)
        else:
            raise TypeError(f"{type(value).__name__} is not a number")
    except (OverflowError, TypeError):
        result = math.nan
    if not math.isfinite(result):
        raise InvalidSchedule(
            f"{what} must be a finite number of seconds or a timedelta, got {value!r}"
        )
    return result
