"""Tasks that wait for others: ``task.using(after=[h1, h2]).dispatch(...)``.

The call waits in its queue's ``waiting`` hash (not the ready list) with a state of
one mark per task it waits for (``-`` until that one finished, then ``s``, ``f`` or
``c``), and registers with each of them (:mod:`rqueue.store.dependencies`). Each
outcome is then applied here, once: at dispatch for a task that had finished
already, otherwise from the notice its outcome left (the worker parent drains them,
``workflows/dependencies.py``). The last success pushes the call to its ready list;
a failure or a cancel fails it at once, unrun, with :class:`~rqueue.errors.DependencyFailed`
naming the task it waited for, unless it was dispatched with ``allow_failures=True``.

An outcome is applied by compare and set on the state read, so two workers
applying the same notice, or a notice applied again after a crash, change it once.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, NamedTuple, Protocol

from rqueue.encoding.codec import pack
from rqueue.encoding.payload import KEEP, Job, decode, encode
from rqueue.errors import DependencyFailed, InvalidPayload, InvalidTaskOption
from rqueue.failed import make_record
from rqueue.store import dependencies as store
from rqueue.store.dependencies import Registration, Resolution
from rqueue.store.queue import RedisQueue
from rqueue.store.results import decode_result
from rqueue.tasks.handles import TaskHandle
from rqueue.tasks.options import TaskOptions

log = logging.getLogger("rqueue.dependencies")

_MARKS = {"succeeded": "s", "failed": "f", "cancelled": "c"}
_ATTEMPTS = 20
"""Compare-and-set rounds of a failure before it is given up (logged): only another
process applying outcomes to the same task at that very moment makes one fail."""


class Waiter(Protocol):
    """What a task's dispatch gives :func:`push_after` (a ``Task``, without importing
    it: ``tasks/definition.py`` imports this module)."""

    name: str
    options: TaskOptions

    @property
    def keep_ms(self) -> int: ...


class Outcome(NamedTuple):
    """How a task that others wait for finished, from its record."""

    id: str
    queue: str
    state: str
    """``succeeded``, ``failed``, ``cancelled``, or ``unreadable``."""
    task: str = ""
    error: str = ""
    """``<exception>: <message>`` of a failure, or why the record is unreadable."""

    @property
    def mark(self) -> str:
        return _MARKS.get(self.state, "f")


def outcome_of(queue: str, task_id: str, raw: bytes) -> Outcome:
    """The outcome in a task's final record (checked: Redis's data is not trusted)."""
    try:
        record = decode_result(raw, task_id)
    except InvalidPayload as exc:
        return Outcome(task_id, queue, "unreadable", error=str(exc))
    state = record["state"] if record["state"] in _MARKS else "unreadable"
    error = f"{record.get('exception', '')}: {record.get('message', '')}"
    return Outcome(task_id, queue, state, str(record.get("task", "")), error)


def push_after(task: Waiter, queue: RedisQueue, job: Job, delay: float) -> TaskHandle[Any]:
    """Dispatch ``job`` to wait for ``task.options.after`` (``Task._deliver``)."""
    options = task.options
    _check(task, delay)
    payload = encode(job, queue.config.max_payload_bytes, queue.config.keyring)
    state = ("a" if options.allow_failures else "n") + "-" * len(options.after)
    store.wait(queue, job.queue, job.id, payload, state, task.keep_ms)
    registrations = [
        Registration(h.queue, h.id, store.member(i, job.id, job.queue))
        for i, h in enumerate(options.after)
    ]
    replies = store.depend(queue, registrations)
    missing = [h for h, reply in zip(options.after, replies, strict=True) if int(reply[0]) == 0]
    if missing:
        read = store.read_waiting(queue, job.queue, job.id)[1] or b""
        store.settle(queue, job.queue, job.id, read, Resolution("drop"))
        raise InvalidTaskOption(
            f"{task.name} cannot wait for task {missing[0].id} on queue {missing[0].queue!r}: "
            "it has no record there (never dispatched there, its record expired, or its "
            "task keeps no result: give it keep_result=); nothing was dispatched"
        )
    for index, (handle, reply) in enumerate(zip(options.after, replies, strict=True)):
        if int(reply[0]) == 2:
            apply(queue, job.queue, job.id, index, outcome_of(handle.queue, handle.id, reply[1]))
    return TaskHandle(job.id, job.task, job.queue, queue, keeps_result=bool(task.keep_ms))


def _check(task: Waiter, delay: float) -> None:
    """Refuse what a waiting call cannot do, naming the task, before anything is sent."""
    for handle in task.options.after:
        if handle.keeps_result is False:
            raise InvalidTaskOption(
                f"{task.name} cannot wait for task {handle.id} ({handle.task}): that task "
                "keeps no result, so its outcome could not be read once it finished; "
                "dispatch it with keep_result="
            )
    options = task.options
    if delay > 0 or options.unique is not False or options.debounce is not None:
        raise InvalidTaskOption(
            f"{task.name}: after= is for dispatch() of a task without unique= or debounce=; "
            "a delayed (later()), unique or debounced call cannot wait for others"
        )


def apply(queue: RedisQueue, name: str, task_id: str, index: int, outcome: Outcome) -> None:
    """Apply the outcome of the ``index``-th task that ``task_id`` (on queue ``name``)
    waits for, once: a mark already there changes nothing. One script call, and one
    more to fail it (its failure is built here, from the payload the first returned)."""
    reply = store.mark(queue, name, task_id, index, outcome.mark)
    for _ in range(_ATTEMPTS):
        if not isinstance(reply, list):
            return
        payload, read = (bytes(part) for part in reply)
        state = read.decode("ascii", "replace")
        if re.fullmatch(r"[an][-sfc]+", state):
            how = _failure(name, payload, DependencyFailed.__name__, reason(outcome))
        else:
            why = f"its waiting state {state!r} is unreadable"
            how = _failure(name, payload, InvalidPayload.__name__, why)
        if store.settle(queue, name, task_id, read, how) != -1:
            return
        reply = store.mark(queue, name, task_id, index, outcome.mark)
    log.warning(
        "task %s: the outcome of %s not applied: its state kept changing", task_id, outcome.id
    )


def reason(outcome: Outcome) -> str:
    """Why a task waiting for the one of ``outcome`` fails (DependencyFailed's message)."""
    what = f"it waited for task {outcome.id}" + (f" ({outcome.task})" if outcome.task else "")
    what += f" on queue {outcome.queue!r}"
    if outcome.state == "cancelled":
        return f"{what}, which was cancelled"
    if outcome.state == "unreadable":
        return f"{what}, whose outcome cannot be read: {outcome.error}"
    return f"{what}, which failed: {outcome.error}"


def _failure(name: str, payload: bytes, exception: str, message: str) -> Resolution:
    """Fail the waiting task, unrun: its failed record, and its kept result if any."""
    try:
        job: Job | None = decode(payload)
    except InvalidPayload as exc:
        job, message = None, f"{message}; and its payload: {exc}"
    record = make_record(name, payload, exception, message, job=job)
    keep = job.meta.get(KEEP) if job is not None else None
    if job is None or type(keep) is not int or keep <= 0:
        return Resolution("fail", failed_record=record)
    now = time.time()
    result = {
        "state": "failed",
        "task": job.task,
        "queue": job.queue,
        "attempts": job.attempts,
        "started_at": now,
        "finished_at": now,
        "exception": exception,
        "message": message,
        "traceback": "",
    }
    return Resolution("fail", failed_record=record, result_record=pack(result), keep_ms=keep)
