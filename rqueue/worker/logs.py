"""Logging setup for ``rqueue work``: one line per task, text for people or JSON for machines.

Log lines carry task names, ids, queue names and exception messages that came from
Redis or from task code. Both formatters mask credentials in them, and the text one
escapes them (:func:`rqueue.text.shown`): a newline in a task name cannot forge a
line, an ANSI or OSC sequence never reaches the terminal that tails the log. Done
here, where every record is formatted, not at each call that logs such a field.
JSON needs no escaping of its own: ``json.dumps`` escapes every control character.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from rqueue.encoding.payload import Job
from rqueue.text import redact, shown
from rqueue.timing import moment

_STANDARD = set(vars(logging.makeLogRecord({})))


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with the task fields as keys."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": moment(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
            "message": redact(record.getMessage()),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["traceback"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """``time LEVEL [pid] message``, each line escaped and redacted; a traceback keeps
    its own line breaks, escaped within them."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s [%(process)d] %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """UTC with its ``Z``, as everywhere rqueue shows a time (:func:`rqueue.timing.moment`):
        logging's default is local time with no zone, which a framework may move (Django
        sets ``TZ`` to its ``TIME_ZONE``)."""
        return moment(record.created)

    def formatMessage(self, record: logging.LogRecord) -> str:
        return shown(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:
        return shown(super().formatException(ei), multiline=True)

    def formatStack(self, stack_info: str) -> str:
        return shown(super().formatStack(stack_info), multiline=True)


def configure(level: str = "INFO", fmt: str = "text") -> None:
    """Set up the ``rqueue`` logger once, in the parent, before children are forked."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
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
