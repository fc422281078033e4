"""The Redis key names of a queue, in one place, and the rules that keep them apart.

On a single Redis a queue named ``emails`` lives at ``queues:emails`` and its
sorted sets and lists beside it (``queues:emails:delayed``, ...). On Redis Cluster
the name is hash-tagged (``queues:{emails}``) so every key of one queue shares a
slot and the Lua scripts, which touch several of them at once, run unchanged. The
global keys are tagged ``{rqueue}`` there, one slot of their own, and no script or
pipeline ever mixes them with a queue's keys.

Because a queue's own keys are its name plus ``:<part>``, a queue named
``emails:delayed`` would *be* the delayed set of ``emails``. So no ``:``-separated
part of a name after the first may be one of those parts (:data:`KEY_PARTS`): then
no legal name can map onto another queue's key, while every name without such a
part (``emails``, ``mail:high``, ``a/b@c``) keeps the keys it always had.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from rqueue.errors import InvalidQueueName
from rqueue.settings.config import ConfigError

_VALID_NAME = re.compile(r"[A-Za-z0-9_.\-:@/]{1,200}")
_CLAIMS = "claims"
_PRIORITY = "priority#"
"""The start of the priority levels' parts (``priority#3``): a queue name has no ``#``,
so these parts can be no name's and reserve no word."""
Lane = int | str
"""Where a ready task waits in its queue: a priority level, 0 to 9, or the name of its
group (``using(group=)``), whose tasks are at level 5 and take turns with the others."""
_GROUPS = "groups#"
"""The groups' turns key, and the start of each group's list (``groups#acme``): no queue
name has a ``#`` either."""
PLAIN_LEVEL = 5
"""The priority level of a task dispatched without one: its queue's ready list is
that level's list, between levels 0-4 (run before) and 6-9 (run after)."""
_PER_TASK = (
    "result",
    "done",
    "once",
    "exceptions",
    "middleware",
    "progress",
    "checkpoint",
    "debounce",
    "dependents",
)
"""Parts followed by a task id: its kept result, the list that wakes whoever waits for
it, the marker that makes a workflow's push of it idempotent, and its count of raised
exceptions (``max_exceptions``); the state of middleware, by kind and key; its latest
progress; and an iterable task's checkpoint. And followed by a debounce key: the call
pending for it. And the tasks waiting for a task (``using(after=...)``, dependencies.lua)."""
_PARTS = {
    "delayed": "delayed",
    "reserved": "reserved",
    "failed": "failed",
    "failed_lookup": "failed-lookup",
    "notify": "notify",
    "timer": "timer",
    "pending_ids": "pending-ids",
    "cancelled": "cancelled",
    "cancelling": "cancelling",
    "schedules": "schedules",
    "schedule_defs": "schedule-defs",
    "rate": "rate",
    "unique": "unique",
    "paused": "paused",
    "metrics": "metrics",
    "events": "events",
    "events_on": "events-on",
    "finished": "finished",
    "waiting": "waiting",
    "resolved": "resolved",
}
"""Each per-queue key's field in :class:`QueueKeys` and the part after the name."""
KEY_PARTS = frozenset([*_PARTS.values(), _CLAIMS, *_PER_TASK])
"""Words a queue name may not use as a ``:``-separated part after its first."""


def validate_queue_name(name: str) -> str:
    """Refuse names that would be ambiguous in keys, logs or the CLI's comma lists.

    ``fullmatch``, not ``match`` with ``$``: ``$`` also matches before a trailing
    newline, which let ``"x\\n"`` through.
    """
    if not isinstance(name, str) or not _VALID_NAME.fullmatch(name):
        raise InvalidQueueName(
            f"invalid queue name {name!r}: use 1 to 200 letters, digits or '_.-:@/' "
            "(no whitespace, commas, braces or control characters)"
        )
    parts = name.split(":")
    for index, part in enumerate(parts[1:], 1):
        if part in KEY_PARTS:
            raise InvalidQueueName(
                f"invalid queue name {name!r}: ':{part}' is reserved for the keys of queue "
                f"{':'.join(parts[:index])!r}; a part after a ':' may not be any of "
                f"{', '.join(sorted(KEY_PARTS))}"
            )
    return name


def validate_prefix(prefix: str) -> str:
    """Refuse a key prefix with braces: Redis Cluster would hash the prefix's braces
    instead of the queue name's, putting every queue in one slot (or splitting one)."""
    if not isinstance(prefix, str) or "{" in prefix or "}" in prefix:
        raise ConfigError(
            f"invalid key prefix {prefix!r} (--prefix, RQUEUE_PREFIX or Config.prefix): "
            "braces are not allowed, since Redis Cluster hashes the part of a key between "
            "braces and rqueue puts each queue's name there"
        )
    return prefix


@dataclass(frozen=True)
class QueueKeys:
    """Every key of one queue."""

    name: str
    ready: str
    delayed: str
    reserved: str
    failed: str
    """The failed list: the records of the queue's failed tasks (:mod:`rqueue.failed`),
    one element per failure, the newest at the head."""
    failed_lookup: str
    """Finds a failed record by its task id: a zset of ``<task id>#<n>`` -> a sequence
    number rising in the order records came, one member per element of the list and
    ranked as the list is ordered, so a member's rank is its record's index
    (lua/failed_list.lua states the invariant)."""
    notify: str
    timer: str
    pending_ids: str
    """Ids of tasks pushed and not yet reserved: lets ``cancel`` answer in O(1)."""
    cancelled: str
    """Ids cancelled while pending; reserve.lua drops them instead of reserving them."""
    cancelling: str
    """Cancels requested for running tasks, a hash: raw task id -> ``'1'`` (file it in
    the failed list too) or ``'0'`` (cancel.lua). The worker's parent polls it while its
    children run tasks and signals the child running one (supervisor.py); the task's
    settle clears it (settle_cancelled.lua, fail.lua), prune_cancelling.lua the rest."""
    schedules: str
    """Schedules firing into this queue: zset of name -> next fire time (ms)."""
    schedule_defs: str
    """Their definitions: hash of name -> msgpack map."""
    rate: str
    """The queue's rate limit state (``rqueue work --rate``): the theoretical arrival
    time of its next task in ms (GCRA, reserve.lua)."""
    unique: str
    """Its unique tasks' locks (``@task(unique=)``), a hash: ``key:<lock key>`` ->
    ``"<owner id> <expiry ms>"`` and ``id:<owner id>`` -> its lock key, so that a lock
    is released by its owner's id alone (push.lua, release_unique.lua)."""
    paused: str
    """Exists while the queue is paused (``rqueue pause``): reserve.lua hands out nothing."""
    metrics: str
    """The queue's all-time counters and histograms, a hash of task name -> its counts
    packed (metrics_flush.lua, :mod:`rqueue.metrics.schema`)."""
    events: str
    """The queue's live task events, a stream capped with ``XADD MAXLEN ~`` (``rqueue
    work --events``; :mod:`rqueue.store.live_events`): written by the scripts that change a
    task's state, in the same call, only while a worker records events."""
    events_on: str
    """Exists while a worker of the queue records events (``rqueue work --events``; its
    parent renews it each tick, migrate.lua), holding the stream's cap: producers'
    scripts (push.lua, cancel.lua) add their ``dispatched`` and ``cancelled`` events
    only then."""
    finished: str
    """The tasks that finished and kept their result, newest last: a zset of raw task id
    -> when it finished (epoch seconds), capped (lua/keep_result.lua), so the dashboard lists
    recently finished tasks a window at a time (:mod:`rqueue.store.browse`)."""
    waiting: str
    """Tasks dispatched ``using(after=...)`` whose dependencies have not all finished, a
    hash: ``p:<id>`` -> the payload, ``s:<id>`` -> its state (wait.lua, resolve.lua)."""
    resolved: str
    """Notices of this queue's tasks that finished with tasks waiting for them, a list
    drained by the worker parents (dependencies.lua, :mod:`rqueue.workflows.dependencies`)."""

    @cached_property
    def levels(self) -> tuple[str, ...]:
        """The ready lists of priority levels 0 to 9 (``@task(priority=)``), level 5
        being the ready list itself: what reserve.lua, release.lua and migrate.lua
        index by level. Then the set of levels 0-4 and 6-9 whose list is not empty
        (reserve.lua looks at the others only when it is not; 5 while groups have
        tasks), the marker that the queue had prioritised or grouped tasks (migrate.lua
        and release.lua read a moved task's level and group only then), the aging hash
        (``rqueue work --aging``) and the groups' turns (:attr:`turns`)."""
        level = f"{self.ready}:{_PRIORITY}"
        lists = [f"{level}{n}" if n != PLAIN_LEVEL else self.ready for n in range(10)]
        return (*lists, f"{level}levels", f"{level}used", f"{level}aging", self.turns)

    @cached_property
    def turns(self) -> str:
        """The groups with tasks ready (``using(group=)``), a zset of group -> its next
        turn (lua/groups.lua); each group's list is this key followed by its name."""
        return f"{self.ready}:{_GROUPS}"

    def group(self, name: str) -> str:
        """The ready list of one group's tasks (lua/groups.lua names it the same way)."""
        return f"{self.turns}{name}"

    def claims(self, token: str) -> str:
        """What one worker child reserved last from this queue (see reserve.lua).

        Beside the ready list, so in the queue's hash slot on Redis Cluster.
        """
        return f"{self.ready}:{_CLAIMS}:{token}"

    def result(self, task_id: str) -> str:
        """A task's status, then its result or error, while it keeps one (results.py)."""
        return f"{self.ready}:result:{task_id}"

    def done(self, task_id: str) -> str:
        """A list holding one token once the task finished: ``result()`` blocks on it."""
        return f"{self.ready}:done:{task_id}"

    def once(self, task_id: str) -> str:
        """Set by push_once.lua: a task with this id was pushed by a workflow already."""
        return f"{self.ready}:once:{task_id}"

    def dependents(self, task_id: str) -> str:
        """The tasks waiting for this one (``using(after=...)``), a set, registered by
        depend.lua and moved into a notice by the script that writes its outcome."""
        return f"{self.ready}:dependents:{task_id}"

    def exceptions(self, task_id: str) -> str:
        """How many exceptions a task with ``max_exceptions`` has raised so far
        (count_exception.lua), kept across its attempts and whichever worker runs them."""
        return f"{self.ready}:exceptions:{task_id}"

    def middleware(self, kind: str, key: str) -> str:
        """State of one middleware key (a rate limiter's, a lock's, a circuit breaker's),
        in the queue's slot so its check-and-set is one script on Redis Cluster too."""
        return f"{self.ready}:middleware:{kind}:{key}"

    def progress(self, task_id: str) -> str:
        """A running task's latest progress (progress.lua), a hash that expires."""
        return f"{self.ready}:progress:{task_id}"

    def debounce(self, key: str) -> str:
        """The call pending for one debounce key (``@task(debounce=)``, debounce.lua): a
        hash of its payload and when its burst began, expiring once the call is due.
        One key per debounce key rather than one hash per queue, so that an entry
        whose call ran leaves by itself: keys from the arguments (a user's id) are
        unbounded in number."""
        return f"{self.ready}:debounce:{key}"

    def checkpoint(self, task_id: str) -> str:
        """How far an iterable task has come (checkpoint.lua): its last cursor, read
        back by its next attempt, in the queue's hash slot as its reservation is."""
        return f"{self.ready}:checkpoint:{task_id}"

    def metrics_minute(self, minute: int) -> str:
        """The same counters for one minute (``minute`` is epoch seconds // 60); each
        expires a day after its minute, so a queue keeps at most 1,440 of them."""
        return f"{self.metrics}:{minute}"

    @classmethod
    def for_queue(cls, name: str, prefix: str = "", cluster: bool = False) -> QueueKeys:
        validate_queue_name(name)
        validate_prefix(prefix)
        base = f"{prefix}queues:{{{name}}}" if cluster else f"{prefix}queues:{name}"
        return cls(name, base, **{field: f"{base}:{part}" for field, part in _PARTS.items()})


_BATCH_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class BatchKeys:
    """Every key of one batch, in one hash slot of their own (the batch's id is the tag)."""

    id: str
    state: str
    """Hash: total, counts, times, options and callbacks (batch_member.lua)."""
    succeeded: str
    """Bitmap by member index: each member counts once, however often it runs."""
    failed: str
    skipped: str
    """Members not run because the batch was cancelled."""
    failed_ids: str
    adds: str
    """Hash: token of an ``add()`` call -> its first index, so a re-run adds nothing."""
    queues: str
    results: str
    """Hash: member index -> its packed return value, for a callback that gets them
    (``then(cb, results=True)``); a member counted before never overwrites its own."""

    def all(self) -> tuple[str, ...]:
        return (
            self.state,
            self.succeeded,
            self.failed,
            self.skipped,
            self.failed_ids,
            self.adds,
            self.queues,
            self.results,
        )

    @classmethod
    def for_batch(cls, batch_id: str, prefix: str = "", cluster: bool = False) -> BatchKeys:
        if not isinstance(batch_id, str) or not _BATCH_ID.fullmatch(batch_id):
            raise ValueError(f"a batch id is 32 lowercase hex digits, got {batch_id!r}")
        validate_prefix(prefix)
        base = f"{prefix}batches:{{{batch_id}}}" if cluster else f"{prefix}batches:{batch_id}"
        return cls(
            batch_id,
            base,
            f"{base}:succeeded",
            f"{base}:failed",
            f"{base}:skipped",
            f"{base}:failed-ids",
            f"{base}:adds",
            f"{base}:queues",
            f"{base}:results",
        )


@dataclass(frozen=True)
class GlobalKeys:
    """Keys shared by all queues: never touched by a script together with a queue's keys."""

    known_queues: str
    restart: str
    schedule_index: str
    """Hash of schedule name -> queue name, so a schedule is found by its name alone."""
    batches: str
    """Zset of batch id -> created (ms): what ``rqueue batches list`` shows."""
    workers: str
    """Zset of running worker id -> when its entry expires (ms): ``rqueue workers``."""
    pools: str
    """Zset of ``host/pool`` -> when its status expires (ms): ``rqueue supervise``'s pools."""

    def worker(self, worker_id: str) -> str:
        """One worker's entry (msgpack map), expiring unless its heartbeat renews it."""
        return f"{self.workers}:{worker_id}"

    def pool(self, pool_id: str) -> str:
        """One supervised pool's status (msgpack map): its targets and last decision,
        expiring unless its supervisor writes it again."""
        return f"{self.pools}:{pool_id}"

    @classmethod
    def for_prefix(cls, prefix: str = "", cluster: bool = False) -> GlobalKeys:
        """On Redis Cluster they all share one hash tag, so one slot: a worker reads
        the marker and re-adds its queues in one round trip, to one node."""
        validate_prefix(prefix)
        base = f"{prefix}{{rqueue}}" if cluster else f"{prefix}rqueue"
        return cls(
            known_queues=f"{base}:queues",
            restart=f"{base}:restart",
            schedule_index=f"{base}:schedules",
            batches=f"{base}:batches",
            workers=f"{base}:workers",
            pools=f"{base}:pools",
        )
