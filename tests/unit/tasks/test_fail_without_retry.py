"""Failing without a retry: ``raise rqueue.Fail(...)``, ``current_job().fail(...)`` and
``@task(retry_for=, dont_retry_for=)``.

Real ``rqueue work`` processes run the tasks of failfast_tasks.py one at a time, in
threads (``--threads``) and as coroutines (``--slots``, the ``async def`` twins), and
the inline runner runs them under ``sync()`` and ``fake().run_all()``: every one must
fail the same tasks at once, with the same records. Each task has tries to spare, so
without the feature each would be retried until they ran out.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

import failfast_tasks as ff
import pytest
from support import Workers, strings, wait_for

from rqueue import Fail, TaskFailed, TaskTimeout, batch, chain, schedules, task
from rqueue.encoding.payload import Job
from rqueue.errors import InvalidTaskOption, describe
from rqueue.failed import FailedTasks
from rqueue.middleware.base import RetryIn
from rqueue.schedules.api import Schedules
from rqueue.store.queue import RedisQueue
from rqueue.testing import fake, sync
from rqueue.worker import verdicts
from rqueue.worker.attempt import Attempt

FAST = ("--block-for", "0.5", "--kill-grace", "0.5", "--log-level", "warning")

NOT_AN_INT = "(from ValueError: invalid literal for int() with base 10: 'f')"
EXPECTED = {
    "f": ("Fail", f"gave up on f {NOT_AN_INT}", 1),
    "j": ("Fail", "j is closed", 1),
    "p-value": ("ValueError", "value on purpose", 1),  # outside retry_for
    "p-missing": ("FileNotFoundError", "missing on purpose", 1),  # dont_retry_for wins
    "p-os": ("OSError", "os on purpose", 3),  # in retry_for: retried
    "r-value": ("ValueError", "value on purpose", 1),  # in dont_retry_for
    "r-runtime": ("RuntimeError", "runtime on purpose", 3),  # not listed: retried
}
"""Per value: the failure's kind and message, and the attempts it took."""
HEARD = [
    "after_failed:f:Fail",
    "after_failed:r-runtime:RuntimeError",
    "after_failed:r-value:ValueError",
]


def dispatch_all(tasks: dict[str, Any]) -> dict[str, Any]:
    return {
        "f": tasks["fails"].dispatch("f"),
        "j": tasks["fails_by_job"].dispatch("j"),
        **{
            f"p-{kind}": tasks["picky"].dispatch(f"p-{kind}", kind)
            for kind in ("value", "missing", "os")
        },
        **{
            f"r-{kind}": tasks["refuses"].dispatch(f"r-{kind}", kind)
            for kind in ("value", "runtime")
        },
    }


def attempts(queue: RedisQueue) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in queue.client.hgetall(ff.ATTEMPTS).items()}


def failed(queue: RedisQueue) -> dict[str, tuple[str, str, int]]:
    """Per value (the task's first argument), its failed record."""
    found = {}
    for record in FailedTasks(queue).list(["default"]):
        job = record.job()
        assert job is not None
        found[job.args[0]] = (record.exception, record.message, record.attempts)
    return found


MODES = {
    "processes": (ff.SYNC, ("-c", "1")),
    "threads": (ff.SYNC, ("-c", "1", "--threads", "2")),
    "slots": (ff.ASYNC, ("-c", "1", "--slots", "2")),
}


@pytest.mark.parametrize("mode", MODES)
def test_a_worker_fails_them_at_once_in_every_mode(
    queue: RedisQueue, workers: Workers, mode: str
) -> None:
    tasks, options = MODES[mode]
    dispatch_all(tasks)
    workers.start(*options, *FAST)
    wait_for(lambda: len(failed(queue)) == len(EXPECTED), 30, "every task to fail for good")
    assert failed(queue) == EXPECTED
    assert attempts(queue) == {value: tries for value, (_, _, tries) in EXPECTED.items()}
    # The hooks of a failure for good: each runs once its record is in the failed list.
    wait_for(lambda: len(strings(queue.client, ff.HEARD)) >= len(HEARD), 30, "the hooks")
    assert sorted(strings(queue.client, ff.HEARD)) == HEARD


def inline_outcomes(queue: RedisQueue, handles: dict[str, Any]) -> dict[str, Any]:
    """Per value, what its handle says of its failure, and the attempts it took."""
    found = {}
    for value, handle in handles.items():
        assert handle.status() == "failed", value
        with pytest.raises(TaskFailed) as failure:
            handle.result()
        found[value] = (failure.value.exception, failure.value.message, attempts(queue)[value])
    return found


@pytest.mark.parametrize("tasks", [ff.SYNC, ff.ASYNC], ids=["def", "async def"])
def test_sync_fails_them_at_once(queue: RedisQueue, tasks: dict[str, Any]) -> None:
    with sync():
        handles = dispatch_all(tasks)
    assert inline_outcomes(queue, handles) == EXPECTED
    assert sorted(strings(queue.client, ff.HEARD)) == HEARD


def test_a_fake_s_run_all_fails_them_at_once(queue: RedisQueue) -> None:
    with fake() as recorded:
        handles = dispatch_all(ff.SYNC)
        outcomes = recorded.run_all()
    assert [outcome.status for outcome in outcomes] == ["failed"] * len(EXPECTED)
    assert inline_outcomes(queue, handles) == EXPECTED


# -- workflows and schedules: the registered task's options, whatever carried the call


def dispatch_workflows() -> None:
    chain(
        ff.record.pending("c1"), ff.refuses.pending("c2", "value"), ff.record.pending("c3")
    ).catch(ff.caught, "chain").dispatch()
    batch([ff.record.pending("b1"), ff.picky.pending("b2", "value")]).finally_(
        ff.finished, "batch"
    ).dispatch()


WORKFLOWS_HEARD = [
    "after_failed:c2:ValueError",
    "caught:chain:ValueError:value on purpose",
    "finally:batch:2:1:1",
]


def test_a_chain_step_a_batch_member_and_a_schedule_fail_at_once(
    queue: RedisQueue, workers: Workers
) -> None:
    """A chain step (dont_retry_for), a batch member and a schedule's run (retry_for)
    have tries to spare: each fails at its first attempt, and the chain's catch and
    the batch's finally hear of it as of any failure for good."""
    dispatch_workflows()
    first = (Schedules(queue).now_ms() // 1000 + 1) * 1000
    schedules.add(
        "failfast",
        ff.picky,
        args=("s", "value"),
        every=1,
        start=datetime.fromtimestamp(first / 1000, timezone.utc),
        end=datetime.fromtimestamp((first + 500) / 1000, timezone.utc),  # one run
    )
    workers.start("-c", "1", *FAST)
    wait_for(lambda: len(strings(queue.client, ff.HEARD)) == 3, 30, "the catch and the finally")
    wait_for(lambda: "s" in failed(queue), 30, "the schedule's run to fail")
    assert sorted(strings(queue.client, ff.HEARD)) == WORKFLOWS_HEARD
    assert attempts(queue) == {"c1": 1, "c2": 1, "b1": 1, "b2": 1, "s": 1}  # c3 never ran
    assert {value: tries for value, (_, _, tries) in failed(queue).items()} == {
        "c2": 1,
        "b2": 1,
        "s": 1,
    }


def test_sync_fails_a_chain_step_and_a_batch_member_at_once(queue: RedisQueue) -> None:
    with sync():
        dispatch_workflows()
    assert sorted(strings(queue.client, ff.HEARD)) == WORKFLOWS_HEARD
    assert attempts(queue) == {"c1": 1, "c2": 1, "b1": 1, "b2": 1}


def test_a_chain_s_catch_hears_fail_s_reason(queue: RedisQueue) -> None:
    with sync():
        chain(ff.record.pending("c1"), ff.fails.pending("f")).catch(ff.caught, "f").dispatch()
    assert strings(queue.client, ff.HEARD) == [
        "after_failed:f:Fail",
        f"caught:f:Fail:gave up on f {NOT_AN_INT}",
    ]
    assert attempts(queue) == {"c1": 1, "f": 1}


# -- the rule's edges --------------------------------------------------------------


def verdict_of(target: Any, exc: BaseException) -> verdicts.Verdict:
    job = Job(id="0" * 32, task=target.name, args=(), kwargs={}, queue="default", attempts=1)
    attempt = Attempt(0, "default", b"", job, math.inf, 3, ())
    attempt.task, attempt.stack = target, ()
    return verdicts.of_raised(attempt, exc)


def test_a_middleware_s_retry_in_does_not_retry_what_the_task_does_not() -> None:
    """``RetryIn`` (ThrottlesExceptions) is asked about the task's own error: one in
    ``dont_retry_for`` fails at once; a timeout is left to ``fail_on_timeout``."""
    try:
        raise RetryIn(5) from ValueError("bad")
    except RetryIn as asked:
        assert verdict_of(ff.refuses, asked) == verdicts.Failed(asked.__cause__, final=True)
    try:
        raise RetryIn(5) from RuntimeError("flaky")
    except RetryIn as asked:
        assert verdict_of(ff.refuses, asked) == verdicts.Failed(asked.__cause__, 5)
    timeout = TaskTimeout()
    assert verdict_of(ff.picky, timeout) == verdicts.Failed(timeout)  # outside retry_for
    fail = Fail("no")
    assert verdict_of(ff.record, fail) == verdicts.Failed(fail, final=True)  # no options


def test_a_failure_names_the_exception_it_was_raised_from() -> None:
    assert describe(Fail("closed")) == ("Fail", "closed")
    assert describe(Fail()) == ("Fail", "the task failed itself, without a retry")
    try:
        try:
            raise KeyError("u1")
        except KeyError as missing:
            raise Fail("no such user") from missing
    except Fail as failure:
        assert describe(failure) == ("Fail", "no such user (from KeyError: 'u1')")
    try:  # merely raised while handling another: not its cause
        try:
            raise KeyError("u1")
        except KeyError:
            raise Fail("no such user") from None
    except Fail as failure:
        assert describe(failure) == ("Fail", "no such user")


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        ({"retry_for": "OSError"}, "retry_for takes exception classes, got 'OSError'"),
        ({"retry_for": [OSError, 3]}, "retry_for takes exception classes, got 3"),
        ({"dont_retry_for": int}, "dont_retry_for takes exception classes: <class 'int'>"),
        ({"retry_for": ()}, "would retry nothing: give tries=1"),
        ({"retry_for": (Fail,)}, "Fail is never retried"),
        ({"dont_retry_for": (TaskTimeout,)}, "unless the task has fail_on_timeout=True"),
    ],
)
def test_options_that_cannot_work_are_refused_where_written(
    options: dict[str, Any], refusal: str
) -> None:
    with pytest.raises(InvalidTaskOption, match=refusal.replace("(", r"\(").replace(")", r"\)")):
        task(**options)


def test_the_options_are_declared_with_task_only() -> None:
    """They name classes, which never travel in a payload: ``using()`` refuses them."""
    assert ff.picky.options.retry_for == (OSError,)
    assert ff.refuses.options.dont_retry_for == (ValueError,)  # one class alone: a tuple
    with pytest.raises(TypeError, match="unexpected keyword argument 'retry_for'"):
        ff.picky.using(retry_for=(ValueError,))  # type: ignore[call-arg]
