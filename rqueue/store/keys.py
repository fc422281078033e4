"""The Redis key names of a queue, in one place.

On a single Redis a queue named ``emails`` lives at ``queues:emails`` and its
sorted sets and lists beside it. On Redis Cluster the name is hash-tagged
(``queues:{emails}``) so every key of one queue shares a slot and the Lua scripts,
which touch several of them at once, run unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rqueue.errors import InvalidQueueName

_VALID_NAME = re.compile(r"^[A-Za-z0-9_.\-:@/]{1,200}$")


def validate_queue_name(name: str) -> str:
    """Refuse names that would be ambiguous in keys, logs or the CLI's comma lists."""
    if not isinstance(name, str) or not _VALID_NAME.match(name):
        raise InvalidQueueName(
            f"invalid queue name {name!r}: use 1 to 200 letters, digits or '_.-:@/' "
            "(no whitespace, commas, braces or control characters)"
        )
    return name


@dataclass(frozen=True)
class QueueKeys:
    """Every key of one queue."""

    name: str
    ready: str
    delayed: str
    reserved: str
    failed: str
    notify: str
    timer: str
    pending_ids: str
    """Ids of tasks pushed and not yet reserved: lets ``cancel`` answer in O(1)."""
    cancelled: str
    """Ids cancelled while pending; reserve.lua drops them instead of reserving them."""
    schedules: str
    """Schedules firing into this queue: zset of name -> next fire time (ms)."""
    schedule_defs: str
    """Their definitions: hash of name -> msgpack map."""

    def claims(self, token: str) -> str:
        """What one worker child reserved last from this queue (see reserve.lua).

        Beside the ready list, so in the queue's hash slot on Redis Cluster.
        """
        return f"{self.ready}:claims:{token}"

    @classmethod
    def for_queue(cls, name: str, prefix: str = "", cluster: bool = False) -> QueueKeys:
        validate_queue_name(name)
        base = f"{prefix}queues:{{{name}}}" if cluster else f"{prefix}queues:{name}"
        return cls(
            name=name,
            ready=base,
            delayed=f"{base}:delayed",
            reserved=f"{base}:reserved",
            failed=f"{base}:failed",
            notify=f"{base}:notify",
            timer=f"{base}:timer",
            pending_ids=f"{base}:pending-ids",
            cancelled=f"{base}:cancelled",
            schedules=f"{base}:schedules",
            schedule_defs=f"{base}:schedule-defs",
        )


@dataclass(frozen=True)
class GlobalKeys:
    """Keys shared by all queues: never touched by a script together with a queue's keys."""

    known_queues: str
    restart: str
    schedule_index: str
    """Hash of schedule name -> queue name, so a schedule is found by its name alone."""

    @classmethod
    def for_prefix(cls, prefix: str = "") -> GlobalKeys:
        return cls(
            known_queues=f"{prefix}rqueue:queues",
            restart=f"{prefix}rqueue:restart",
            schedule_index=f"{prefix}rqueue:schedules",
        )
