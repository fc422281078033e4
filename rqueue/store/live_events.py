"""A queue's live task events: the stream its scripts write, followed and read back checked.

With ``rqueue work --events`` (``Config.events``: the stream's cap) a worker's scripts
add one entry to ``queues:<q>:events`` in the same call that changes a task's state
(``lua/events.lua``): ``started`` (reserve.lua), ``succeeded`` (reserve.lua, ack.lua,
push_once.lua), ``retried`` (release.lua), ``failed`` (fail.lua), ``progress``
(progress.lua). A producer has no such option: its scripts (push.lua, push_once.lua,
cancel.lua) add ``dispatched`` and ``cancelled`` while the queue's marker
(``queues:<q>:events-on``) exists, which each recording worker's parent renews every
tick (migrate.lua) and which lapses 30 s after the last one stops. The stream is capped
(``XADD MAXLEN ~``) and expires a day after the last recording worker's tick.

Reading follows the streams with ``XREAD BLOCK``, from now or from their start. An
entry came from Redis, where anyone may write: an entry that is not an event of
these (unknown kind, no id) is skipped, and its strings are kept as given for the
caller to escape (``rqueue.text.shown``), never trusted to be printable.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import redis

from rqueue.store.header import RAW_ID_LENGTH
from rqueue.store.keys import QueueKeys
from rqueue.store.queue import RedisQueue

KINDS = frozenset(
    {"dispatched", "started", "progress", "retried", "succeeded", "failed", "cancelled"}
)
FINAL = frozenset({"succeeded", "failed", "cancelled"})
"""The events after which a task has no more (until it is retried from the failed list)."""
_ENTRY_ID = re.compile(rb"(\d{1,20})-(\d{1,20})")
_LONGEST = 1000
"""Characters kept of any string field: an entry is a line, not a file."""
_BLOCK_CHUNK = 1.0
"""Longest single XREAD BLOCK: under any socket timeout."""
_BATCH = 500
"""Entries one XREAD reads per stream at most."""
RECENT_SCANNED = 2000
"""Newest entries a task's page looks through for its events."""


class LiveEvent(NamedTuple):
    """One event of one task, as its queue's stream holds it."""

    event: str
    """dispatched, started, progress, retried, succeeded, failed or cancelled."""
    id: str
    task: str
    """Its task's name ('' for ``cancelled``: the cancelling call knows only the id)."""
    queue: str
    attempt: int
    """The attempt it is of (0 before the first: dispatched, cancelled)."""
    time: float
    """Epoch seconds by Redis's clock: when the script added it."""
    fraction: float | None = None
    """``progress``: how far the task has come, 0 to 1."""
    message: str | None = None
    """``progress``: what the task said, if anything."""
    error: str | None = None
    """``retried`` and ``failed``: the type of the error the attempt raised."""

    def as_dict(self) -> dict[str, Any]:
        """The fields that apply, for JSON (``rqueue events --json``)."""
        return {k: v for k, v in self._asdict().items() if v is not None}


def parse(queue: str, entry_id: bytes, fields: Any) -> LiveEvent | None:
    """A stream entry as a :class:`LiveEvent`, or None if it is not one (skipped)."""
    match = _ENTRY_ID.fullmatch(entry_id) if isinstance(entry_id, bytes) else None
    if match is None or not isinstance(fields, dict):
        return None
    text = {_text(k): _text(v) for k, v in fields.items()}
    event, stored_id = text.get("event"), fields.get(b"id")
    # The scripts store the id's 16 raw bytes (as the pending-ids set); anything else
    # is shown as the text it is.
    raw = isinstance(stored_id, bytes) and len(stored_id) == RAW_ID_LENGTH
    task_id = stored_id.hex() if raw else text.get("id")  # type: ignore[union-attr]
    if event not in KINDS or not task_id:
        return None
    attempt = text.get("attempt", "")
    fraction = _fraction(text.get("fraction"))
    return LiveEvent(
        event,
        task_id,
        text.get("task", ""),
        queue,
        int(attempt) if attempt.isdigit() and len(attempt) < 11 else 0,
        int(match[1]) / 1000,
        fraction if event == "progress" else None,
        (text.get("message") or None) if event == "progress" else None,
        (text.get("error") or "") if event in ("retried", "failed") else None,
    )


class EventFollower:
    """Follows the event streams of some queues, each from now or from its start."""

    def __init__(self, queue: RedisQueue, names: Sequence[str], from_start: bool = False) -> None:
        self.queue = queue
        keys = [queue.keys(name) for name in names]
        self._names = {k.events: k.name for k in keys}
        self._last = {k.events: "0-0" if from_start else self._newest(k) for k in keys}

    def _newest(self, keys: QueueKeys) -> str:
        """The id of the stream's newest entry ("now"), or 0-0 if it has none yet."""
        try:
            newest: Any = self.queue.client.xrevrange(keys.events, count=1)
        except redis.ResponseError:  # a key of another type: nothing to follow there
            return "0-0"
        return newest[0][0].decode() if newest else "0-0"

    def poll(self, block: float) -> list[LiveEvent]:
        """The events added since the last poll, waiting up to ``block`` seconds for one."""
        block_ms = max(1, round(min(block, _BLOCK_CHUNK) * 1000))
        if self.queue.config.cluster and len(self._last) > 1:  # one XREAD cannot span slots
            found = [
                e for key in list(self._last) for e in self._read({key: self._last[key]}, None)
            ]
            if not found:
                time.sleep(min(block, 0.2))
            return found
        return self._read(dict(self._last), block_ms)

    def _read(self, streams: dict[str, str], block_ms: int | None) -> list[LiveEvent]:
        try:
            reply: Any = self.queue.client.xread(streams, count=_BATCH, block=block_ms)  # type: ignore[arg-type]
        except redis.ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            return []  # a key of another type where a stream should be: no events there
        found: list[LiveEvent] = []
        for stream, entries in reply or []:
            key = stream.decode() if isinstance(stream, bytes) else str(stream)
            for entry_id, fields in entries:
                self._last[key] = entry_id.decode()
                event = parse(self._names.get(key, ""), entry_id, fields)
                if event is not None:
                    found.append(event)
        return found


def task_events(
    queue: RedisQueue, queue_name: str, task_id: str, timeout: float
) -> Iterator[LiveEvent]:
    """One task's events from its queue's stream, from the stream's start, as they come:
    ends after its final event (succeeded, failed, cancelled) or once ``timeout``
    seconds have passed."""
    deadline = time.monotonic() + max(0.0, timeout)
    follower = EventFollower(queue, [queue_name], from_start=True)
    while (left := deadline - time.monotonic()) > 0:
        for event in follower.poll(left):
            if event.id == task_id:
                yield event
                if event.event in FINAL:
                    return


def recent_events(
    queue: RedisQueue, queue_name: str, task_id: str, scanned: int = RECENT_SCANNED
) -> list[LiveEvent]:
    """One task's events among the newest ``scanned`` of its queue's stream, oldest
    first, without waiting (a task's page): one ``XREVRANGE``, bounded."""
    try:
        entries: Any = queue.client.xrevrange(queue.keys(queue_name).events, count=scanned)
    except redis.ResponseError as exc:
        if "WRONGTYPE" not in str(exc):
            raise
        return []  # a key of another type where the stream should be: no events there
    found = (parse(queue_name, entry_id, fields) for entry_id, fields in entries or [])
    return [event for event in found if event is not None and event.id == task_id][::-1]


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")[:_LONGEST]
    return str(value)[:_LONGEST]


def _fraction(value: str | None) -> float | None:
    try:
        fraction = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return fraction if 0.0 <= fraction <= 1.0 else None
