"""Idle waits that a signal may cut short, in the worker parent and in each child.

Python runs a signal handler between any two steps of the main loop, so a handler
that raised wherever it landed could break a task or a Redis call half way. The
parent and the child therefore raise :class:`Interrupted` only while their loop sits
in a wait that is safe to abandon, marked by ``_interruptible``: a stop or a dead
child is then seen at once, not after the wait. Both loops share this one base so
the flag, the sleep and the raise cannot drift apart.
"""

from __future__ import annotations

import time


class Interrupted(Exception):
    """Raised by a signal handler to cut an idle wait short (never while a task runs)."""


class InterruptibleWaits:
    """Base of the parent's ``Supervisor`` and the child's ``ChildWorker``."""

    _interruptible = False
    """True only while the loop is in a wait it may abandon; every such wait sets it."""

    def _sleep(self, seconds: float) -> None:
        self._interruptible = True
        try:
            time.sleep(seconds)
        except Interrupted:
            pass
        finally:
            self._interruptible = False

    def _interrupt(self) -> None:
        """Called by a signal handler once it has done its work."""
        if self._interruptible:
            raise Interrupted()
