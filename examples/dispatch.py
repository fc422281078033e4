"""Dispatch one of each example task, to watch a worker handle them by hand.

Run from this folder, against a Redis (``rqueue server`` starts one)::

    python dispatch.py
    rqueue work emails,default -A tasks      # Ctrl-C when you have seen enough
    rqueue failed list
"""

from __future__ import annotations

from datetime import timedelta

import tasks

from rqueue import dispatch_many

if __name__ == "__main__":
    tasks.greet.dispatch(1)
    tasks.send_reminder.later(timedelta(seconds=5), 42)
    dispatch_many(
        [
            tasks.flaky_charge.pending(7),
            tasks.always_fails.pending(8),
            tasks.slow_report.pending(),
        ]
    )
    print("dispatched 5 tasks; now run: rqueue work emails,default -A tasks")
