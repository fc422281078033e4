"""Job controls: max_exceptions, retry_until, fail_on_timeout, exponential backoff.

Real ``rqueue work`` processes run the tasks of control_tasks.py; every test here
fails without the control it is named for (the task would be retried instead).
"""

from __future__ import annotations

import itertools
import signal
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import control_tasks
import pytest
from support import Workers, strings, wait_for

from rqueue import chain, task
from rqueue.encoding.payload import Job, decode, encode, new_id
from rqueue.errors import InvalidPayload, InvalidTaskOption
from rqueue.failed import FailedTask, FailedTasks
from rqueue.store.queue import RedisQueue

FAST = ("--kill-grace", "0.5", "--block-for", "0.5")


def failed(queue: RedisQueue) -> list[FailedTask]:
    return FailedTasks(queue).list(["default"])


def attempts(queue: RedisQueue, value: str) -> int:
    return int(queue.client.get(f"test:controls:attempts:{value}") or 0)


def attempt_times(queue: RedisQueue, value: str) -> list[float]:
    return [float(t) for t in strings(queue.client, f"test:controls:times:{value}")]


def counter(queue: RedisQueue, task_id: str) -> bytes | None:
    value: bytes | None = queue.client.get(queue.keys("default").exceptions(task_id))
    return value


# -- max_exceptions -----------------------------------------------------------------------


def test_max_exceptions_fails_a_task_that_has_tries_left(
    queue: RedisQueue, workers: Workers
) -> None:
    handle = control_tasks.raises.dispatch("a")  # tries=10, max_exceptions=2
    workers.start(*FAST)
    (record,) = wait_for(lambda: failed(queue), 10, "the task to fail for good")
    assert (record.id, record.exception, record.attempts) == (handle.id, "ValueError", 2)
    assert attempts(queue, "a") == 2
    # Deleted once it failed for good (the call right after the one that failed it).
    wait_for(lambda: counter(queue, handle.id) is None, 5, "the count to be deleted")


def test_a_chain_step_keeps_its_job_controls(queue: RedisQueue, workers: Workers) -> None:
    chain(control_tasks.record.pending("c1"), control_tasks.raises.pending("c2")).dispatch()
    workers.start(*FAST)
    (record,) = wait_for(lambda: failed(queue), 10, "the step to fail for good")
    assert (record.exception, record.attempts) == ("ValueError", 2)  # max_exceptions=2
    assert attempts(queue, "c2") == 2


def test_timeouts_do_not_count_as_exceptions(queue: RedisQueue, workers: Workers) -> None:
    handle = control_tasks.times_out_first.dispatch("t")  # times out, then raises
    workers.start(*FAST)
    (record,) = wait_for(lambda: failed(queue), 15, "the task to fail for good")
    assert (record.exception, record.attempts, record.timed_out) == ("ValueError", 3, False)
    wait_for(lambda: counter(queue, handle.id) is None, 5, "the count to be deleted")


def test_a_success_after_an_exception_leaves_no_count_behind(
    queue: RedisQueue, workers: Workers
) -> None:
    handle = control_tasks.raises_once.dispatch("s")
    workers.start(*FAST)
    wait_for(lambda: strings(queue.client, control_tasks.DONE) == ["s"], 10, "the success")
    wait_for(lambda: counter(queue, handle.id) is None, 5, "the count to be deleted")
    assert attempts(queue, "s") == 2 and not failed(queue)


def test_the_count_is_kept_in_redis_across_workers(queue: RedisQueue, workers: Workers) -> None:
    handle = control_tasks.raises.using(backoff=1.5).dispatch("w")
    first = workers.start(*FAST)
    wait_for(lambda: counter(queue, handle.id) == b"1", 10, "the first exception counted")
    ttl = queue.client.pttl(queue.keys("default").exceptions(handle.id))
    assert 1500 < ttl <= (1.5 + 7 * 24 * 3600) * 1000  # its backoff and a week
    first.signal(signal.SIGTERM)
    assert first.wait(10) == 0
    workers.start(*FAST)  # another worker: it sees the count the first one left
    (record,) = wait_for(lambda: failed(queue), 10, "the task to fail for good")
    assert record.attempts == 2 and attempts(queue, "w") == 2


# -- retry_until ---------------------------------------------------------------------------


def test_a_failed_attempt_is_not_retried_past_retry_until(
    queue: RedisQueue, workers: Workers
) -> None:
    late = control_tasks.fails.using(retry_until=30, backoff=60).dispatch("late")
    in_time = control_tasks.fails.using(retry_until=timedelta(seconds=30)).dispatch("in-time")
    workers.start(*FAST)
    records = wait_for(lambda: len(failed(queue)) == 2 and failed(queue), 15, "both to fail")
    by_id = {r.id: r for r in records}
    assert by_id[late.id].attempts == 1  # its retry would start after retry_until
    assert by_id[in_time.id].attempts == 3  # retried as its tries say
    assert attempts(queue, "late") == 1 and attempts(queue, "in-time") == 3


def test_a_task_picked_up_after_retry_until_fails_without_running(
    queue: RedisQueue, workers: Workers
) -> None:
    control_tasks.record.using(retry_until=0.3).later(1.0, "fixed")
    control_tasks.record_if_in_time.later(1.0, "callable")  # until: 0.2 s after dispatch
    workers.start(*FAST)
    records = wait_for(lambda: len(failed(queue)) == 2 and failed(queue), 10, "both to fail")
    assert {r.exception for r in records} == {"RetryUntilPassed"}
    assert "passed before it started" in records[0].message
    assert attempts(queue, "fixed") == attempts(queue, "callable") == 0
    control_tasks.record_if_in_time.using(retry_until=30).dispatch("now")
    wait_for(lambda: strings(queue.client, control_tasks.DONE) == ["now"], 10, "it to run")


# -- fail_on_timeout -----------------------------------------------------------------------


def test_fail_on_timeout_fails_at_the_first_timeout(queue: RedisQueue, workers: Workers) -> None:
    control_tasks.sleeps.dispatch("once")  # tries=3
    workers.start(*FAST)
    (record,) = wait_for(lambda: failed(queue), 10, "the task to fail")
    assert (record.exception, record.timed_out, record.attempts) == ("TaskTimeout", True, 1)
    assert attempts(queue, "once") == 1


def test_fail_on_timeout_also_when_the_parent_kills_the_task(
    queue: RedisQueue, workers: Workers
) -> None:
    control_tasks.swallows_timeout.dispatch("stuck")  # tries=3, swallows its TaskTimeout
    workers.start(*FAST)
    (record,) = wait_for(lambda: failed(queue), 15, "the parent to fail the task")
    assert (record.exception, record.timed_out, record.attempts) == ("TaskTimeout", True, 1)
    assert "did not stop" in record.message
    assert attempts(queue, "stuck") == 1


# -- exponential backoff -------------------------------------------------------------------


def test_exponential_backoff_retries_within_its_cap(queue: RedisQueue, workers: Workers) -> None:
    control_tasks.backs_off.dispatch("e")  # ("exponential", 0.3, 0.6), tries=4
    workers.start(*FAST)
    (record,) = wait_for(lambda: failed(queue), 15, "the task to fail for good")
    times = attempt_times(queue, "e")
    assert record.attempts == 4 and len(times) == 4
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(gap < 0.6 + 1.0 for gap in gaps), gaps  # the cap, plus a worker's wake-up


@pytest.mark.parametrize(
    ("backoff", "base", "cap"),
    [("exponential", 1.0, 300.0), (("exponential", 0.5, 4), 0.5, 4.0)],
)
def test_exponential_delays_are_jittered_below_the_doubling_curve(
    backoff: Any, base: float, cap: float
) -> None:
    job = control_tasks.record.using(backoff=backoff).make_job(("x",), {})
    assert job.backoff == ("exponential", base, cap)
    for attempt in (1, 2, 3, 5, 40, 1_000_000):
        ceiling = min(cap, base * 2 ** min(attempt - 1, 64))
        delays = [job.backoff_for(attempt) for _ in range(500)]
        assert all(0 <= d <= ceiling for d in delays)
        assert max(delays) > 0.8 * ceiling and len(set(delays)) > 400  # full jitter
    assert decode(encode(job)).backoff == job.backoff


# -- validation ----------------------------------------------------------------------------


BAD_OPTIONS: list[tuple[str, object]] = [
    ("max_exceptions", 0),
    ("max_exceptions", True),
    ("max_exceptions", "3"),
    ("retry_until", "tomorrow"),
    ("retry_until", -5),
    ("retry_until", timedelta(days=-1)),
    ("retry_until", float("nan")),
    ("fail_on_timeout", "yes"),
    ("backoff", "linear"),
    ("backoff", ("exponential", 5, 1)),
    ("backoff", ("exponential", 0, 1)),
    ("backoff", ("exponential", 1)),
]


@pytest.mark.parametrize(("option", "value"), BAD_OPTIONS)
def test_bad_options_are_refused_at_task_and_using_naming_the_option(
    option: str, value: object
) -> None:
    define: Callable[..., Any] = task
    with pytest.raises(InvalidTaskOption, match=option):
        define(**{option: value})(lambda: None)
    with pytest.raises(InvalidTaskOption, match=option):
        control_tasks.record.using(**{option: value})


def test_a_callable_retry_until_is_checked_at_dispatch(queue: RedisQueue) -> None:
    with pytest.raises(InvalidTaskOption, match="retry_until"):
        control_tasks.record.using(retry_until=lambda: "soon").dispatch("x")
    assert not queue.client.keys("*default")


def _controlled() -> Job:
    return Job(
        new_id(),
        "control_tasks:record",
        ("x",),
        {},
        "default",
        max_exceptions=5,
        retry_until=2_000_000_000.5,
        fail_on_timeout=True,
    )


def test_job_controls_round_trip_and_plain_payloads_do_not_carry_them() -> None:
    job = _controlled()
    back = decode(encode(job))
    assert (back.max_exceptions, back.retry_until, back.fail_on_timeout) == (5, 2e9 + 0.5, True)
    plain = encode(Job(new_id(), "control_tasks:record", ("x",), {}, "default"))
    assert b"controls" not in plain and b"max_exceptions" not in plain


@pytest.mark.parametrize(
    ("field", "good", "bad"),
    [
        (b"\xaemax_exceptions", b"\x05", b"\xa15"),  # a string
        (b"\xaemax_exceptions", b"\x05", b"\x00"),  # out of range
        (b"\xabretry_until", b"\xcbA\xdd\xcde\x00 \x00\x00", b"\xa4soon"),  # a string
        (b"\xabretry_until", b"\xcbA\xdd\xcde\x00 \x00\x00", b"\xc3"),  # a bool
        (b"\xaffail_on_timeout", b"\xc3", b"\x01"),  # an int
        # a backoff entry added to the options map (it holds only controls): base not a
        # number, then no cap
        (b"", b"\x81\xa8controls", b"\x82\xa7backoff\x93\xabexponential\xa1x\x01\xa8controls"),
        (b"", b"\x81\xa8controls", b"\x82\xa7backoff\x92\xabexponential\x01\xa8controls"),
        (b"\xa8controls", b"\x83", b"\x93"),  # a list, not a map
    ],
)
def test_hostile_job_control_fields_raise_invalid_payload(
    field: bytes, good: bytes, bad: bytes
) -> None:
    data = encode(_controlled())
    assert field + good in data
    with pytest.raises(InvalidPayload):
        decode(data.replace(field + good, field + bad))
