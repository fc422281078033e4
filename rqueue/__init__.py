"""rqueue: a Laravel-style task queue for Python on Redis."""

from rqueue import schedules
from rqueue.config import Config, ConfigError
from rqueue.current import current_job
from rqueue.errors import (
    DispatchRefused,
    InvalidPayload,
    InvalidQueueName,
    InvalidSchedule,
    InvalidTaskOption,
    PayloadTooLarge,
    QueueConnectionError,
    ReplicasNotReached,
    RQueueError,
    TaskImportFailed,
    TaskNotRegistered,
    TaskTimeout,
    UnserializableArgument,
    WorkerLost,
)
from rqueue.events import TaskEvent, on_exception, on_failed, on_processed, on_processing
from rqueue.payload import Job
from rqueue.store.cancel import CancelOutcome
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue
from rqueue.task import Dispatched, PendingDispatch, Task, dispatch_many, task
from rqueue.worker.options import WorkerOptions

__all__ = [
    "CancelOutcome",
    "Config",
    "ConfigError",
    "DispatchRefused",
    "Dispatched",
    "InvalidPayload",
    "InvalidQueueName",
    "InvalidSchedule",
    "InvalidTaskOption",
    "Job",
    "PayloadTooLarge",
    "PendingDispatch",
    "QueueConnectionError",
    "RQueueError",
    "RedisQueue",
    "ReplicasNotReached",
    "Task",
    "TaskEvent",
    "TaskImportFailed",
    "TaskNotRegistered",
    "TaskTimeout",
    "UnserializableArgument",
    "WorkerLost",
    "WorkerOptions",
    "current_job",
    "dispatch_many",
    "on_exception",
    "on_failed",
    "on_processed",
    "on_processing",
    "schedules",
    "task",
    "use",
]
