"""The default connection: the queue ``dispatch`` uses unless a task is bound to another.

Process-wide by nature (``@task`` functions are module-level), so it is kept here as
the one other piece of global state besides the task registry, and dropped in a
forked child so that parent and child never share a socket.
"""

from __future__ import annotations

import os

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

_default_queue: list[RedisQueue] = []


def default_queue() -> RedisQueue:
    """The connection ``dispatch`` uses unless a task is bound to another one.

    Opened lazily from the environment, so importing tasks never touches Redis.
    """
    if not _default_queue:
        _default_queue.append(RedisQueue(Config.resolve()))
    return _default_queue[0]


def use(queue: RedisQueue) -> None:
    """Make ``queue`` the default connection of this process (workers do this per child)."""
    _default_queue[:] = [queue]


def _forget_connection_after_fork() -> None:
    # A socket shared between parent and child would interleave their replies.
    _default_queue.clear()


os.register_at_fork(after_in_child=_forget_connection_after_fork)
