"""A task's options, each defined once: here.

:class:`TaskOptions` is the one definition of what a task can be given. Each field's
metadata (an :class:`Option`) says how the argument a user passes becomes its value,
how that value is checked (the same ranges a worker checks when it decodes a payload),
and how each call's job carries it. Everything else reads them from here:

- ``@task(...)`` and ``using(...)``: :func:`declared` and :meth:`TaskOptions.overridden`,
  which take exactly the arguments ``TaskArguments`` and ``UsingArguments`` list
  (option_arguments.py: the types users see, for mypy; checked against the fields
  on import);
- the job of each call: :meth:`TaskOptions.job_fields` and :meth:`TaskOptions.job_meta`,
  through ``Task.make_job``;
- through that job, what travels without a live task: batch members, chain steps and
  batch callbacks (rqueue/workflows/steps.py) and each run of a schedule
  (rqueue/schedules/api.py), so none of them can drop an option the job carries.

So an option is added here: a field with its default and its ``Option``, and its
argument in ``TaskArguments`` (``@task``) and/or ``UsingArguments`` (``using()``), in
option_arguments.py. Only
one that needs a new ``Job`` attribute also changes the wire (rqueue/encoding/payload.py,
a step's and a schedule's fields), and tests/unit/tasks/test_task_options.py fails until it does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

from rqueue.encoding.payload import GROUP, KEEP, PRIORITY
from rqueue.encoding.ranges import (
    Backoff,
    checked_backoff,
    checked_keep,
    checked_max_exceptions,
    checked_priority,
    checked_timeout,
    checked_tries,
)
from rqueue.errors import InvalidTaskOption
from rqueue.middleware.base import MIDDLEWARE, Middleware, check_stack
from rqueue.middleware.concurrency import check_limit
from rqueue.middleware.stacks import CONCURRENCY
from rqueue.settings.config import LIMITS
from rqueue.store.keys import PLAIN_LEVEL, validate_queue_name
from rqueue.tasks.hooks import Hook
from rqueue.tasks.iterable import ITERABLE
from rqueue.tasks.option_arguments import (
    DebounceKey,
    TaskArguments,
    UniqueKey,
    UniqueUntil,
    UsingArguments,
)
from rqueue.tasks.option_values import (
    GroupKey,
    RetryUntil,
    Tags,
    carried_stack,
    check_after,
    check_debounce_by,
    check_flag,
    check_group,
    check_retry_until,
    check_tags,
    check_unique,
    check_unique_until,
    checked,
    exception_classes_of,
    given_group,
    given_tags,
    hook_check,
    keep_seconds,
    retry_until_at_dispatch,
    tags_of_call,
)
from rqueue.tasks.validation import (
    ExceptionClasses,
    check_debounce,
    checked_duration,
    checked_unique_for,
)
from rqueue.timing import seconds

if TYPE_CHECKING:
    from rqueue.store.queue import RedisQueue
    from rqueue.tasks.handles import Dispatched


DEFAULT_UNIQUE_FOR = 3600.0
"""Seconds a unique lock lasts unless released first: a lost worker never leaves one."""
UNIQUE = "unique"
"""The ``meta`` entry of a unique task's call: ``{"key": its lock's key, "until":
"processed" or "processing"}``, for the worker that releases the lock. Written per call
by ``Task.make_job``: the key is computed from the call's arguments."""


_Carried = tuple[str, Callable[..., Any], Any]
"""``(Job attribute or meta key, how its value is turned into the entry, the value)``."""


@dataclass(frozen=True)
class Option:
    """What rqueue does with one option, besides its name, type and default."""

    check: Callable[[Any], object] | None = None
    """Raises InvalidTaskOption (InvalidQueueName for a queue) naming the option if its
    value is refused; not called with None where None is the default ("not set")."""
    given: Callable[[Any], Any] | None = None
    """Turns what a user passes (a timedelta, a list) into the value; None: as it is."""
    argument: str | None = None
    """The argument that sets it, if not named as the field (``using(middleware=)``)."""
    job: str | None = None
    """The ``Job`` attribute that carries it in each call's payload."""
    at_dispatch: Callable[[Any, float], Any] | None = None
    """Its value in a job dispatched at a time (epoch seconds), if not the value itself."""
    of_call: Callable[[Any, Sequence[Any], dict[str, Any]], Any] | None = None
    """Its value in the job of a call with these arguments, if it depends on them
    (set by ``Task.make_job``, not in :meth:`TaskOptions.job_fields`)."""
    meta: str | None = None
    """The ``Job.meta`` entry that carries it, if any..."""
    in_meta: Callable[[Any], Any] | None = None
    """...holding this of its value (None: no entry for that value)."""


def _how(**how: Any) -> dict[str, Option]:
    """A field's metadata: what rqueue does with the option (see :class:`Option`)."""
    return {"option": Option(**how)}


@dataclass(frozen=True)
class TaskOptions:
    """How a task is queued and run; ``None`` means the worker's default applies."""

    queue: str = field(default="default", metadata=_how(check=validate_queue_name, job="queue"))
    tries: int | None = field(
        default=None, metadata=_how(check=checked(checked_tries), job="tries")
    )
    timeout: float | None = field(
        default=None, metadata=_how(check=checked(checked_timeout), job="timeout")
    )
    backoff: Backoff = field(
        default=(),
        metadata=_how(
            check=checked(checked_backoff), given=checked(checked_backoff), job="backoff"
        ),
    )
    after_succeeded: Hook | None = field(
        default=None, metadata=_how(check=hook_check("after_succeeded"))
    )
    after_failed: Hook | None = field(default=None, metadata=_how(check=hook_check("after_failed")))
    after_cancelled: Hook | None = field(
        default=None, metadata=_how(check=hook_check("after_cancelled"))
    )
    connection: RedisQueue | None = field(default=None, compare=False, metadata=_how())
    wait_replicas: int | None = field(
        default=None,
        metadata=_how(check=checked(partial(LIMITS["wait_replicas"][1].check, "wait_replicas"))),
    )
    """Replicas each dispatch waits for (Redis ``WAIT``); None: the connection's config."""
    keep_result: float | None = field(
        default=None,
        metadata=_how(
            check=checked(checked_keep),
            given=keep_seconds,
            meta=KEEP,
            in_meta=lambda keep: round(keep * 1000),
        ),
    )
    """Seconds to keep each call's status and result (docs/workflows.md); None: none kept."""
    max_exceptions: int | None = field(
        default=None, metadata=_how(check=checked(checked_max_exceptions), job="max_exceptions")
    )
    """Raised exceptions (timeouts and lost workers aside) after which it fails for good."""
    retry_until: RetryUntil | None = field(
        default=None,
        metadata=_how(
            check=check_retry_until, job="retry_until", at_dispatch=retry_until_at_dispatch
        ),
    )
    """When it stops being retried or started (docs/tasks.md, "Job controls")."""
    fail_on_timeout: bool = field(
        default=False,
        metadata=_how(check=partial(check_flag, "fail_on_timeout"), job="fail_on_timeout"),
    )
    """A timeout fails it at once instead of retrying it."""
    encrypted: bool = field(
        default=False, metadata=_how(check=partial(check_flag, "encrypted"), job="encrypted")
    )
    """Its arguments travel encrypted and its kept result is kept encrypted, with the
    keys of ``RQUEUE_ENCRYPTION_KEYS`` (docs/security.md, "Encrypted tasks")."""
    middleware: tuple[Middleware, ...] = field(
        default=(), metadata=_how(check=partial(check_stack, what="middleware"), given=tuple)
    )
    """Declared with ``@task(middleware=)``: the worker's registered task has them."""
    dispatch_middleware: tuple[Middleware, ...] = field(
        default=(),
        metadata=_how(
            check=partial(check_stack, what="using(middleware=)", carried=True),
            given=tuple,
            argument="middleware",
            meta=MIDDLEWARE,
            in_meta=carried_stack,
        ),
    )
    """Given to ``using(middleware=)``: they travel in each call's payload and run
    after the declared ones (Laravel's ``through()``)."""
    concurrency: int | None = field(
        default=None,
        metadata=_how(check=checked(partial(check_limit, what="concurrency")), meta=CONCURRENCY),
    )
    """At most this many of its calls run at once, across all workers of its queue
    (docs/tasks.md, "Concurrency"): the worker runs each call inside a ``Concurrency``
    of the task (``middleware/stacks.py``). None: no limit."""
    unique: UniqueKey = field(default=False, metadata=_how(check=check_unique))
    """At most one call per key queued or running (docs/tasks.md, "Unique tasks"); each
    call's key travels in its meta (:data:`UNIQUE`)."""
    unique_for: float = field(
        default=DEFAULT_UNIQUE_FOR,
        metadata=_how(
            check=checked(checked_unique_for),
            given=lambda lasts: (
                seconds(lasts, "unique_for") if isinstance(lasts, timedelta) else lasts
            ),
        ),
    )
    unique_until: UniqueUntil = field(default="processed", metadata=_how(check=check_unique_until))
    tags: Tags = field(
        default=(),
        metadata=_how(check=check_tags, given=given_tags, job="tags", of_call=tags_of_call),
    )
    """Labels each call carries, to find it by (docs/tasks.md, "Tags")."""
    retry_for: ExceptionClasses | None = field(
        default=None,
        metadata=_how(
            check=exception_classes_of("retry_for"), given=exception_classes_of("retry_for")
        ),
    )
    """Only these exceptions are retried; any other fails it at once (None: all are)."""
    dont_retry_for: ExceptionClasses = field(
        default=(),
        metadata=_how(
            check=exception_classes_of("dont_retry_for"),
            given=exception_classes_of("dont_retry_for"),
        ),
    )
    """These exceptions fail it at once, even those ``retry_for`` lists. Neither
    option travels in a payload: a worker asks its registered task's
    (``worker/rules.py``, ``fails_at_once``), so ``@task`` alone declares them."""
    debounce: float | None = field(
        default=None,
        metadata=_how(check=checked_duration("debounce"), given=checked_duration("debounce")),
    )
    """Seconds a call waits for another with its key, which replaces it and waits
    again; the last one runs (docs/tasks.md, "Debounced tasks"). None: not debounced."""
    debounce_by: DebounceKey | None = field(default=None, metadata=_how(check=check_debounce_by))
    """The debounce key of a call's arguments; None: one key for the whole task."""
    debounce_max: float | None = field(
        default=None,
        metadata=_how(
            check=checked_duration("debounce_max"), given=checked_duration("debounce_max")
        ),
    )
    """Seconds after a burst's first call by which its call is due, however many come."""
    iterable: bool = field(
        default=False,
        metadata=_how(
            check=partial(check_flag, "iterable"),
            meta=ITERABLE,
            in_meta=lambda on: 1 if on else None,
        ),
    )
    """A generator yielding a cursor per item, checkpointed and resumed (docs/tasks.md,
    "Iterable tasks"): ``@task`` wraps its function (``tasks/iterable.py``)."""
    after: tuple[Dispatched, ...] = field(
        default=(), compare=False, metadata=_how(check=check_after, given=tuple)
    )
    """Dispatched tasks each call waits for: it runs once they all succeeded
    (docs/workflows.md, "Dependencies"; ``tasks/dependencies.py``)."""
    allow_failures: bool = field(
        default=False, metadata=_how(check=partial(check_flag, "allow_failures"))
    )
    """With ``after``: run once they all finished, whether they succeeded or not."""
    priority: int | None = field(
        default=None,
        metadata=_how(
            check=checked(checked_priority),
            meta=PRIORITY,
            in_meta=lambda level: None if level == PLAIN_LEVEL else level,
        ),
    )
    """Its level in its queue, 0 (runs first) to 9 (runs last); None: 5, the level of
    the queue's plain ready list (docs/tasks.md, "Priorities")."""
    group: GroupKey | None = field(
        default=None,
        metadata=_how(
            check=check_group,
            given=given_group,
            meta=GROUP,
            in_meta=lambda group: None if callable(group) else group,
        ),
    )
    """The fair group its calls belong to (a tenant's id), or a callable of a call's
    arguments giving it: a queue's groups take turns at level 5 (docs/tasks.md, "Fair
    groups"); a call with a priority too runs at its level, its group's limits apply."""

    def __post_init__(self) -> None:
        for name, how in _OPTIONS.items():
            value = getattr(self, name)
            if how.check is not None and not (value is None and name in _UNSET_BY_NONE):
                how.check(value)
        if self.debounce is not None or self.debounce_by or self.debounce_max:
            check_debounce(self.debounce, self.debounce_by, self.debounce_max, self.unique)
        if self.allow_failures and not self.after:
            raise InvalidTaskOption("allow_failures=True is for a call given after=[...]")

    def overridden(self, given: Mapping[str, Any]) -> TaskOptions:
        """These options with those given to ``using()`` (None: not given) instead."""
        changes = {name: value for name, value in given.items() if value is not None}
        return replace(self, **_values(changes, _USING, "Task.using"))

    def job_fields(self, dispatched_at: float) -> dict[str, Any]:
        """The ``Job`` attributes of a call dispatched at ``dispatched_at``."""
        fixed, timed, _, _ = self._carried
        carried = fixed.copy()
        for attribute, at_dispatch, value in timed:
            carried[attribute] = at_dispatch(value, dispatched_at)
        return carried

    def call_fields(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The ``Job`` attributes that depend on a call's arguments (set ones only)."""
        return {
            attribute: of_call(value, args, kwargs)
            for attribute, of_call, value in self._carried[3]
        }

    def job_meta(self) -> dict[str, Any]:
        """The ``Job.meta`` entries each call carries (the unique key aside: per call)."""
        carried = {}
        for key, in_meta, value in self._carried[2]:
            entry = in_meta(value)
            if entry is not None:
                carried[key] = entry
        return carried

    @cached_property
    def _carried(
        self,
    ) -> tuple[dict[str, Any], list[_Carried], list[_Carried], list[_Carried]]:
        """What each call's job gets, worked out once per options (a dispatch copies it):
        the fixed ``Job`` attributes, those set at dispatch, the meta entries, and the
        attributes each call's arguments decide (each as ``(attribute or key, how,
        value)``, the unset ones left out)."""
        fixed = {attribute: getattr(self, name) for name, attribute, at in _IN_JOB if not at}
        timed = [(attribute, at, getattr(self, name)) for name, attribute, at in _IN_JOB if at]
        meta = [(key, in_meta, getattr(self, name)) for name, key, in_meta in _IN_META]
        of_call = [(attribute, of, getattr(self, name)) for name, attribute, of in _OF_CALL]
        return (
            fixed,
            [(attribute, at, value) for attribute, at, value in timed if value is not None],
            [(key, in_meta, value) for key, in_meta, value in meta if value is not None],
            [(attribute, of, value) for attribute, of, value in of_call if value],
        )

    @cached_property
    def depends_on_call(self) -> bool:
        """Some attribute or meta entry of each call's job depends on its arguments
        (``tags=`` or ``group=`` a callable): ``dispatch_many`` cannot share one
        template's options for it."""
        return callable(self.group) or any(callable(v) for _, _, v in self._carried[3])

    @cached_property
    def depends_on_time(self) -> bool:
        """Some attribute of each call's job depends on when it is dispatched
        (``retry_until=`` a duration): a template made earlier would carry a stale one."""
        return bool(self._carried[1])


_OPTIONS: dict[str, Option] = {f.name: f.metadata["option"] for f in fields(TaskOptions)}
_UNSET_BY_NONE = frozenset(f.name for f in fields(TaskOptions) if f.default is None)
"""The options whose None means "not set" (the worker's or the connection's default
applies): neither checked nor converted. Any other option is checked, None included."""
_IN_JOB = [
    (n, how.job, how.at_dispatch)
    for n, how in _OPTIONS.items()
    if how.job is not None and how.of_call is None
]
_OF_CALL = [
    (n, how.job, how.of_call)
    for n, how in _OPTIONS.items()
    if how.job is not None and how.of_call is not None
]
_IN_META = [
    (n, how.meta, how.in_meta or (lambda value: value))
    for n, how in _OPTIONS.items()
    if how.meta is not None
]
JOB_ATTRIBUTES = tuple(attribute for _, attribute, _ in (*_IN_JOB, *_OF_CALL))
JOB_META = tuple(key for _, key, _ in _IN_META)
"""The ``Job`` attributes and meta entries options set: what a workflow step or a
schedule must carry."""


def _fields_of(arguments: type, renamed: bool) -> dict[str, str]:
    """Argument name to field name; an argument that sets no field fails the import."""
    by_argument = {name: name for name in _OPTIONS}
    if renamed:
        by_argument.update({how.argument: n for n, how in _OPTIONS.items() if how.argument})
    missing = [name for name in arguments.__annotations__ if name not in by_argument]
    if missing:
        raise TypeError(f"{arguments.__name__} lists {missing}, which set no TaskOptions field")
    return {name: by_argument[name] for name in arguments.__annotations__}


_DECLARED = _fields_of(TaskArguments, renamed=False)
_USING = _fields_of(UsingArguments, renamed=True)


def _values(given: Mapping[str, Any], accepted: dict[str, str], where: str) -> dict[str, Any]:
    """``given`` arguments as field values; TypeError for one ``where`` does not take."""
    values = {}
    for argument, value in given.items():
        name = accepted.get(argument)
        if name is None:
            raise TypeError(f"{where}() got an unexpected keyword argument {argument!r}")
        convert = _OPTIONS[name].given
        unset = value is None and name in _UNSET_BY_NONE
        values[name] = value if convert is None or unset else convert(value)
    return values


def declared(given: Mapping[str, Any]) -> TaskOptions:
    """The options of ``@task(**given)``."""
    return TaskOptions(**_values(given, _DECLARED, "task"))
