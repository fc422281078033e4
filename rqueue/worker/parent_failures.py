"""Running ``after_failed`` and the ``failed`` listeners for tasks the parent had to fail.

When a task swallows its timeout or its child dies, the parent fails the task itself
(see ``recovery.py``). The parent never imports user code, so instead of calling the
hook it queues this small internal task; a child then calls the hook with the final
exception, exactly as if the task had raised it there.
"""

from __future__ import annotations

import logging

from rqueue import events, registry
from rqueue.errors import TaskTimeout, WorkerLost
from rqueue.events import TaskEvent
from rqueue.payload import decode
from rqueue.task import call_hook, task

log = logging.getLogger("rqueue.worker")


REPORT_TASK = "rqueue.parent_failures:report"
"""Its name from before the worker/ folder existed: payloads already queued by a
parent of an older version still find it. Registered by importing this module, which
:mod:`rqueue.worker.child` does."""


@task(tries=1, name=REPORT_TASK)
def report(payload: bytes, kind: str, message: str) -> None:
    """Call the failed task's ``after_failed`` hook and the ``failed`` listeners."""
    job = decode(payload)
    exception: BaseException = (
        TaskTimeout(message) if kind == "TaskTimeout" else WorkerLost(message)
    )
    target = registry.lookup(job.task)
    if target.options.after_failed is not None:
        try:
            call_hook(target.options.after_failed, exception, job)
        except Exception:
            log.exception(
                "hook of task %s (%s) raised; the task's outcome stands", job.task, job.id
            )
    events.emit(TaskEvent("failed", job, exception=exception))
