"""rqueue: a Laravel-style task queue for Python on Redis."""

import os
import sys

from rqueue import schedules
from rqueue.encoding.codec import register_type
from rqueue.encoding.payload import Job
from rqueue.errors import (
    BatchCancelled,
    CheckpointRefused,
    DispatchRefused,
    Fail,
    InvalidCursor,
    InvalidPayload,
    InvalidProgress,
    InvalidQueueName,
    InvalidSchedule,
    InvalidTaskOption,
    PayloadTooLarge,
    QueueConnectionError,
    ReplicasNotReached,
    ResultNotKept,
    RQueueError,
    TaskCancelled,
    TaskFailed,
    TaskImportFailed,
    TaskNotRegistered,
    TaskTimeout,
    UnserializableArgument,
    WorkerLost,
)
from rqueue.events import (
    TaskEvent,
    on_cancelled,
    on_exception,
    on_failed,
    on_processed,
    on_processing,
)
from rqueue.settings.config import Config, ConfigError
from rqueue.store.cancel import CancelOutcome
from rqueue.store.debounce import Debounced
from rqueue.store.default import use
from rqueue.store.live_events import LiveEvent
from rqueue.store.progress import Progress
from rqueue.store.queue import RedisQueue
from rqueue.tasks.current import current_job
from rqueue.tasks.decorator import task
from rqueue.tasks.definition import PendingDispatch, Task, dispatch_many
from rqueue.tasks.handles import Dispatched, TaskHandle
from rqueue.tasks.iterable import Total
from rqueue.worker.options import WorkerOptions
from rqueue.workflows import (
    Batch,
    BatchStatus,
    batch,
    batch_of,
    chain,
    current_batch,
    result_of,
    skip_if_batch_cancelled,
)

__all__ = [
    "Batch",
    "BatchCancelled",
    "BatchStatus",
    "CancelOutcome",
    "CheckpointRefused",
    "Config",
    "ConfigError",
    "Debounced",
    "DispatchRefused",
    "Dispatched",
    "Fail",
    "InvalidCursor",
    "InvalidPayload",
    "InvalidProgress",
    "InvalidQueueName",
    "InvalidSchedule",
    "InvalidTaskOption",
    "Job",
    "LiveEvent",
    "PayloadTooLarge",
    "PendingDispatch",
    "Progress",
    "QueueConnectionError",
    "RQueueError",
    "RedisQueue",
    "ReplicasNotReached",
    "ResultNotKept",
    "Task",
    "TaskCancelled",
    "TaskEvent",
    "TaskFailed",
    "TaskHandle",
    "TaskImportFailed",
    "TaskNotRegistered",
    "TaskTimeout",
    "Total",
    "UnserializableArgument",
    "WorkerLost",
    "WorkerOptions",
    "batch",
    "batch_of",
    "chain",
    "current_batch",
    "current_job",
    "dispatch_many",
    "on_cancelled",
    "on_exception",
    "on_failed",
    "on_processed",
    "on_processing",
    "register_type",
    "result_of",
    "schedules",
    "skip_if_batch_cancelled",
    "task",
    "use",
]


def _started_as_the_cli() -> bool:
    """True while ``rqueue ...`` or ``python -m rqueue`` imports this package: the CLI
    cannot catch what its own package's import raises, so the import says it."""
    return os.path.basename(sys.argv[0]) in ("rqueue", "rqueue.exe") or sys.argv[0] == "-m"


if os.environ.get("RQUEUE_SYNC", "").strip():  # on (or a typo, refused): docs/testing.md
    from rqueue.testing.sync import sync_from_environment

    try:
        sync_from_environment()
    except ConfigError as exc:
        if not _started_as_the_cli():
            raise
        # A setting the CLI cannot take is a usage error naming it (click's exit code).
        sys.stderr.write(f"rqueue: {exc}\n")
        raise SystemExit(2) from None
