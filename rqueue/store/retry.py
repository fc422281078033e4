"""Riding out a Redis outage: what counts as one, backoff with jitter, and retrying.

A task's outcome (ack, release, fail) must never be dropped because Redis blinked,
and a fleet of workers must not reconnect in lockstep: hence the jitter.

An outage is not only a lost connection. During a failover or a restart Redis
answers, but refuses: ``READONLY`` (a master turned replica), ``UNBLOCKED`` (a
blocking pop cut short by that change), ``LOADING``, ``MASTERDOWN``, ``OOM`` and
their siblings (:data:`TRANSIENT_REPLIES`). Each means the command did not run: a
script is refused before its first write, never half way. So the connection's
parser (``connect.py``) turns them into :class:`RedisUnavailable`, which is in
:data:`REDIS_ERRORS`: every handler rides them out as it rides out a lost
connection, in the worker parent, its children and at dispatch.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Protocol, TypeVar

import redis

T = TypeVar("T")

TRANSIENT_REPLIES = frozenset(
    {
        "BUSY",  # a script or module command is running past its time limit
        "CLUSTERDOWN",
        "LOADING",  # restarting: the dataset is being loaded
        "MASTERDOWN",  # a replica lost its master and serves no stale data
        "MISCONF",  # snapshots fail, so writes are refused until the disk is fixed
        "NOREPLICAS",  # fewer replicas than min-replicas-to-write
        "OOM",  # maxmemory reached: a worker draining the queues frees it
        "READONLY",  # a replica, for instance a master demoted by a failover
        "TRYAGAIN",
        "UNBLOCKED",  # a blocking pop cut short by a role change
    }
)
"""Error codes of replies that mean "not now": the command did not run."""
ROLE_CHANGES = frozenset({"MASTERDOWN", "READONLY", "UNBLOCKED"})
"""Those that say this server is not (or no longer) the master: reconnect to find it."""

# Before Redis 7 an error inside a script comes back as ``ERR Error running script
# (call to f_<sha>): @user_script:1: ... -READONLY You can't write ...``.
_SCRIPT_ERROR = re.compile(r"ERR Error running script .*?: -([A-Z]+ .*)", re.DOTALL)


class RedisUnavailable(redis.ResponseError):
    """Redis answered with one of :data:`TRANSIENT_REPLIES`: back off and try again.

    A ``ResponseError``, not a ``ConnectionError``: the reply was read in full, so
    the connection stays usable and a pipeline goes on reading the replies after it
    (redis-py drops the connection on a ConnectionError from its parser). Its text
    is Redis's reply, without the script wrapper: ``READONLY You can't write ...``.
    """

    def __init__(self, reply: str) -> None:
        super().__init__(reply)
        self.code = reply.split(" ", 1)[0]


def transient_reply(reply: str) -> str | None:
    """An error reply as Redis gave it (unwrapped from a script error) if it is
    transient, else None."""
    if embedded := _SCRIPT_ERROR.match(reply):
        reply = embedded.group(1)
    return reply if reply.split(" ", 1)[0] in TRANSIENT_REPLIES else None


_TRANSIENT_ERRORS = (
    RedisUnavailable,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ReadOnlyError,
)
"""The transient replies as exceptions: ours, and those redis-py's cluster client raises
itself for ``CLUSTERDOWN`` (a cluster that lost a master and has not failed over yet),
``TRYAGAIN`` and ``READONLY`` once its own retries are spent, before our parser sees them."""
REDIS_ERRORS = (redis.ConnectionError, redis.TimeoutError, *_TRANSIENT_ERRORS)
"""What an outage raises: a lost or refused connection, a timeout, a transient refusal."""


def refusal(exc: BaseException) -> bool:
    """Whether Redis refused a command for good: an error reply that is not one of the
    transient ones an outage gives (sending it again would meet the same refusal)."""
    return isinstance(exc, redis.ResponseError) and not isinstance(exc, _TRANSIENT_ERRORS)


def unsent(error: redis.TimeoutError) -> bool:
    """Whether a timeout came before the connection opened, so nothing was sent.

    redis-py raises the same TimeoutError for a connect that timed out (a host gone,
    not refusing) as for a reply that did not come; only its text tells them apart.
    """
    return str(error).startswith("Timeout connecting")


def backoff_delay(failures: int) -> float:
    """Seconds to wait after ``failures`` failures in a row: 0.1 s doubling up to 5 s, jittered."""
    return min(5.0, 0.1 * 2.0 ** min(failures, 6)) * random.uniform(0.5, 1.0)


class Persist(Protocol):
    """A process's own way of retrying a state change until Redis takes it (see persist)."""

    def __call__(self, call: Callable[[], T], /) -> T: ...


def persist(call: Callable[[], T], on_error: Callable[[int, Exception], None]) -> T:
    """Call until Redis answers; ``on_error(failures, exc)`` waits, or raises to give up."""
    failures = 0
    while True:
        try:
            return call()
        except REDIS_ERRORS as exc:
            failures += 1
            on_error(failures, exc)
