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
import os
import sys
import time
from typing import Any

from rqueue.encoding.payload import Job
from rqueue.text import redact, shown
from rqueue.timing import moment

_STANDARD = set(vars(logging.makeLogRecord({})))
_OUTCOME = "%s %s %s attempt %d: %s (%.1f ms)"


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
        # The line compose() writes; logging reads it to know the line shows a time.
        super().__init__("%(asctime)s %(levelname)s [%(process)d] %(message)s")
        # A second and its text up to the second, in one object: threads logging at
        # once never pair one second with another's text.
        self._kept = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return self.stamp(record.created)

    def stamp(self, created: float) -> str:
        """UTC with its ``Z``, as everywhere rqueue shows a time (:func:`rqueue.timing.moment`):
        logging's default is local time with no zone, which a framework may move (Django
        sets ``TZ`` to its ``TIME_ZONE``).

        Every task logs a line, and building a datetime for each was a tenth of the
        line's cost (#30): the text up to the second is kept and reused while the
        lines' second stays the same, and only the milliseconds are written anew.
        The same text as :func:`~rqueue.timing.moment`, its rounding included."""
        try:
            second, ms = divmod(round(created * 1000), 1000)
        except (TypeError, ValueError, OverflowError):
            return moment(created)
        kept, prefix = self._kept
        if second != kept:
            stamp = moment(second)
            if not stamp.endswith(".000Z"):
                return moment(created)  # out of range: as moment shows it
            prefix = stamp[:-4]
            self._kept = (second, prefix)
        return f"{prefix}{ms:03d}Z"

    def formatMessage(self, record: logging.LogRecord) -> str:
        return self.compose(record.asctime, record.levelname, record.process, record.message)

    def compose(self, asctime: str, levelname: str, process: int | None, message: str) -> str:
        """The line from its fields: a record's, or a task line's with no record
        (:meth:`TaskLineHandler.emit_line`)."""
        return shown(f"{asctime} {levelname} [{process}] {message}")

    def formatException(self, ei: Any) -> str:
        return shown(super().formatException(ei), multiline=True)

    def formatStack(self, stack_info: str) -> str:
        return shown(super().formatStack(stack_info), multiline=True)


class TaskLineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The stream handler :func:`configure` sets up, which also writes a task's line
    without a :class:`logging.LogRecord` when nothing else would see the record.

    The record (its creation, the search for its caller, the handler's filters and
    the formatter's steps) was most of the line's cost, and the line one of the
    largest costs of a task (#30). The line is written and flushed in the call, as a
    record's is: a child killed right after its task has its line out already."""

    def takes(self, level: int) -> bool:
        """Whether a record at ``level`` would reach this handler's stream as text, unfiltered."""
        return not self.filters and level >= self.level and type(self.formatter) is TextFormatter

    def emit_line(self, level: int, message: str) -> None:
        """Write the line a record of ``message`` at ``level`` would have made, now."""
        formatter = self.formatter
        assert isinstance(formatter, TextFormatter)
        try:
            stamp = formatter.stamp(time.time())
            line = formatter.compose(stamp, logging.getLevelName(level), os.getpid(), message)
            self.acquire()
            try:
                self.stream.write(line + self.terminator)
                self.stream.flush()
            finally:
                self.release()
        except RecursionError:
            raise
        except Exception:
            self.handleError(logging.makeLogRecord({"msg": message, "levelno": level}))


def configure(level: str = "INFO", fmt: str = "text") -> None:
    """Set up the ``rqueue`` logger once, in the parent, before children are forked."""
    handler = TaskLineHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    logger = logging.getLogger("rqueue")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False


def sole_handler(logger: logging.Logger) -> logging.Handler | None:
    """The one handler a record from ``logger`` would reach, if only one would and
    ``logger`` would pass it on unfiltered (as :meth:`logging.Logger.callHandlers` walks)."""
    if logger.disabled or logger.filters:
        return None
    while not logger.handlers and logger.propagate and logger.parent is not None:
        logger = logger.parent
    if logger.propagate or len(logger.handlers) != 1:
        return None
    return logger.handlers[0]


def log_outcome(
    logger: logging.Logger, job: Job, outcome: str, duration: float, level: int = logging.INFO
) -> None:
    """The one line per task: queue, task, id, attempt, outcome, duration (and as JSON fields)."""
    if not logger.isEnabledFor(level):
        return
    args = (job.queue, job.task, job.id, job.attempts, outcome, duration * 1000)
    handler = sole_handler(logger)
    if isinstance(handler, TaskLineHandler) and handler.takes(level):
        handler.emit_line(level, _OUTCOME % args)
        return
    # The record logger.log would make, without its search of the stack for the caller
    # (a tenth of its cost): the caller it finds is this function, here.
    here = sys._getframe()
    record = logger.makeRecord(
        logger.name,
        level,
        here.f_code.co_filename,
        here.f_lineno,
        _OUTCOME,
        args,
        None,
        here.f_code.co_name,
        {
            "queue": job.queue,
            "task": job.task,
            "task_id": job.id,
            "attempt": job.attempts,
            "outcome": outcome,
            "duration_ms": round(duration * 1000, 3),
        },
    )
    logger.handle(record)
