"""The producing role of :class:`~rqueue.store.queue.RedisQueue`: queueing tasks.

Every path that queues a task comes through here (a dispatch, ``later``, a bulk
dispatch, a workflow's next step), so this is where payloads are signed, queues are
registered, and a push that Redis never ran is retried: a caller gets its tasks
queued once, or an error that says whether they may have been.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence

import redis

from rqueue.errors import DispatchRefused, QueueConnectionError, ReplicasNotReached
from rqueue.store import calls
from rqueue.store.base import QueueBase
from rqueue.store.calls import Completing, Kept, Push, UniqueLock
from rqueue.store.debounce import DebounceReply, read_reply
from rqueue.store.keys import PLAIN_LEVEL, Lane
from rqueue.store.retry import REDIS_ERRORS, RedisUnavailable, unsent
from rqueue.store.scripts import execute
from rqueue.store.signing import sign

_PUSH_CHUNK = 1000
"""Lua's unpack() is limited to a few thousand values; bulk pushes are chunked below it."""


def _deduplicated(reply: object) -> dict[str, str]:
    """push.lua's reply with locks: ``[id, owner id, ...]`` -> ``{id: owner id}``."""
    if not isinstance(reply, list):
        raise DispatchRefused(f"push.lua answered {reply!r} where it lists deduplicated tasks")
    ids = [item.decode() if isinstance(item, bytes) else str(item) for item in reply]
    return dict(zip(ids[::2], ids[1::2], strict=True))


class Producer(QueueBase):
    """Pushing tasks: one script call per push, retried while Redis never ran it."""

    def push(
        self,
        queue: str,
        payloads: Sequence[bytes],
        delay_ms: int = 0,
        wait_replicas: int | None = None,
        kept: frozenset[str] = frozenset(),
        keep_ms: int = 0,
        locks: Sequence[UniqueLock] = (),
        lane: Lane = PLAIN_LEVEL,
    ) -> dict[str, str]:
        """Queue ``payloads`` (after ``delay_ms``; onto ``lane``'s list: a priority level's
        or a group's); with
        ``wait_replicas`` (default: the config's) return only once that many replicas
        have them (see push_many). ``kept`` are the ids among them that keep their
        result for ``keep_ms``. Returns the deduplicated ones, as for push_many."""
        if len(payloads) > _PUSH_CHUNK or self._replicas(wait_replicas):
            push = Push(queue, delay_ms, payloads, kept, keep_ms, locks, lane)
            return self.push_many([push], wait_replicas)
        self._register_if_due([queue])
        signed = Push(queue, delay_ms, self._signed(queue, payloads), kept, keep_ms, locks, lane)
        call = calls.push(self.keys(queue), signed)
        replies: list[object] = []
        self._dispatching(lambda: replies.append(self.scripts.push(self.wire, *call)), [queue])
        return _deduplicated(replies[0]) if locks else {}

    def debounce(
        self,
        queue: str,
        payload: bytes,
        replacing: bool,
        key: str,
        timing: tuple[int, int],
        keep_ms: int = 0,
        wait_replicas: int | None = None,
    ) -> DebounceReply:
        """Dispatch a debounced call (debounce.lua): a new burst for ``key``, or the
        replacement of its pending call if ``replacing`` and ``payload`` carries that
        call's id. ``timing`` is (debounce, debounce_max or 0) in ms. Retried and
        waiting for replicas as a push is; a reply without an outcome asks the caller
        to send the call again with the id it names (see the script's header)."""
        self._register_if_due([queue])
        signed = self._signed(queue, [payload])[0]
        call = calls.debounce(self.keys(queue), signed, replacing, key, timing, keep_ms)
        replicas = self._replicas(wait_replicas)
        replies: list[object] = []
        if not replicas:
            self._dispatching(
                lambda: replies.append(self.scripts.debounce(self.wire, *call)), [queue]
            )
            return read_reply(replies[0])
        timeout_ms = max(1, round(self.config.wait_replicas_timeout * 1000))

        def send() -> None:
            pipe = self.client.pipeline(transaction=False)
            self.scripts.debounce.queue(pipe, *call)
            pipe.execute_command("WAIT", replicas, timeout_ms)  # type: ignore[no-untyped-call]
            replies.extend(execute(pipe, self.scripts))

        self._dispatching(send, [queue])
        reply = read_reply(replies[0])
        acks = replies[1]
        if reply.outcome is not None and not (isinstance(acks, int) and acks >= replicas):
            raise ReplicasNotReached(
                f"the debounced call was queued, but only {acks} of {replicas} replicas "
                f"confirmed it within {self.config.wait_replicas_timeout:g} s: a failover "
                "now could lose it (see docs/deployment.md)"
            )
        return reply

    def release_unique(self, queue: str, task_id: str) -> bool:
        """Release the unique lock ``task_id`` holds, if it still holds one."""
        call = calls.release_unique(self.keys(queue), task_id)
        return bool(self.scripts.release_unique(self.wire, *call))

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
        acked = None
        if completing is not None:
            own_queue, reserved, result = completing
            acked = Completing(self.keys(own_queue), reserved, result)
        signed = self._signed(queue, [payload])[0]
        events = self.config.events
        call = calls.push_once(
            self.keys(queue), signed, delay_ms, marker_ms, kept, acked, first, events
        )
        pushed: list[bool] = []
        self._dispatching(
            lambda: pushed.append(bool(self.scripts.push_once(self.side, *call))), [queue]
        )
        return pushed[0]

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
                self.scripts.push.queue(pipe, *calls.push(self.keys(push.queue), push))
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
                # At most 0.2 s apart: a dispatch goes through within that of Redis
                # taking writes again (a promoted master refuses them until its first
                # replica follows it, with min-replicas-to-write: about a second).
                delay = min(0.2, 0.05 * 2**failures) * random.uniform(0.5, 1.0)
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
