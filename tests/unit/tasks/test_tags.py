"""Tags (``@task(tags=...)``): each call carries its labels in its payload's options,
however it is made: a dispatch, ``dispatch_many``, a chain's step, a schedule's run."""

from __future__ import annotations

import msgpack
import pytest
from support import ready

from rqueue import chain, dispatch_many, task
from rqueue.encoding.payload import Job, decode, encode
from rqueue.encoding.ranges import MAX_HEADERS, MAX_TAGS
from rqueue.errors import InvalidPayload, InvalidTaskOption
from rqueue.schedules.api import Schedules
from rqueue.store.queue import RedisQueue
from rqueue.workflows.steps import step_job, step_of


@task(queue="tagged", tags=["billing", "nightly"])
def fixed_tags(order_id: int) -> int:
    return order_id


@task(queue="tagged", tags=lambda order_id: [f"order:{order_id}"])
def tags_of_order(order_id: int) -> int:
    return order_id


def test_a_call_carries_its_declared_tags_in_its_payload(queue: RedisQueue) -> None:
    fixed_tags.dispatch(1)
    [payload] = ready(queue, "tagged")
    assert msgpack.unpackb(payload)[8] == {"tags": ["billing", "nightly"]}
    assert decode(payload).tags == ("billing", "nightly")


def test_a_callable_s_tags_are_each_call_s_own(queue: RedisQueue) -> None:
    tags_of_order.dispatch(7)
    dispatch_many([tags_of_order.pending(8), tags_of_order.pending(9), fixed_tags.pending(3)])
    tags = [decode(payload).tags for payload in ready(queue, "tagged")]
    assert tags == [("order:7",), ("order:8",), ("order:9",), ("billing", "nightly")]


def test_using_replaces_the_tags() -> None:
    job = fixed_tags.using(tags=["urgent"]).make_job((1,), {})
    assert job.tags == ("urgent",)


def test_a_chain_step_and_a_schedule_s_run_keep_the_call_s_tags(queue: RedisQueue) -> None:
    step = step_of(tags_of_order.pending(5))
    assert step_job(step, "0" * 32, {}).tags == ("order:5",)
    schedules = Schedules(queue)
    schedules.add("tag-run", tags_of_order, every=60, args=(6,))
    assert schedules.get("tag-run").job(0, 0).tags == ("order:6",)
    schedules.update("tag-run", args=(11,))  # its task is here: its tags follow its args
    assert schedules.get("tag-run").job(0, 0).tags == ("order:11",)
    chain(tags_of_order.pending(1), fixed_tags.pending(2)).dispatch()
    assert decode(ready(queue, "tagged")[0]).tags == ("order:1",)


def test_schedules_added_in_bulk_each_keep_their_call_s_tags(queue: RedisQueue) -> None:
    entries = [{"name": f"t{i}", "task": tags_of_order, "every": 60, "args": (i,)} for i in (3, 4)]
    added = Schedules(queue).add_many(entries)  # the task's options are built once for both
    assert [s.job(0, 0).tags for s in added] == [("order:3",), ("order:4",)]
    assert Schedules(queue).get("t4").job(0, 0).tags == ("order:4",)


@pytest.mark.parametrize(
    "tags",
    ["billing", [1], [""], ["x" * 257], [f"t{i}" for i in range(MAX_TAGS + 1)], {"a": "b"}],
)
def test_tags_that_are_not_short_strings_are_refused_naming_the_option(tags: object) -> None:
    with pytest.raises(InvalidTaskOption, match="tag"):
        task(tags=tags)(lambda: None)  # type: ignore[call-overload]


def test_a_tags_callable_that_returns_no_strings_fails_its_dispatch(queue: RedisQueue) -> None:
    bad = fixed_tags.using(tags=lambda order_id: order_id)
    with pytest.raises(InvalidTaskOption, match="the tags= callable returned 4"):
        bad.dispatch(4)
    assert ready(queue, "tagged") == []


def test_tags_and_headers_round_trip_and_stay_out_of_a_plain_payload() -> None:
    job = Job(id="ab" * 16, task="t:f", args=(), kwargs={}, queue="q")
    assert msgpack.unpackb(encode(job))[8] == {}
    job.tags, job.headers = ("a", "b"), {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    assert decode(encode(job)) == job


@pytest.mark.parametrize(
    "options",
    [
        {"tags": "abc"},
        {"tags": [b"bytes"]},
        {"tags": ["x"] * (MAX_TAGS + 1)},
        {"headers": ["traceparent"]},
        {"headers": {"k": 1}},
        {"headers": {"": "v"}},
        {"headers": {"k": "v" * 8193}},
        {"headers": {f"k{i}": "v" for i in range(MAX_HEADERS + 1)}},
    ],
)
def test_hostile_tags_or_headers_from_redis_are_an_invalid_payload(options: object) -> None:
    job = Job(id="ab" * 16, task="t:f", args=(), kwargs={}, queue="q")
    forged = encode(job)[:-1] + msgpack.packb(options)  # the options map comes last
    with pytest.raises(InvalidPayload):
        decode(forged)
