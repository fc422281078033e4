"""What a workflow's callback is called with first (its ``gets`` entry): the batch it
follows, with the counts its payload carries, or the failure a chain's catch handles.

Read from a payload, so checked whole: a malformed entry is an InvalidPayload, and the
callback alone goes to ``:failed``. ``effects.check`` asks it before the callback runs;
the worker (``worker/workflow.py``) and the inline runner build the argument with it.
"""

from __future__ import annotations

from typing import Any

from rqueue.encoding.payload import Job
from rqueue.errors import InvalidPayload, TaskFailed
from rqueue.store.keys import BatchKeys
from rqueue.store.queue import RedisQueue
from rqueue.workflows.batch_results import RESULTS
from rqueue.workflows.batch_status import BatchCounts
from rqueue.workflows.batches import BATCH, GETS, Batch


def given(job: Job, queue: RedisQueue | None) -> Any:
    """What a callback is called with first: the batch, or the failure it handles."""
    gets = job.meta[GETS]
    if (
        type(gets) is list
        and len(gets) in (2, 3, 4)
        and gets[0] == BATCH
        and type(gets[1]) is str
        and gets[3:] in ([], [RESULTS])
    ):
        BatchKeys.for_batch(gets[1])  # checks the id
        if queue is None:
            counted(job)  # checks them
            return None
        found = Batch(gets[1], queue)
        found.counted = counted(job)
        return found
    if type(gets) is list and len(gets) == 2 and gets[0] == "failure" and type(gets[1]) is dict:
        failure = gets[1]
        fields = [failure.get(name, "") for name in ("id", "exception", "message", "traceback")]
        if all(type(field) is str for field in fields):
            return TaskFailed(*fields)
    raise InvalidPayload(f"meta {GETS!r} is malformed: {gets!r}")


def gets_results(job: Job) -> bool:
    """Whether a callback is called with its batch's results after the batch."""
    gets = job.meta.get(GETS)
    return type(gets) is list and len(gets) == 4 and gets[3] == RESULTS


def counted(job: Job) -> BatchCounts | None:
    """The batch's counts a callback's payload carries (``Batch.counted``), if any."""
    gets = job.meta.get(GETS)
    return _counts(gets[2]) if type(gets) is list and len(gets) in (3, 4) else None


def _counts(counts: object) -> BatchCounts:
    """A callback's ``Batch.counted``, as its payload carries it (worker-made)."""
    if type(counts) is not list or len(counts) != 4:
        raise InvalidPayload(f"a callback's batch counts are malformed: {counts!r}")
    if not all(type(n) is int and 0 <= n < 2**63 for n in counts):
        raise InvalidPayload(f"a callback's batch counts are malformed: {counts!r}")
    return BatchCounts(*counts)
