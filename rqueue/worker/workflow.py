"""A workflow's part in an attempt: results kept, chains, batches (``rqueue.workflows``).

Before the task runs, its workflow entries are checked (malformed ones refuse it), a
batch member whose batch was cancelled is skipped, and a batch's callback is given
its batch. After a success, what it changes besides leaving its queue (a kept
result, a chain's next step, a member counted) is computed first, as a pure
``effects.Completion`` (``stored.py`` bounds it), and applied idempotently before
its acknowledgement, which then carries only what is left; a member's count waits
for that acknowledgement and goes just before it (``member_counts.py``). A failure's
part is ``outcomes.complete_failure``, shared with the parent.

A plain task has none of this: the lifecycle asks only ``job.meta`` first.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import redis

from rqueue.errors import InvalidPayload, RQueueError
from rqueue.settings.config import Config
from rqueue.store.queue import Kept, RedisQueue
from rqueue.store.retry import Persist
from rqueue.worker import stored
from rqueue.worker.attempt import Attempt
from rqueue.worker.outcomes import Outcomes
from rqueue.worker.reservations import Reservations
from rqueue.worker.verdicts import Failed
from rqueue.workflows import callbacks, effects, heard
from rqueue.workflows.batch_results import read_results


class WorkflowPart:
    """One child's workflow steps around its attempts."""

    def __init__(
        self,
        store: RedisQueue,
        config: Config,
        persist: Persist,
        outcomes: Outcomes,
        skipped: Callable[[Attempt], None],
        counts_wait: bool = True,
    ) -> None:
        self.store = store
        self.counts_wait = counts_wait
        """Whether a member's count waits for its ack (member_counts.py). Not in a child
        an integration joined (tracing): there each member is counted as its attempt
        completes, so the callbacks it makes due are sent in its attempt's trace."""
        self.skipped = skipped
        """Settles a cancelled batch's member (the lifecycle's step)."""
        self.persist = persist
        self.outcomes = outcomes
        self.limits = stored.Limits(config.max_payload_bytes, config.max_result_bytes)

    def prepare(self, attempt: Attempt) -> bool:
        """Ready it to run; False if it was settled instead (skipped, or refused)."""
        job = attempt.job
        if not (job.meta and effects.involved(job)):
            return True
        attempt.workflow = True
        try:
            attempt.member_index = effects.check(job)
        except InvalidPayload as exc:
            self.outcomes.refused(attempt, type(exc).__name__, str(exc))
            return False
        cancelled = attempt.member_index is not None and self._batch_cancelled(attempt)
        if cancelled is not False:  # None: failed already, for its unreadable batch
            if cancelled:
                self.skipped(attempt)
            return False
        if effects.is_callback(job):
            given = callbacks.given(job, self.store)
            if callbacks.gets_results(job):
                results = self._results(attempt, given.id)
                if results is None:
                    return False
                attempt.args = (given, results, *attempt.args)
            else:
                attempt.args = (given, *attempt.args)
        return True

    def _results(self, attempt: Attempt, batch_id: str) -> list[object] | None:
        """The members' results a callback gets; None, with the callback failed for
        good, if they cannot be read: the batch is gone, or they do not decode."""
        try:
            return self.persist(functools.partial(read_results, self.store, batch_id))
        except (RQueueError, redis.ResponseError) as exc:
            self.outcomes.refused(attempt, type(exc).__name__, str(exc))
            return None

    def completion(self, attempt: Attempt, result: object) -> effects.Completion | None:
        """What follows its success in a workflow (None if it is in none). Asked after
        the call: a running task may have started a chain (``job.chain``). A result
        that cannot be kept or passed on raises ResultNotStored (``stored.py``)."""
        job = attempt.job
        if not (attempt.workflow or effects.involved(job)):
            return None
        started_at = time.time() - (time.monotonic() - attempt.started)  # wall clock
        return stored.completion(
            job, attempt.payload, result, started_at, attempt.member_index, self.limits, self.store
        )

    def applied(
        self,
        attempt: Attempt,
        completion: effects.Completion,
        duration: float,
        reservations: Reservations,
    ) -> bool:
        """Push what follows its success, idempotently, then acknowledge it (with the
        next reserve call, unless the push took it already); False if Redis refused
        that for good: the task is failed instead, never retried. A batch's member
        with nothing to push is counted with the acks that call carries instead
        (member_counts.py): one call per batch, not one per member (unless
        ``counts_wait`` is off)."""
        queue, payload = attempt.queue, attempt.payload
        if self.counts_wait and completion.follower is None and completion.member is not None:
            kept, member = completion.kept, completion.member
            reservations.pending.acknowledge(queue, payload, attempt.expires_at, kept, member)
            return True
        apply = functools.partial(effects.apply, completion, self.store, (queue, payload))
        try:
            acked = self.persist(apply)
        except (RQueueError, redis.ResponseError) as exc:  # refused for good: no retry
            self.outcomes.failed(attempt, Failed(exc, final=True), duration)
            return False
        if not acked:
            reservations.pending.acknowledge(queue, payload, attempt.expires_at, completion.kept)
        return True

    def skip(self, attempt: Attempt) -> Kept | None:
        """Count a cancelled batch's member as skipped; its result record, for its ack."""
        completion = effects.on_skip(attempt.job, attempt.payload)
        self.persist(functools.partial(effects.apply, completion, self.store))
        return completion.kept

    def _batch_cancelled(self, attempt: Attempt) -> bool | None:
        """Whether the member's batch was cancelled; None, with the task failed, if the
        batch's state cannot be read (a key of the wrong type): it alone goes to
        ``:failed``, where it can be retried once the state is mended."""
        known = heard.heard_cancelled(attempt.job)
        if known is not None:  # no call to Redis: nothing to persist
            return known
        try:
            return self.persist(functools.partial(heard.batch_cancelled, attempt.job, self.store))
        except redis.ResponseError as exc:
            self.outcomes.refused(attempt, "ResponseError", str(exc))
            return None
