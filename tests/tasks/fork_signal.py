"""Preloaded by a worker parent in a test (``--app fork_signal``): a stop that lands
while the parent forks its first child, taken by another thread.

The parent holds its signals in its main thread across ``fork()``; a signal sent to the
process then goes to any thread that does not hold it (the Sentinel watcher's, or a
library's), and its handler runs in the main thread at the next chance: here, inside
``os.fork()``, before the parent has recorded the new child.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from types import FrameType

_sent: list[bool] = []


def _stop_during_first_fork() -> None:
    """Send the stop, and return once its handler has run (here, between two short
    sleeps: in the fork, before the parent records the child), 10 s at most."""
    if _sent:
        return
    _sent.append(True)
    handled = threading.Event()
    handler = signal.getsignal(signal.SIGTERM)
    assert callable(handler)

    def noted(signum: int, frame: FrameType | None) -> None:
        handled.set()
        signal.signal(signal.SIGTERM, handler)
        handler(signum, frame)

    signal.signal(signal.SIGTERM, noted)
    os.kill(os.getpid(), signal.SIGTERM)
    deadline = time.monotonic() + 10
    while not handled.is_set() and time.monotonic() < deadline:
        time.sleep(0.001)


threading.Thread(target=threading.Event().wait, name="takes-signals", daemon=True).start()
os.register_at_fork(after_in_parent=_stop_during_first_fork)
