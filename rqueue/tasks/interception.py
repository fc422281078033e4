"""Interception: sending a block's dispatches somewhere other than Redis.

``rqueue.testing`` (``fake()``, ``sync()``, ``RQUEUE_SYNC``) takes every dispatch of
its block through :func:`intercept`; dispatching code asks :func:`current_interceptor`
first. Which block a dispatch belongs to is the context's (a ContextVar), so two tasks
running at once in one worker never see each other's blocks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from rqueue.errors import RQueueError
from rqueue.tasks.current import current_job
from rqueue.tasks.handles import Dispatched

Interceptor = Callable[[Any, "str | None", "dict[str, Any] | None"], Dispatched]
"""Takes every dispatch instead of Redis: ``(call, id or None, meta or None)``, the call
a ``PendingDispatch`` (rqueue/tasks/definition.py, which sits above this module)."""

_intercepted: ContextVar[Interceptor | None] = ContextVar("rqueue_interceptor", default=None)
"""The interceptor of the ``intercept()`` block this context runs in: a block's code,
the asyncio tasks it starts and ``asyncio.to_thread`` calls (both copy the context)."""


class _Blocks:
    """The ``intercept()`` blocks open in this process, and sync mode for all of it.

    Process-wide on purpose, and only a fallback for a context that is in no block of
    its own: a thread a test started in a ``fake()`` block (a ``ThreadPoolExecutor``
    copies no context) must still be recorded. Never for a worker's run, though: a
    task running beside another (``--threads``, ``--slots``) sees only its own.
    """

    def __init__(self) -> None:
        self.process: Interceptor | None = None
        """``RQUEUE_SYNC``'s (:func:`intercept_process`): every context's last resort."""
        self.open: dict[int, tuple[Interceptor, Interceptor | None]] = {}
        """Per open block (by its id): its interceptor, and the one it replaced in its
        context (None if none): the blocks nested in one another form one chain."""
        self.lock = threading.Lock()

    def innermost(self) -> Interceptor | None:
        """The open block a context outside every block belongs to: the innermost one
        if all open blocks nest in one another; RQueueError if there are two chains
        (tests running in threads at once), which one could only guess."""
        with self.lock:
            blocks = list(self.open.values())
        if not blocks:
            return self.process
        outer = {id(replaced) for _, replaced in blocks}
        inner = [interceptor for interceptor, _ in blocks if id(interceptor) not in outer]
        if len(inner) != 1:
            raise RQueueError(
                "a dispatch from a thread outside every fake()/sync() block, while blocks "
                "are open in several threads: rqueue cannot tell which one it belongs to; "
                "start the thread in its block's context (contextvars.copy_context().run)"
            )
        return inner[0]


_blocks = _Blocks()


@contextmanager
def intercept(interceptor: Interceptor) -> Iterator[None]:
    """Send the dispatches of this block to ``interceptor`` instead of Redis: those of
    this context, and of threads in no block of their own (see :class:`_Blocks`); a
    block inside it takes them over until it ends. For :mod:`rqueue.testing`."""
    replaced = _intercepted.get()
    token = _intercepted.set(interceptor)
    key = id(token)
    with _blocks.lock:
        _blocks.open[key] = (interceptor, replaced)
    try:
        yield
    finally:
        with _blocks.lock:
            del _blocks.open[key]
        try:
            _intercepted.reset(token)
        except ValueError:  # ended in another context than it began (a fixture's teardown)
            _intercepted.set(replaced)


def intercept_process(interceptor: Interceptor | None) -> None:
    """Send every dispatch of the process that no block takes to ``interceptor``
    (``RQUEUE_SYNC``; None: to Redis again)."""
    _blocks.process = interceptor


def current_interceptor() -> Any:
    """What takes this context's dispatches instead of Redis, or None: its own block's,
    else (outside a worker's run) the process's. rqueue.testing's also takes whole
    chains and batches (``take_chain``, ``take_batch``), hence ``Any``."""
    own = _intercepted.get()
    if own is not None:
        return own
    if current_job() is not None:  # a worker's run: another run's block is not its own
        return _blocks.process
    return _blocks.innermost()
