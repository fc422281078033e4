"""Exceptions users may catch; each says what went wrong in words a user can act on."""

from __future__ import annotations


class RQueueError(Exception):
    """Base of every error rqueue raises on purpose."""


class InvalidQueueName(RQueueError, ValueError):
    """A queue name that cannot be used as part of a Redis key."""


class UnserializableArgument(RQueueError, TypeError):
    """An argument msgpack cannot encode; raised at dispatch, before anything is stored."""


class PayloadTooLarge(RQueueError, ValueError):
    """An encoded task over the configured size limit; refused at dispatch."""


class InvalidSchedule(RQueueError, ValueError):
    """A ``later()`` time, delay or option that makes no sense."""


class InvalidPayload(RQueueError):
    """Bytes in a queue that are not a task rqueue can run; they go to ``:failed``."""


class TaskNotRegistered(RQueueError):
    """A payload names a callable that is not registered with ``@task``."""


class QueueConnectionError(RQueueError, ConnectionError):
    """Redis could not be reached after a bounded retry."""


class TaskTimeout(BaseException):
    """Raised inside a task that overran its timeout.

    It derives from ``BaseException`` so that a task's own ``except Exception`` does
    not swallow it by accident; a task that swallows it anyway is killed by the parent.
    """


class WorkerLost(RQueueError):
    """The worker child running a task died (killed, out of memory, ``os._exit``)."""
