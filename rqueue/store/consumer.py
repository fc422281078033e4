"""The consuming role of :class:`~rqueue.store.queue.RedisQueue`: a worker's calls.

Reserving tasks (with the previous batch's acks in the same call), renewing,
acknowledging, releasing and failing them, counting their exceptions, moving due
and expired tasks back to ready, and waiting for work. The hot ones (reserve, ack)
go through the lean :class:`~rqueue.store.wire.Wire`, one script call each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import msgpack
from redis.exceptions import AskError

from rqueue.store import calls, probe
from rqueue.store.base import QueueBase
from rqueue.store.calls import Kept
from rqueue.store.scripts import execute
from rqueue.store.wire import KeyOrArg, Reply

_MIGRATE_LIMIT = 500
"""Most tasks one migrate.lua call moves per set: at 10^6 delayed tasks a call of 1,000
took 2.6 ms (p99 5.3 ms); one of 500, 1.4 ms (p99 2.9 ms), at the same rate overall."""
_MIGRATE_QUEUES = 1000


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


class BehindWait(NamedTuple):
    """The settings of a reserve call sent behind a wait for a push: its tasks' default
    timeout, the grace and the margin (ms), the children sharing the queue, and the
    calling child's claims key (reserve.lua)."""

    default_timeout_ms: int
    grace_ms: int
    margin_ms: int
    share: int
    claims: str


class Migration(NamedTuple):
    """What one migrate call did, and when the next delayed task is due (Redis's clock)."""

    moved: int
    next_due_ms: int | None
    now_ms: int
    notices: int = 0
    """Notices of finished tasks that others wait for (``using(after=...)``), to apply."""


class Consumer(QueueBase):
    """A worker's side of the queue: from reserving a task to settling it."""

    def reserve(
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
    ) -> Reservation:
        """:meth:`send_reserve`, then wait for its reservation."""
        return self.send_reserve(
            queue, count, default_timeout_ms, grace_ms, margin_ms, share, ack, claims, kept, rate
        )()

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
        call = calls.reserve(
            self.keys(queue),
            count,
            default_timeout_ms,
            grace_ms,
            margin_ms,
            share,
            ack,
            claims,
            kept,
            rate,
            self.config.events,
            queue in self._leveled,
        )
        # With no acks, the same call comes again and again (an idle worker's, each time
        # a push wakes it): packed once.
        reply = self.scripts.reserve.send(self.wire, *call, reuse=not (ack or kept))

        def reservation() -> Reservation:
            found = self._reservation(queue, reply(), rate is not None)
            if found is None:  # priority levels in use: ask again, with their lists
                timing = (default_timeout_ms, grace_ms, margin_ms)
                return self.send_reserve(queue, count, *timing, share, (), claims, (), rate)()
            return found

        return reservation

    def send_wait_then_reserve(
        self, queue: str, timeout: float, settings: BehindWait
    ) -> Callable[[], tuple[bool, Reservation]] | None:
        """:meth:`wait_for_ready` on ``queue`` alone, and behind it, in the same write, a
        reserve call of one task, which Redis runs as soon as the wait ends: a push
        starts its task with no round trip after the wake-up. The returned call reads
        both: whether a push ended the wait, and the reservation. None: not sent (the
        wire is busy), wait as usual.

        Redis may run it for a worker that will never read it (one that died while it
        waited, its socket not yet closed; a host cut off), so the reservations are
        unconfirmed: each lasts the margin alone and gets its attempt back if it
        expires (reserve.lua's ARGV[9], migrate.lua); the worker confirms each with
        :meth:`send_renew` as the task starts.
        """
        wait: tuple[KeyOrArg, ...] = (
            "BLPOP",
            self.keys(queue).notify,
            max(0.01, round(timeout, 3)),
        )
        return self.send_reserve_behind(queue, wait, settings)

    def send_reserve_behind(
        self, queue: str, wait: tuple[KeyOrArg, ...] | Reply, settings: BehindWait
    ) -> Callable[[], tuple[bool, Reservation]] | None:
        """The unconfirmed reserve call of one task behind ``wait`` (a BLPOP to send
        with it, or one on its way), and the call that reads both (see
        :meth:`send_wait_then_reserve`); None: not sent, the wire is busy."""
        timing, share, claims = settings[:3], settings.share, settings.claims
        events, leveled = self.config.events, queue in self._leveled
        call = calls.reserve(
            self.keys(queue), 1, *timing, share, (), claims, (), None, events, leveled,
            unconfirmed=True,
        )  # fmt: skip
        read = self.scripts.reserve.send_after(self.wire, wait, *call, reuse=True)
        if read is None:
            return None

        def both() -> tuple[bool, Reservation]:
            woken, reply = read()
            if isinstance(woken, Exception) and not isinstance(woken, AskError):
                raise woken  # a redirect (its slot moved) reads as a wake-up: look again
            found = self._reservation(queue, reply, False)
            if found is None:  # priority levels in use: ask again, with their lists
                found = self.send_reserve(queue, 1, *timing, share, (), claims)()
            return woken is not None, found

        return both

    def _reservation(self, queue: str, reply: bytes, rated: bool) -> Reservation | None:
        """A reserve call's reply; None if the queue uses priority levels, whose lists
        the call did not pass (the caller calls again: they go with every call now)."""
        raw = msgpack.unpackb(reply, raw=True)
        if raw[1] < 0:
            self._leveled.add(queue)
            return None
        if not rated:
            return Reservation(raw[0], queue, raw[2:], raw[1])
        return Reservation(raw[0], queue, raw[3:], raw[1], raw[2])

    def leveled(self, queue: str) -> bool:
        """Whether ``queue`` is known to use priority levels (a reserve call found them)."""
        return queue in self._leveled

    def claimed(self, queue: str, claims: str) -> list[bytes]:
        """The tasks a worker child's last reserve call took (none once it expired)."""
        packed: bytes | None = self.client.get(self.keys(queue).claims(claims))  # type: ignore[assignment]
        if packed is None:
            return []
        reply: list[bytes] = msgpack.unpackb(packed, raw=True)
        return reply[2:]  # after Redis's clock and the ready count, as in the reply

    def send_renew(self, queue: str, reserved: bytes, lasting: float) -> Callable[[], bool]:
        """:meth:`renew`, sent now; the returned call reads whether it renewed."""
        call = calls.renew(self.keys(queue), reserved, int(lasting * 1000))
        reply = self.scripts.renew.send(self.wire, *call)
        return lambda: bool(reply())

    def renew(self, queue: str, reserved: bytes, lasting: float) -> bool:
        """Make a reservation last ``lasting`` more seconds; False if it already ran out."""
        return self.send_renew(queue, reserved, lasting)()

    def ack(self, queue: str, reserved: Sequence[bytes], kept: Sequence[Kept] = ()) -> int:
        """Forget finished tasks; write the result records of the ``kept`` ones."""
        if not reserved and not kept:
            return 0
        call = calls.ack(self.keys(queue), reserved, kept, self.config.events)
        return int(self.scripts.ack(self.wire, *call))

    def release(
        self,
        queue: str,
        reserved: Sequence[bytes],
        delay: float = 0.0,
        unstarted: bool = False,
        claims: str | None = None,
        error: str = "",
    ) -> int:
        """Put tasks back: after ``delay`` seconds, or at the front if they never started.

        With ``claims`` (a child's token) the child's claims key goes in the same step.
        ``error`` (the type of the error a failed attempt raised) says it is a retry:
        a ``retried`` event, when this worker records events.
        """
        if claims is None and not reserved:
            return 0
        delay_ms, events = int(delay * 1000), self.config.events
        call = calls.release(self.keys(queue), reserved, delay_ms, unstarted, claims, events, error)
        return int(self.scripts.release(self.wire, *call))

    def fail(
        self,
        queue: str,
        reserved: bytes,
        record: bytes,
        force: bool = False,
        kept: Kept | None = None,
    ) -> bool:
        """Move a task to the failed list; with ``kept``, write its result record too."""
        call = calls.fail(self.keys(queue), reserved, record, force, kept, self.config.events)
        return bool(self.scripts.fail(self.wire, *call))

    def count_exception(self, queue: str, task_id: str, keep_ms: int) -> int:
        """Count one exception of a task with ``max_exceptions``; the count so far, this
        one included, kept ``keep_ms`` more (count_exception.lua)."""
        call = calls.count_exception(self.keys(queue), task_id, keep_ms)
        return int(self.scripts.count_exception(self.wire, *call))

    def forget_exceptions(self, queue: str, task_id: str) -> None:
        """Delete a task's count of exceptions: it has finished for good."""
        self.wire.call("DEL", self.keys(queue).exceptions(task_id))

    def migrate(self, queue: str, limit: int = _MIGRATE_LIMIT, aging: float = 0) -> Migration:
        return self.migrate_all([queue], limit, aging)[0]

    def migrate_all(
        self, queues: Sequence[str], limit: int = _MIGRATE_LIMIT, aging: float = 0
    ) -> list[Migration]:
        """One migrate.lua call per queue, pipelined ``_MIGRATE_QUEUES`` at a time: a worker
        parent of 10^4 queues paid 10^4 round trips (1.5 s) every tick. ``aging``: seconds
        after which a waiting priority level's oldest task is promoted (0: never)."""
        migrations: list[Migration] = []
        for migration in self.migrate_each(queues, limit, aging):
            if isinstance(migration, Exception):
                raise migration
            migrations.append(migration)
        return migrations

    def migrate_each(
        self, queues: Sequence[str], limit: int = _MIGRATE_LIMIT, aging: float = 0
    ) -> list[Migration | Exception]:
        """:meth:`migrate_all`, each queue's error in its place: on Redis Cluster a
        shard that is down fails its own queues' calls, and the others' still count
        (``ClusterPipeline`` gives a node's connection error to its commands alone).
        On one server a lost connection fails the whole pipeline: raised."""
        aging_ms = round(aging * 1000)
        migrations: list[Migration | Exception] = []
        for start in range(0, len(queues), _MIGRATE_QUEUES):
            pipe = self.client.pipeline(transaction=False)
            for queue in queues[start : start + _MIGRATE_QUEUES]:
                call = calls.migrate(self.keys(queue), limit, self.config.events, aging_ms)
                self.scripts.migrate.queue(pipe, *call)
            for reply in execute(pipe, self.scripts, raise_on_error=False):
                if isinstance(reply, Exception):
                    migrations.append(reply)
                    continue
                moved, next_due, now, notices = reply
                due = None if int(next_due) < 0 else int(next_due)
                migrations.append(Migration(int(moved), due, int(now), int(notices)))
        return migrations

    def wait_for_ready(self, queues: Sequence[str], timeout: float) -> str | None:
        """Block until a push signals one of ``queues`` (returned: the child looks there
        first) or ``timeout`` passes (None)."""
        return self._block({self.keys(q).notify: q for q in queues}, timeout)

    def send_wait_for_ready(self, queues: Sequence[str], timeout: float) -> Waiting | None:
        """:meth:`wait_for_ready` sent now and read later (``Waiting``); None where the
        wait is not one command on one connection (a cluster's queues in several slots:
        call :meth:`wait_for_ready`). A worker child's event loop watches its socket
        while its coroutines run, and reads the reply itself: a push wakes the thread
        that takes the task, with no other thread in between (``worker/listener.py``)."""
        keys = {self.keys(q).notify: q for q in queues}
        if self._waits is not None and len(keys) > 1:
            return None
        command: tuple[KeyOrArg, ...] = ("BLPOP", *keys, max(0.01, round(timeout, 3)))
        reply = self.wire.send(*command)
        if reply is None:  # its connection is busy: never for a queue of its own
            return None
        return Waiting(self, keys, reply, self.wire.socket(*command))

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

    def ready_lengths(self, queues: Sequence[str]) -> list[int]:
        """Not 0 for each of ``queues`` that has tasks ready, on its ready list or a
        priority level's, in a round trip or two (``probe.py``): how a worker child of
        many queues finds the ones to reserve from."""
        groups = [(self.keys(queue).ready, self.keys(queue).levels[10]) for queue in queues]
        return probe.holding(self.client, groups)


class Waiting:
    """A wait for a push sent and not read yet (``Consumer.send_wait_for_ready``): the
    socket its reply comes on, the call that reads it (blocking until then), and the
    reserve call its worker may send behind it once it has nothing left to run."""

    def __init__(self, consumer: Consumer, keys: dict[str, str], reply: Reply, socket: int):
        self._consumer = consumer
        self._keys = keys
        """Each waited key's queue."""
        self.queues = tuple(keys.values())
        self._reply = reply
        self.socket = socket

    def read(self) -> str | None:
        """The queue whose push ended the wait; None: it timed out."""
        reply = self._reply()
        return None if reply is None else self._keys[reply[0].decode()]

    def then_reserve(self, settings: BehindWait) -> Callable[[], tuple[bool, Reservation]] | None:
        """The reserve call of ``send_wait_then_reserve``, sent now behind this wait: an
        event loop's (``worker/listener.py``), on its way since coroutines ran, whose
        child has just gone idle. Redis runs it as the wait ends. The call returned
        reads both, instead of :meth:`read`; None: not sent, the wait covers several
        queues (it cannot say which queue to reserve from until it ends)."""
        if len(self.queues) != 1:
            return None
        return self._consumer.send_reserve_behind(self.queues[0], self._reply, settings)
