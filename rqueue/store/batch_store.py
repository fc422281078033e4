"""A batch's state in Redis: a hash of counts and options, and one bitmap per outcome.

Every key of a batch carries its id as the hash tag, so they share one slot on Redis
Cluster and each change is one script (batch_*.lua); its members may live in any
queues. The list of batches (``rqueue batches list``) is a global zset, written in a
call of its own: a global key never shares a script or pipeline with another slot's.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from typing import NamedTuple, TypeAlias

import msgpack

from rqueue.errors import InvalidPayload
from rqueue.store.keys import BatchKeys
from rqueue.store.queue import RedisQueue

_HEX_ID = re.compile(r"[0-9a-f]{32}")

MemberCount: TypeAlias = tuple[int, str, str, bytes | None]
"""A member to count: its index, outcome (``s``, ``f``, ``k``) and task id, and a
success's packed return value if its batch's callback gets the results (else None)."""


RESULTS_PAGE = 2000
"""Members' results read per call: a callback of a large batch reads them in pages,
never as one huge reply."""


class Due(NamedTuple):
    """Callbacks a member made due (or found due again: it ran twice)."""

    member_index: int
    names: tuple[str, ...]
    """Of ``then``, ``catch``, ``finally`` and ``progress``."""
    counts: tuple[int, int, int, int]
    """Total, succeeded, failed and skipped right after this member was counted."""


class Counted(NamedTuple):
    """What batch_member.lua said of the members counted in one call."""

    exists: bool
    """False if there is no such batch (expired, pruned): nothing was counted."""
    cancelled: bool
    counted: str
    """One character per member, in order: ``1`` counted now, ``0`` counted before
    (it ran twice), ``-`` not a member (its index is not one), ``x`` a success whose
    value would take the batch's results over ``RQUEUE_MAX_BATCH_RESULTS_BYTES``,
    counted as failed instead."""
    callbacks: bytes
    """The batch's callbacks (msgpack), sent only when some are due."""
    due: tuple[Due, ...]


class Place(NamedTuple):
    """Where a nested batch sits in its workflow."""

    parent: tuple[str, int] | None
    """The outer batch and the index of the member it belongs to, if any."""
    after: str
    """The id of the task or batch it follows in its chain; '' if none."""


class BatchState(NamedTuple):
    """The batch's hash, checked; times in seconds."""

    id: str
    name: str
    total: int
    succeeded: int
    failed: int
    skipped: int
    allow_failures: bool
    created_at: float
    finished_at: float | None
    cancelled_at: float | None
    failed_ids: tuple[str, ...]
    queues: tuple[str, ...]
    callbacks: bytes
    place: Place | None = None
    """Where it sits, if it is nested (shown by ``rqueue batches show``)."""
    nested: tuple[tuple[int, str], ...] = ()
    """The batches nested in it: (member index, batch id), by index."""


class BatchStore:
    """The batch scripts and reads, on one connection."""

    def __init__(self, queue: RedisQueue) -> None:
        self.queue = queue

    def keys(self, batch_id: str) -> BatchKeys:
        config = self.queue.config
        return _batch_keys(batch_id, config.prefix, config.cluster)

    def open(
        self,
        batch_id: str,
        total: int,
        name: str,
        allow_failures: bool,
        callbacks: bytes,
        keep_ms: int,
        queues: Sequence[str],
        progress: bool = False,
        place: Place | None = None,
        results: bool = False,
    ) -> int:
        """Create the batch; Redis's clock (ms) at creation, 0 if it existed already,
        -1 if it existed and its members were pushed (:meth:`pushed`). ``place``:
        where a nested batch sits; ``results``: a callback gets the members' results,
        which they send when counted."""
        keys = self.keys(batch_id)
        flags = ["1" if allow_failures else "0", callbacks, keep_ms, "1" if progress else "0"]
        parent = ""
        if place is not None and place.parent is not None:
            parent = f"{place.parent[0]} {place.parent[1]}"
        after = "" if place is None else place.after
        args = [total, name, *flags, parent, after, "1" if results else "0", *queues]
        created = int(
            self.queue.scripts.batch_open(self.queue.client, (keys.state, keys.queues), args)
        )
        if created > 0:
            self.queue.client.zadd(self.queue.global_keys.batches, {batch_id: created})
        return created

    def nest(self, outer_id: str, batch_id: str, index: int) -> None:
        """Note in the outer batch that ``batch_id`` belongs to its member ``index``."""
        outer = self.keys(outer_id).state
        self.queue.scripts.batch_nested(self.queue.client, (outer,), (batch_id, index))

    def pushed(self, batch_id: str) -> None:
        """Mark the batch's members as all pushed (batch_pushed.lua)."""
        self.queue.scripts.batch_pushed(self.queue.client, (self.keys(batch_id).state,), ())

    def count(self, batch_id: str, members: Sequence[MemberCount]) -> Counted:
        """Count members' outcomes, in one call: each (index, outcome, task id), the
        outcome ``s`` succeeded, ``f`` failed for good, ``k`` skipped, and a success's
        value to keep for the batch's callback (``RQUEUE_MAX_BATCH_RESULTS_BYTES`` in
        all)."""
        keys = self.keys(batch_id)
        # Flat, four per member, false for no value (a nil would end Lua's array there);
        # no bin type: Lua's cmsgpack reads none.
        flat = [
            part
            for index, outcome, task_id, value in members
            for part in (index, outcome, task_id, False if value is None else value)
        ]
        packed = msgpack.packb(flat, use_bin_type=False)
        most = self.queue.config.max_batch_results_bytes
        reply = self.queue.scripts.batch_member(self.queue.side, keys.all(), (packed, most))
        if int(reply[0]) < 0:
            return Counted(False, False, "", b"", ())
        counted = reply[3].decode() if isinstance(reply[3], bytes) else str(reply[3])
        found = reply[4:]
        due = tuple(_due(found[at : at + 6]) for at in range(0, len(found), 6))
        return Counted(True, bool(int(reply[1])), counted, bytes(reply[2] or b""), due)

    def add(self, batch_id: str, token: str, count: int, queues: Sequence[str]) -> tuple[int, bool]:
        """Room for ``count`` more members: their first index (-1: no such batch), and
        whether they send their results (a callback of the batch gets them)."""
        keys = self.keys(batch_id)
        reply = self.queue.scripts.batch_add(
            self.queue.client, (keys.state, keys.adds, keys.queues), (token, count, *queues)
        )
        return int(reply[0]), len(reply) > 1 and reply[1] == b"1"

    def results(self, batch_id: str, first: int, count: int) -> list[bytes | None]:
        """The packed values of members ``first`` to ``first + count - 1`` (None: none
        kept), in one call; read a large batch's in pages of :data:`RESULTS_PAGE`."""
        keys = self.keys(batch_id)
        if count <= 0:
            return []
        indexes = list(range(first, first + count))
        found: list[bytes | None] = self.queue.client.hmget(keys.results, indexes)  # type: ignore[assignment]
        return found

    def total(self, batch_id: str) -> int | None:
        """How many members the batch has; None if there is no such batch."""
        raw = self.queue.client.hget(self.keys(batch_id).state, "total")
        if raw is None:
            return None
        try:
            total = int(raw)
        except ValueError:
            raise InvalidPayload(f"the state of batch {batch_id} is malformed: total") from None
        if total < 0:
            raise InvalidPayload(f"the state of batch {batch_id} is malformed: total")
        return total

    def reopen(self, batch_id: str, members: Sequence[tuple[int, str]]) -> int:
        """Before failed ``members`` (index, task id) are retried: pending again, and the
        batch not cancelled, finished nor expiring; how many were failed."""
        keys = self.keys(batch_id)
        args = [part for member in members for part in member]
        return int(self.queue.scripts.batch_retry(self.queue.client, keys.all(), args))

    def cancel(self, batch_id: str) -> int:
        """1 if cancelled now, 0 if it was already, 2 if it has finished (nothing to
        cancel), -1 if there is no such batch."""
        keys = self.keys(batch_id)
        return int(self.queue.scripts.batch_cancel(self.queue.client, (keys.state,), ()))

    def cancelled(self, batch_id: str) -> bool | None:
        """Whether the batch is cancelled; None if there is no such batch."""
        keys = self.keys(batch_id)
        total, cancelled_at = self.queue.side.call("HMGET", keys.state, "total", "cancelled_at")
        if total is None:
            return None
        return cancelled_at is not None

    def read(self, batch_id: str) -> BatchState | None:
        """The batch's state, or None if there is none (never created, expired, pruned)."""
        keys = self.keys(batch_id)
        pipe = self.queue.client.pipeline(transaction=False)
        pipe.hgetall(keys.state)
        pipe.smembers(keys.failed_ids)
        pipe.smembers(keys.queues)
        fields, failed_ids, queues = pipe.execute()
        if not fields:
            return None
        try:
            return _state(batch_id, fields, failed_ids, queues)
        except (KeyError, ValueError, UnicodeDecodeError, OverflowError) as exc:
            raise InvalidPayload(f"the state of batch {batch_id} is malformed: {exc}") from None

    def listed(self, limit: int = 1000) -> list[str]:
        """The newest ``limit`` batch ids, newest first (some may have expired)."""
        members: list[bytes] = self.queue.client.zrevrange(
            self.queue.global_keys.batches, 0, limit - 1
        )  # type: ignore[assignment]
        return [m.decode("ascii", "replace") for m in members]

    def forget(self, batch_ids: Sequence[str]) -> None:
        """Take batches off the list, and delete their keys (one slot per batch)."""
        for batch_id in batch_ids:
            try:
                self.queue.client.delete(*self.keys(batch_id).all())
            except ValueError:  # not a batch id (written by hand): it has no keys
                continue
        if batch_ids:
            self.queue.client.zrem(self.queue.global_keys.batches, *batch_ids)


def _due(found: Sequence[object]) -> Due:
    index, succeeded, failed, skipped, total, names = found
    raw = names.decode() if isinstance(names, bytes) else str(names)
    counts = (int(total), int(succeeded), int(failed), int(skipped))  # type: ignore[call-overload]
    return Due(int(index), tuple(raw.split(",")), counts)  # type: ignore[call-overload]


@functools.lru_cache(maxsize=1024)
def _batch_keys(batch_id: str, prefix: str, cluster: bool) -> BatchKeys:
    """A batch's keys, named once: a worker counts its members one call each."""
    return BatchKeys.for_batch(batch_id, prefix, cluster)


def _state(
    batch_id: str, fields: dict[bytes, bytes], failed_ids: set[bytes], queues: set[bytes]
) -> BatchState:
    def number(name: str) -> int:
        value = int(fields[name.encode()])
        if value < 0:
            raise ValueError(f"{name} is negative")
        return value

    def moment(name: str) -> float | None:
        raw = fields.get(name.encode())
        if raw is None:
            return None
        value = float(raw) / 1000
        if not math.isfinite(value):
            raise ValueError(f"{name} is not finite")
        return value

    return BatchState(
        id=batch_id,
        name=fields.get(b"name", b"").decode("utf-8", "replace"),
        total=number("total"),
        succeeded=number("succeeded"),
        failed=number("failed"),
        skipped=number("skipped"),
        allow_failures=fields.get(b"allow_failures") == b"1",
        created_at=moment("created_at") or 0.0,
        finished_at=moment("finished_at"),
        cancelled_at=moment("cancelled_at"),
        failed_ids=tuple(sorted(i.decode("ascii", "replace") for i in failed_ids)),
        queues=tuple(sorted(q.decode("utf-8", "replace") for q in queues)),
        callbacks=fields.get(b"callbacks", b""),
        place=_place(fields),
        nested=_nested(fields),
    )


def _place(fields: dict[bytes, bytes]) -> Place | None:
    """Where the batch sits, from its fields (hostile: ValueError if malformed)."""
    raw_parent, after = fields.get(b"parent"), fields.get(b"after", b"")
    if raw_parent is None and not after:
        return None
    parent = None
    if raw_parent is not None:
        outer, index = raw_parent.decode("ascii").split(" ")
        parent = _batch_id(outer), int(index)
    return Place(parent, _batch_id(after.decode("ascii")) if after else "")


def _nested(fields: dict[bytes, bytes]) -> tuple[tuple[int, str], ...]:
    found = [
        (int(index), _batch_id(name[len(b"nested:") :].decode("ascii")))
        for name, index in fields.items()
        if name.startswith(b"nested:")
    ]
    return tuple(sorted(found))


def _batch_id(text: str) -> str:
    """``text`` if it is an id (32 hex digits); ValueError if not."""
    if not _HEX_ID.fullmatch(text):
        raise ValueError(f"{text!r} is not an id")
    return text
