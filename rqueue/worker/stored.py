"""Whether what a task returned can be stored: kept as its result, or passed on.

A task that keeps its result (``keep_result``) or feeds a chain's next step has its
return value encoded after it ran. When that fails, the fault is rqueue's to report
and it is deterministic: the same call returns the same value. So the task fails at
once (:class:`ResultNotStored`), with a message about the return value, instead of
being retried: a retry would repeat its side effects and fail the same way.

A kept result is also bounded: ``RQUEUE_MAX_RESULT_BYTES``, and the Redis server's own
limit on one value (``proto-max-bulk-len``), asked once per child, when the first
result is kept. Over it, Redis would refuse the acknowledgement by dropping the
connection, which nobody could tell from an outage. So is the value a batch member
sends with its count for a callback that gets its batch's results (the batch bounds
their sum: ``RQUEUE_MAX_BATCH_RESULTS_BYTES``, batch_member.lua).
"""

from __future__ import annotations

import redis

from rqueue.encoding.payload import Job
from rqueue.errors import PayloadTooLarge, ResultNotStored, ResultTooLarge, UnserializableArgument
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import REDIS_ERRORS
from rqueue.workflows import effects

_RESULT_SETTING = "RQUEUE_MAX_RESULT_BYTES"
_SERVER_SETTING = "the Redis server's proto-max-bulk-len"


class Limits:
    """What a stored value may weigh in one worker child."""

    def __init__(self, payload_bytes: int, result_bytes: int) -> None:
        self.payload_bytes = payload_bytes
        self._result_bytes = result_bytes
        self._server_bytes: int | None = None
        """The server's limit on one value; None until asked, 0 if it would not say."""

    def result_bytes(self, queue: RedisQueue) -> tuple[int, str]:
        """The largest result record this child may keep, and the setting that says so."""
        if self._server_bytes is None:
            self._server_bytes = _server_bulk_limit(queue)
        if self._server_bytes and self._server_bytes < self._result_bytes:
            return self._server_bytes, _SERVER_SETTING
        return self._result_bytes, _RESULT_SETTING


def completion(
    job: Job,
    payload: bytes,
    result: object,
    started_at: float,
    index: int | None,
    limits: Limits,
    queue: RedisQueue,
) -> effects.Completion:
    """``effects.on_success`` (``index``: a member's, as ``effects.check`` read it), with
    every reason the return value cannot be stored raised as ResultNotStored
    (ResultTooLarge for a kept result over its limit)."""
    try:
        done = effects.on_success(job, payload, result, started_at, limits.payload_bytes, index)
    except UnserializableArgument as exc:
        raise ResultNotStored(str(exc)) from None
    except PayloadTooLarge as exc:
        raise ResultNotStored(f"the next step of {job.task} could not be queued: {exc}") from None
    if done.kept is not None:
        _check_size(job, queue, limits, "result record", len(done.kept.record))
    if done.member is not None and done.member.value is not None:
        _check_size(job, queue, limits, "value kept for its batch", len(done.member.value))
    return done


def _check_size(job: Job, queue: RedisQueue, limits: Limits, what: str, size: int) -> None:
    """ResultTooLarge if ``what`` (``size`` bytes) is over what this child may keep."""
    limit, setting = limits.result_bytes(queue)
    if size > limit:
        raise ResultTooLarge(
            f"the return value of {job.task} could not be stored: its {what} is "
            f"{size} bytes, over the limit of {limit} ({setting}); return a reference "
            "(an id or a URL) to the data instead of the data itself"
        )


def _server_bulk_limit(queue: RedisQueue) -> int | None:
    """``proto-max-bulk-len``; 0 if the server does not say (CONFIG may be disabled,
    as managed services do, or answer per node on a cluster), None if it is away (it
    is asked again next time)."""
    try:
        reply = queue.client.config_get("proto-max-bulk-len")
    except REDIS_ERRORS:
        return None
    except redis.ResponseError:
        return 0
    values = reply.values() if isinstance(reply, dict) else ()
    found = [value for value in values if isinstance(value, (str, bytes))]
    try:
        return min(int(value) for value in found) if found else 0
    except ValueError:
        return 0
