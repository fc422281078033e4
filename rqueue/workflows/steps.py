"""A workflow step: a call that travels inside another task's payload until its turn.

A chain's later steps and a batch's callbacks are dispatched by a worker, when a task
completes, not by the process that built the workflow. So each is written down as a
plain msgpack map (a *step*) inside the payload that carries it, with the options of
the ``pending()`` call it came from, and turned into a payload of its own when its
turn comes, with an id derived from the completing task: the same completion always
makes the same id, and pushing it is idempotent (push_once.lua), so a task that runs
twice dispatches what follows it once.

Steps come back from Redis, so :func:`checked_step` checks every field before a
payload is built from one; a payload's signature (when signing is on) covers them,
since they are part of the payload.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any

from rqueue.errors import InvalidPayload
from rqueue.payload import (
    KEEP,
    MAX_DELAY_SECONDS,
    Job,
    checked_backoff,
    checked_controls,
    checked_keep,
    checked_meta,
    checked_timeout,
    checked_tries,
)
from rqueue.store.keys import validate_queue_name
from rqueue.task import UNIQUE, PendingDispatch, Task
from rqueue.task_names import check_name

Step = dict[str, Any]

ONCE_MS = 7 * 24 * 3600 * 1000
"""How long a derived id's push marker lasts: a completing task that runs again (its
worker died before the ack) does so within its reservation and retries, far sooner."""


_OWN_META = (KEEP, UNIQUE)
"""Meta entries a step's job gets afresh when its turn comes, not from the step."""


def step_of(call: PendingDispatch) -> Step:
    """The step for ``call``: its task, arguments and the options its task carries,
    job controls and ``using(middleware=)`` included (as its job would have them now:
    a ``retry_until`` in seconds counts from the workflow's dispatch)."""
    task = call.task
    task.check_dispatchable()
    options = task.options
    job = task.make_job(call.args, call.kwargs)
    step = {
        "task": task.name,
        "args": list(call.args),
        "kwargs": dict(call.kwargs),
        "queue": options.queue,
        "tries": options.tries,
        "timeout": options.timeout,
        "backoff": list(options.backoff),
        "delay": call.delay,
        "keep": task.keep_ms,
    }
    if job.max_exceptions is not None or job.retry_until is not None or job.fail_on_timeout:
        step["controls"] = {
            "max_exceptions": job.max_exceptions,
            "retry_until": job.retry_until,
            "fail_on_timeout": job.fail_on_timeout,
        }
    meta = {key: value for key, value in job.meta.items() if key not in _OWN_META}
    if meta:
        step["meta"] = meta
    return step


def callback_call(
    callback: Task[Any, Any] | PendingDispatch, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> PendingDispatch:
    """A callback's call: a task with the arguments it gets after the one the worker
    gives it first (the batch, the failure), or a ``pending()`` call as it is.

    ``then(notify, "ops")`` rather than ``then(notify.pending("ops"))``: ``pending``
    is typed with the task's whole signature, first argument included.
    """
    if isinstance(callback, PendingDispatch):
        if args or kwargs:
            raise TypeError("pass arguments either to pending() or here, not to both")
        return callback
    return PendingDispatch(callback, args, kwargs)


def checked_step(step: object) -> Step:
    """``step`` if it is a well-formed step; InvalidPayload naming what is wrong."""
    try:
        if type(step) is not dict:
            raise TypeError("a step is a map")
        check_name(step["task"])
        validate_queue_name(step["queue"])
        if type(step["args"]) is not list or type(step["kwargs"]) is not dict:
            raise TypeError("args must be a list and kwargs a map")
        if step.get("tries") is not None:
            checked_tries(step["tries"])
        if step.get("timeout") is not None:
            checked_timeout(step["timeout"])
        checked_backoff(step.get("backoff") or [])
        delay = step.get("delay", 0)
        if type(delay) not in (int, float) or not 0 <= delay <= MAX_DELAY_SECONDS:
            raise ValueError(f"delay must be 0 to {MAX_DELAY_SECONDS} seconds, got {delay!r}")
        if step.get("keep"):
            checked_keep(step["keep"] / 1000)
        if "controls" in step:
            checked_controls(step["controls"])
        if "meta" in step:
            checked_meta(step["meta"])
    except Exception as exc:
        raise InvalidPayload(f"a workflow step is malformed: {exc!r}") from None
    return step


def derived_id(parent_id: str, what: str) -> str:
    """The id of what ``parent_id``'s completion dispatches: the same every time."""
    return hashlib.sha256(f"{parent_id}:{what}".encode()).hexdigest()[:32]


def step_job(
    step: Step, task_id: str, meta: dict[str, Any], first_args: tuple[Any, ...] = ()
) -> Job:
    """The job a step becomes, with ``first_args`` before its own (a piped value)."""
    if step.get("keep"):
        meta = {**meta, KEEP: step["keep"]}
    if step.get("meta"):
        meta = {**step["meta"], **meta}
    job = Job(
        id=task_id,
        task=step["task"],
        args=(*first_args, *step["args"]),
        kwargs=step["kwargs"],
        queue=step["queue"],
        tries=step.get("tries"),
        timeout=step.get("timeout"),
        backoff=tuple(step.get("backoff") or ()),
        dispatched_at=time.time(),
        meta=meta,
    )
    if "controls" in step:
        job.max_exceptions, job.retry_until, job.fail_on_timeout = checked_controls(
            step["controls"]
        )
    return job


def delay_ms(step: Step) -> int:
    delay = float(step.get("delay") or 0)
    return 0 if not math.isfinite(delay) else round(delay * 1000)
