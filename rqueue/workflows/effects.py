"""What a worker does when a task of a workflow completes, beyond acknowledging it.

A task's ``meta`` says which workflows it belongs to: ``keep`` (keep its result),
``chain``/``catch``/``pipe`` (the steps after it, and the one to run if it fails),
``batch`` (it is a member of one) and ``gets`` (it is a callback, and is called
with the batch or the failure first). A plain task has none, and the worker skips
all of this after one test of ``job.meta``.

Completing runs in two parts. :func:`on_success` (and its siblings) only compute:
the result record and the payloads that follow; a return value that cannot be
encoded raises there, and the task fails with that message. :func:`apply` then
makes every change that lives outside the task's own queue, each idempotent (a
derived id pushed once, a batch member counted by its bit), *before* the task is
acknowledged: if the worker dies in between, the task runs again, and its second
completion changes nothing that the first one made. The result record rides on
the acknowledgement itself (reserve.lua, ack.lua, fail.lua). A worker child counts a
member that succeeded with no step to push later, with the other members of its
batch just before the call that carries their acks (:func:`count_members`,
``worker/member_counts.py``): still before its acknowledgement.

With a secret, :func:`apply` pushes a chain's next step or catch only if the step
itself is signed (steps.py): the worker signs the payload it builds from it, so it
must never build one from a step nobody with the secret wrote.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, NamedTuple

from rqueue.encoding.codec import pack
from rqueue.encoding.payload import CHAIN, KEEP, Job
from rqueue.encoding.sealing import Keyring, Sealed, batch_result_data, result_data
from rqueue.errors import InvalidPayload, UnserializableArgument
from rqueue.store.queue import Kept, RedisQueue
from rqueue.tasks import observers
from rqueue.tasks.arguments import check_arguments, describe_unencodable
from rqueue.tasks.current import current_runner
from rqueue.tasks.definition import PendingDispatch
from rqueue.workflows.batch_results import RESULTS, over_limit
from rqueue.workflows.batches import BATCH, GETS, INDEX, member_index
from rqueue.workflows.callbacks import given
from rqueue.workflows.nesting import Opening, continuation, count_members, open_batch
from rqueue.workflows.shapes import checked_link, is_batch_step
from rqueue.workflows.steps import (
    CATCH,
    CHAIN_CATCH,
    CHAIN_STEP,
    ONCE_MS,
    PIPE,
    Step,
    checked_step,
    delay_ms,
    derived_id,
    signed,
    step_job,
    step_of,
    trusted,
)

log = logging.getLogger("rqueue.worker")

_CATCH_TRACEBACK = 8_000
"""Characters of the traceback a catch step is given (its end, where the error is):
the failure travels in the catch's payload, which has a size limit."""
_KEYS = frozenset({KEEP, CHAIN, CATCH, PIPE, BATCH, GETS})


class Follower(NamedTuple):
    """A payload to push once when a task completes: a chain's next step or catch."""

    queue: str
    payload: bytes
    delay_ms: int
    kept: bool
    step: Step | None = None
    """The step it was built from, verified before it is pushed (see :func:`apply`)."""
    place: str = ""
    """Where that step belongs, as its signature says: ``chain step`` or ``chain catch``."""


class Member(NamedTuple):
    """A batch member to count as its task completes: the last task of its chain."""

    batch_id: str
    member_index: int
    outcome: str
    """``s`` succeeded, ``f`` failed for good or ``k`` skipped."""
    task_id: str
    failure: dict[str, str] | None = None
    """A failed member's failure, for the catch of a chain its batch is a link of."""
    value: bytes | None = None
    """A success's packed return value, if its batch has a callback that gets the
    results (meta ``results``); it goes with the count (batch_member.lua)."""


class Completion(NamedTuple):
    """Everything a completed task changes besides leaving its queue."""

    kept: Kept | None
    follower: Follower | None
    member: Member | None
    opening: Opening | None = None
    """The batch that is the chain's next link, to open."""


def involved(job: Job) -> bool:
    """True if the job belongs to a workflow (a plain task: one dict test)."""
    return bool(job.meta) and not _KEYS.isdisjoint(job.meta)


def is_member(job: Job) -> bool:
    """True if the job is a member of a batch."""
    return BATCH in job.meta


def is_callback(job: Job) -> bool:
    """True if the job is called with a batch or a failure first (``given``)."""
    return GETS in job.meta


def check(job: Job) -> int | None:
    """Refuse, before it runs, a job whose workflow entries are malformed: whatever is
    wrong with them, an InvalidPayload (so the task alone goes to ``:failed``). Its
    index in its batch if it is a batch's member (None if not), read once here: its
    completion takes it (:func:`on_success`)."""
    meta = job.meta
    index = None
    try:
        keep = meta.get(KEEP)
        if keep is not None and (type(keep) is not int or keep <= 0):
            raise InvalidPayload(f"meta {KEEP!r} must be a positive integer, got {keep!r}")
        steps = meta.get(CHAIN)
        if steps is not None:
            if not isinstance(steps, list):
                raise InvalidPayload("meta 'chain' must be a list of steps")
            for step in steps:
                checked_link(step)
        if meta.get(CATCH) is not None:
            checked_step(meta[CATCH])
        if BATCH in meta:
            index = member_index(job)
        if GETS in meta:
            given(job, None)
    except InvalidPayload:
        raise
    except Exception as exc:
        raise InvalidPayload(
            f"the workflow entries of task {job.id} are malformed: {exc!r}"
        ) from None
    return index


def on_success(
    job: Job,
    payload: bytes,
    result: Any,
    started_at: float,
    max_bytes: int | None,
    index: int | None = None,
) -> Completion:
    """The completion of a job that returned ``result``; raises UnserializableArgument
    if the result must be kept or piped and msgpack cannot carry it. ``index``: a
    member's index in its batch, as :func:`check` read it (else read again here)."""
    kept = None
    if job.meta.get(KEEP):
        encodable = _encodable_result(job, result)
        kept = _kept(job, payload, _record(job, "succeeded", started_at, result=encodable))
    if BATCH in job.meta and index is None:
        index = member_index(job)
    steps = job.meta.get(CHAIN)
    if steps:  # a member whose chain goes on is counted by the chain's last task
        return _next_step(job, index, list(steps), result, max_bytes, kept)
    member = None
    if index is not None:
        value = _sent_result(job, index, result) if RESULTS in job.meta else None
        member = Member(job.meta[BATCH], index, "s", job.id, None, value)
    return Completion(kept, None, member)


def on_failure(
    job: Job,
    payload: bytes,
    exception: str,
    message: str,
    traceback: str,
    started_at: float,
    max_bytes: int | None,
) -> Completion:
    """The completion of a job that failed for good (no tries left, or it cannot run)."""
    kept = None
    if job.meta.get(KEEP):
        fields = {"exception": exception, "message": message, "traceback": traceback}
        kept = _kept(job, payload, _record(job, "failed", started_at, **fields))
    follower = None
    failure = {
        "id": job.id,
        "task": job.task,
        "exception": exception,
        "message": message,
        "traceback": traceback[-_CATCH_TRACEBACK:],
    }
    catch = job.meta.get(CATCH)
    if catch is not None:
        step = checked_step(catch)
        gets = {GETS: ["failure", failure]}
        catch_job = step_job(step, derived_id(job.id, "catch"), gets, (), _own_keyring())
        follower = _follower(step, catch_job, max_bytes, CHAIN_CATCH)
    member = None
    if BATCH in job.meta:
        member = Member(job.meta[BATCH], member_index(job), "f", job.id, failure)
    return Completion(kept, follower, member)


def on_skip(job: Job, payload: bytes) -> Completion:
    """The completion of a batch member not run because its batch was cancelled."""
    kept = None
    if job.meta.get(KEEP):
        kept = _kept(job, payload, _record(job, "cancelled", time.time()))
    member = Member(job.meta[BATCH], member_index(job), "k", job.id)
    return Completion(kept, None, member)


def on_cancel(job: Job) -> Completion | None:
    """The completion of a job cancelled while it ran: a batch member counts as
    skipped, as a member its cancelled batch skipped does (so the batch still
    finishes: ``finally`` runs, ``then`` does not, nor ``catch``, nothing having
    failed); a chain stops there (no next step, no catch). Its kept result reads
    ``cancelled`` (settle_cancelled.lua writes it). None: nothing of the kind."""
    if BATCH not in job.meta:
        return None
    return Completion(None, None, Member(job.meta[BATCH], member_index(job), "k", job.id))


def apply(
    completion: Completion, queue: RedisQueue, completing: tuple[str, bytes] | None = None
) -> bool:
    """Count the batch member and push what follows: each change idempotent, so the
    caller may retry this until Redis takes it, and a task run twice changes nothing.

    ``completing`` is the task's ``(queue, reserved payload)``: if the chain's next
    step may share its script (``RedisQueue.same_slot``), the task is acknowledged in
    the same call that pushes it, and True is returned; else the caller acknowledges.
    A success whose value the batch cannot keep (``RQUEUE_MAX_BATCH_RESULTS_BYTES``) is
    counted as failed, and ResultTooLarge raised: the caller fails it for good.
    """
    member = completion.member
    if member is not None:
        index, value = member.member_index, member.value
        counted = [(index, member.outcome, member.task_id, value)]
        if count_members(queue, member.batch_id, counted, member.failure) == "x" and value:
            limit = queue.config.max_batch_results_bytes
            raise over_limit(member.batch_id, index, len(value), limit)
    if completion.opening is not None:
        _open(completion.opening, queue)
    follower = completion.follower
    if follower is None or not _trusted(follower, queue):
        return False
    ack = None
    if completing is not None and queue.same_slot(completing[0], follower.queue):
        ack = (*completing, completion.kept)
    queue.push_once(
        follower.queue, follower.payload, follower.delay_ms, ONCE_MS, follower.kept, ack
    )
    return ack is not None


def _open(opening: Opening, queue: RedisQueue) -> None:
    """Open the batch that is the chain's next link: with a secret, only if the link is
    signed (as a step is, :func:`_trusted`); one that is not is logged and not opened."""
    try:
        link = trusted(opening.link, queue.config.secret, CHAIN_STEP, checked_link)
    except InvalidPayload as exc:  # InvalidSignature included
        log.error("refused the chain's batch %s: %s", opening.batch_id, exc)
        return
    open_batch(queue, opening.batch_id, *continuation(link, opening.meta), opening.after)


def _trusted(follower: Follower, queue: RedisQueue) -> bool:
    """Whether ``follower``'s step may be pushed: with a secret, only if the step is
    signed for its place; one that is not is logged and not pushed (the task that
    carried it completes all the same)."""
    secret = queue.config.secret
    if not secret or follower.step is None:
        return True
    try:
        trusted(follower.step, secret, follower.place)
    except InvalidPayload as exc:  # InvalidSignature included
        task = follower.step.get("task")
        log.error("refused the %s %r on queue %s: %s", follower.place, task, follower.queue, exc)
        return False
    return True


def _own_secret() -> str | None:
    """The secret of the worker running this task: steps a running task added to its
    chain (``job.chain``) are its own, signed here, not read from Redis."""
    runner = current_runner()
    return None if runner is None else runner.connection.config.secret


def _own_keyring() -> Keyring | None:
    """The keys of the worker running this task, which seal what it dispatches and keeps
    of an encrypted call (none inline, where nothing is stored)."""
    runner = current_runner()
    return None if runner is None else runner.connection.config.keyring


def _next_step(
    job: Job,
    index: int | None,
    steps: list[Any],
    result: Any,
    max_bytes: int | None,
    kept: Kept | None,
) -> Completion:
    """What follows a chain's task: its next link, a task to push or a batch to open,
    carrying the rest of the chain and, in a batch's member (``index``), the member it
    counts for."""
    first, rest = steps[0], steps[1:]
    step = _step(first) if isinstance(first, PendingDispatch) else checked_link(first)
    meta: dict[str, Any] = {}
    if rest:
        meta[CHAIN] = [_step(s) if isinstance(s, PendingDispatch) else s for s in rest]
    for name in (CATCH, PIPE, BATCH, RESULTS):
        if job.meta.get(name) is not None:
            meta[name] = job.meta[name]
    if index is not None:
        meta[INDEX] = index
    next_id = derived_id(job.id, "next")
    if is_batch_step(step):
        return Completion(kept, None, None, Opening(job.id, next_id, step, meta))
    piped = (result,) if job.meta.get(PIPE) else ()
    next_job = step_job(step, next_id, meta, piped, _own_keyring())
    try:
        return Completion(kept, _follower(step, next_job, max_bytes, CHAIN_STEP), None)
    except UnserializableArgument as exc:
        raise _unstorable(job, "could not be passed to the next step", str(exc)) from None


def _step(call: PendingDispatch) -> Step:
    """The step of a call a running task added to its chain."""
    return signed(step_of(call), _own_secret(), CHAIN_STEP)


def _follower(step: Step, job: Job, max_bytes: int | None, place: str) -> Follower:
    # sent while its step's attempt is traced
    payload = observers.encoded(job, max_bytes, _own_keyring())
    return Follower(job.queue, payload, delay_ms(step), bool(job.meta.get(KEEP)), step, place)


def _kept(job: Job, payload: bytes, record: bytes) -> Kept:
    return Kept(payload, job.id, record, int(job.meta[KEEP]))


def _sent_result(job: Job, index: int, result: Any) -> bytes | None:
    """A member's return value, packed, if its batch has a callback that gets them."""
    if job.meta.get(RESULTS) is not True:
        return None
    value = _encodable_result(job, result)
    try:
        if job.encrypted:  # bound to its batch and place in it: read_results opens it
            where = batch_result_data(job.meta[BATCH], index)
            value = _sealed(pack(value), where, value)
        return pack(value)
    except (TypeError, ValueError, OverflowError) as exc:
        message = describe_unencodable(job.task, (value,), {}, exc)
        raise _unstorable(job, "could not be kept for its batch", message) from None


def _encodable_result(job: Job, result: Any) -> Any:
    try:
        check_arguments(job.task, (result,), {})
    except UnserializableArgument as exc:
        raise _unstorable(job, "could not be stored", str(exc)) from None
    return result


_FOUND = re.compile(r"cannot encode argument args\[0\](?P<at>.*?) of task \S+: (?P<why>.*)", re.S)


def _unstorable(job: Job, what: str, found: str) -> UnserializableArgument:
    """Say it of the return value: the argument check that found the value calls it
    ``args[0]`` (a kept result is checked as one argument; a piped one is the next
    step's first)."""
    match = _FOUND.fullmatch(found)
    if match is not None:
        why = match["why"].replace(" value is not supported by msgpack", " is not a type")
        why = why.replace("; pass ", " rqueue can encode; return ", 1)
        found = f"result{match['at']}: {why}"
    return UnserializableArgument(f"the return value of {job.task} {what}: {found}")


def _sealed(packed: bytes, associated: bytes, value: Any) -> Any:
    """An encrypted call's packed result, sealed with the running worker's keys for
    ``associated`` (a worker without them could not have run it); ``value`` as it is
    inline, where nothing is kept in Redis."""
    keyring = _own_keyring()
    return value if keyring is None else Sealed(keyring.seal(packed, associated))


def _record(job: Job, state: str, started_at: float, **fields: Any) -> bytes:
    record = {
        "state": state,
        "task": job.task,
        "queue": job.queue,
        "attempts": job.attempts,
        "started_at": started_at,
        "finished_at": time.time(),
        **fields,
    }
    if job.tags:  # rqueue status shows them
        record["tags"] = list(job.tags)
    try:
        if "result" in fields and job.encrypted:
            result = fields["result"]
            record["result"] = _sealed(pack(result), result_data(job.queue, job.id), result)
        return pack(record)
    except (TypeError, ValueError, OverflowError) as exc:
        message = describe_unencodable(job.task, (fields.get("result"),), {}, exc)
        raise _unstorable(job, "could not be stored", message) from None
