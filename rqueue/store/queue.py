"""The Redis queue operations: every state change of a task, as one script call each.

Producers, workers and the CLI all go through :class:`RedisQueue` to change a task's
state; it names keys through :mod:`rqueue.store.keys` and runs the scripts of
:mod:`rqueue.store.scripts`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgpack
import redis

from rqueue.config import Config
from rqueue.errors import QueueConnectionError
from rqueue.store.connect import connect
from rqueue.store.keys import GlobalKeys, QueueKeys
from rqueue.store.scripts import Scripts, execute
from rqueue.store.signing import sign
from rqueue.store.wire import Wire

# Lua's unpack() is limited to a few thousand values; bulk pushes are chunked below it.
_PUSH_CHUNK = 1000
_MIGRATE_LIMIT = 1000


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


@dataclass(frozen=True)
class QueueSize:
    name: str
    ready: int
    delayed: int
    reserved: int
    failed: int


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
        self.scripts = Scripts()
        self.global_keys = GlobalKeys.for_prefix(config.prefix)
        self._keys: dict[str, QueueKeys] = {}
        self._known: set[str] = set()

    def keys(self, queue: str) -> QueueKeys:
        keys = self._keys.get(queue)
        if keys is None:
            keys = QueueKeys.for_queue(queue, self.config.prefix, self.config.cluster)
            self._keys[queue] = keys
        return keys

    # -- producing ------------------------------------------------------------

    def push(self, queue: str, payloads: Sequence[bytes], delay_ms: int = 0) -> None:
        if queue not in self._known or len(payloads) > _PUSH_CHUNK:
            self.push_many([(queue, delay_ms, payloads)])
            return
        keys = self.keys(queue)
        push_keys = (keys.ready, keys.delayed, keys.notify, keys.timer, keys.pending_ids)
        signed = self._signed(payloads)
        self._dispatching(lambda: self.scripts.push(self.wire, push_keys, (delay_ms, *signed)))

    def push_many(self, groups: Iterable[tuple[str, int, Sequence[bytes]]]) -> None:
        """Push groups of payloads, each ``(queue, delay_ms, payloads)``, in one round trip."""
        signed = [(queue, delay_ms, self._signed(payloads)) for queue, delay_ms, payloads in groups]

        def send() -> None:
            pipe = self.client.pipeline(transaction=False)
            new = {queue for queue, _, _ in signed} - self._known
            for queue in sorted(new):
                pipe.sadd(self.global_keys.known_queues, queue)
            for queue, delay_ms, payloads in signed:
                keys = self.keys(queue)
                push_keys = (keys.ready, keys.delayed, keys.notify, keys.timer, keys.pending_ids)
                for start in range(0, len(payloads), _PUSH_CHUNK):
                    chunk = payloads[start : start + _PUSH_CHUNK]
                    self.scripts.push.queue(pipe, push_keys, (delay_ms, *chunk))
            execute(pipe, self.scripts)
            self._known |= new

        self._dispatching(send)

    def _signed(self, payloads: Sequence[bytes]) -> Sequence[bytes]:
        if not self.config.secret:
            return payloads
        return [sign(p, self.config.secret) for p in payloads]

    def _dispatching(self, send: Callable[[], object]) -> None:
        """Send a push, retrying a refused connection for ``config.dispatch_retry`` seconds.

        Only connection errors are retried: Redis never ran a command it could not
        receive. A timeout is not, since the push may have landed; re-sending it
        could queue the task twice. Either way the caller gets QueueConnectionError,
        never a hang.
        """
        deadline = time.monotonic() + self.config.dispatch_retry
        failures = 0
        while True:
            try:
                send()
                return
            except redis.TimeoutError as exc:
                raise QueueConnectionError(
                    f"Redis at {self.config.redacted_url()} did not answer a dispatch in time "
                    f"({exc}); the task may or may not have been queued"
                ) from None
            except redis.ConnectionError as exc:
                failures += 1
                delay = min(0.5, 0.05 * 2**failures) * random.uniform(0.5, 1.0)
                if time.monotonic() + delay > deadline:
                    raise QueueConnectionError(
                        f"cannot reach Redis at {self.config.redacted_url()} to dispatch "
                        f"(tried {failures} times over {self.config.dispatch_retry:g} s): {exc}"
                    ) from None
                time.sleep(delay)

    def _remember(self, pipe: Any, queue: str) -> None:
        """Record the queue name once per process so ``size`` never needs ``KEYS``."""
        if queue not in self._known:
            pipe.sadd(self.global_keys.known_queues, queue)
            self._known.add(queue)

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
    ) -> Callable[[], Reservation]:
        """Pop and reserve up to ``count`` tasks, first acking ``ack``, in one call.

        Sent now; the returned call reads the reservation (see ``Wire.send``), so a
        worker child can run its current batch meanwhile. ``claims`` is a child's
        token: the batch is also recorded under it (reserve.lua), so the child's
        parent can give it back if the child dies before reading the reply.
        """
        keys = self.keys(queue)
        script_keys = [keys.ready, keys.reserved, keys.notify, keys.pending_ids, keys.cancelled]
        if claims is not None:
            script_keys.append(keys.claims(claims))
        reply = self.scripts.reserve.send(
            self.wire,
            script_keys,
            (count, default_timeout_ms, grace_ms, margin_ms, max(1, share), *ack),
        )

        def reservation() -> Reservation:
            raw = reply()
            return Reservation(int(raw[0]), queue, raw[2:], int(raw[1]))

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

    def ack(self, queue: str, reserved: Sequence[bytes]) -> int:
        if not reserved:
            return 0
        return int(self.scripts.ack(self.wire, (self.keys(queue).reserved,), reserved))

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
        if claims is not None:
            script_keys.append(keys.claims(claims))
        elif not reserved:
            return 0
        return int(
            self.scripts.release(
                self.wire, script_keys, (int(delay * 1000), "1" if unstarted else "0", *reserved)
            )
        )

    def fail(self, queue: str, reserved: bytes, record: bytes, force: bool = False) -> bool:
        keys = self.keys(queue)
        return bool(
            self.scripts.fail(
                self.wire, (keys.reserved, keys.failed), (reserved, record, "1" if force else "0")
            )
        )

    def migrate(self, queue: str, limit: int = _MIGRATE_LIMIT) -> Migration:
        keys = self.keys(queue)
        moved, next_due, now = self.scripts.migrate(
            self.client, (keys.delayed, keys.reserved, keys.ready, keys.notify), (limit,)
        )
        return Migration(int(moved), None if int(next_due) < 0 else int(next_due), int(now))

    def wait_for_ready(self, queues: Sequence[str], timeout: float) -> bool:
        """Block until a push signals one of ``queues`` or ``timeout`` passes."""
        return self._block([self.keys(q).notify for q in queues], timeout)

    def wait_for_timer(self, queues: Sequence[str], timeout: float) -> bool:
        """Block until a delayed push moves a due time earlier, or ``timeout`` passes."""
        return self._block([self.keys(q).timer for q in queues], timeout)

    def _block(self, keys: list[str], timeout: float) -> bool:
        if self.config.cluster:
            keys = keys[:1]  # a blocking pop cannot span slots; the rest are polled
        if timeout <= 0:
            return False
        return self.wire.call("BLPOP", *keys, max(0.01, round(timeout, 3))) is not None

    def reserved_payloads(self, queue: str) -> list[bytes]:
        """Every reservation of a queue: few (the tasks in flight), read only in recovery."""
        members: list[bytes] = self.client.zrange(self.keys(queue).reserved, 0, -1)  # type: ignore[assignment]
        return members

    # -- inspecting and administering -------------------------------------------

    def remember_queues(self, queues: Iterable[str]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for queue in queues:
            self.keys(queue)
            self._remember(pipe, queue)
        pipe.execute()

    def known_queues(self) -> list[str]:
        members: set[bytes] = self.client.smembers(self.global_keys.known_queues)  # type: ignore[assignment]
        return sorted(m.decode() for m in members)

    def sizes(self, queues: Sequence[str]) -> list[QueueSize]:
        pipe = self.client.pipeline(transaction=False)
        for queue in queues:
            keys = self.keys(queue)
            pipe.llen(keys.ready)
            pipe.zcard(keys.delayed)
            pipe.zcard(keys.reserved)
            pipe.llen(keys.failed)
        counts = pipe.execute()
        return [QueueSize(queue, *counts[4 * i : 4 * i + 4]) for i, queue in enumerate(queues)]

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
        if doomed:
            self.client.delete(*doomed)
        return len(doomed)

    def request_restart(self, at: float) -> None:
        self.client.set(self.global_keys.restart, repr(at))

    def restart_marker(self) -> bytes | None:
        value: bytes | None = self.client.get(self.global_keys.restart)  # type: ignore[assignment]
        return value
