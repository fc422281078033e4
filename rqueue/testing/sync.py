"""``sync()`` and ``RQUEUE_SYNC=1``: every dispatch runs inline, at once (Celery's
eager mode, RQ's ``is_async=False``), through the same encode, decode and
middleware as in a worker, so an argument a worker could not get still fails.

``later()`` and ``.delayed()`` run at once too: nothing waits. A failed attempt is
retried at once, up to the task's ``tries`` (the worker's default, 3, if it sets
none), so a test sees the outcome a worker would reach; a middleware's ``Release``
leaves the call ``delayed`` and not run again (its ``result()`` says so).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rqueue.settings.config import env_flag
from rqueue.tasks.definition import PendingDispatch
from rqueue.tasks.interception import intercept, intercept_process
from rqueue.testing.inline import InlineRunner, Interception

ENVIRONMENT = "RQUEUE_SYNC"


class Sync(Interception):
    """Runs each dispatch as soon as its payload is made."""

    def __init__(self) -> None:
        super().__init__(InlineRunner())

    def taken(self, payload: bytes, call: PendingDispatch | None) -> None:
        self.runner.run(payload)


@contextmanager
def sync() -> Iterator[Sync]:
    """Run the dispatches of this block inline until it ends (its own, and those of
    threads it starts); each handle's ``status()`` and ``result()`` give its outcome."""
    runner = Sync()
    with intercept(runner):
        yield runner


def sync_from_environment() -> bool:
    """Turn sync mode on for the rest of the process if ``RQUEUE_SYNC`` is on (``1``,
    ``true``, ``yes``, ``on``); True if it did; ConfigError naming it for a value that
    is neither on nor off. Importing ``rqueue`` calls it, so ``RQUEUE_SYNC=1 pytest``
    or ``RQUEUE_SYNC=1 python app.py`` need nothing more."""
    if not env_flag(ENVIRONMENT):
        return False
    intercept_process(Sync())
    return True
