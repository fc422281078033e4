"""Dispatching a debounced task's call (``@task(debounce=)``): the last call of a burst runs.

A call carries the id of the call it means to replace, or a new one. debounce.lua
replaces the pending call of its key only with a payload carrying that call's id, and
starts a burst only with a new id; otherwise it answers with the id to carry, and the
call is sent again with it. So every handle of one burst points at the one call that
runs (``result()`` and ``status()`` work for each caller), and no id is ever given to
two calls. The id cannot be swapped inside the script: with a secret set, the
signature covers it (rqueue/store/signing.py).

Which id to carry first is a guess: the id this process last got for the key (each
task keeps its :class:`Hints`). A process dispatching a burst guesses right from its
second call on, so a call costs one round trip; a wrong guess (another process began
the burst, or it ended) costs a second (benchmarks/speed/debounce_cost.py).

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
_MAX_HINTS = 4096
"""Keys a task remembers the last id of, at most: forgotten all at once beyond."""


class Hints:
    """The id each debounce key (per queue) last got in this process: only a guess,
    which the script checks. Shared by threads: a dict's get and set are atomic."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], str] = {}

    def get(self, queue: str, key: str) -> str | None:
        return self._ids.get((queue, key))

    def remember(self, queue: str, key: str, task_id: str) -> None:
        if len(self._ids) >= _MAX_HINTS:
            self._ids.clear()
        self._ids[(queue, key)] = task_id


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
    queue: RedisQueue, job: Job, options: TaskOptions, keep_ms: int, delay: float, hints: Hints
) -> TaskHandle[Any]:
    """Send one debounced call; its handle is the call that will run, with what the
    dispatch did (``handle.debounced``). ``hints``: its task's guesses."""
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
    guess = hints.get(job.queue, key)
    task_id, replacing = (job.id, False) if guess is None else (guess, True)
    for _ in range(_SENDS):
        payload = template.encode(task_id, job.args, job.kwargs, limit, None, queue.config.keyring)
        reply = queue.debounce(
            job.queue, payload, replacing, key, timing, keep_ms, options.wait_replicas
        )
        if reply.outcome is not None:
            hints.remember(job.queue, key, reply.id)
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
