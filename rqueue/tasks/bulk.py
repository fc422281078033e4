"""The push of ``dispatch_many``'s calls: encoded per task from one template, grouped
per connection, queue and delay, one round trip per connection (``Task`` and
``dispatch_many`` are in definition.py, which imports this module: what a call and its
task must offer here is written as the protocols below, so imports go one way)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from rqueue.encoding.payload import Job, PayloadTemplate, encode, lane_of
from rqueue.store.calls import Push, UniqueLock
from rqueue.store.keys import Lane
from rqueue.tasks import observers
from rqueue.tasks.debouncing import refuse_debounced
from rqueue.tasks.handles import Dispatched, TaskHandle
from rqueue.tasks.options import TaskOptions

if TYPE_CHECKING:
    from rqueue.store.queue import RedisQueue


class BulkTask(Protocol):
    """What ``push_calls`` asks of a ``Task``."""

    @property
    def name(self) -> str: ...
    @property
    def options(self) -> TaskOptions: ...
    @property
    def dispatch_hooks(self) -> Sequence[object]: ...
    @property
    def keep_ms(self) -> int: ...
    def check_dispatchable(self) -> None: ...
    def connection(self) -> RedisQueue: ...
    def unique_lock(self, job: Job, position: int = 0) -> UniqueLock: ...
    def make_job(
        self,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        meta: dict[str, Any] | None = None,
        dispatched_at: float | None = None,
        task_id: str | None = None,
        template: bool = False,
    ) -> Job: ...


class BulkCall(Protocol):
    """What ``push_calls`` asks of a ``PendingDispatch``."""

    @property
    def task(self) -> BulkTask: ...
    @property
    def args(self) -> tuple[Any, ...]: ...
    @property
    def kwargs(self) -> dict[str, Any]: ...
    @property
    def delay(self) -> float: ...


def push_calls(
    calls: Sequence[BulkCall],
    ids: list[str],
    meta: dict[str, Any] | None,
    unique: bool,
    sending: observers.Sending | None,
) -> list[Dispatched]:
    """Encode the calls of ``dispatch_many`` (each carrying what ``sending``'s observers
    added) and push them, one round trip per connection."""
    groups: dict[tuple[int, str, int, Lane], _Group] = {}
    """Per connection, queue, delay (ms) and lane (priority level or group): the payloads
    pushed together."""
    replicas: dict[int, int] = {}
    """Per connection, the most replicas any of its tasks waits for (its own, or the
    connection's ``wait_replicas``)."""
    # Keyed by id(task); holding the task keeps that id from being reused meanwhile.
    templates: dict[int, tuple[BulkTask, RedisQueue, PayloadTemplate]] = {}
    now = time.time()
    handles: list[Dispatched] = []
    for call, task_id in zip(calls, ids, strict=True):
        entry = templates.get(id(call.task))
        if entry is None:
            task = call.task
            task.check_dispatchable()
            refuse_debounced(task.name, task.options, "dispatch_many")
            queue = task.connection()
            wanted = task.options.wait_replicas
            wanted = queue.config.wait_replicas if wanted is None else wanted
            replicas[id(queue)] = max(replicas.get(id(queue), 0), wanted)
            shared = task.make_job((), {}, meta, now, template=True)
            template = PayloadTemplate(shared if sending is None else sending.onto(shared))
            entry = templates[id(task)] = (task, queue, template)
        task, queue, template = entry
        limit = queue.config.max_payload_bytes
        job = None
        if task.dispatch_hooks or task.options.unique is not False or task.options.depends_on_call:
            # each call's own job
            job = task.make_job(call.args, call.kwargs, meta, now, task_id)
            if sending is not None:
                sending.onto(job)
        lane = lane_of((job or template.job).meta)
        key = (id(queue), task.options.queue, round(call.delay * 1000), lane)
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(queue, [], set(), 0, [])
        if job is not None:
            if unique and task.options.unique is not False:
                group.locks.append(task.unique_lock(job, len(group.payloads)))
            group.payloads.append(encode(job, limit, queue.config.keyring))
        else:
            keyring = queue.config.keyring
            group.payloads.append(
                template.encode(task_id, call.args, call.kwargs, limit, None, keyring)
            )
        if task.keep_ms:
            group.kept.add(task_id)
            group.keep_ms = max(group.keep_ms, task.keep_ms)
        keeps = bool(task.keep_ms)
        handles.append(
            TaskHandle(task_id, task.name, task.options.queue, queue, keeps_result=keeps)
        )
    by_connection: dict[int, tuple[RedisQueue, list[Push]]] = {}
    for (connection, name, delay_ms, lane), group in groups.items():
        kept = frozenset(group.kept)
        push = Push(name, delay_ms, group.payloads, kept, group.keep_ms, group.locks, lane)
        by_connection.setdefault(connection, (group.queue, []))[1].append(push)
    owners: dict[str, str] = {}
    for connection, (queue, pushes) in by_connection.items():
        owners.update(queue.push_many(pushes, replicas.get(connection)))
    if owners:  # deduplicated: each handle is the call that holds its lock
        handles = [
            h._replace(id=owners[h.id], deduplicated=True, keeps_result=None)
            if h.id in owners
            else h
            for h in handles
        ]
    return handles


@dataclass
class _Group:
    """Payloads of one connection, queue and delay, gathered by ``dispatch_many``."""

    queue: RedisQueue
    payloads: list[bytes]
    kept: set[str]
    keep_ms: int
    locks: list[UniqueLock]
