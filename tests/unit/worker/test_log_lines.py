"""The per-task log line: its exact text, written without a LogRecord when only
rqueue's own handler would see one (#30), and out before its child can be killed."""

from __future__ import annotations

import io
import logging
import math
import re
from collections.abc import Iterator

import apptasks
import pytest
from support import Workers

from rqueue.encoding.payload import Job
from rqueue.store.queue import RedisQueue
from rqueue.timing import moment
from rqueue.worker import logs

FAST = ("-c", "1", "--kill-grace", "0.5", "--block-for", "0.5")
HOSTILE = "tasks:x\x1b[2J\nFORGED"
LINE = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO \[\d+\] default tasks:x\\x1b\[2J\\nFORGED "
    r"f{32} attempt 3: succeeded \(2\.5 ms\)\n"
)


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """``rqueue work``'s logging set up on a string, and put back afterwards."""
    logger = logging.getLogger("rqueue")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    written = io.StringIO()
    logs.configure("INFO")
    handler = logger.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(written)
    yield written
    logger.handlers[:], logger.level, logger.propagate = saved


def alone() -> None:
    """Only rqueue's handler on its logger: pytest's capture, which it adds to every
    logger that does not propagate as the test starts, sees records (and so gets them)."""
    logger = logging.getLogger("rqueue")
    logger.handlers[:] = [h for h in logger.handlers if isinstance(h, logs.TaskLineHandler)]


def a_job() -> Job:
    return Job(id="f" * 32, task=HOSTILE, args=(), kwargs={}, queue="default", attempts=3)


def test_a_task_line_makes_no_record_when_only_rqueues_handler_would_see_it(
    stream: io.StringIO,
) -> None:
    alone()
    made = []
    factory = logging.getLogRecordFactory()

    def counted(*args: object, **kwargs: object) -> logging.LogRecord:
        made.append(args)
        return factory(*args, **kwargs)

    logging.setLogRecordFactory(counted)
    try:
        logs.log_outcome(logging.getLogger("rqueue.worker"), a_job(), "succeeded", 0.0025)
    finally:
        logging.setLogRecordFactory(factory)
    assert made == []
    assert LINE.fullmatch(stream.getvalue()), stream.getvalue()


def test_a_task_line_is_the_text_its_record_makes(stream: io.StringIO) -> None:
    """Written with or without a record, the same line: a filter on the logger gets
    the record (with its fields), and the stream the very same text."""
    alone()
    seen: list[logging.LogRecord] = []
    worker = logging.getLogger("rqueue.worker")

    def keep(record: logging.LogRecord) -> bool:
        seen.append(record)
        return True

    worker.addFilter(keep)
    try:
        logs.log_outcome(worker, a_job(), "succeeded", 0.0025)
    finally:
        worker.removeFilter(keep)
    logs.log_outcome(worker, a_job(), "succeeded", 0.0025)
    (record,) = seen
    assert (record.task_id, record.outcome, record.funcName) == (
        "f" * 32,
        "succeeded",
        "log_outcome",
    )
    first, second = stream.getvalue().splitlines(keepends=True)
    assert LINE.fullmatch(first) and LINE.fullmatch(second), (first, second)


def test_a_task_line_reaches_an_added_handler_as_a_record(stream: io.StringIO) -> None:
    alone()
    added = logging.Handler()
    seen: list[logging.LogRecord] = []
    added.emit = seen.append  # type: ignore[method-assign]
    worker = logging.getLogger("rqueue.worker")
    worker.addHandler(added)
    try:
        logs.log_outcome(worker, a_job(), "succeeded", 0.0025)
    finally:
        worker.removeHandler(added)
    assert [r.getMessage() for r in seen] == [
        f"default {HOSTILE} {'f' * 32} attempt 3: succeeded (2.5 ms)"
    ]
    assert LINE.fullmatch(stream.getvalue()), stream.getvalue()


@pytest.mark.parametrize(
    "times",
    [
        [1_700_000_000.0, 1_700_000_000.4, 1_700_000_000.9994, 1_700_000_000.9996, 1_700_000_001.2],
        [0.0, -0.0004, -1.5, 1e11, 1e20, math.nan, math.inf],
        [1_700_000_005.25, 1_700_000_004.75, 1_700_000_005.0],
    ],
)
def test_the_kept_second_writes_what_moment_writes(times: list[float]) -> None:
    formatter = logs.TextFormatter()
    assert [formatter.stamp(t) for t in times] == [moment(t) for t in times]


def test_a_childs_line_is_out_before_its_next_task_can_kill_it(
    queue: RedisQueue, workers: Workers
) -> None:
    """Its line is written as its task settles, not held: a SIGKILL loses none."""
    handle = apptasks.record.dispatch("logged")
    apptasks.kills_own_process.dispatch()  # SIGKILLs its child, twice (tries=2)
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    (line,) = [line for line in output.splitlines() if handle.id in line]
    assert re.search(
        rf"INFO \[\d+\] default apptasks:record {handle.id} attempt 1: succeeded", line
    )
    assert output.count("killed by signal 9") >= 1, output
