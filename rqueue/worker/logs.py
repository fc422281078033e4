"""Logging setup for ``rqueue work``: one line per task, text for people or JSON for machines."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from rqueue.payload import Job

_STANDARD = set(vars(logging.makeLogRecord({})))


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with the task fields as keys."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(level: str = "INFO", fmt: str = "text") -> None:
    """Set up the ``rqueue`` logger once, in the parent, before children are forked."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s [%(process)d] %(message)s")
        )
    logger = logging.getLogger("rqueue")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False


def log_outcome(
    logger: logging.Logger, job: Job, outcome: str, duration: float, level: int = logging.INFO
) -> None:
    """The one line per task: queue, task, id, attempt, outcome, duration (and as JSON fields)."""
    if logger.isEnabledFor(level):
        logger.log(
            level,
            "%s %s %s attempt %d: %s (%.1f ms)",
            job.queue,
            job.task,
            job.id,
            job.attempts,
            outcome,
            duration * 1000,
            extra={
                "queue": job.queue,
                "task": job.task,
                "task_id": job.id,
                "attempt": job.attempts,
                "outcome": outcome,
                "duration_ms": round(duration * 1000, 3),
            },
        )
