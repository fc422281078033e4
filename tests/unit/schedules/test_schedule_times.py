"""Trigger times, computed (no clock, no Redis): cron, intervals, windows and DST."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from rqueue.errors import InvalidSchedule
from rqueue.timing import Timing, from_ms, to_ms

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def ms(*parts: int, tz: ZoneInfo | timezone = UTC) -> int:
    return to_ms(datetime(*parts, tzinfo=tz))  # type: ignore[misc]


def local(instant: int, tz: ZoneInfo) -> str:
    return from_ms(instant).astimezone(tz).isoformat()


def test_cron_walks_wall_clock_time_in_its_zone() -> None:
    timing = Timing(cron="0 3 * * *", timezone="Europe/Berlin")
    runs = timing.next_runs(ms(2027, 1, 10, 12, 0), 2)
    assert [local(r, BERLIN) for r in runs] == [
        "2027-01-11T03:00:00+01:00",
        "2027-01-12T03:00:00+01:00",
    ]


def test_six_field_cron_has_seconds_first() -> None:
    timing = Timing(cron="*/15 * * * * *")
    start = ms(2027, 1, 1, 0, 0, 0)
    assert [r - start for r in timing.next_runs(start, 3)] == [15_000, 30_000, 45_000]


def test_spring_forward_skipped_time_fires_once_at_the_end_of_the_gap() -> None:
    # Europe/Berlin, 2027-03-28: 02:00 CET jumps to 03:00 CEST; 02:30 never happens.
    timing = Timing(cron="30 2 * * *", timezone="Europe/Berlin")
    runs = timing.next_runs(ms(2027, 3, 26, 12, 0), 4)
    assert [local(r, BERLIN) for r in runs] == [
        "2027-03-27T02:30:00+01:00",
        "2027-03-28T03:00:00+02:00",  # once, right after the gap
        "2027-03-29T02:30:00+02:00",
        "2027-03-30T02:30:00+02:00",
    ]


def test_fall_back_repeated_time_fires_once_at_its_first_occurrence() -> None:
    # Europe/Berlin, 2027-10-31: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    timing = Timing(cron="30 2 * * *", timezone="Europe/Berlin")
    runs = timing.next_runs(ms(2027, 10, 30, 12, 0), 3)
    assert [local(r, BERLIN) for r in runs] == [
        "2027-10-31T02:30:00+02:00",  # the first 02:30 only
        "2027-11-01T02:30:00+01:00",
        "2027-11-02T02:30:00+01:00",
    ]
    # Asked from inside the repeated hour (after the first 02:30), it does not fire again.
    second_pass = ms(2027, 10, 31, 1, 15)  # 01:15 UTC is 02:15 CET, in the repeated hour
    assert local(timing.next_after(second_pass) or 0, BERLIN) == "2027-11-01T02:30:00+01:00"


def test_hourly_cron_across_both_transitions_never_fires_twice_at_one_instant() -> None:
    timing = Timing(cron="0 * * * *", timezone="America/New_York")
    for day in ((2027, 3, 14), (2027, 11, 7)):
        runs = timing.next_runs(ms(*day, 0, 0, tz=NEW_YORK) - 1, 6)
        assert len(set(runs)) == len(runs) and runs == sorted(runs)
        walls = [local(r, NEW_YORK)[11:16] for r in runs]
        assert len(set(walls)) == len(walls)  # each wall-clock hour at most once


def test_interval_counts_from_its_anchor_and_ignores_time_zones() -> None:
    anchor = ms(2027, 3, 28, 0, 0)
    timing = Timing(every_ms=3_600_000, timezone="Europe/Berlin", anchor_ms=anchor)
    runs = timing.next_runs(anchor, 4)
    assert [r - anchor for r in runs] == [3_600_000 * k for k in (1, 2, 3, 4)]


def test_window_start_and_end_bound_the_triggers() -> None:
    start, end = ms(2027, 1, 1, 0, 0, 10), ms(2027, 1, 1, 0, 0, 13)
    timing = Timing(cron="* * * * * *", start_ms=start, end_ms=end, anchor_ms=start)
    assert timing.between(start - 60_000, end + 60_000, 100) == [
        start,
        start + 1000,
        start + 2000,
        end,
    ]
    assert timing.next_after(end) is None
    interval = Timing(every_ms=5000, start_ms=start, end_ms=start + 12_000, anchor_ms=start)
    assert interval.next_runs(0, 10) == [start, start + 5000, start + 10_000]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron expression"),
        ({"cron": "* * *"}, "invalid cron expression"),
        ({"cron": "* * * * * * *"}, "6 with seconds first"),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"every_ms": 0}, "from 1 second to ten years"),
        ({"every_ms": 10**306}, "from 1 second to ten years"),  # was a msgpack overflow
        ({}, "exactly one of cron= or every="),
        ({"cron": "* * * * *", "every_ms": 1000}, "exactly one of cron= or every="),
        ({"every_ms": 1000, "start_ms": 10_000, "end_ms": 5_000}, "is before start"),
    ],
)
def test_invalid_timings_are_refused_with_a_clear_message(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidSchedule, match=message):
        Timing(**options)  # type: ignore[arg-type]


def test_every_second_cron_skips_the_repeated_hour_quickly() -> None:
    import time

    timing = Timing(cron="* * * * * *", timezone="Europe/Berlin")
    second_pass = ms(2027, 10, 31, 1, 15)  # 02:15 CET, after the first pass of 02:00-03:00
    began = time.perf_counter()
    found = timing.next_after(second_pass)
    assert time.perf_counter() - began < 0.5
    assert local(found or 0, BERLIN) == "2027-10-31T03:00:00+01:00"
    first_pass = ms(2027, 10, 31, 0, 59, 58)  # 02:59:58 CEST
    assert [local(r, BERLIN) for r in timing.next_runs(first_pass, 2)] == [
        "2027-10-31T02:59:59+02:00",
        "2027-10-31T03:00:00+01:00",
    ]
