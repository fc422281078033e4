"""A queue whose shard is down is left for a back-off of its own (``outages.py``)."""

from __future__ import annotations

from rqueue.worker.outages import Outages


def test_a_failed_queue_is_down_for_its_back_off_and_the_others_are_not() -> None:
    outages = Outages()
    assert not outages and outages.next_try() == float("inf")
    outages.failed("a")
    assert outages and outages.down("a") and not outages.down("b")
    assert 0 < outages.next_try() <= 0.2  # 0.1 s doubled once, jittered


def test_a_queue_that_answers_starts_its_back_off_afresh() -> None:
    outages = Outages()
    for _ in range(5):
        outages.failed("a")
    assert outages.next_try() > 0.2
    outages.answered("a")
    assert not outages and not outages.down("a")
    outages.failed("a")
    assert outages.next_try() <= 0.2
