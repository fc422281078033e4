"""Schedules: recurring tasks kept in Redis, fired by every worker, each trigger once.

``from rqueue import schedules`` then ``schedules.add("cleanup", cleanup, every=300)``.

- ``api``: :class:`Schedules` (add, add_many, update, pause, resume, remove, list) and the
  module-level functions re-exported here, on the default connection.
- ``record``: one schedule as a plain record, and its msgpack form in Redis.
- ``scheduler``: the worker parent's part, firing due triggers into their queues.

When a schedule fires is pure logic in :mod:`rqueue.timing`, below this folder,
because ``@task(cron=...)`` checks its expression there too.

May import: the task layer (``task``, ``registry``, ``payload``, ``timing``),
``store`` and ``config``/``errors``. Never ``worker`` or ``cli``, which call it.
"""

from rqueue.schedules.api import (
    ScheduleExists,
    ScheduleNotFound,
    Schedules,
    add,
    add_many,
    get,
    list,
    pause,
    remove,
    resume,
    run_now,
    update,
)
from rqueue.schedules.record import Schedule

__all__ = [
    "Schedule",
    "ScheduleExists",
    "ScheduleNotFound",
    "Schedules",
    "add",
    "add_many",
    "get",
    "list",
    "pause",
    "remove",
    "resume",
    "run_now",
    "update",
]
