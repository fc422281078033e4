"""Running ``after_failed`` and the ``failed`` listeners for tasks the parent had to fail.

When a task swallows its timeout or its child dies, the parent fails the task itself
(see ``recovery.py``). The parent never imports user code, so instead of calling the
hook it queues this small internal task with the failed record it wrote; a child then
calls the hook with the final exception, exactly as if the task had raised it there.

That task would run any task's hook with any arguments, so it must not be forgeable
by writing a payload to Redis. With a secret, the parent signs it with a key only a
worker derives (``admission.py`` refuses it otherwise). With or without one, it acts
only on a record that is really in the queue's failed list and that a parent writes
(a timeout or a lost worker), and with a secret only if that record's task was
itself signed for the queue: a forged report changes nothing and leaves a log line.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from rqueue.encoding.payload import decode, encode
from rqueue.errors import InvalidPayload, QueueConnectionError, TaskTimeout, WorkerLost
from rqueue.failed import FailedTask, FailedTasks, decode_record
from rqueue.store.default import default_queue
from rqueue.store.header import payload_id
from rqueue.store.queue import RedisQueue
from rqueue.store.signing import parent_secret, verify
from rqueue.tasks import registry
from rqueue.tasks.decorator import task
from rqueue.worker import reports

log = logging.getLogger("rqueue.worker")


REPORT_TASK = "rqueue.parent_failures:report"
"""Its name from before the worker/ folder existed, in the ``rqueue.`` namespace that
only worker parents may queue (``admission.py``). Registered by importing this module,
which :mod:`rqueue.worker.child` does."""

_EXCEPTIONS: dict[str, type[BaseException]] = {
    "TaskTimeout": TaskTimeout,
    "WorkerLost": WorkerLost,
}
"""The failures a parent records itself; a report of any other is not the parent's."""


def queue_report(queue: RedisQueue, name: str, record: bytes) -> None:
    """Queue the report of ``record``, which the parent just put in ``name``'s failed list."""
    job = report.make_job((record,), {})
    job = replace(job, queue=name)
    encoded = encode(job, queue.config.max_payload_bytes, queue.config.keyring)
    secret = queue.config.secret
    sender = queue
    if secret:  # signed as the parent's own message: no producer can sign one
        sender = RedisQueue(replace(queue.config, secret=parent_secret(secret)), queue.client)
    try:
        sender.push(name, [encoded])
    except QueueConnectionError as exc:  # the failure itself is recorded; only hooks miss it
        log.warning("could not queue after_failed for task %s: %s", decode_record(record).id, exc)


@task(tries=1, name=REPORT_TASK)
def report(record: bytes) -> None:
    """Call the failed task's ``after_failed`` hook and the ``failed`` listeners."""
    failed = _genuine(record)
    if failed is None:
        return
    job = decode(failed.payload)
    exception = _EXCEPTIONS[failed.exception](failed.message)
    target = registry.lookup(job.task)
    reports.failed(target, job, exception)


def _genuine(record: bytes) -> FailedTask | None:
    """The failure ``record`` reports, if a parent really recorded it; else None, logged."""
    try:
        failed = decode_record(record)
    except InvalidPayload as exc:
        log.warning("ignored a failure report: %s", exc)
        return None
    queue = default_queue()
    reason = None
    if failed.exception not in _EXCEPTIONS:
        reason = f"a worker parent never records {failed.exception!r} itself"
    elif not FailedTasks(queue).holds(failed):
        reason = "no such record in its queue's failed list (retried or forgotten since?)"
    elif queue.config.secret:
        try:
            verify(failed.payload, queue.config.secret, failed.queue)
        except InvalidPayload as exc:
            reason = str(exc)
    if reason is not None:
        log.warning(
            "ignored the failure report of task %s on queue %s: %s",
            payload_id(failed.payload) or failed.id,
            failed.queue,
            reason,
        )
        return None
    return failed
