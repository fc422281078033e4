"""Which features take part in an attempt, chosen once per attempt from its job.

A worker child (and the parent, settling a dead child's tasks) builds one
:class:`Roster` when it starts. :meth:`Roster.of` picks an attempt's participants
from its job with two cheap tests (no ``max_exceptions``, and none of the ``meta``
entries that add one: the plain case) among tuples made once, so a plain task with
metrics off calls no hook at all, and one with metrics on calls the collector's alone.

Metrics are a participant like the others (:class:`Metrics`): the lifecycle tells
them each outcome through the same hooks as unique locks and exception counting, and
the parent's recovery tells them the outcomes it settles.

A new feature with state in Redis adds a :class:`~rqueue.worker.attempt.Participant`
in its own module and one test here saying which jobs it is for.

An integration (tracing: ``rqueue/contrib/opentelemetry.py``, ``sentry.py``) takes part
in every attempt of the process: it joins (:func:`join`) before the child builds its roster
(in the child, after fork: ``WorkerOptions.child_setup``, or in an ``-A`` module), and
its participant is then everyone's, its ``call_scope`` asked for each call. A child
none joined builds the rosters it always did.
"""

from __future__ import annotations

from collections.abc import Callable

from rqueue.encoding.payload import Job
from rqueue.metrics.collector import Collector, NoMetrics
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import Persist
from rqueue.tasks.iterable import ITERABLE
from rqueue.tasks.options import UNIQUE
from rqueue.worker.attempt import Participant, Participants
from rqueue.worker.iteration import ForgetCheckpoint, is_iterable
from rqueue.worker.max_exceptions import ExceptionCount
from rqueue.worker.unique_locks import UniqueLock, is_unique


class Metrics(Collector, Participant):
    """A worker process's collector (metrics/collector.py), taking part in its attempts:
    it records each outcome its hooks hear. A success is recorded by the collector's
    own method, with no call around it: it is every task's (metrics are on by default).

    ``counted`` is the name a failure is counted under: a child asks its registry, the
    parent, which imported no task, trusts a well-formed name (see their callers)."""

    def __init__(self, store: RedisQueue, counted: Callable[[Job | None], str]) -> None:
        super().__init__(store)
        self.counted = counted

    after_succeeded = Collector.succeeded

    def after_retried(self, queue: str, job: Job, duration: float | None) -> None:
        self.retried(queue, self.counted(job), job, duration)

    def after_failed(self, queue: str, job: Job | None, duration: float | None) -> None:
        self.failed(queue, self.counted(job), job, duration)


def recorder(
    store: RedisQueue, enabled: bool, counted: Callable[[Job | None], str]
) -> Metrics | NoMetrics:
    """What a worker process (a child, or the parent for the tasks it settles) records
    its outcomes into: :class:`Metrics`, or with ``--no-metrics`` nothing."""
    return Metrics(store, counted) if enabled else NoMetrics()


_CHOOSING = frozenset({UNIQUE, ITERABLE})
"""The ``meta`` entries that add a participant: a job with none and no
``max_exceptions`` (a batch's member, a chain's step) has a plain task's."""
_joined: Participants = ()
"""The integrations' participants, in the order they joined: process-wide, as the
SDKs they serve are (one ``sentry_sdk.init`` per process)."""


def join(participant: Participant) -> None:
    """Take part in every attempt of the workers this process starts from now on (the
    rosters built since); joining again is a no-op."""
    global _joined
    if participant not in _joined:
        _joined = (*_joined, participant)


def leave(participant: Participant) -> None:
    """Stop taking part in the attempts of rosters built from now on."""
    global _joined
    _joined = tuple(p for p in _joined if p is not participant)


class Roster:
    """The participants of one worker process's attempts, by what their job needs."""

    def __init__(
        self,
        store: RedisQueue,
        persist: Persist,
        metrics: Metrics | NoMetrics,
    ) -> None:
        everyone: Participants = (metrics,) if isinstance(metrics, Metrics) else ()
        everyone += _joined
        self.scoping = bool(_joined)
        """An integration joined: each call asks its participants' ``call_scope``."""
        self.plain = everyone
        """A plain task's: a job with no ``meta`` and no ``max_exceptions``."""
        count, lock = ExceptionCount.in_redis(store, persist), UniqueLock(store, persist)
        self._forget = ForgetCheckpoint(store, persist)
        self._chosen: dict[tuple[bool, bool], Participants] = {
            (False, False): everyone,
            (True, False): (*everyone, count),
            (False, True): (*everyone, lock),
            (True, True): (*everyone, count, lock),  # the order their Redis calls go in
        }

    def of(self, job: Job | None) -> Participants:
        """The participants of ``job``'s attempt (None: a payload that could not be read)."""
        if job is None or (job.max_exceptions is None and _CHOOSING.isdisjoint(job.meta)):
            return self.plain
        chosen = self._chosen[job.max_exceptions is not None, bool(job.meta) and is_unique(job)]
        return (*chosen, self._forget) if job.meta and is_iterable(job) else chosen
