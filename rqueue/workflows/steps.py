"""A workflow step: a call that travels inside another task's payload until its turn.

A chain's later steps and a batch's callbacks are dispatched by a worker, when a task
completes, not by the process that built the workflow. So each is written down as a
plain msgpack map (a *step*) inside the payload that carries it, with the options of
the ``pending()`` call it came from, and turned into a payload of its own when its
turn comes, with an id derived from the completing task: the same completion always
makes the same id, and pushing it is idempotent (push_once.lua), so a task that runs
twice dispatches what follows it once.

Steps come back from Redis, so :func:`checked_step` checks every field before a
payload is built from one. With a secret (``RQUEUE_SECRET``) each step is also signed
by the process that wrote it (:func:`signed`), for where it belongs: a batch's
callback for its batch and role, a chain's step or catch for a chain. A worker turns
a step into a payload, which it then signs, only once the step's own signature
verifies (:func:`trusted`): it never signs bytes it merely read from Redis, so whoever
can rewrite a batch's hash cannot have a task of their choosing signed.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeGuard, cast, runtime_checkable

from rqueue.encoding import codec
from rqueue.encoding.payload import KEEP, Job
from rqueue.encoding.ranges import (
    MAX_DELAY_SECONDS,
    checked_backoff,
    checked_controls,
    checked_keep,
    checked_meta,
    checked_tags,
    checked_timeout,
    checked_tries,
)
from rqueue.encoding.sealed_args import open_call
from rqueue.encoding.sealing import Keyring, must_seal, no_key, no_key_to_seal, step_data
from rqueue.errors import InvalidPayload
from rqueue.store.keys import validate_queue_name
from rqueue.store.signing import step_mac, verify_step_mac
from rqueue.tasks.debouncing import refuse_debounced
from rqueue.tasks.definition import PendingDispatch, Task
from rqueue.tasks.handles import Dispatched
from rqueue.tasks.interception import current_interceptor
from rqueue.tasks.names import check_name
from rqueue.tasks.options import UNIQUE

Step = dict[str, Any]


@runtime_checkable
class Composite(Protocol):
    """A chain or a batch being built, which can be a batch's member or a chain's link
    (shapes.py)."""

    def composed(self, secret: str | None) -> Step:
        """Its step (a chain member or a batch step), links signed with ``secret``."""
        ...


SIG = "sig"
"""A step's signature entry (absent without a secret)."""
CHAIN_STEP, CHAIN_CATCH = "chain step", "chain catch"
"""Where a chain's steps and its catch belong, for their signatures."""
CATCH, PIPE = "catch", "pipe"
"""Meta entries of a chain's task: the step to run if it fails, and whether each step's
return value is the next one's first argument."""


def callback_place(batch_id: str, name: str) -> str:
    """Where a batch's ``name`` callback (then, catch, finally, progress) belongs."""
    return f"batch {batch_id} {name} callback"


ONCE_MS = 7 * 24 * 3600 * 1000
"""How long a derived id's push marker lasts: a completing task that runs again (its
worker died before the ack) does so within its reservation and retries, far sooner."""


_OWN_META = (KEEP, UNIQUE)
"""Meta entries a step's job gets afresh when its turn comes, not from the step."""


def step_of(call: PendingDispatch) -> Step:
    """The step for ``call``: the job a dispatch of it would make now (so every option
    its job carries: rqueue/tasks/options.py), as a map; a ``retry_until`` in seconds
    counts from the workflow's dispatch."""
    task = call.task
    task.check_dispatchable()
    job = task.make_job(call.args, call.kwargs)
    step = {
        "task": job.task,
        "args": list(call.args),
        "kwargs": dict(call.kwargs),
        "queue": job.queue,
        "tries": job.tries,
        "timeout": job.timeout,
        "backoff": list(job.backoff),
        "delay": call.delay,
        "keep": job.meta.get(KEEP, 0),
    }
    if job.max_exceptions is not None or job.retry_until is not None or job.fail_on_timeout:
        step["controls"] = {
            "max_exceptions": job.max_exceptions,
            "retry_until": job.retry_until,
            "fail_on_timeout": job.fail_on_timeout,
        }
    if job.tags:
        step["tags"] = list(job.tags)
    meta = {key: value for key, value in job.meta.items() if key not in _OWN_META}
    if meta:
        step["meta"] = meta
    if current_interceptor() is None:  # rqueue.testing: all in memory, never sealed
        keyring = task.connection().config.keyring
        if must_seal(job.encrypted, keyring):
            _seal(step, keyring)
    return step


def _seal(step: Step, keyring: Keyring | None) -> None:
    """Seal an encrypted task's step's arguments in place (``sealed``; ``args`` and
    ``kwargs`` left empty), for its queue and task, as a payload's are."""
    if keyring is None:
        raise no_key_to_seal(step["task"])
    plain = codec.pack([step["args"], step["kwargs"]])
    step["sealed"] = keyring.seal(plain, step_data(step["queue"], step["task"]))
    step["args"], step["kwargs"], step["encrypted"] = [], {}, True


def _opened(step: Step, keyring: Keyring | None) -> tuple[list[Any], dict[str, Any]]:
    """A step's arguments, opened with ``keyring`` if they are sealed; NotDecrypted
    (an InvalidPayload: the step is refused) if they cannot be."""
    sealed = step.get("sealed")
    if sealed is None:
        return step["args"], step["kwargs"]
    if keyring is None:
        raise no_key(step["task"])
    args, kwargs = open_call(keyring, sealed, step_data(step["queue"], step["task"]))
    checked_step({**step, "args": args, "kwargs": kwargs})
    return args, kwargs


def callback_call(
    what: str, callback: object, args: tuple[Any, ...], kwargs: dict[str, Any], given: int = 1
) -> PendingDispatch:
    """A callback's call: a task with the arguments it gets after the ``given`` the
    worker gives it first (the batch, the failure; the batch and its members' results),
    or a ``pending()`` call as it is. ``what`` names the method (``then``, ``catch``...)
    for the TypeError of a callback that is neither.

    ``then(notify, "ops")`` rather than ``then(notify.pending("ops"))``: ``pending``
    is typed with the task's whole signature, first argument included.
    """
    called = callback.task if isinstance(callback, PendingDispatch) else callback
    if isinstance(called, Task):
        refuse_debounced(called.name, called.options, f"a workflow's {what}() callback")
    if isinstance(callback, PendingDispatch):
        if args or kwargs:
            raise TypeError("pass arguments either to pending() or here, not to both")
        callback.task.check_call(callback.args, callback.kwargs, given)
        return callback
    if isinstance(callback, Task):
        callback.check_call(args, kwargs, given)
        return PendingDispatch(callback, args, kwargs)
    raise TypeError(
        f"{what}() takes a task (a function decorated with @task) or a pending call like "
        f"notify.pending(...); got {_described(callback)}"
    )


def pending_calls(calls: object, what: str) -> list[PendingDispatch]:
    """``calls`` as a list of pending calls, checked now, when the workflow is built,
    rather than when it is dispatched or run; TypeError saying what was expected.
    ``what`` names the function (``Batch.add()``)."""
    return [_member_call(call, what) for call in _listed(calls, what)]


def pending_members(calls: object, what: str) -> list[PendingDispatch | Composite]:
    """As :func:`pending_calls`, where a chain or a batch may be a member too."""
    return [
        call if isinstance(call, Composite) else _member_call(call, what)
        for call in _listed(calls, what)
    ]


def _listed(calls: object, what: str) -> list[object]:
    if isinstance(calls, (Task, PendingDispatch, Dispatched, Composite)) or not _iterable(calls):
        raise TypeError(
            f"{what} takes a list of pending calls like [send_welcome.pending(42)]; "
            f"got {_described(calls)}"
        )
    return list(cast(Iterable[object], calls))


def _member_call(call: object, what: str) -> PendingDispatch:
    check_pending(call, what)
    pending = cast(PendingDispatch, call)
    pending.task.check_call(pending.args, pending.kwargs)  # a member runs as it is
    return pending


def check_pending(call: object, what: str) -> TypeGuard[PendingDispatch]:
    """TypeError unless ``call`` is a pending call (``task.pending(...)``)."""
    if isinstance(call, PendingDispatch):
        refuse_debounced(call.task.name, call.task.options, what)
        return True
    example = call.__name__ if isinstance(call, Task) else "send_welcome"
    raise TypeError(
        f"{what} takes pending calls like {example}.pending(42); got {_described(call)}"
    )


def _iterable(value: object) -> bool:
    try:
        iter(value)  # type: ignore[call-overload]
    except TypeError:
        return False
    return not isinstance(value, (str, bytes, dict))


def _described(value: object) -> str:
    """What a caller passed, in words, for a TypeError."""
    if isinstance(value, Task):
        return f"the task {value.__name__} itself"
    if isinstance(value, Dispatched):
        return (
            f"the handle of task {value.task} (id {value.id}), which was dispatched already: "
            "pass its pending() call instead"
        )
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return f"{shown} ({type(value).__name__})"


def checked_step(step: object) -> Step:
    """``step`` if it is a well-formed step; InvalidPayload naming what is wrong."""
    try:
        if type(step) is not dict:
            raise TypeError("a step is a map")
        check_name(step["task"])
        validate_queue_name(step["queue"])
        if type(step["args"]) is not list or type(step["kwargs"]) is not dict:
            raise TypeError("args must be a list and kwargs a map")
        if step.get("tries") is not None:
            checked_tries(step["tries"])
        if step.get("timeout") is not None:
            checked_timeout(step["timeout"])
        checked_backoff(step.get("backoff") or [])
        delay = step.get("delay", 0)
        if type(delay) not in (int, float) or not 0 <= delay <= MAX_DELAY_SECONDS:
            raise ValueError(f"delay must be 0 to {MAX_DELAY_SECONDS} seconds, got {delay!r}")
        if step.get("keep"):
            checked_keep(step["keep"] / 1000)
        if "controls" in step:
            checked_controls(step["controls"])
        if "meta" in step:
            checked_meta(step["meta"])
        if "tags" in step:
            checked_tags(step["tags"])
        if type(step.get("encrypted", False)) is not bool:
            raise TypeError("encrypted must be true or false")
        if type(step.get("sealed", b"")) is not bytes:
            raise TypeError("sealed must be bytes")
    except Exception as exc:
        raise InvalidPayload(f"a workflow step is malformed: {exc!r}") from None
    return step


def signed(step: Step, secret: str | None, place: str) -> Step:
    """``step`` with its signature for ``place``; as it is without a secret."""
    if not secret:
        return step
    body = {key: value for key, value in step.items() if key != SIG}
    # Signed as a worker will see it: decoded from Redis, then packed again.
    return {**body, SIG: step_mac(secret, place, _packed(codec.unpack(_packed(body))))}


def trusted(
    step: object, secret: str | None, place: str, check: Callable[[object], Step] | None = None
) -> Step:
    """``step`` checked (by ``check``; :func:`checked_step` if None) and, with a
    secret, verified as signed for ``place``; InvalidPayload (InvalidSignature) if not."""
    checked = (check or checked_step)(step)
    if secret:
        body = {key: value for key, value in checked.items() if key != SIG}
        verify_step_mac(secret, place, _packed(body), checked.get(SIG))
    return checked


def _packed(body: Step) -> bytes:
    try:
        return codec.pack(body)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidPayload(f"a workflow step cannot be packed: {exc!r}") from None


def derived_id(parent_id: str, what: str) -> str:
    """The id of what ``parent_id``'s completion dispatches: the same every time."""
    return hashlib.sha256(f"{parent_id}:{what}".encode()).hexdigest()[:32]


def step_job(
    step: Step,
    task_id: str,
    meta: dict[str, Any],
    first_args: tuple[Any, ...] = (),
    keyring: Keyring | None = None,
) -> Job:
    """The job a step becomes, with ``first_args`` before its own (a piped value); an
    encrypted step's arguments opened with ``keyring``."""
    args, kwargs = _opened(step, keyring)
    if step.get("keep"):
        meta = {**meta, KEEP: step["keep"]}
    if step.get("meta"):
        meta = {**step["meta"], **meta}
    job = Job(
        id=task_id,
        task=step["task"],
        args=(*first_args, *args),
        kwargs=kwargs,
        queue=step["queue"],
        tries=step.get("tries"),
        timeout=step.get("timeout"),
        backoff=tuple(step.get("backoff") or ()),
        dispatched_at=time.time(),
        meta=meta,
        tags=tuple(step.get("tags") or ()),
        encrypted=step.get("encrypted") is True,
    )
    if "controls" in step:
        job.max_exceptions, job.retry_until, job.fail_on_timeout = checked_controls(
            step["controls"]
        )
    return job


def delay_ms(step: Step) -> int:
    delay = float(step.get("delay") or 0)
    return 0 if not math.isfinite(delay) else round(delay * 1000)
