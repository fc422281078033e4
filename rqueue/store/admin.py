"""The administering role of :class:`~rqueue.store.queue.RedisQueue`: reading and
steering queues as a whole.

What the CLI, the dashboard, metrics and a worker's parent ask about or do to a
queue rather than to a task: the registry of queues, sizes, pausing, clearing, the
restart marker. Reads are pipelined, one round trip for any number of queues.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from rqueue.errors import InvalidQueueName
from rqueue.store import calls
from rqueue.store.base import QueueBase
from rqueue.store.cluster import ClusterClient
from rqueue.store.keys import PLAIN_LEVEL, validate_queue_name

_SCAN_COUNT = 500
"""Registry members per SSCAN step."""


@dataclass(frozen=True)
class QueueSize:
    name: str
    ready: int
    delayed: int
    reserved: int
    failed: int
    paused: bool = False
    levels: tuple[int, ...] = ()
    """Ready tasks per priority level, 0 to 9 (level 5: those without a priority, and
    the groups'), if any level but 5 has some; else empty (all of ``ready`` are level 5)."""
    groups: int = 0
    """Fair groups (``using(group=)``) with tasks ready; their tasks count in ``ready``."""

    @property
    def by_level(self) -> str:
        """``levels``' non-empty counts as ``0=3 5=10 9=100000`` ('' without levels),
        as ``rqueue size`` and the dashboard show them."""
        return " ".join(f"{level}={n}" for level, n in enumerate(self.levels) if n)

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


class Admin(QueueBase):
    """Queues as a whole: which exist, how big they are, paused or cleared."""

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
        """Each queue's counts: six O(1) reads a queue in one round trip, and one more
        round trip for the queues with priority levels in use (their lists' lengths)."""
        pipe = self.client.pipeline(transaction=False)
        for queue in queues:
            keys = self.keys(queue)
            pipe.llen(keys.ready)
            pipe.zcard(keys.delayed)
            pipe.zcard(keys.reserved)
            pipe.llen(keys.failed)
            pipe.exists(keys.paused)
            pipe.exists(keys.levels[10])
        for queue in queues:  # counted out below (QueueSize.counted_out)
            pipe.scard(self.keys(queue).cancelled)
        counts = pipe.execute()
        cancelled = counts[len(counts) - len(queues) :]
        rows = [counts[6 * i : 6 * i + 6] for i in range(len(queues))]
        leveled = [q for q, row in zip(queues, rows, strict=True) if row[5]]
        levels, groups = self._levels(leveled), self._groups(leveled)
        sizes = []
        for i, queue in enumerate(queues):
            ready, delayed, reserved, failed, paused, _ = rows[i]
            grouped, tasks = groups.get(queue, (0, 0))
            by_level = levels.get(queue, ())
            if by_level:
                by_level = tuple(
                    n + tasks * (level == PLAIN_LEVEL) for level, n in enumerate(by_level)
                )
            ready = sum(by_level) if by_level else ready + tasks
            size = QueueSize(
                queue, ready, delayed, reserved, failed, bool(paused), by_level, grouped
            )
            sizes.append(size.counted_out(cancelled[i]))
        return sizes

    def _levels(self, queues: Sequence[str]) -> dict[str, tuple[int, ...]]:
        """The ready tasks per priority level of each of ``queues`` (levels set in use),
        left out where only level 5 has any after all."""
        if not queues:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for queue in queues:
            for key in self.keys(queue).levels[:10]:
                pipe.llen(key)
        counts = pipe.execute()
        found = {}
        for i, queue in enumerate(queues):
            row = tuple(counts[10 * i : 10 * i + 10])
            if sum(row) != row[PLAIN_LEVEL]:
                found[queue] = row
        return found

    def _groups(self, queues: Sequence[str]) -> dict[str, tuple[int, int]]:
        """How many fair groups have tasks ready in each of ``queues``, and how many
        tasks they hold: two round trips, and one list length a group."""
        pipe = self.client.pipeline(transaction=False)
        for queue in queues:
            pipe.zrange(self.keys(queue).turns, 0, -1)
        names: list[list[bytes]] = [[g for g in turns if g] for turns in pipe.execute()]
        if not any(names):
            return {}
        pipe = self.client.pipeline(transaction=False)
        for queue, groups in zip(queues, names, strict=True):
            turns = self.keys(queue).turns.encode()
            for group in groups:  # '' is the ready list's turn, counted already
                pipe.llen(turns + group)
        lengths = iter(pipe.execute())
        return {
            queue: (len(groups), sum(next(lengths) for _ in groups))
            for queue, groups in zip(queues, names, strict=True)
            if groups
        }

    def pause(self, queue: str) -> bool:
        """Stop workers taking tasks from ``queue`` (running ones finish); False if it
        was paused already. Dispatching to it goes on: the tasks wait, as in Laravel's
        ``queue:pause``."""
        return bool(self.scripts.pause(self.client, *calls.pause(self.keys(queue), True)))

    def resume(self, queue: str) -> bool:
        """Let workers take tasks from ``queue`` again; False if it was not paused."""
        return bool(self.scripts.pause(self.client, *calls.pause(self.keys(queue), False)))

    def paused(self, queues: Sequence[str]) -> set[str]:
        """Which of ``queues`` are paused, in one pipelined round trip."""
        pipe = self.client.pipeline(transaction=False)
        for queue in queues:
            pipe.exists(self.keys(queue).paused)
        return {queue for queue, held in zip(queues, pipe.execute(), strict=True) if held}

    def clear(self, queue: str) -> int:
        """Delete every pending task of ``queue`` (clear.lua); how many. Failed stays.

        One atomic call for any size: the script unlinks the keys and Redis frees their
        memory in the background, so it never holds Redis for the time of the freeing.
        """
        return int(self.scripts.clear(self.client, *calls.clear(self.keys(queue))))

    def ping(self) -> None:
        """Raise redis-py's error now if Redis cannot be reached or refuses us.

        On a cluster, reached means some primary answers, asked in turn: a PING goes to
        any primary, and one that is down (its failover under way) must not stop a
        worker from starting, whose loop rides that out; it once did, at random.
        """
        if not isinstance(self.client, ClusterClient):
            self.client.ping()
            return
        self.client.any_primary("PING")

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
