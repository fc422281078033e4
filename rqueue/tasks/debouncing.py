"""Dispatching a debounced task's call (``@task(debounce=)``): the last call of a burst runs.

A call is sent with a new id. debounce.lua either starts a burst with it, or, finding
a call pending for the same key, answers with that call's id: the call is then sent
again carrying that id, and replaces the pending call. So every handle of one burst
points at the one call that runs (``result()`` and ``status()`` work for each caller),
and no id is ever given to two calls. The id cannot be swapped inside the script:
with a secret set, the signature covers it (rqueue/store/signing.py). A replacement
costs a second round trip, the first call of a burst one (benchmarks/speed/debounce_cost.py).

Only ``dispatch()`` (and ``dispatch_async()``) debounces: a call given a delay, or put in
``dispatch_many``, a chain, a batch or a schedule, is refused with the reason (see
:func:`refuse_debounced`), since each of those promises that every call it is given
runs, and when.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rqueue.encoding.payload import Job, PayloadTemplate, new_id
from rqueue.errors import DispatchRefused, InvalidTaskOption
from rqueue.tasks.handles import TaskHandle
from rqueue.tasks.options import TaskOptions

if TYPE_CHECKING:
    from rqueue.store.queue import RedisQueue

_SENDS = 16
"""Sends of one call at most: a second one follows when a burst is under way (the
first learns its id), and one more each time that burst ends in between (a rare
race), so running out of them means a livelock, reported rather than spun."""
_MAX_KEY_LENGTH = 1000
"""Characters of a debounce key at most: it becomes part of a Redis key."""


def debounce_key(
    name: str, options: TaskOptions, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str:
    """A call's debounce key, scoped by its task's name: two tasks never share one."""
    by = options.debounce_by
    if by is None:
        return name
    key = by(*args, **kwargs)
    if isinstance(key, bool) or not isinstance(key, (str, int)) or len(str(key)) > _MAX_KEY_LENGTH:
        raise InvalidTaskOption(
            f"debounce_by of task {name} returned {key!r} for this call; it must return a "
            f"str (of at most {_MAX_KEY_LENGTH} characters) or an int, the call's debounce key"
        )
    return f"{name}:{key}"


def push_debounced(
    queue: RedisQueue, job: Job, options: TaskOptions, keep_ms: int, delay: float
) -> TaskHandle[Any]:
    """Send one debounced call; its handle is the call that will run, with what the
    dispatch did (``handle.debounced``)."""
    wait = options.debounce or 0.0
    if delay:
        raise InvalidTaskOption(
            f"task {job.task} is debounced (debounce={wait:g}): its calls are due "
            "debounce seconds after the last one, so later() and a delay are refused; "
            "use dispatch(), or a task without debounce="
        )
    key = debounce_key(job.task, options, job.args, job.kwargs)
    timing = (round(wait * 1000), round((options.debounce_max or 0) * 1000))
    template = PayloadTemplate(job)
    limit = queue.config.max_payload_bytes
    task_id, replacing = job.id, False
    for _ in range(_SENDS):
        payload = template.encode(task_id, job.args, job.kwargs, limit)
        reply = queue.debounce(
            job.queue, payload, replacing, key, timing, keep_ms, options.wait_replicas
        )
        if reply.outcome is not None:
            return TaskHandle(
                reply.id,
                job.task,
                job.queue,
                queue,
                keeps_result=bool(keep_ms),
                debounced=reply.outcome,
            )
        task_id, replacing = (reply.id, True) if reply.id else (new_id(), False)
    raise DispatchRefused(
        f"task {job.task}'s debounced call was sent {_SENDS} times and each time its "
        f"key's burst had changed meanwhile; it was not queued (key {key!r})"
    )


def refuse_debounced(task: str, options: TaskOptions, where: str) -> None:
    """InvalidTaskOption if a debounced task's call is put where every call runs:
    ``where`` names it (``a chain``, ``dispatch_many``...)."""
    if options.debounce is not None:
        raise InvalidTaskOption(
            f"task {task} is debounced (debounce=), so its calls cannot go in {where}: "
            f"{where} runs every call it is given, while debounce drops all but the last of "
            "a burst; dispatch it with .dispatch(), or use a task without debounce="
        )
