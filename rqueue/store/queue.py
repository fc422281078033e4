"""The Redis queue operations: every state change of a task, as one script call each.

Producers, workers and the CLI all go through :class:`RedisQueue` to change a task's
state; it names keys through :mod:`rqueue.store.keys` and runs the scripts of
:mod:`rqueue.store.scripts`.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import msgpack
import redis

from rqueue.errors import (
    DispatchRefused,
    InvalidQueueName,
    QueueConnectionError,
    ReplicasNotReached,
)
from rqueue.settings.config import Config
from rqueue.store import probe
from rqueue.store.cluster import ClusterClient
from rqueue.store.connect import connect
from rqueue.store.header import payload_id
from rqueue.store.keys import GlobalKeys, QueueKeys, validate_queue_name
from rqueue.store.retry import REDIS_ERRORS, RedisUnavailable, unsent
from rqueue.store.scripts import Scripts, execute
from rqueue.store.signing import sign
from rqueue.store.waits import ShardedWaits
from rqueue.store.wire import Wire

# Lua's unpack() is limited to a few thousand values; bulk pushes are chunked below it.
_PUSH_CHUNK = 1000
_REGISTRY_REFRESH = 60.0
"""Seconds between a producer's re-adds of its queues to the registry (``rqueue:queues``),
which FLUSHALL or a restart without persistence may empty. One round trip of its own
per queue a minute: a global key never shares a pipeline with a queue's script (on
Redis Cluster they live on different nodes). Worker parents re-add theirs every tick."""
_MIGRATE_LIMIT = 500
"""Most tasks one migrate.lua call moves per set: at 10^6 delayed tasks a call of 1,000
took 2.6 ms (p99 5.3 ms); one of 500, 1.4 ms (p99 2.9 ms), at the same rate overall."""
_MIGRATE_QUEUES = 1000
_SCAN_COUNT = 500
"""Registry members per SSCAN step."""
_STATUS_SLACK_MS = 24 * 3600 * 1000
"""A kept task's status record lasts its delay plus its keep time plus this: a day in
the queue before a worker takes it, after which its status reads ``unknown``."""


class UniqueLock(NamedTuple):
    """The lock a unique task's payload takes as it is pushed (``@task(unique=)``)."""

    position: int
    """Its payload's place among those pushed with it, from 0."""
    key: str
    owner: str
    """The payload's task id: the only one that may release the lock."""
    lasts_ms: int


class Push(NamedTuple):
    """Payloads for one queue, pushed together (:meth:`RedisQueue.push_many`)."""

    queue: str
    delay_ms: int
    payloads: Sequence[bytes]
    kept: frozenset[str] = frozenset()
    """Ids of the payloads that keep their result: each gets a status record."""
    keep_ms: int = 0
    """The longest keep time among them."""
    locks: Sequence[UniqueLock] = ()
    """Unique tasks' locks: a payload whose lock is held is not pushed (push.lua)."""


def _deduplicated(reply: object) -> dict[str, str]:
    """push.lua's reply with locks: ``[id, owner id, ...]`` -> ``{id: owner id}``."""
    if not isinstance(reply, list):
        raise DispatchRefused(f"push.lua answered {reply!r} where it lists deduplicated tasks")
    ids = [item.decode() if isinstance(item, bytes) else str(item) for item in reply]
    return dict(zip(ids[::2], ids[1::2], strict=True))


class Kept(NamedTuple):
    """A finished task that keeps its result, acknowledged with its result record."""

    payload: bytes
    """The reserved bytes, as for a plain ack."""
    task_id: str
    record: bytes
    keep_ms: int


class Reservation(NamedTuple):
    """What one reserve call returned: Redis's clock at that moment, and the tasks.

    ``payloads`` are the reserved bytes, the key to ack, release or fail each task by.
    Plain bytes, not an object per task: a busy worker reserves thousands a second.
    """

    now_ms: int
    queue: str
    payloads: list[bytes]
    still_ready: int
    """How many tasks were left in the list after this call took its own."""
    rate_wait_ms: int = 0
    """With a rate limit: ms until it lets the next task start (0: now, or no limit)."""


@dataclass(frozen=True)
class QueueSize:
    name: str
    ready: int
    delayed: int
    reserved: int
    failed: int
    paused: bool = False

    def counted_out(self, cancelled: int) -> QueueSize:
        """Without the ``cancelled`` tasks (cancel.lua's set) that still sit in ready or
        delayed until a worker pops and drops them: a cancelled timer is no longer work,
        so ``rqueue size``, the dashboard, Prometheus and ``--stop-when-drained`` (which
        waited for its due time) leave it out. Which of the two holds each is not recorded
        (cancelling stays O(1), no search), so they come off delayed first: a cancelled
        ready task leaves as soon as a worker reaches it, a delayed one only when due.
        Their sum is exact."""
        from_delayed = min(self.delayed, max(0, cancelled))
        from_ready = min(self.ready, max(0, cancelled) - from_delayed)
        return replace(self, ready=self.ready - from_ready, delayed=self.delayed - from_delayed)


class Migration(NamedTuple):
    """What one migrate call did, and when the next delayed task is due (Redis's clock)."""

    moved: int
    next_due_ms: int | None
    now_ms: int


class RedisQueue:
    """A connection to rqueue's keys on one Redis."""

    def __init__(self, config: Config, client: redis.Redis | None = None) -> None:
        self.config = config
        self.client = client if client is not None else connect(config)
        self.wire = Wire(self.client)
        self.side = Wire(self.client)
        """A second lean connection, for the calls a worker child makes while its next
        reserve call is in flight on ``wire``: a workflow's pushes and batch counts."""
        self.scripts = Scripts()
        self.global_keys = GlobalKeys.for_prefix(config.prefix, config.cluster)
        self._waits = ShardedWaits(self.client) if isinstance(self.client, ClusterClient) else None
        self._keys: dict[str, QueueKeys] = {}
        self._registered: dict[str, float] = {}
        """Queue name -> when (monotonic) this process last added it to the registry."""

    def keys(self, queue: str) -> QueueKeys:
        keys = self._keys.get(queue)
        if keys is None:
            keys = QueueKeys.for_queue(queue, self.config.prefix, self.config.cluster)
            self._keys[queue] = keys
        return keys

    # -- producing ------------------------------------------------------------

    def push(
        self,
        queue: str,
        payloads: Sequence[bytes],
        delay_ms: int = 0,
        wait_replicas: int | None = None,
        kept: frozenset[str] = frozenset(),
        keep_ms: int = 0,
        locks: Sequence[UniqueLock] = (),
    ) -> dict[str, str]:
        """Queue ``payloads`` (after ``delay_ms``); with ``wait_replicas`` (default: the
        config's) return only once that many replicas have them (see push_many).
        ``kept`` are the ids among them that keep their result for ``keep_ms``.
        Returns the deduplicated ones, as for push_many."""
        push = Push(queue, delay_ms, payloads, kept, keep_ms, locks)
        if len(payloads) > _PUSH_CHUNK or self._replicas(wait_replicas):
            return self.push_many([push], wait_replicas)
        self._register_if_due([queue])
        keys, args = self._push_call(push._replace(payloads=self._signed(queue, payloads)))
        replies: list[object] = []
        self._dispatching(lambda: replies.append(self.scripts.push(self.wire, keys, args)), [queue])
        return _deduplicated(replies[0]) if locks else {}

    def _push_call(self, push: Push) -> tuple[list[str], list[bytes | int | str]]:
        """push.lua's keys and arguments for one chunk of signed payloads."""
        keys = self.keys(push.queue)
        script_keys = [keys.ready, keys.delayed, keys.notify, keys.timer, keys.pending_ids]
        status_ms = max(0, push.delay_ms) + push.keep_ms + _STATUS_SLACK_MS
        args: list[bytes | int | str] = [push.delay_ms, status_ms, len(push.locks)]
        if push.locks:
            script_keys.append(keys.unique)
            for lock in push.locks:
                args += [lock.position + 1, lock.key, lock.owner, lock.lasts_ms]
        if push.kept:
            ids = (payload_id(payload) for payload in push.payloads)
            script_keys += [keys.result(i) for i in ids if i is not None and i in push.kept]
        args += push.payloads
        return script_keys, args

    def release_unique(self, queue: str, task_id: str) -> bool:
        """Release the unique lock ``task_id`` holds, if it still holds one."""
        keys = [self.keys(queue).unique]
        return bool(self.scripts.release_unique(self.wire, keys, [task_id]))

    def push_once(
        self,
        queue: str,
        payload: bytes,
        delay_ms: int,
        marker_ms: int,
        kept: bool,
        completing: tuple[str, bytes, Kept | None] | None = None,
        first: bool = False,
    ) -> bool:
        """Push one task unless one with its id was pushed this way in the last
        ``marker_ms`` (push_once.lua); True if pushed. Retries as a dispatch does.
        ``first``: at the head of the ready list, the next to be reserved.

        ``completing`` is ``(queue, reserved payload, kept result or None)`` of the
        task whose completion pushes this one: it is acknowledged in the same script
        call. Only if its queue shares a slot with ``queue`` (see ``same_slot``).
        """
        self._register_if_due([queue])
        task_id = payload_id(payload) or ""
        keys = self.keys(queue)
        script_keys = [keys.ready, keys.delayed, keys.notify, keys.timer, keys.pending_ids]
        script_keys.append(keys.once(task_id))
        if kept:
            script_keys.append(keys.result(task_id))
        signed = self._signed(queue, [payload])[0]
        args: list[bytes | int | str] = [delay_ms, marker_ms, signed, "1" if kept else "0"]
        if completing is None:
            args += ["", "", 0]
        else:
            own_queue, reserved, result = completing
            own = self.keys(own_queue)
            script_keys.append(own.reserved)
            args += [reserved, b"", 0]
            if result is not None:
                script_keys += [own.result(result.task_id), own.done(result.task_id)]
                args[-2:] = [result.record, result.keep_ms]
        args.append("1" if first else "0")
        pushed: list[bool] = []
        self._dispatching(
            lambda: pushed.append(bool(self.scripts.push_once(self.side, script_keys, args))),
            [queue],
        )
        return pushed[0]

    def same_slot(self, queue: str, other: str) -> bool:
        """Whether one script may touch both queues' keys: always on a single Redis;
        on Redis Cluster only the same queue (each queue's name is its hash tag)."""
        return not self.config.cluster or queue == other

    def push_many(
        self,
        groups: Iterable[Push | tuple[str, int, Sequence[bytes]]],
        wait_replicas: int | None = None,
    ) -> dict[str, str]:
        """Push groups of payloads (a :class:`Push` or ``(queue, delay_ms, payloads)``
        each), in one round trip per node. Returns the unique tasks deduplicated: the
        id of each not pushed -> the id of the task holding its lock.

        A push that Redis refused for a passing reason (``retry.py``) is sent again,
        alone: the ones that landed are never sent twice. With ``wait_replicas`` each
        push is followed by ``WAIT`` on its connection; ReplicasNotReached if fewer
        replicas than that confirm it in time (the tasks are queued all the same).
        """
        replicas = self._replicas(wait_replicas)
        timeout_ms = max(1, round(self.config.wait_replicas_timeout * 1000))
        pending: list[Push] = []
        confirmed: list[int] = []
        deduplicated: dict[str, str] = {}
        pushes = [Push(*group) for group in groups]
        self._register_if_due(sorted({push.queue for push in pushes}))
        for push in pushes:
            signed = self._signed(push.queue, push.payloads)
            for start in range(0, len(signed), _PUSH_CHUNK):
                end = start + _PUSH_CHUNK
                locks = [
                    lock._replace(position=lock.position - start)
                    for lock in push.locks
                    if start <= lock.position < end
                ]
                pending.append(push._replace(payloads=signed[start:end], locks=locks))

        def send() -> None:
            pipe = self.client.pipeline(transaction=False)
            for push in pending:
                push_keys, push_args = self._push_call(push)
                self.scripts.push.queue(pipe, push_keys, push_args)
                if replicas:  # on the push's own connection (see ClusterPipeline)
                    pipe.execute_command("WAIT", replicas, timeout_ms)  # type: ignore[no-untyped-call]
            results = execute(pipe, self.scripts, raise_on_error=False)
            pushes = results[:: 2 if replicas else 1]
            refused = [
                (push, result)
                for push, result in zip(pending, pushes, strict=True)
                if isinstance(result, Exception)
            ]
            for push, result in zip(pending, pushes, strict=True):
                if push.locks and not isinstance(result, Exception):
                    deduplicated.update(_deduplicated(result))
            if replicas:
                confirmed.extend(
                    int(acks) if isinstance(acks, int) else 0
                    for push, acks in zip(pushes, results[1::2], strict=True)
                    if not isinstance(push, Exception)
                )
            pending[:] = [push for push, _ in refused]
            if refused:
                raise refused[0][1]

        self._dispatching(send, lambda: sorted({push.queue for push in pending}))
        if replicas and min(confirmed, default=replicas) < replicas:
            raise ReplicasNotReached(
                f"the tasks were queued, but only {min(confirmed)} of {replicas} replicas "
                f"confirmed them within {self.config.wait_replicas_timeout:g} s: a failover "
                "now could lose them (see docs/deployment.md)"
            )
        return deduplicated

    def _replicas(self, wait_replicas: int | None) -> int:
        return self.config.wait_replicas if wait_replicas is None else wait_replicas

    def _register_if_due(self, queues: Sequence[str]) -> None:
        """Re-add queues to the registry once a minute (see _REGISTRY_REFRESH).

        Best effort: if Redis cannot take it now, the push that follows reports why,
        and the next dispatch tries again.
        """
        now = time.monotonic()
        due = [q for q in queues if now - self._registered.get(q, -math.inf) >= _REGISTRY_REFRESH]
        if due:
            try:
                self.remember_queues(due)
            except (*REDIS_ERRORS, redis.ResponseError):
                pass

    def _signed(self, queue: str, payloads: Sequence[bytes]) -> Sequence[bytes]:
        """Signed for ``queue``: a signature is only valid on the queue it was pushed to."""
        if not self.config.secret:
            return payloads
        return [sign(p, self.config.secret, queue) for p in payloads]

    def _dispatching(
        self, send: Callable[[], object], queues: Sequence[str] | Callable[[], list[str]]
    ) -> None:
        """Send a push, retrying for ``config.dispatch_retry`` seconds what Redis never ran.

        A refused connection, a connection that timed out before it opened (a master's
        machine gone, during a failover) and a transient refusal (``OOM``, ``READONLY``,
        ``LOADING``: see ``retry.py``) are retried, since Redis did not run the command.
        A timeout once sent is not, since the push may have landed; re-sending it could
        queue the task twice. Either way the caller gets a QueueConnectionError
        (a DispatchRefused if Redis answered), never a hang nor a raw Redis error.
        """
        deadline = time.monotonic() + self.config.dispatch_retry_seconds
        failures = 0
        while True:
            try:
                send()
                return
            except REDIS_ERRORS as exc:
                if isinstance(exc, redis.TimeoutError) and not unsent(exc):
                    raise QueueConnectionError(
                        f"Redis at {self.config.redacted_url()} did not answer a dispatch in "
                        f"time ({exc}); the task may or may not have been queued"
                    ) from None
                failures += 1
                delay = min(0.5, 0.05 * 2**failures) * random.uniform(0.5, 1.0)
                if time.monotonic() + delay <= deadline:
                    time.sleep(delay)
                    continue
                tried = f"tried {failures} times over {self.config.dispatch_retry_seconds:g} s"
                if isinstance(exc, RedisUnavailable):
                    raise self._refused(exc, queues, tried) from None
                raise QueueConnectionError(
                    f"cannot reach Redis at {self.config.redacted_url()} to dispatch "
                    f"({tried}): {exc}"
                ) from None
            except redis.ResponseError as exc:  # a key of the wrong type, say: no retry
                raise self._refused(exc, queues, "not retried") from None

    def _refused(
        self,
        exc: redis.ResponseError,
        queues: Sequence[str] | Callable[[], list[str]],
        tried: str,
    ) -> DispatchRefused:
        names = ", ".join(repr(q) for q in (queues() if callable(queues) else queues))
        return DispatchRefused(
            f"Redis at {self.config.redacted_url()} refused to queue tasks on {names} "
            f"({tried}), so they were not queued: {exc}"
        )

    # -- consuming --------------------------------------------------------------

    def reserve(self, *args: Any, **kwargs: Any) -> Reservation:
        """:meth:`send_reserve`, then wait for its reservation."""
        return self.send_reserve(*args, **kwargs)()

    def send_reserve(
        self,
        queue: str,
        count: int,
        default_timeout_ms: int,
        grace_ms: int,
        margin_ms: int,
        share: int = 1,
        ack: Sequence[bytes] = (),
        claims: str | None = None,
        kept: Sequence[Kept] = (),
        rate: tuple[int, int] | None = None,
    ) -> Callable[[], Reservation]:
        """Pop and reserve up to ``count`` tasks, first acking ``ack``, in one call.

        Sent now; the returned call reads the reservation (see ``Wire.send``), so a
        worker child can run its current batch meanwhile. ``claims`` is a child's
        token: the batch is also recorded under it (reserve.lua), so the child's
        parent can give it back if the child dies before reading the reply.
        ``rate`` is the queue's limit as ``(tasks, period_ms)``: no more are reserved
        than it frees, counted in the queue's rate key, so across every worker that
        passes the same limit.
        """
        keys = self.keys(queue)
        script_keys = [
            keys.ready,
            keys.reserved,
            keys.notify,
            keys.pending_ids,
            keys.cancelled,
            keys.paused,
        ]
        if claims is not None:
            script_keys.append(keys.claims(claims))
        args: list[bytes | int] = [count, default_timeout_ms, grace_ms, margin_ms, max(1, share)]
        args += [len(ack), len(kept), *ack]
        for done in kept:
            script_keys += [keys.result(done.task_id), keys.done(done.task_id)]
            args += [done.payload, done.record, done.keep_ms]
        if rate is not None:
            script_keys.append(keys.rate)
            args += [rate[1], rate[0]]
        reply = self.scripts.reserve.send(self.wire, script_keys, args)

        def reservation() -> Reservation:
            raw = reply()
            if rate is None:
                return Reservation(int(raw[0]), queue, raw[2:], int(raw[1]))
            return Reservation(int(raw[0]), queue, raw[3:], int(raw[1]), int(raw[2]))

        return reservation

    def claimed(self, queue: str, claims: str) -> list[bytes]:
        """The tasks a worker child's last reserve call took (none once it expired)."""
        packed: bytes | None = self.client.get(self.keys(queue).claims(claims))  # type: ignore[assignment]
        if packed is None:
            return []
        reply: list[bytes] = msgpack.unpackb(packed, raw=True)
        return reply[2:]  # after Redis's clock and the ready count, as in the reply

    def renew(self, queue: str, reserved: bytes, lasting: float) -> bool:
        """Make a reservation last ``lasting`` more seconds; False if it already ran out."""
        keys = self.keys(queue)
        return bool(
            self.scripts.renew(self.wire, (keys.reserved,), (reserved, int(lasting * 1000)))
        )

    def ack(self, queue: str, reserved: Sequence[bytes], kept: Sequence[Kept] = ()) -> int:
        """Forget finished tasks; write the result records of the ``kept`` ones."""
        if not reserved and not kept:
            return 0
        keys = self.keys(queue)
        script_keys = [keys.reserved]
        args: list[bytes | int] = [len(reserved), *reserved]
        for done in kept:
            script_keys += [keys.result(done.task_id), keys.done(done.task_id)]
            args += [done.payload, done.record, done.keep_ms]
        return int(self.scripts.ack(self.wire, script_keys, args))

    def release(
        self,
        queue: str,
        reserved: Sequence[bytes],
        delay: float = 0.0,
        unstarted: bool = False,
        claims: str | None = None,
    ) -> int:
        """Put tasks back: after ``delay`` seconds, or at the front if they never started.

        With ``claims`` (a child's token) the child's claims key goes in the same step.
        """
        keys = self.keys(queue)
        script_keys = [keys.reserved, keys.delayed, keys.ready, keys.notify, keys.timer]
        script_keys.append(keys.pending_ids)
        if claims is not None:
            script_keys.append(keys.claims(claims))
        elif not reserved:
            return 0
        return int(
            self.scripts.release(
                self.wire, script_keys, (int(delay * 1000), "1" if unstarted else "0", *reserved)
            )
        )

    def fail(
        self,
        queue: str,
        reserved: bytes,
        record: bytes,
        force: bool = False,
        kept: Kept | None = None,
    ) -> bool:
        """Move a task to the failed list; with ``kept``, write its result record too."""
        keys = self.keys(queue)
        script_keys = [keys.reserved, keys.failed, keys.failed_lookup]
        args: list[bytes | int | str] = [reserved, record, "1" if force else "0"]
        if kept is not None:
            script_keys += [keys.result(kept.task_id), keys.done(kept.task_id)]
            args += [kept.record, kept.keep_ms]
        return bool(self.scripts.fail(self.wire, script_keys, args))

    def count_exception(self, queue: str, task_id: str, keep_ms: int) -> int:
        """Count one exception of a task with ``max_exceptions``; the count so far, this
        one included, kept ``keep_ms`` more (count_exception.lua)."""
        keys = (self.keys(queue).exceptions(task_id),)
        return int(self.scripts.count_exception(self.wire, keys, (keep_ms,)))

    def forget_exceptions(self, queue: str, task_id: str) -> None:
        """Delete a task's count of exceptions: it has finished for good."""
        self.wire.call("DEL", self.keys(queue).exceptions(task_id))

    def migrate(self, queue: str, limit: int = _MIGRATE_LIMIT) -> Migration:
        return self.migrate_all([queue], limit)[0]

    def migrate_all(self, queues: Sequence[str], limit: int = _MIGRATE_LIMIT) -> list[Migration]:
        """One migrate.lua call per queue, pipelined ``_MIGRATE_QUEUES`` at a time: a worker
        parent of 10^4 queues paid 10^4 round trips (1.5 s) every tick."""
        migrations: list[Migration] = []
        for start in range(0, len(queues), _MIGRATE_QUEUES):
            pipe = self.client.pipeline(transaction=False)
            for queue in queues[start : start + _MIGRATE_QUEUES]:
                keys = self.keys(queue)
                script_keys = (keys.delayed, keys.reserved, keys.ready, keys.notify)
                self.scripts.migrate.queue(pipe, script_keys, (limit,))
            for moved, next_due, now in execute(pipe, self.scripts):
                due = None if int(next_due) < 0 else int(next_due)
                migrations.append(Migration(int(moved), due, int(now)))
        return migrations

    def wait_for_ready(self, queues: Sequence[str], timeout: float) -> str | None:
        """Block until a push signals one of ``queues`` (returned: the child looks there
        first) or ``timeout`` passes (None)."""
        return self._block({self.keys(q).notify: q for q in queues}, timeout)

    def wait_for_timer(self, queues: Sequence[str], timeout: float) -> str | None:
        """Block until a delayed push moves a due time earlier (its queue is returned),
        or ``timeout`` passes (None)."""
        return self._block({self.keys(q).timer: q for q in queues}, timeout)

    def _block(self, keys: dict[str, str], timeout: float) -> str | None:
        """BLPOP on ``keys`` (key -> its queue); the queue of the key that woke it."""
        if timeout <= 0:
            return None
        if self._waits is not None and len(keys) > 1:  # one BLPOP cannot span slots
            woken = self._waits.wait(list(keys), timeout)
        else:
            reply = self.wire.call("BLPOP", *keys, max(0.01, round(timeout, 3)))
            woken = None if reply is None else reply[0].decode()
        return None if woken is None else keys[woken]

    def reserved_payloads(self, queue: str) -> list[bytes]:
        """Every reservation of a queue: few (the tasks in flight), read only in recovery."""
        members: list[bytes] = self.client.zrange(self.keys(queue).reserved, 0, -1)  # type: ignore[assignment]
        return members

    # -- inspecting and administering -------------------------------------------

    def remember_queues(self, queues: Iterable[str]) -> None:
        """Add ``queues`` to the registry (``rqueue:queues``) now."""
        names = [self.keys(queue).name for queue in queues]
        if names:
            self.client.sadd(self.global_keys.known_queues, *names)
            self._registered.update(dict.fromkeys(names, time.monotonic()))

    def check_in(self, queues: Sequence[str]) -> bytes | None:
        """Re-add a worker's ``queues`` to the registry and read the restart marker, in
        one round trip: the worker parent's every tick, so a registry that FLUSHALL or a
        restart without persistence emptied is whole again within a second.

        Only the marker's error is raised: a registry write refused (``OOM``) is tried
        again next tick and must not hold up the rest of the parent's work.
        """
        pipe = self.client.pipeline(transaction=False)
        pipe.sadd(self.global_keys.known_queues, *queues)
        pipe.get(self.global_keys.restart)
        marker: bytes | Exception | None = pipe.execute(raise_on_error=False)[1]
        if isinstance(marker, Exception):
            raise marker
        return marker

    def known_queues(self) -> list[str]:
        """Every queue in the registry. Its members came from Redis, so one that is not
        a valid name (written by hand, or refused by a newer rule) is left out rather
        than breaking every command that lists queues."""
        # SSCAN, a bounded step at a time: SMEMBERS of 10^4 names held Redis 2-24 ms.
        members = self.client.sscan_iter(self.global_keys.known_queues, count=_SCAN_COUNT)
        names = []
        for member in members:
            try:
                names.append(validate_queue_name(member.decode("utf-8")))
            except (UnicodeDecodeError, InvalidQueueName):
                continue
        return sorted(set(names))  # SSCAN may return a member twice

    def sizes(self, queues: Sequence[str]) -> list[QueueSize]:
        pipe = self.client.pipeline(transaction=False)
        for queue in queues:
            keys = self.keys(queue)
            pipe.llen(keys.ready)
            pipe.zcard(keys.delayed)
            pipe.zcard(keys.reserved)
            pipe.llen(keys.failed)
            pipe.exists(keys.paused)
        for queue in queues:  # counted out below (QueueSize.counted_out)
            pipe.scard(self.keys(queue).cancelled)
        counts = pipe.execute()
        cancelled = counts[len(counts) - len(queues) :]
        sizes = []
        for i, queue in enumerate(queues):
            ready, delayed, reserved, failed, paused = counts[5 * i : 5 * i + 5]
            size = QueueSize(queue, ready, delayed, reserved, failed, bool(paused))
            sizes.append(size.counted_out(cancelled[i]))
        return sizes

    def pause(self, queue: str) -> bool:
        """Stop workers taking tasks from ``queue`` (running ones finish); False if it
        was paused already. Dispatching to it goes on: the tasks wait, as in Laravel's
        ``queue:pause``."""
        return self._set_paused(queue, True)

    def resume(self, queue: str) -> bool:
        """Let workers take tasks from ``queue`` again; False if it was not paused."""
        return self._set_paused(queue, False)

    def _set_paused(self, queue: str, paused: bool) -> bool:
        keys = self.keys(queue)
        script_keys = (keys.paused, keys.ready, keys.notify)
        return bool(self.scripts.pause(self.client, script_keys, ("1" if paused else "0",)))

    def paused(self, queues: Sequence[str]) -> set[str]:
        """Which of ``queues`` are paused, in one pipelined round trip."""
        pipe = self.client.pipeline(transaction=False)
        for queue in queues:
            pipe.exists(self.keys(queue).paused)
        return {queue for queue, held in zip(queues, pipe.execute(), strict=True) if held}

    def clear(self, queue: str) -> int:
        keys = self.keys(queue)
        return int(
            self.scripts.clear(
                self.client,
                (
                    keys.ready,
                    keys.delayed,
                    keys.reserved,
                    keys.notify,
                    keys.timer,
                    keys.pending_ids,
                    keys.cancelled,
                    keys.unique,
                ),
                (),
            )
        )

    def ping(self) -> None:
        """Raise redis-py's error now if Redis cannot be reached or refuses us."""
        self.client.ping()

    def delete_everything(self) -> int:
        """Delete every key under this config's prefix, by SCAN (never KEYS); how many.

        For a throwaway prefix such as the demo's: with no prefix it empties the database.
        """
        doomed = list(self.client.scan_iter(match=f"{self.config.prefix}*", count=1000))
        pipe = self.client.pipeline(transaction=False)
        for key in doomed:  # key by key: on Redis Cluster they live in many slots
            pipe.delete(key)
        pipe.execute()
        return len(doomed)

    def request_restart(self, at: float) -> None:
        self.client.set(self.global_keys.restart, repr(at))

    def restart_marker(self) -> bytes | None:
        value: bytes | None = self.client.get(self.global_keys.restart)  # type: ignore[assignment]
        return value

    def ready_lengths(self, queues: Sequence[str]) -> list[int]:
        """How many tasks are ready in each of ``queues``, in a round trip or two
        (``probe.py``): how a worker child of many queues finds the ones to reserve from."""
        return probe.lengths(self.client, [self.keys(queue).ready for queue in queues])
