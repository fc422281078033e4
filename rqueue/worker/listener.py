"""A concurrent child's wait for a push while its coroutines run, or as it leaves.

With slots free and its queues empty, a child running coroutines waits for a push
beside them (``concurrent.py``), on a connection of its own so that the loop's calls
never queue behind the blocking one. The wait is a BLPOP sent now and read later:
the event loop watches its socket, and the reply is read on the loop's own thread,
which then reserves and starts the task. When the last coroutine ends and the child
goes back to process mode, the wait still pending is read there too, by a blocking
read in the same thread, as process mode's own BLPOP is; its reserve call first goes
behind it, on its connection (``Reservations.reserve_behind``), as process mode sends
its own with its BLPOP.

So a push wakes the thread that takes the task, and no other. A thread blocked in the
BLPOP (how this worked before) had to hand the wake to the loop: its result, a write
to the loop's self-pipe, the loop's turns, a second thread scheduled. On a loaded
2-CPU machine that hop cost an idle child about 0.1 to 0.3 ms per wake-up.

Only a cluster wait over queues in several slots is no one command on one connection
(``store/waits.py``): that one still runs in a thread, as ``wait_for_ready``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from rqueue.settings.config import Config
from rqueue.store.consumer import Waiting
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import REDIS_ERRORS

Woken = asyncio.Future[str | None]
"""A wait's end: the queue whose push ended it, or None (timed out)."""
Behind = Callable[[Waiting], Callable[[], str | None] | None]
"""What sends a call behind a wait on its way, returning the reader of both (None: sent
nothing)."""


class Listener:
    """One child's waits for a push, on a connection of its own."""

    def __init__(self, config: Config, loop: asyncio.AbstractEventLoop) -> None:
        self.store = RedisQueue(config)
        self.loop = loop
        self._watched: tuple[Woken, Waiting, Callable[[], str | None]] | None = None
        """The wait whose socket the loop watches: its future, itself and its reader."""
        self._thread: ThreadPoolExecutor | None = None
        """For a wait that is no single command (see the module)."""

    def listen(self, queues: Sequence[str], timeout: float) -> Woken:
        """Start a wait for a push to ``queues``, for at most ``timeout`` seconds; the
        future is done once it ends (a Redis error: done with it, as a wake-up)."""
        woken: Woken = self.loop.create_future()
        try:
            sent = self.store.send_wait_for_ready(queues, timeout)
        except REDIS_ERRORS as exc:  # the next reserve call meets it too
            woken.set_exception(exc)
            return woken
        if sent is None:
            if self._thread is None:
                self._thread = ThreadPoolExecutor(1, "rqueue-listen")
            return self.loop.run_in_executor(
                self._thread, self.store.wait_for_ready, queues, timeout
            )
        self._watched = woken, sent, sent.read
        self.loop.add_reader(sent.socket, self._read)
        return woken

    def _read(self) -> None:
        """The reply is here: read it, on the loop's thread."""
        watched, self._watched = self._watched, None
        assert watched is not None
        woken, waiting, read = watched
        self.loop.remove_reader(waiting.socket)
        try:
            woken.set_result(read())
        except Exception as exc:  # a Redis error, as a wake-up: the next call meets it
            woken.set_exception(exc)

    def finish(self, woken: Woken, behind: Behind | None = None) -> None:
        """Wait here for ``woken`` to end, the loop not running: a watched wait is read
        in this thread (a push wakes it directly), a thread's is waited for. ``behind``
        may first send a call behind a watched wait, on its connection (its child's
        reserve call: ``Reservations.reserve_behind``); the reader it returns reads
        both, in place of the wait's own."""
        watched = self._watched
        if watched is not None and watched[0] is woken:
            if behind is not None:
                try:
                    read = behind(watched[1])
                except Exception as exc:  # its connection is cut: an error, as a wake-up
                    self._watched = None
                    self.loop.remove_reader(watched[1].socket)
                    woken.set_exception(exc)
                    return
                if read is not None:
                    self._watched = woken, watched[1], read
            self._read()
        elif not woken.done():
            self.loop.run_until_complete(asyncio.wait([woken]))
