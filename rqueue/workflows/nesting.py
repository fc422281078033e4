"""Workflows inside workflows, carried out (shapes.py says what they look like).

A batch that is a chain's link is opened by the worker that completes the link
before it, as that link's next step would be pushed; a batch that is a batch's member
is opened with its outer batch. Either way, what follows it (the rest of its chain,
its catch, and the outer batch's member it stands for) is written into its own
callbacks, as a *continuation* (:data:`CONTINUATION`), signed for that batch like its
other callbacks. When the batch finishes, the worker that counts its last member
goes on from there: the next link is pushed (or opened), or the outer member is
counted. If the batch fails (a failure without ``allow_failures``) the chain's catch
gets that failure, and the chain stops; a batch that was cancelled stops it too.

Every id is derived (a batch opened after a task: ``derived_id(task, "next")``; the
link after a batch: ``derived_id(batch, "next")``), the pushes are idempotent
(push_once.lua), a member is counted by its bit (batch_member.lua), and a batch opened
twice (its opener died before its ack) is created once and its members pushed again
only if they were not all pushed (batch_pushed.lua): so each level is counted once
when anything in it runs twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import msgpack

from rqueue.encoding import codec
from rqueue.encoding.payload import CHAIN, KEEP, Job, lane_of
from rqueue.encoding.sealing import Keyring
from rqueue.errors import RQueueError
from rqueue.store.batch_store import BatchStore, MemberCount, Place
from rqueue.store.calls import Push
from rqueue.store.keys import Lane
from rqueue.store.queue import RedisQueue
from rqueue.tasks import observers
from rqueue.workflows.batch_results import wants_results
from rqueue.workflows.batch_status import BatchCounts
from rqueue.workflows.batches import (
    BATCH,
    GETS,
    INDEX,
    KEEP_FINISHED_MS,
    member_id,
    member_meta,
    push_callbacks,
)
from rqueue.workflows.heard import remember
from rqueue.workflows.shapes import (
    CHAIN_MEMBER,
    batch_spec,
    checked_link,
    is_batch_step,
    is_chain_member,
)
from rqueue.workflows.steps import (
    CATCH,
    CHAIN_CATCH,
    CHAIN_STEP,
    ONCE_MS,
    PIPE,
    Step,
    callback_place,
    checked_step,
    delay_ms,
    derived_id,
    signed,
    step_job,
    trusted,
)

log = logging.getLogger("rqueue.worker")

CONTINUATION = "chain"
"""The entry of a nested batch's callbacks that says what follows it."""


class Opening(NamedTuple):
    """A batch to open as a task completes: the chain's link after it."""

    after: str
    """The id of the task it follows."""
    batch_id: str
    link: Step
    """The batch step, as the chain carried it (verified before it is opened)."""
    meta: dict[str, Any]
    """What the chain carries on past the batch (see :func:`continuation`)."""


def continuation(link: Step, meta: dict[str, Any]) -> tuple[dict[str, Any], Step]:
    """The batch a (checked) batch step describes, and what follows it, from the meta a
    task in its place would have had: the next link and the meta the job it becomes
    gets (the links after it, the chain's catch and pipe, the outer batch and member
    index), and whether the batch allows failures."""
    spec = batch_spec(link)
    rest = list(meta.get(CHAIN) or [])
    carried = {key: value for key, value in meta.items() if key != CHAIN}
    if len(rest) > 1:
        carried[CHAIN] = rest[1:]
    allow_failures = spec.get("allow_failures", False)
    follows = {"next": rest[0] if rest else None, "meta": carried, "allow_failures": allow_failures}
    return spec, follows


def open_batch(
    queue: RedisQueue, batch_id: str, spec: dict[str, Any], follows: Step | None, after: str = ""
) -> None:
    """Create the batch ``spec`` describes (shapes.py, checked) under ``batch_id``, with
    ``follows`` (a :func:`continuation`) among its callbacks, then push its members
    and open the batches among them; ``after``: the id of what it follows in its
    chain. Idempotent, as described above."""
    secret = queue.config.secret
    callbacks = {
        name: signed(step, secret, callback_place(batch_id, name))
        for name, step in spec.get("callbacks", {}).items()
    }
    if follows is not None:
        callbacks[CONTINUATION] = signed(follows, secret, callback_place(batch_id, CONTINUATION))
    results = wants_results(spec.get("callbacks", {}))
    jobs, nested = members_of(batch_id, spec, results, queue.config.keyring)
    packed = codec.pack(callbacks)
    place = _place(follows, after)
    store = BatchStore(queue)
    opened = store.open(
        batch_id,
        len(spec["members"]),
        spec.get("name", ""),
        spec.get("allow_failures", False),
        packed,
        KEEP_FINISHED_MS,
        sorted({job.queue for job, _ in jobs}),
        "progress" in callbacks,
        place,
        results,
    )
    if place is not None and place.parent is not None:
        store.nest(place.parent[0], batch_id, place.parent[1])
    if opened < 0:  # opened and pushed before: its opener died before its ack
        return
    for inner_id, inner, follows_inner in nested:
        open_batch(queue, inner_id, inner, follows_inner)
    if jobs:
        queue.push_many(_pushes(jobs, queue.config.max_payload_bytes, queue.config.keyring))
    store.pushed(batch_id)
    if not spec["members"]:  # nothing will complete: what a finished batch does is due now
        none = BatchCounts(0, 0, 0, 0)
        push_callbacks(queue, batch_id, 0, packed, ("then", "finally"), none)
        _go_on(queue, batch_id, packed, ("then", "finally"), none, False, None)


class Nested(NamedTuple):
    """A batch that is a batch's member (or the first step of a member's chain)."""

    batch_id: str
    spec: dict[str, Any]
    follows: Step


def members_of(
    batch_id: str, spec: dict[str, Any], results: bool = False, keyring: Keyring | None = None
) -> tuple[list[tuple[Job, Step]], list[Nested]]:
    """The batch's members: the jobs of those that start with a task (each with the step
    it came from), and the batches among them, with what follows each. ``results``:
    their successes send their values (a chain's last task's; a batch's, none).
    ``keyring`` opens an encrypted member's arguments."""
    jobs: list[tuple[Job, Step]] = []
    nested: list[Nested] = []
    for index, member in enumerate(spec["members"]):
        links, meta = _member_chain(member)
        meta.update(member_meta(batch_id, results))
        if len(links) > 1:
            meta[CHAIN] = links[1:]
        if is_batch_step(links[0]):
            inner, follows = continuation(links[0], {**meta, INDEX: index})
            nested.append(Nested(derived_id(member_id(batch_id, index), "batch"), inner, follows))
        else:
            job = step_job(links[0], member_id(batch_id, index), meta, (), keyring)
            jobs.append((job, links[0]))
    return jobs, nested


def _place(follows: Step | None, after: str) -> Place | None:
    """Where a batch sits: the outer member its continuation counts, what it follows."""
    meta = {} if follows is None else follows["meta"]
    parent = (meta[BATCH], meta[INDEX]) if BATCH in meta else None
    return None if parent is None and not after else Place(parent, after)


def _member_chain(member: Step) -> tuple[list[Step], dict[str, Any]]:
    """A member as the links of its chain (one for a task or a batch) and the meta its
    first job gets besides its batch: the chain's catch and pipe."""
    if not is_chain_member(member):
        return [member], {}
    meta: dict[str, Any] = {}
    if member.get("catch") is not None:
        meta[CATCH] = member["catch"]
    if member.get("pipe"):
        meta[PIPE] = True
    return list(member[CHAIN_MEMBER]), meta


def _pushes(
    jobs: Sequence[tuple[Job, Step]], max_bytes: int | None, keyring: Keyring | None
) -> list[Push]:
    """The members' payloads, grouped by what one push.lua call shares."""
    groups: dict[tuple[str, int, int, Lane], list[Job]] = {}
    for job, step in jobs:
        keep = int(job.meta.get(KEEP) or 0)
        groups.setdefault((job.queue, delay_ms(step), keep, lane_of(job.meta)), []).append(job)
    return [
        Push(
            queue,
            delay,
            [observers.encoded(job, max_bytes, keyring) for job in group],
            frozenset(job.id for job in group) if keep else frozenset(),
            keep,
            lane=lane,
        )
        for (queue, delay, keep, lane), group in groups.items()
    ]


def count_members(
    queue: RedisQueue,
    batch_id: str,
    members: Sequence[MemberCount],
    failure: dict[str, str] | None = None,
) -> str:
    """Count members of one batch, each (index, outcome, task id), in one call, and push
    the callbacks they made due, and what follows the batch if it is nested; what was
    counted (``Counted.counted``). Idempotent: a member counted before changes nothing,
    and its callbacks are pushed once. ``failure`` is the failure of the one member
    counted as failed, for the catch of a chain the batch is a link of."""
    counted = BatchStore(queue).count(batch_id, members)
    remember(batch_id, counted.cancelled)
    if not counted.exists:
        indexes = ", ".join(str(member[0]) for member in members)
        log.warning(
            "batch %s is gone (expired or pruned); member %s not counted", batch_id, indexes
        )
    for due in counted.due:
        counts = BatchCounts(*due.counts)
        push_callbacks(queue, batch_id, due.member_index, counted.callbacks, due.names, counts)
        _go_on(queue, batch_id, counted.callbacks, due.names, counts, counted.cancelled, failure)
    return counted.counted


class After(NamedTuple):
    """What a nested batch's count makes due beyond its own callbacks."""

    catch: tuple[Step, Job] | None = None
    """The chain's catch (its step and job), at the batch's failure."""
    next: tuple[Step, dict[str, Any]] | None = None
    """The chain's next link and the meta it carries on, at the batch's end."""
    outer: tuple[str, int, str, dict[str, str] | None] | None = None
    """The outer batch's member it stands for, to count: (batch id, index, outcome,
    failure), at its end."""


def after(
    batch_id: str,
    follows: Step,
    due: Sequence[str],
    counts: BatchCounts,
    cancelled: bool,
    failure: dict[str, str] | None,
    keyring: Keyring | None = None,
) -> After:
    """What follows a nested batch (its checked continuation ``follows``), if ``due``
    makes it due: its chain's catch at its failure (unless it allows failures), and
    at its end the next link, or the outer member counted; a batch that failed or was
    cancelled stops its chain there. ``keyring`` opens an encrypted catch's arguments."""
    meta: dict[str, Any] = follows["meta"]
    catch = None
    if "catch" in due and not follows["allow_failures"] and meta.get(CATCH) is not None:
        failed = failure or _batch_failure(batch_id, counts)
        step = checked_step(meta[CATCH])
        gets = {GETS: ["failure", failed]}
        catch = step, step_job(step, derived_id(batch_id, "catch"), gets, (), keyring)
    if "finally" not in due:
        return After(catch)
    if cancelled:
        if BATCH not in meta:
            return After(catch)
        outcome = "f" if counts.failed else "k"
        return After(
            catch, outer=(meta[BATCH], meta[INDEX], outcome, _batch_failure(batch_id, counts))
        )
    if follows["next"] is not None:
        return After(catch, next=(follows["next"], meta))
    if BATCH in meta:  # it was the last link of an outer batch's member
        return After(catch, outer=(meta[BATCH], meta[INDEX], "s", None))
    return After(catch)


def _go_on(
    queue: RedisQueue,
    batch_id: str,
    packed: bytes,
    due: Sequence[str],
    counts: BatchCounts,
    cancelled: bool,
    failure: dict[str, str] | None,
) -> None:
    """Carry out :func:`after` for a batch in Redis."""
    if "catch" not in due and "finally" not in due:
        return
    follows = _continuation(queue, batch_id, packed)
    if follows is None:
        return
    then = after(batch_id, follows, due, counts, cancelled, failure, queue.config.keyring)
    if then.catch is not None:
        step, job = then.catch
        if _signed_for(queue, step, CHAIN_CATCH):
            _push(queue, job, step)
    if then.next is not None:
        follow(queue, batch_id, *then.next)
    if then.outer is not None:
        outer_id, index, outcome, failed = then.outer
        count_members(queue, outer_id, [(index, outcome, batch_id, None)], failed)


def follow(queue: RedisQueue, parent_id: str, link: Step, meta: dict[str, Any]) -> None:
    """Push (or open) ``link``, the chain's next after ``parent_id``, with ``meta``."""
    if not _signed_for(queue, link, CHAIN_STEP, checked_link):
        return
    next_id = derived_id(parent_id, "next")
    if is_batch_step(link):
        open_batch(queue, next_id, *continuation(link, meta), parent_id)
        return
    _push(queue, step_job(link, next_id, meta, (), queue.config.keyring), link)


def _signed_for(
    queue: RedisQueue, step: Step, place: str, check: Callable[[object], Step] | None = None
) -> bool:
    """Whether ``step`` may be pushed: checked and, with a secret, signed for ``place``;
    one that is not is logged and left out (what made it due stands)."""
    try:
        trusted(step, queue.config.secret, place, check)
    except RQueueError as exc:  # InvalidPayload, InvalidSignature
        log.error("refused the %s after a batch: %s", place, exc)
        return False
    return True


def _push(queue: RedisQueue, job: Job, step: Step) -> None:
    payload = observers.encoded(job, queue.config.max_payload_bytes, queue.config.keyring)
    queue.push_once(job.queue, payload, delay_ms(step), ONCE_MS, bool(job.meta.get(KEEP)))


def _continuation(queue: RedisQueue, batch_id: str, packed: bytes) -> Step | None:
    """The batch's continuation, verified (a hand-written one is logged and ignored)."""
    try:
        callbacks = msgpack.unpackb(packed, raw=False)
        follows = callbacks.get(CONTINUATION) if type(callbacks) is dict else None
        if follows is None:
            return None
        return trusted(
            follows, queue.config.secret, callback_place(batch_id, CONTINUATION), _checked
        )
    except (RQueueError, ValueError, msgpack.UnpackException) as exc:
        log.error("batch %s: what follows it is refused: %s", batch_id, exc)
        return None


def _checked(follows: object) -> Step:
    """A continuation's shape (its links are checked as they are pushed)."""
    if type(follows) is not dict or type(follows.get("meta")) is not dict:
        raise ValueError("a batch's continuation must be a map with a 'meta' map")
    if type(follows.get("allow_failures")) is not bool:
        raise ValueError("a batch's continuation must say whether it allows failures")
    meta = follows["meta"]
    if BATCH in meta and (type(meta[BATCH]) is not str or type(meta.get(INDEX)) is not int):
        raise ValueError("a batch's continuation names its outer member malformed")
    return follows


def _batch_failure(batch_id: str, counts: BatchCounts) -> dict[str, str]:
    """The failure a chain's catch gets for a batch that failed as a whole."""
    return {
        "id": batch_id,
        "task": "batch",
        "exception": "BatchFailed",
        "message": f"batch {batch_id}: {counts.failed} of {counts.total} members failed",
        "traceback": "",
    }
