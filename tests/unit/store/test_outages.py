"""A queue whose shard is down is left for a back-off of its own (``outages.py``)."""

from __future__ import annotations

import time

import pytest
import redis

from rqueue.store.outages import Outages


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


def test_settle_leaves_a_down_shards_queues_out_on_a_cluster() -> None:
    outages = Outages()
    down = redis.ConnectionError("shard down")
    assert outages.settle(["a", "b"], [1, down], cluster=True) == [1, None]
    assert outages.down("b") and not outages.down("a")
    assert outages.up(["a", "b", "c"]) == ["a", "c"]
    assert outages.settle(["b"], [2], cluster=True) == [2]
    assert not outages


def test_settle_raises_when_no_queue_answered_or_on_one_server() -> None:
    down = redis.ConnectionError("down")
    with pytest.raises(redis.ConnectionError):
        Outages().settle(["a", "b"], [down, down], cluster=True)
    with pytest.raises(redis.ConnectionError):
        Outages().settle(["a", "b"], [1, down], cluster=False)
    with pytest.raises(redis.ResponseError):  # a script's error is no outage
        Outages().settle(["a", "b"], [1, redis.ResponseError("bad")], cluster=True)


def test_a_back_off_that_ended_wakes_no_one_while_its_queue_has_not_answered() -> None:
    outages = Outages()
    outages.failed("a")
    outages._until["a"] = time.monotonic() - 1  # its back-off over, as after a while
    assert not outages.down("a")  # tried again like any other queue
    assert outages.next_try() == float("inf")  # and no idle wait cut short for it
    assert outages  # noted until a call on it answers: its next back-off grows
