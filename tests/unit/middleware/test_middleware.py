"""Job middleware: the stack, and the built-ins RateLimited, WithoutOverlapping,
ThrottlesExceptions and Skip, with real ``rqueue work`` processes on a real Redis.

Each test fails without the behaviour it is named for: the tasks of
middleware_tasks.py record every run, so a run that should not have happened, or an
attempt that should not have been used, shows.
"""

from __future__ import annotations

import itertools
from datetime import timedelta

import middleware_tasks as mt
import pytest
from support import Workers, failures, push_job, ready, strings, wait_for

from rqueue import chain
from rqueue.encoding.payload import decode
from rqueue.errors import InvalidTaskOption
from rqueue.failed import FailedTasks
from rqueue.middleware import RateLimited, Skip, ThrottlesExceptions, WithoutOverlapping
from rqueue.middleware.base import MIDDLEWARE
from rqueue.schedules import Schedules
from rqueue.store import guards
from rqueue.store.header import header
from rqueue.store.queue import RedisQueue
from rqueue.tasks.current import Runner, set_runner
from rqueue.tasks.handles import Dispatched

FAST = ("--kill-grace", "0.5", "--block-for", "0.5")


def idle(queue: RedisQueue) -> bool:
    """Nothing ready, delayed or reserved."""
    keys = queue.keys("default")
    pipe = queue.client.pipeline()
    pipe.llen(keys.ready).zcard(keys.delayed).zcard(keys.reserved)
    return sum(pipe.execute()) == 0


# -- RateLimited ----------------------------------------------------------------------


def test_rate_limited_starts_at_most_the_limit_and_uses_no_attempt(
    queue: RedisQueue, workers: Workers
) -> None:
    count, limit = 200, 50  # the task allows 50 a second, evenly spaced
    mt.limited.dispatch_many([(str(i),) for i in range(count)])
    workers.start("--concurrency", "2", "--log-level", "warning", *FAST)
    wait_for(lambda: len(queue.client.lrange(mt.STARTS, 0, -1)) == count, 30, "every run")
    runs = [line.split() for line in strings(queue.client, mt.STARTS)]
    assert sorted(int(value) for value, _, _ in runs) == list(range(count))  # each ran once
    assert {attempts for _, attempts, _ in runs} == {"1"}  # waiting used no attempt
    starts = sorted(float(at) for _, _, at in runs)
    rate = (count - 1) / (starts[-1] - starts[0])
    assert abs(rate - limit) / limit < 0.05, f"observed {rate:.1f}/s against a limit of 50/s"
    assert not failures(queue)


@pytest.mark.topology
def test_the_limiter_hands_out_evenly_spaced_cells(queue: RedisQueue) -> None:
    """What bounds every window: 100 calls at once get cells ``per / limit`` apart, each
    its own (10 s apart here, so no call can be slow enough to find its cell passed)."""
    waits = [guards.take_cell(queue, "default", "k", f"id-{i}", 1, 10.0) for i in range(100)]
    assert waits[0] == 0 and all(wait > 0 for wait in waits[1:])
    cells = queue.keys("default").middleware("rate-cells", "k")
    held = queue.client.zrange(cells, 0, -1, withscores=True)
    assert [member for member, _ in held] == [f"id-{i}".encode() for i in range(1, 100)]
    times = [score for _, score in held]  # each cell's time in ms, as the script set it
    assert all(abs(b - a - 10_000.0) < 1e-3 for a, b in itertools.pairwise(times)), times
    # A call that comes back early for its cell waits the rest, and takes no other.
    assert 0 < guards.take_cell(queue, "default", "k", "id-99", 1, 10.0) <= waits[-1]
    assert queue.client.zcard(cells) == 99


def test_dont_release_drops_a_limited_call(queue: RedisQueue, workers: Workers) -> None:
    for value in ("a", "b", "c"):
        mt.limited_dropping.dispatch(value)
    workers.start(*FAST)
    wait_for(lambda: idle(queue) and strings(queue.client, mt.RUNS) == ["a"], 10, "drops")
    assert not failures(queue)


def test_by_gives_each_key_its_own_limiter(queue: RedisQueue, workers: Workers) -> None:
    for user, value in (("ann", "1"), ("bob", "1"), ("ann", "2")):
        mt.limited_per_user.dispatch(user, value)
    workers.start(*FAST)
    wait_for(lambda: len(strings(queue.client, mt.RUNS)) == 2, 10, "one run per user")
    assert sorted(strings(queue.client, mt.RUNS)) == ["ann:1", "bob:1"]
    # ann's second call waits for its cell, a minute away, in the delayed set.
    (waiting,) = wait_for(lambda: queue.client.zrange(queue.keys("default").delayed, 0, -1), 5)
    assert header(waiting)[1] == 0  # its attempt was given back


# -- WithoutOverlapping -----------------------------------------------------------------


def test_runs_with_one_key_never_overlap(queue: RedisQueue, workers: Workers) -> None:
    for value in ("a", "b", "c"):
        mt.exclusive.dispatch(value, 0.3)
    workers.start("--concurrency", "3", *FAST)
    wait_for(lambda: len(strings(queue.client, mt.RUNS)) == 6, 20, "three runs")
    runs = strings(queue.client, mt.RUNS)
    for start, end in zip(runs[::2], runs[1::2], strict=True):  # each start is followed
        value, attempt = start.split()[1:]  # by its own end: nothing in between
        assert (start.split()[0], end) == ("start", f"end {value}")
        assert attempt == "1"
    lock = queue.keys("default").middleware("lock", f"task:{mt.exclusive.name}:report")
    wait_for(lambda: not queue.client.exists(lock), 5, "the last run to free the lock")


def test_a_lock_whose_holder_was_killed_expires(queue: RedisQueue, workers: Workers) -> None:
    handle = mt.exclusive_dies_first.dispatch("k")
    workers.start(*FAST)
    # Attempt 1 SIGKILLs its child holding the lock; attempt 2 waits it out (2 s), runs.
    wait_for(lambda: strings(queue.client, mt.RUNS) == ["k 1", "k 2"], 20, "the retry to run")
    wait_for(lambda: idle(queue), 10, "the retry to finish")
    lock = queue.keys("default").middleware("lock", f"task:{mt.exclusive_dies_first.name}:dies")
    assert not queue.client.exists(lock), "the lock is never left held"
    assert not failures(queue), handle


@pytest.mark.topology
def test_only_the_holder_frees_a_lock(queue: RedisQueue) -> None:
    assert guards.lock(queue, "default", "k", "holder:1", 10) == 0
    assert guards.lock(queue, "default", "k", "other:1", 10) > 0
    assert not guards.unlock(queue, "default", "k", "other:1")
    assert guards.lock(queue, "default", "k", "other:1", 10) > 0  # still held
    assert guards.unlock(queue, "default", "k", "holder:1")
    assert guards.lock(queue, "default", "k", "other:1", 10) == 0


# -- ThrottlesExceptions ----------------------------------------------------------------


@pytest.mark.topology
def test_the_circuit_breaker_opens_half_opens_and_closes(queue: RedisQueue) -> None:
    report = (queue, "default", "by:api")  # the breaker of ThrottlesExceptions(by="api")

    def state() -> str:
        return ThrottlesExceptions(by="api").state(queue, "default", "api")

    for token in ("a:1", "b:1"):
        assert guards.breaker(*report, "check", token, 2, 0.5, 5) == 0
        guards.breaker(*report, "failure", token, 2, 0.5, 5)
    assert state() == "open"
    assert 0 < guards.breaker(*report, "check", "c:1", 2, 0.5, 5) <= 0.5
    wait_for(lambda: state() == "half-open", 5, "the breaker to half-open")
    assert guards.breaker(*report, "check", "trial:1", 2, 0.5, 5) == 0  # the one trial
    assert guards.breaker(*report, "check", "d:1", 2, 0.5, 5) > 0  # others wait for it
    guards.breaker(*report, "failure", "trial:1", 2, 0.5, 5)
    assert state() == "open"  # the trial failed: open again
    wait_for(lambda: state() == "half-open", 5, "the breaker to half-open again")
    assert guards.breaker(*report, "check", "trial:2", 2, 0.5, 5) == 0
    guards.breaker(*report, "success", "trial:2", 2, 0.5, 5)
    assert state() == "closed"


def test_an_open_breaker_holds_calls_back_without_using_attempts(
    queue: RedisQueue, workers: Workers
) -> None:
    queue.client.set(mt.DOWN, 1)
    mt.flaky.dispatch("a")
    workers.start(*FAST)
    breaker = ThrottlesExceptions()
    wait_for(lambda: breaker.state(queue, "default", mt.flaky.name) == "open", 10, "opening")
    held = mt.flaky.dispatch("b")
    delayed = queue.keys("default").delayed

    def held_back() -> bool:
        entries = [header(p) for p in queue.client.zrange(delayed, 0, -1)]
        return (held.id, 0, 0) in entries  # back in the delayed set, attempt given back

    wait_for(held_back, 10, "the second call to be held back, unrun")
    assert not [r for r in strings(queue.client, mt.RUNS) if r.startswith("b ")]
    queue.client.delete(mt.DOWN)
    wait_for(lambda: idle(queue), 20, "both calls to succeed once the service is back")
    runs = strings(queue.client, mt.RUNS)
    assert runs[:2] == ["a 1", "a 2"] and runs[-1].startswith(("a ", "b "))
    assert [r for r in runs if r.startswith("b ")] in (["b 1"], ["b 2"])
    assert breaker.state(queue, "default", mt.flaky.name) == "closed"
    assert not failures(queue)


# -- Skip, the stack, dispatch-time middleware -------------------------------------------


def test_skip_does_not_run_the_call(queue: RedisQueue, workers: Workers) -> None:
    for value in ("run-1", "skip-1", "run-2"):
        mt.skippable.dispatch(value)
    mt.skippable.using(middleware=[Skip(unless=False)]).dispatch("run-3")
    workers.start(*FAST)
    wait_for(lambda: idle(queue), 10, "every call to be done")
    assert strings(queue.client, mt.RUNS) == ["run-1", "run-2"]
    assert not failures(queue)


DECLARED_AROUND_GIVEN = ["enter declared", "enter given", "run x", "leave given", "leave declared"]
"""What ``mt.recorded("x")`` notes, run with ``Recording("given")`` given by ``using()``."""


def test_declared_middleware_wrap_given_ones_and_act_at_dispatch(
    queue: RedisQueue, workers: Workers
) -> None:
    handle = mt.recorded.using(middleware=[mt.Recording("given")], keep_result=60).dispatch("x")
    workers.start(*FAST)
    assert handle.result(10) == ["declared", "given"]  # both before_dispatch ran, in order
    assert strings(queue.client, mt.ORDER) == DECLARED_AROUND_GIVEN


def test_a_schedule_s_runs_carry_its_task_s_using_options_and_middleware(
    queue: RedisQueue, workers: Workers
) -> None:
    """A schedule kept tries, timeout and backoff only: keep_result, max_exceptions,
    fail_on_timeout, retry_until and using(middleware=) were dropped without a word."""
    target = mt.recorded.using(
        middleware=[mt.Recording("given")],
        keep_result=60,
        max_exceptions=2,
        fail_on_timeout=True,
        retry_until=timedelta(hours=1),
    )
    Schedules(queue).add("carried", target, every=3600, args=["x"])
    task_id = Schedules(queue).run_now("carried")
    (job,) = [decode(payload) for payload in ready(queue)]
    assert (job.max_exceptions, job.fail_on_timeout) == (2, True)
    assert job.retry_until == pytest.approx(job.dispatched_at + 3600)
    workers.start(*FAST)
    # Kept, and both middleware ran (before_dispatch does not: the worker fires it).
    assert Dispatched(task_id, mt.recorded.name, "default", queue).result(10) == []
    assert strings(queue.client, mt.ORDER) == DECLARED_AROUND_GIVEN


def test_a_payload_naming_unknown_middleware_fails_alone(
    queue: RedisQueue, workers: Workers
) -> None:
    bad = push_job(queue, mt.skippable.name, "x", meta={MIDDLEWARE: [["os:system", {}]]})
    mt.skippable.dispatch("after")
    workers.start(*FAST)
    wait_for(lambda: strings(queue.client, mt.RUNS) == ["after"], 10, "the next task to run")
    (record,) = wait_for(lambda: FailedTasks(queue).list(["default"]), 10)
    assert (record.id, record.exception) == (bad.id, "InvalidPayload")
    assert "os:system" in record.message


@pytest.mark.parametrize(
    "middleware",
    [Skip(when=lambda: True), RateLimited("x", 1, 1, by=len), object()],
)
def test_middleware_that_cannot_travel_is_refused_at_using(middleware: object) -> None:
    with pytest.raises(InvalidTaskOption, match="middleware"):
        mt.skippable.using(middleware=[middleware])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("build", "option"),
    [
        (lambda: RateLimited("x", 0, 1), "limit"),
        (lambda: RateLimited("x", 1, float("nan")), "per"),
        (lambda: RateLimited("", 1, 1), "name"),
        (lambda: WithoutOverlapping("k", release_after=-1), "release_after"),
        (lambda: WithoutOverlapping("k", expire_after=float("inf")), "expire_after"),
        (lambda: ThrottlesExceptions(max_exceptions=0), "max_exceptions"),
        (lambda: Skip(when="yes"), "when"),
        (lambda: RateLimited("x", 1, timedelta(seconds=-1)), "per"),
    ],
)
def test_settings_out_of_range_name_the_option(build: object, option: str) -> None:
    with pytest.raises(ValueError, match=option):
        build()  # type: ignore[operator]


def test_per_may_be_a_timedelta() -> None:
    assert RateLimited("x", 10, timedelta(minutes=1)).per == 60.0


def test_middleware_state_is_in_the_queue_slot(queue: RedisQueue) -> None:
    set_runner(Runner(queue, 60.0, 5.0))
    try:
        keys = queue.keys("emails")
        assert keys.middleware("lock", "x").startswith(keys.ready + ":")
    finally:
        set_runner(None)


def test_a_chain_step_keeps_its_own_middleware(queue: RedisQueue, workers: Workers) -> None:
    skipped = mt.skippable.using(middleware=[Skip(when=True)])
    handles = chain(
        mt.skippable.pending("first"), skipped.pending("second"), mt.skippable.pending("third")
    ).dispatch()
    workers.start(*FAST)
    wait_for(lambda: strings(queue.client, mt.RUNS) == ["first", "third"], 10, "the chain")
    assert len(handles.steps) == 3 and not failures(queue)


# -- keys given by by= and default keys never meet (issue #26, item 9) -------------------


def test_a_by_key_naming_a_task_never_opens_that_task_s_breaker(
    queue: RedisQueue, workers: Workers
) -> None:
    mt.impostor.dispatch("x")
    workers.start(*FAST)
    wait_for(lambda: failures(queue), 10, "the impostor to fail and open its breaker")
    given = ThrottlesExceptions(by=mt.guarded.name)
    assert given.state(queue, "default", mt.guarded.name) == "open"
    assert ThrottlesExceptions().state(queue, "default", mt.guarded.name) == "closed"
    mt.guarded.dispatch("y")
    wait_for(lambda: strings(queue.client, mt.RUNS) == ["guarded y"], 10, "guarded to run")


def test_no_key_given_equals_a_default_key_of_any_middleware(queue: RedisQueue) -> None:
    """Each pair once shared its state: a key given (``by=``, a shared lock, a limiter's
    name with a colon) spelled like a default one (a task's name, a per-task lock)."""
    job = mt.guarded.make_job(("a",), {})
    other = mt.limited.make_job(("b",), {})
    set_runner(Runner(queue, 60.0, 5.0))
    try:

        def fails() -> None:
            raise RuntimeError("down")

        with pytest.raises(RuntimeError):
            ThrottlesExceptions(max_exceptions=1, decay=60, by=job.task)(other, fails)
        assert ThrottlesExceptions(max_exceptions=1, decay=60)(job, lambda: "ran") == "ran"

        assert RateLimited("api:x", 1, 60)(job, lambda: "first") == "first"
        assert RateLimited("api", 1, 60, by="x:")(job, lambda: "ran") == "ran"
        assert RateLimited("api", 1, 60, by="x:all")(job, lambda: "ran") == "ran"

        def overlapping() -> object:
            shared = WithoutOverlapping(f"{job.task}:k", shared=True)
            return shared(other, lambda: "ran")

        assert WithoutOverlapping("k")(job, overlapping) == "ran"
    finally:
        set_runner(None)
