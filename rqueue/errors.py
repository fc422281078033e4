"""Exceptions users may catch; each says what went wrong in words a user can act on."""

from __future__ import annotations

from collections.abc import Callable


class RQueueError(Exception):
    """Base of every error rqueue raises on purpose."""


class InvalidQueueName(RQueueError, ValueError):
    """A queue name that cannot be used as part of a Redis key."""


class UnserializableArgument(RQueueError, TypeError):
    """An argument msgpack cannot encode; raised at dispatch, before anything is stored."""


class PayloadTooLarge(RQueueError, ValueError):
    """An encoded task over the configured size limit; refused at dispatch."""


class ResultNotStored(RQueueError):
    """A task ran, but what it returned cannot be stored: kept (``keep_result``) or
    passed on to a chain's next step. The task fails at once, without a retry: running
    it again would return the same value and repeat its side effects."""


class ResultTooLarge(ResultNotStored, ValueError):
    """A kept result over ``RQUEUE_MAX_RESULT_BYTES`` (or over what the Redis server
    takes in one value, its ``proto-max-bulk-len``): the task fails, alone."""


class MaxAttemptsExceeded(RQueueError):
    """A task used up its tries without finishing: its last try released it (a
    ``Release`` from the task's own code uses an attempt, as Laravel's ``release()``)."""


class InvalidSchedule(RQueueError, ValueError):
    """A ``later()`` time, delay or option that makes no sense."""


class InvalidTaskOption(RQueueError, ValueError, TypeError):
    """A ``@task``/``using()`` option (tries, timeout, backoff, name, a hook) that cannot work.

    Raised when the task is defined, or when ``using()`` is called, so a mistake fails
    where it is written and never reaches a worker. It is both a ``ValueError`` and a
    ``TypeError``, the two errors these checks raised before it existed.
    """


class InvalidProgress(RQueueError, ValueError, TypeError):
    """``current_job().progress()`` given a fraction that is not a finite number from 0
    to 1, or a message that is not a short string."""


class InvalidCursor(RQueueError, ValueError, TypeError):
    """An iterable task's cursor that cannot be checkpointed (not plain msgpack data),
    or a checkpoint read back from Redis that rqueue did not write: the task fails
    without a retry, since a rerun would meet the same value (docs/tasks.md,
    "Iterable tasks")."""


class CheckpointRefused(RQueueError):
    """An iterable task's checkpoint was refused: its worker no longer holds the task
    (its reservation ran out, or it was settled, as a thread past its timeout is), so
    it may run elsewhere now. This run stops at the item boundary."""


class InvalidPayload(RQueueError):
    """Bytes in a queue that are not a task rqueue can run; they go to ``:failed``."""


class TaskNotRegistered(RQueueError):
    """A payload names a callable that is not registered with ``@task``."""


class TaskImportFailed(TaskNotRegistered):
    """Importing the module a task name points at failed (missing, or it raised).

    Unlike the other lookup failures it is retried within the task's tries: a deploy
    in progress (code not there yet, a setting not set yet) is its usual cause.
    """


class QueueConnectionError(RQueueError, ConnectionError):
    """Redis could not be reached after a bounded retry."""


class TaskTimeout(BaseException):
    """Raised inside a task that overran its timeout.

    It derives from ``BaseException`` so that a task's own ``except Exception`` does
    not swallow it by accident; a task that swallows it anyway is killed by the parent.
    """


class Fail(RQueueError):
    """Raise it in a task that will never succeed (a refused card, a deleted record):
    the task fails at once, whatever tries it has left, as Laravel's ``$this->fail()``
    and BullMQ's ``UnrecoverableError``. ``current_job().fail(reason)`` raises it.

    It is filed like any failure for good (the ``:failed`` list, ``after_failed``,
    ``on_failed``, a chain's catch, a batch's failed count), its kind ``Fail`` and its
    message the reason, followed by the exception it was raised ``from``, if any
    (``raise Fail("card refused") from exc``: ``card refused (from CardError:
    insufficient funds)``). Its traceback shows both.
    """

    def __init__(self, reason: str | None = None) -> None:
        self.reason = "the task failed itself, without a retry" if reason is None else reason
        super().__init__(self.reason)

    def __str__(self) -> str:
        # Read when it is reported, not when it is made: ``from`` sets the cause after.
        # Only the cause it was raised ``from``: an exception merely being handled
        # nearby (its implicit context) may be anyone's, rqueue's own included.
        cause = self.__cause__
        if cause is None:
            return str(self.reason)
        kind, message = describe(cause)
        return (
            f"{self.reason} (from {kind}: {message})" if message else f"{self.reason} (from {kind})"
        )


class WorkerLost(RQueueError):
    """The worker child running a task died (killed, out of memory, ``os._exit``)."""


def describe(exc: BaseException) -> tuple[str, str]:
    """``(type name, message)`` of any exception, never raising.

    Reporting an outcome must not fail because of the exception being reported: a
    ``__str__`` (or ``__repr__``) may raise or return a non-string, and a metaclass may
    make the type's name anything. Each falls back to something plainer, and the text
    is made valid UTF-8 (a lone surrogate would make the failed record unencodable).
    """
    cls = type(exc)
    name = _text(lambda: cls.__name__) or type.__dict__["__name__"].__get__(cls)
    message = _text(lambda: str(exc))
    if message is None:
        shown = _text(lambda: repr(exc)) or object.__repr__(exc)
        message = f"{shown} (its str() failed)"
    return utf8(name), utf8(message)


def utf8(text: str) -> str:
    """``text`` with anything UTF-8 cannot encode (lone surrogates) escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _text(make: Callable[[], object]) -> str | None:
    try:
        value = make()
    except BaseException:  # user code: whatever it raises, fall back
        return None
    return value if isinstance(value, str) else None


class ReplicasNotReached(RQueueError):
    """A dispatch with ``wait_replicas`` was queued, but fewer replicas than asked
    confirmed it in time (Redis ``WAIT``). Not a ConnectionError: the tasks are
    queued, and dispatching them again would queue them twice."""


class DispatchRefused(QueueConnectionError):
    """Redis was reached but refused a dispatch, and kept refusing for the retry time.

    Out of memory (``OOM``: raise ``maxmemory`` or let workers drain the queues), a
    read-only replica after a failover, a key of the queue holding the wrong type. The
    message gives Redis's own reason; the tasks it names were not queued.
    """


class TaskFailed(RQueueError):
    """``result()`` of a task that failed for good: the remote exception, as text.

    The worker's exception object is not sent back (it would need pickle); its type's
    name, its message and its formatted traceback are, in ``exception``, ``message``
    and ``traceback``.
    """

    def __init__(self, task_id: str, exception: str, message: str, traceback: str = "") -> None:
        super().__init__(f"task {task_id} failed: {exception}: {message}")
        self.task_id = task_id
        self.exception = exception
        self.message = message
        self.traceback = traceback


class DependencyFailed(RQueueError):
    """What a task dispatched ``using(after=[...])`` fails with, unrun, when a task it
    waits for failed for good or was cancelled (without ``allow_failures``): its message
    names that task's id and name and its error. Filed in the failed list as any
    failure; its kept result raises it (by name) as ``TaskFailed``."""


class TaskCancelled(RQueueError):
    """A task was cancelled: ``result()`` of one cancelled before or while it ran, and
    what a running task meets once its cancel reaches it (raised inside it in process
    mode, as ``TaskTimeout`` is; by ``current_job().check_cancelled()`` in a thread).
    Raised by a task, it ends the run as ``cancelled``: not retried, not failed."""


class ResultNotKept(RQueueError, TimeoutError):
    """``result()`` of a task that keeps no result (no ``keep_result``): there will
    never be one to wait for."""


class BatchCancelled(RQueueError):
    """Raised by ``skip_if_batch_cancelled()`` inside a member of a cancelled batch: the
    worker counts the member as skipped, neither succeeded nor failed."""


class UnregisteredType(InvalidPayload):
    """A payload holds a value of a type ``register_type`` did not name in this process.

    A worker imports a task's module on first use, and that module may be where the
    type is registered: so the worker imports it and decodes again before it gives up.
    """
