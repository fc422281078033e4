"""Schedules in Redis: where they live and how they change, as bytes and fire times.

A schedule lives beside the queue it fires into (``queues:<name>:schedules``, a zset
of name -> next fire time, and ``queues:<name>:schedule-defs``, the definitions), so
each of its scripts touches one hash slot; a global hash maps each name to its queue,
so a schedule is found by its name alone. :mod:`rqueue.schedules` owns the definition's
format and all timing; it reads and writes through :class:`ScheduleStore` and never
names a key or a script. Every write is a compare-and-set against the definition's
bytes as they were read, which is what makes concurrent changes and firings safe.

With a secret, every definition written here is signed for its queue and name
(``signing.sign_definition``), like every payload pushed: a worker turns a definition
into signed payloads, so one written by anyone without the secret must not fire.
:meth:`ScheduleStore.check` is what the scheduler asks before it fires one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, TypeVar

import msgpack

from rqueue.errors import InvalidPayload, InvalidQueueName
from rqueue.store.keys import validate_queue_name
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import REDIS_ERRORS
from rqueue.store.schedule_calls import FIRE_CHUNK, Firing, Prepared, Read, Saving, Sent
from rqueue.store.scripts import execute
from rqueue.store.signing import sign, sign_definition, verify_definition

MAX_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z, the last moment a datetime holds: a stored time past it
(``start_ms=1e20``) is no time at all, and reads as unreadable."""


class StoredSchedule(NamedTuple):
    """A definition as stored, and its place on the timeline (None: paused or finished)."""

    definition: bytes
    next_ms: int | None
    trusted: bool = True
    """False if this process has a secret and the definition's signature fails it."""
    name: str = ""
    """Its name in the index (a name that is not UTF-8 shown with U+FFFD)."""
    queue: str = ""
    problem: str | None = None
    """Why it cannot even be read (its queue or name is not one, its place on the
    timeline is not a time): listings show it as unreadable; None if it reads."""


_T = TypeVar("_T")
_NOT_A_QUEUE = "its queue in the schedule index is not a queue name"


def _fire_time(score: float | None) -> tuple[int | None, str | None]:
    """A timeline score as a fire time, or why it is none (it is hostile data: a score
    of ``inf`` or ``1e300`` is no time a schedule fires at)."""
    if score is None:
        return None, None
    if not math.isfinite(score) or not 0 <= score <= MAX_MS:
        return None, f"its place on the timeline ({score!r}) is not a time"
    return int(score), None


def _queue_name(raw: bytes) -> str | None:
    try:
        return validate_queue_name(raw.decode())
    except (UnicodeDecodeError, InvalidQueueName):
        return None


PIPELINED = 10_000
"""Most commands, or schedules in scripts, a bulk change sends in one round trip."""
SAVE_CHUNK = 500
"""Most schedules one save_schedules.lua call saves (a bulk add): a bounded call."""


def _chunks(items: Sequence[_T], size: int) -> list[Sequence[_T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class ScheduleStore:
    """The schedules of one Redis, by name."""

    def __init__(self, queue: RedisQueue) -> None:
        self.queue = queue
        self.client = queue.client
        self._cluster = queue.config.cluster

    def now_ms(self, queue: str) -> int:
        """Redis's clock (``TIME``), the only one rqueue trusts: on Redis Cluster, the
        clock of the node that holds ``queue`` (clock.lua)."""
        keys = self.queue.keys(queue)
        return int(self.queue.scripts.clock(self.client, (keys.schedules,), ()))

    # -- the name index --------------------------------------------------------------

    def claim_names(self, names: Sequence[tuple[str, str]]) -> list[str]:
        """Enter each ``(name, queue)`` in the index as firing into its queue, all or
        none: the names taken already (none claimed then), or an empty list.

        Up to :data:`SAVE_CHUNK` names a claim_names.lua call, each call all or none,
        :data:`PIPELINED` names to a round trip; the index is a global key, so never in
        a pipeline with a queue's script."""
        index = self.queue.global_keys.schedule_index
        claimed: list[str] = []
        taken: list[str] = []
        for calls in _chunks(_chunks(names, SAVE_CHUNK), PIPELINED // SAVE_CHUNK):
            pipe = self.client.pipeline(transaction=False)
            for chunk in calls:
                args = [part for pair in chunk for part in pair]
                self.queue.scripts.claim_names.queue(pipe, (index,), args)
            for chunk, refused in zip(calls, execute(pipe, self.queue.scripts), strict=True):
                if refused:
                    taken += [name.decode() for name in refused]
                else:
                    claimed += [name for name, _ in chunk]
        if taken:
            self.release_names(claimed)
        return taken

    def release_names(self, names: Sequence[str]) -> None:
        for chunk in _chunks(names, PIPELINED):
            self.client.hdel(self.queue.global_keys.schedule_index, *chunk)

    def _indexed(self, name: str) -> bytes | None:
        queue: bytes | None = self.client.hget(self.queue.global_keys.schedule_index, name)  # type: ignore[assignment]
        return queue

    # -- reading ---------------------------------------------------------------------

    def get(self, name: str) -> StoredSchedule | None:
        raw = self._indexed(name)
        if raw is None:
            return None
        queue = _queue_name(raw)
        if queue is None:
            shown = raw.decode(errors="replace")
            return StoredSchedule(b"", None, False, name, shown, _NOT_A_QUEUE)
        keys = self.queue.keys(queue)
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(keys.schedule_defs, name)
        pipe.zscore(keys.schedules, name)
        definition, score = pipe.execute()
        if definition is None:
            return None
        return self._stored(queue, name.encode(), definition, score)

    def all(self) -> list[StoredSchedule]:
        """Every schedule in the index, read queue by queue in one round trip; one whose
        queue, name or fire time is not one comes with its ``problem``."""
        index: dict[bytes, bytes] = self.client.hgetall(self.queue.global_keys.schedule_index)  # type: ignore[assignment]
        found: list[StoredSchedule] = []
        queues: set[str] = set()
        for member, raw in index.items():
            queue = _queue_name(raw)
            if queue is None:
                name, shown = member.decode(errors="replace"), raw.decode(errors="replace")
                found.append(StoredSchedule(b"", None, False, name, shown, _NOT_A_QUEUE))
            else:
                queues.add(queue)
        ordered = sorted(queues)
        pipe = self.client.pipeline(transaction=False)
        for queue in ordered:
            keys = self.queue.keys(queue)
            pipe.hgetall(keys.schedule_defs)
            pipe.zrange(keys.schedules, 0, -1, withscores=True)
        replies = pipe.execute()
        for i, queue in enumerate(ordered):
            definitions, scores = replies[2 * i], dict(replies[2 * i + 1])
            for member, definition in definitions.items():
                found.append(self._stored(queue, member, definition, scores.get(member)))
        return found

    def _stored(
        self, queue: str, member: bytes, definition: bytes, score: float | None
    ) -> StoredSchedule:
        next_ms, problem = _fire_time(score)
        try:
            name = member.decode()
        except UnicodeDecodeError:
            problem = "its name is not UTF-8"
            name = member.decode(errors="replace")
        trusted = self.trusted(queue, member, definition)
        return StoredSchedule(definition, next_ms, trusted, name, queue, problem)

    def definition(self, queue: str, name: str) -> bytes | None:
        """The definition's bytes alone: what a compare-and-set compares against."""
        found: bytes | None = self.client.hget(self.queue.keys(queue).schedule_defs, name)  # type: ignore[assignment]
        return found

    # -- signatures ------------------------------------------------------------------

    def check(self, queue: str, name: str | bytes, definition: bytes) -> None:
        """Raise InvalidSignature if this process has a secret and ``definition``, stored
        as schedule ``name`` on ``queue``, is not signed with it for that place."""
        secret = self.queue.config.secret
        if secret:
            verify_definition(definition, secret, queue, name)

    def trusted(self, queue: str, name: str | bytes, definition: bytes) -> bool:
        try:
            self.check(queue, name, definition)
        except InvalidPayload:
            return False
        return True

    def _signed(self, queue: str, name: str | bytes, definition: bytes) -> bytes:
        secret = self.queue.config.secret
        return sign_definition(definition, secret, queue, name) if secret else definition

    # -- changing --------------------------------------------------------------------

    def save(self, savings: Sequence[Saving]) -> list[bool]:
        """Store each definition at its next fire time (None: off the timeline) if the
        stored one is still the one read (``b""``: none), and wake the workers of the
        queues; False for each that changed since (save_schedules.lua).

        One call per queue for up to :data:`SAVE_CHUNK` schedules (each call's keys in
        its queue's hash slot), :data:`PIPELINED` calls to a round trip."""
        by_queue: dict[str, list[int]] = {}
        for i, saving in enumerate(savings):
            by_queue.setdefault(saving.queue, []).append(i)
        calls: list[tuple[str, Sequence[int]]] = [
            (queue, chunk)
            for queue, places in by_queue.items()
            for chunk in _chunks(places, SAVE_CHUNK)
        ]
        saved = [False] * len(savings)
        for batch in _chunks(calls, PIPELINED // SAVE_CHUNK):
            pipe = self.client.pipeline(transaction=False)
            for queue, places in batch:
                keys = self.queue.keys(queue)
                args: list[str | bytes | int] = []
                for i in places:
                    name, read, definition, next_ms = savings[i][1:]
                    signed = self._signed(queue, name, definition)
                    args += (name, read, signed, -1 if next_ms is None else next_ms)
                self.queue.scripts.save_schedules.queue(
                    pipe, (keys.schedules, keys.schedule_defs, keys.timer), args
                )
            for (_, places), replies in zip(batch, execute(pipe, self.queue.scripts), strict=True):
                for i, reply in zip(places, replies, strict=True):
                    saved[i] = bool(reply)
        return saved

    def remove(self, name: str) -> bool:
        """Delete a schedule, also one half-written by a crashed add, or one whose queue
        in the index is not a queue name (only its index entry is there to delete);
        False if unknown."""
        raw = self._indexed(name)
        if raw is None:
            return False
        queue = _queue_name(raw)
        if queue is None:
            self.release_names([name])
            return True
        keys = self.queue.keys(queue)
        self.queue.scripts.remove_schedule(
            self.client, (keys.schedules, keys.schedule_defs), (name,)
        )
        self.release_names([name])
        return True

    # -- firing ----------------------------------------------------------------------

    def earliest(
        self, reads: Sequence[Read]
    ) -> list[tuple[int, list[tuple[bytes, float, bytes | None]]] | Exception]:
        """Per read, Redis's clock and the ``(name, fire time, definition)`` entries of
        its range of the timeline, the definition read only for those due by then or
        within the read's ``ahead_ms`` (else None), read together from the queue's
        node, so "due" means due by the clock of the node that fires it
        (earliest_schedules.lua). One round trip per node.

        On Redis Cluster a read whose shard is down gets its error in its place (the
        other shards' schedules still fire); on one server it is raised."""
        pipe = self.client.pipeline(transaction=False)
        for read in reads:
            keys = self.queue.keys(read.queue)
            args = (read.limit, read.low, read.high, read.skip, read.ahead_ms)
            self.queue.scripts.earliest_schedules.queue(
                pipe, (keys.schedules, keys.schedule_defs), args
            )
        found: list[tuple[int, list[tuple[bytes, float, bytes | None]]] | Exception] = []
        for reply in execute(pipe, self.queue.scripts, raise_on_error=not self._cluster):
            if isinstance(reply, Exception):
                found.append(reply)
                continue
            now, *entries = msgpack.unpackb(reply, raw=True)
            found.append(
                (
                    int(now),
                    [
                        (name, float(score), None if data is False else data)
                        for name, score, data in zip(*[iter(entries)] * 3, strict=True)
                    ],
                )
            )
        return found

    def fire(self, firings: Sequence[Firing]) -> list[bool]:
        """Send every firing at once (:meth:`prepare`, :meth:`send`); True for each this
        worker won, False for those it lost or whose trigger is still ahead."""
        return self.send([self.prepare(firings)])[0].won

    def prepare(self, firings: Sequence[Firing], signed: bool = True) -> Prepared:
        """Sign and pack firings for :meth:`send`.

        Signs what it writes (unless ``signed`` is False: a shelving writes back the
        definition it read): the payloads for their queue, the new definition for its
        queue and name. The caller has checked the definition it read (:meth:`check`).
        """
        secret = self.queue.config.secret if signed else None
        packed = []
        for firing in firings:
            payloads, definition = firing.payloads, firing.definition
            if secret:
                payloads = [sign(p, secret, firing.queue) for p in payloads]
                definition = sign_definition(definition, secret, firing.queue, firing.name)
            # Lua's msgpack reads no bin type: bytes go as msgpack's older raw strings.
            packed.append(
                msgpack.packb(_fire_args(firing, definition, payloads), use_bin_type=False)
            )
        return Prepared(firings, packed)

    def send(self, batch: Sequence[Prepared]) -> list[Sent]:
        """Send prepared firings, all in one round trip: one fire_schedules.lua call per
        queue and :data:`FIRE_CHUNK` firings (each call's keys in its queue's hash
        slot). What became of each, per prepared.

        On Redis Cluster the calls to a shard that is down are not won (their schedules
        stay due, and fire once it is back), unless no shard answered: then, as on one
        server, the outage is raised."""
        by_queue: dict[str, list[tuple[int, int]]] = {}
        for b, prepared in enumerate(batch):
            for i, firing in enumerate(prepared.firings):
                by_queue.setdefault(firing.queue, []).append((b, i))
        calls = [
            (queue, chunk)
            for queue, places in by_queue.items()
            for chunk in _chunks(places, FIRE_CHUNK)
        ]
        pipe = self.client.pipeline(transaction=False)
        for queue, chunk in calls:
            keys = self.queue.keys(queue)
            parts = [batch[b].packed[i] for b, i in chunk]
            fixed = (keys.schedules, keys.schedule_defs, keys.ready, keys.notify, keys.pending_ids)
            self.queue.scripts.fire_schedules.queue(
                pipe, fixed + keys.levels, (_ARRAY.pack_array_header(len(parts)) + b"".join(parts),)
            )
        won = [[True] * len(prepared.firings) for prepared in batch]
        early: list[list[int]] = [[] for _ in batch]
        wait = [0.0] * len(batch)
        replies = execute(pipe, self.queue.scripts, raise_on_error=not self._cluster)
        if replies and all(isinstance(reply, Exception) for reply in replies):
            raise replies[0]
        for (_, chunk), reply in zip(calls, replies, strict=True):
            if isinstance(reply, Exception):
                if not isinstance(reply, REDIS_ERRORS):
                    raise reply
                # Its shard is down: not fired, the schedules stay due on its timeline.
                for b, i in chunk:
                    won[b][i] = False
                continue
            lost, ahead, now = reply
            for place in lost:
                b, i = chunk[place - 1]
                won[b][i] = False
            for place in ahead:
                b, i = chunk[place - 1]
                won[b][i] = False
                early[b].append(i)
                wait[b] = max(wait[b], (batch[b].firings[i].read_ms - now) / 1000)
        return [Sent(*sent) for sent in zip(won, early, wait, strict=True)]

    def shelve(self, queue: str, name: bytes, read_ms: float, read: bytes) -> bool:
        """Take a schedule that cannot fire off the timeline, its definition untouched
        (so never signed by this worker); False if it changed since it was read.

        It stays listed, and ``resume`` or ``update`` puts it back once it can fire.
        """
        firing = Firing(queue, name, read_ms, read, None, read, ())
        return self.send([self.prepare([firing], signed=False)])[0].won[0]


_ARRAY = msgpack.Packer()
"""Writes the header of the msgpack array the packed firings of one call follow."""


def _fire_args(firing: Firing, definition: bytes, payloads: Sequence[bytes]) -> tuple[object, ...]:
    """One schedule's part of fire_schedules.lua's argument, as the script reads it."""
    next_ms = -1 if firing.next_ms is None else firing.next_ms
    fire_by = -1 if firing.fire_by is None else firing.fire_by
    return (firing.name, firing.read_ms, firing.read, next_ms, definition, payloads, fire_by)
