"""The Redis side of dependencies (``using(after=[...])``): one call per script.

A task that waits for others sits in its queue's ``waiting`` hash (wait.lua), and
registers in the ``dependents`` set of each task it waits for, in that task's slot
(depend.lua). The script that writes a task's outcome turns that set into a notice on
its queue's ``resolved`` list (dependents.lua); a worker parent reads the notices and
applies each to the waiting task in that task's slot (resolve.lua) before it removes
the notice: so a worker killed in between only applies it again, which changes
nothing. No script touches two queues' keys: each runs in one queue's slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, cast

from rqueue.store.calls import kept_keys
from rqueue.store.header import raw_id
from rqueue.store.queue import RedisQueue
from rqueue.store.scripts import execute
from rqueue.store.wire import KeyOrArg

REGISTRATION_MS = 7 * 24 * 3600 * 1000
"""The least time a dependents set lasts (longer if its task's status record does):
a task that has not finished in a week of being waited for is not waited for."""


class Registration(NamedTuple):
    """One task waited for, seen from the waiting task's dispatch."""

    queue: str
    task_id: str
    member: str
    """The waiting task's entry in its set (depend.lua's header says its shape)."""


def member(index: int, task_id: str, queue: str) -> str:
    """A waiting task's entry in the dependents set of the ``index``-th task it waits for."""
    return f"{index}:{task_id}:{queue}"


def wait(
    queue: RedisQueue, name: str, task_id: str, payload: bytes, state: str, keep_ms: int
) -> None:
    """Put a task's payload (signed for ``name``) in its queue's waiting hash."""
    keys = queue.keys(name)
    queue._register_if_due([name])
    signed = queue._signed(name, [payload])[0]
    script_keys = [keys.waiting, keys.pending_ids]
    if keep_ms:
        script_keys.append(keys.result(task_id))
    status_ms = keep_ms + REGISTRATION_MS
    queue.scripts.wait(
        queue.client, script_keys, [task_id, raw_id(task_id), signed, state, status_ms]
    )


def depend(queue: RedisQueue, registrations: Sequence[Registration]) -> list[list[Any]]:
    """Register with each task waited for, in one pipeline (each call in that task's
    slot): per task, ``[2, record]`` if it finished already, ``[1]`` registered, ``[0]``
    if it has no record."""
    pipe = queue.client.pipeline(transaction=False)
    for queue_name, task_id, entry in registrations:
        keys = queue.keys(queue_name)
        script_keys = [keys.result(task_id), keys.dependents(task_id)]
        queue.scripts.depend.queue(pipe, script_keys, [entry, REGISTRATION_MS])
    return execute(pipe, queue.scripts)


def read_waiting(queue: RedisQueue, name: str, task_id: str) -> tuple[bytes | None, bytes | None]:
    """A waiting task's payload and state, or Nones if it no longer waits."""
    waiting = queue.keys(name).waiting
    payload, state = queue.client.hmget(waiting, [f"p:{task_id}", f"s:{task_id}"])
    return cast(bytes | None, payload), cast(bytes | None, state)


class Resolution(NamedTuple):
    """How a waiting task leaves, unrun (resolve.lua's ``fail`` or ``drop``)."""

    action: str
    failed_record: bytes = b""
    result_record: bytes = b""
    keep_ms: int = 0


def mark(queue: RedisQueue, name: str, task_id: str, index: int, outcome: str) -> Any:
    """Set the mark (``s``, ``f`` or ``c``) of the ``index``-th task ``task_id`` waits
    for, and push it to its ready list if it was the last: 1 done, 0 set before or it
    no longer waits, 2 it was cancelled (dropped now); ``[payload, state]`` if it must
    fail instead (the caller builds the failure: :func:`settle`)."""
    args: list[KeyOrArg] = [task_id, raw_id(task_id), "mark", index, outcome, REGISTRATION_MS]
    return queue.scripts.resolve(queue.client, _resolve_keys(queue, name, task_id), args)


def settle(queue: RedisQueue, name: str, task_id: str, read: bytes, how: Resolution) -> int:
    """Fail or drop a waiting task if its state is still ``read``: 1 done, 0 it no
    longer waits, -1 its state changed (read it again), 2 it was cancelled."""
    args: list[KeyOrArg] = [task_id, raw_id(task_id), how.action, read, how.failed_record]
    args += (how.result_record, how.keep_ms)
    return int(queue.scripts.resolve(queue.client, _resolve_keys(queue, name, task_id), args))


def _resolve_keys(queue: RedisQueue, name: str, task_id: str) -> list[str]:
    keys = queue.keys(name)
    script_keys = [keys.waiting, keys.ready, keys.notify, keys.pending_ids, keys.cancelled]
    script_keys += (keys.failed, keys.failed_lookup, *kept_keys(keys, task_id))
    return [*script_keys, *keys.levels]


def notices(queue: RedisQueue, name: str, count: int) -> list[bytes]:
    """The oldest ``count`` notices of the queue's tasks that others wait for."""
    return cast(list[bytes], queue.client.lrange(queue.keys(name).resolved, 0, count - 1))


def forget_notices(queue: RedisQueue, name: str, applied: Sequence[bytes]) -> None:
    """Remove notices once applied: one ``LREM`` each, in one pipeline (applying one
    again changes nothing, so a crash before this only costs that)."""
    pipe = queue.client.pipeline(transaction=False)
    for notice in applied:
        pipe.lrem(queue.keys(name).resolved, 1, notice)  # type: ignore[arg-type]  # bytes are fine
    pipe.execute()
