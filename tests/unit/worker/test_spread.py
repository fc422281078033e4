"""How many tasks a turn of the concurrent runner may start (worker/concurrent.py)."""

from __future__ import annotations

from rqueue.worker.concurrent import starts_allowed


def test_a_fast_turn_starts_a_tenth_of_the_slots() -> None:
    assert starts_allowed(10, 0.0002) == 10
    assert starts_allowed(1, 0.0) == 1


def test_a_slow_turn_starts_a_tenth_of_the_slots_per_millisecond() -> None:
    """A loaded machine's 4 ms turn: 40 of 100 slots, not 10 (a third stayed empty)."""
    assert starts_allowed(10, 0.004) == 40
    assert starts_allowed(1, 0.0025) == 2
