"""Reading a task's kept result: its status now, or its outcome once it finishes.

A task dispatched with ``keep_result`` has a record at ``queues:<q>:result:<id>``:
push.lua writes a status record (pending or delayed) when it is queued, and the
script that acknowledges or fails it overwrites it with the outcome, in the same
step (reserve.lua, ack.lua, fail.lua). Whether a queued task is running is not
written anywhere, which would cost the hot path a round trip: it is read off the
queue, since reserve.lua takes a task's id out of the pending-ids set when a worker
takes it. Waiting blocks on the task's done list, which those scripts push to.

The record comes from Redis, so it is checked before anything is believed: anything
malformed is an InvalidPayload that says which task, never a crash or a wrong answer.
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple

from rqueue.encoding.codec import unpack
from rqueue.encoding.sealing import KEYS_SETTING, Keyring, NotDecrypted, Sealed, result_data
from rqueue.errors import InvalidPayload, TaskCancelled, TaskFailed
from rqueue.store.header import raw_id
from rqueue.store.queue import RedisQueue
from rqueue.store.scripts import execute

FINAL = frozenset({"succeeded", "failed", "cancelled"})
_QUEUED = frozenset({"pending", "delayed"})
WAITING = "waiting"
"""A task dispatched ``using(after=...)`` whose dependencies have not all finished
(wait.lua): it is in its queue's waiting hash, not the ready list."""
_WAIT_CHUNK = 1.0
"""Longest single block on Redis: under any socket timeout, and a lost connection is
noticed within a second."""


class TaskStatus(NamedTuple):
    """A task's status and, once it finished, the fields of its outcome."""

    id: str
    queue: str
    status: str
    record: dict[str, Any]
    """The checked record: ``result``, or ``exception``/``message``/``traceback``, and
    ``task``, ``attempts``, ``started_at``, ``finished_at`` (seconds) and ``tags`` (if
    any) once finished."""


def read_status(queue: RedisQueue, queue_name: str, task_id: str) -> TaskStatus:
    """One round trip: the record, whether the task is still queued, and Redis's clock."""
    try:
        stored = raw_id(task_id)
    except ValueError:  # not an id any task could have
        return TaskStatus(task_id, queue_name, "unknown", {})
    keys = queue.keys(queue_name)
    pipe = queue.client.pipeline(transaction=False)
    pipe.get(keys.result(task_id))
    pipe.sismember(keys.pending_ids, stored)  # type: ignore[arg-type]  # bytes are fine
    queue.scripts.clock.queue(pipe, (keys.ready,), ())
    raw, pending, now_ms = _executed(queue, pipe)
    queued = bool(pending)
    if raw is None:
        return TaskStatus(task_id, queue_name, "unknown", {})
    record = opened(decode_result(raw, task_id), queue_name, task_id, queue.config.keyring)
    state = record["state"]
    if state in _QUEUED:
        if not queued:
            state = "running"
        elif state == "delayed" and record.get("due", 0) <= int(now_ms):
            state = "pending"
    return TaskStatus(task_id, queue_name, state, record)


def wait_status(
    queue: RedisQueue, queue_name: str, task_id: str, timeout: float | None
) -> TaskStatus:
    """The task's status once it is final, or as it is when ``timeout`` seconds pass.

    ``unknown`` is waited out too: a chain's later step has no record until the step
    before it succeeds. Blocks on the done list with ``BLMOVE done done``: the token
    moves in place, so every waiter wakes and it stays for the next; no sleeping, no
    polling loop.
    """
    deadline = math.inf if timeout is None else time.monotonic() + max(0.0, timeout)
    done = queue.keys(queue_name).done(task_id)
    while True:
        status = read_status(queue, queue_name, task_id)
        left = deadline - time.monotonic()
        if status.status in FINAL or left <= 0:
            return status
        block = round(min(left, _WAIT_CHUNK), 3)
        queue.client.execute_command("BLMOVE", done, done, "RIGHT", "RIGHT", max(0.01, block))  # type: ignore[no-untyped-call]


def outcome(status: TaskStatus) -> Any:
    """The value of a task that succeeded; TaskFailed or TaskCancelled otherwise."""
    record = status.record
    if status.status == "succeeded":
        result = record.get("result")
        if type(result) is Sealed:
            raise NotDecrypted(
                f"the result of task {status.id} is encrypted and this process has no key "
                f"to decrypt it: set {KEYS_SETTING}"
            )
        return result
    if status.status == "failed":
        raise TaskFailed(
            status.id,
            str(record.get("exception", "")),
            str(record.get("message", "")),
            str(record.get("traceback", "")),
        )
    if status.status == "cancelled":
        raise TaskCancelled(f"task {status.id} was cancelled")
    if status.status == "unknown":
        raise TimeoutError(
            f"task {status.id} has no result: it keeps none (see keep_result), it expired, "
            "or it was not dispatched yet (a chain's later step)"
        )
    raise TimeoutError(f"task {status.id} has not finished (it is {status.status})")


def decode_result(raw: bytes, task_id: str) -> dict[str, Any]:
    """The record at a task's result key, checked; InvalidPayload if it is not one."""
    try:
        record = unpack(raw)
    except InvalidPayload as exc:  # a value in it this process cannot decode
        raise InvalidPayload(f"the result record of task {task_id}: {exc}") from None
    except Exception:
        raise InvalidPayload(f"the result record of task {task_id} is not valid msgpack") from None
    if type(record) is not dict or record.get("state") not in (*_QUEUED, *FINAL, WAITING):
        raise InvalidPayload(f"the result record of task {task_id} has the wrong shape")
    for name in ("due", "started_at", "finished_at", "attempts"):
        value = record.get(name, 0)
        if type(value) not in (int, float) or not math.isfinite(value):
            raise InvalidPayload(f"the result record of task {task_id} has a bad {name!r}")
    for name in ("exception", "message", "traceback", "task"):
        if type(record.get(name, "")) is not str:
            raise InvalidPayload(f"the result record of task {task_id} has a bad {name!r}")
    tags = record.get("tags", [])
    if type(tags) is not list or any(type(tag) is not str for tag in tags):
        raise InvalidPayload(f"the result record of task {task_id} has a bad 'tags'")
    return record


def opened(
    record: dict[str, Any], queue_name: str, task_id: str, keyring: Keyring | None
) -> dict[str, Any]:
    """``record`` with its result decrypted if it is encrypted and ``keyring`` can; left
    sealed without a keyring (what shows it says ``encrypted``)."""
    result = record.get("result")
    if type(result) is not Sealed or keyring is None:
        return record
    plain = keyring.open(result.blob, result_data(queue_name, task_id), "result")
    try:
        value = unpack(plain)
    except InvalidPayload as exc:
        raise InvalidPayload(f"the result of task {task_id}: {exc}") from None
    except Exception:
        raise InvalidPayload(f"the encrypted result of task {task_id} is not msgpack") from None
    return {**record, "result": value}


def find_queue(queue: RedisQueue, task_id: str) -> str | None:
    """The known queue that holds a record for ``task_id``: one round trip per node."""
    names = queue.known_queues()
    pipe = queue.client.pipeline(transaction=False)
    for name in names:
        pipe.exists(queue.keys(name).result(task_id))
    found = [name for name, exists in zip(names, _executed(queue, pipe), strict=True) if exists]
    return found[0] if found else None


def _executed(queue: RedisQueue, pipe: Any) -> list[Any]:
    return execute(pipe, queue.scripts)
