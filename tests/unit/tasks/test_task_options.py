"""A task's options are defined once (rqueue/tasks/options.py), and every way a call
travels carries all of them: a dispatch's job, a chain step or batch callback (a step
in a payload) and a schedule's run make the same job. Setting every option here, an
option added to TaskOptions but dropped on one of these ways fails this test."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from rqueue import task
from rqueue.encoding.payload import Job
from rqueue.errors import InvalidTaskOption
from rqueue.middleware import Middleware
from rqueue.schedules.builder import call_options
from rqueue.schedules.record import Schedule
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import Task
from rqueue.tasks.options import JOB_ATTRIBUTES, JOB_META, TaskOptions, declared
from rqueue.timing import Timing
from rqueue.workflows.steps import step_job, step_of

UNTIL = datetime(2031, 1, 1, tzinfo=timezone.utc)


@dataclasses.dataclass
class Stamp(Middleware):
    label: str


@task(
    queue="options",
    tries=3,
    timeout=7.5,
    backoff=[1, 2],
    keep_result=60,
    max_exceptions=2,
    retry_until=UNTIL,
    fail_on_timeout=True,
    encrypted=True,
    tags=lambda x: [f"x:{x}", "every"],
    iterable=True,
    priority=2,
    concurrency=2,
    group=lambda x, cursor=None: f"tenant-{x}",
)
def every_option(x: int, cursor: int | None = None) -> Iterator[int]:
    yield x
    return x


def _with(**options: object) -> Task[..., Any]:
    return every_option.using(middleware=[Stamp("x")], **options)  # type: ignore[arg-type]


def _assert_same(made: Job, carried: Job, skip: tuple[str, ...] = ()) -> None:
    default = Job(id="", task="", args=(), kwargs={}, queue="default")
    for attribute in JOB_ATTRIBUTES:
        # A default value would prove nothing: set the new option in every_option.
        assert getattr(made, attribute) != getattr(default, attribute), attribute
        if attribute not in skip:
            assert getattr(carried, attribute) == getattr(made, attribute), attribute
    for entry in JOB_META:
        assert carried.meta[entry] == made.meta[entry], entry


def test_a_workflow_step_makes_the_job_a_dispatch_makes() -> None:
    keyed = RedisQueue(Config(encryption_keys="WvP0c3q3yPZb4s8oFv5yiwqIhldyB5ZZMnWVqhsD6uc="))
    target = _with(connection=keyed)  # every_option is encrypted: its step needs a key
    made = target.make_job((1,), {})
    carried = step_job(step_of(target.pending(1)), "0" * 32, {}, (), keyed.config.keyring)
    _assert_same(made, carried)


def test_a_schedule_s_run_makes_the_job_a_dispatch_makes() -> None:
    target = _with(retry_until=timedelta(hours=1))
    made = target.make_job((1,), {}, dispatched_at=1000.0)
    schedule = Schedule(
        name="s",
        task=target.name,
        queue=target.options.queue,
        args=(1,),
        timing=Timing(None, 1000, "UTC"),
        **call_options(target, (1,), {}),
    )
    carried = schedule.job(1_000_000, 1_000_000)
    _assert_same(made, carried)


def test_task_and_using_take_exactly_their_arguments() -> None:
    with pytest.raises(TypeError, match=r"task\(\) got an unexpected keyword argument 'nope'"):
        task(nope=1)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"using\(\) got an unexpected keyword argument 'unique'"):
        every_option.using(unique=True)  # type: ignore[call-arg]
    with pytest.raises(InvalidTaskOption, match="tries must be an integer"):
        every_option.using(tries=0)
    assert every_option.using(tries=None).options == every_option.options
    # None is "not set" only where it is the default: elsewhere it is refused.
    assert declared({"tries": None, "keep_result": None}) == TaskOptions()
    with pytest.raises(InvalidTaskOption, match="unique must be callable, got None"):
        task(unique=None)  # type: ignore[call-overload]
    assert TaskOptions.queue == "default"
