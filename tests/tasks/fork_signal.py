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

_sent: list[bool] = []


def _stop_during_first_fork() -> None:
    if _sent:
        return
    _sent.append(True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.5)  # the handler runs in here, and the sleep goes on after it


threading.Thread(target=threading.Event().wait, name="takes-signals", daemon=True).start()
os.register_at_fork(after_in_parent=_stop_during_first_fork)
