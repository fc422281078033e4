"""Finding failed tasks by text, task name or tag, and retrying or forgetting every one
that matches.

Over :class:`~rqueue.failed.FailedTasks`, which reads the failed lists a window of
:data:`~rqueue.failed.CHUNK` records at a time: nothing here holds more than one
window and one page of matches, whatever the lists hold.

A search page reads at most :data:`SEARCH_SCAN` records, newest first, and says
so when it stopped there. An action on every match reads them all: with no text to
match it is ``retry_chunks``/``flush_chunks`` of the queues; with some, it acts on
each match as the scan meets it. Removing a record shifts the positions of the
records read after it, so one scan may step over some; the scan is repeated until
one finds nothing left to do. Only records that failed before the action began
count, so a retried task failing again meanwhile is not retried twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rqueue.failed import MOST_SCANNED, PAGE, STEP, FailedTask, FailedTasks

SEARCH_SCAN = MOST_SCANNED
"""Records a search page reads at most."""
MOST_PASSES = 32
"""Scans an action over matches makes at most: each one leaves fewer to step over."""


@dataclass(frozen=True)
class Match:
    """What to look for: text in a record's id, task, queue, error or traceback
    (case-insensitive), in the queues named (empty: every known queue); and, if
    given, only records of the task named ``task`` exactly, or tagged ``tag``."""

    text: str = ""
    queues: tuple[str, ...] = ()
    task: str = ""
    tag: str = ""

    @property
    def scans(self) -> bool:
        """Records must be read to tell a match: more than the queues to look in."""
        return bool(self.text or self.task or self.tag)

    def __call__(self, record: FailedTask) -> bool:
        if self.task and record.task != self.task:
            return False
        if self.tag and self.tag not in record.tags():
            return False
        if not self.text:
            return True
        needle = self.text.casefold()
        fields = (record.id, record.task, record.queue, record.exception, record.message)
        return any(needle in field.casefold() for field in (*fields, record.traceback))


@dataclass(frozen=True)
class Found:
    records: list[FailedTask]
    total: int | None
    """How many failed records there are in all (known without text to match)."""
    next_offset: int | None
    """Where the next page starts (None: this is the last)."""
    scanned_out: bool = False
    """The search stopped after :data:`SEARCH_SCAN` records without reaching the end."""


def search(
    failed: FailedTasks,
    match: Match,
    offset: int,
    limit: int = PAGE,
    most_scanned: int = SEARCH_SCAN,
) -> Found:
    """A page of matches; ``offset`` counts records (nothing to match but the queues)
    or matches. A scan stops after ``most_scanned`` records."""
    queues = match.queues or None
    if not match.scans:
        page = failed.page(queues, offset, limit)
        return Found(page.records, page.total, page.end if page.end < page.total else None)
    found = failed.matching(match, queues, offset, limit, most_scanned)
    return Found(found.records, None, found.next_offset, found.scanned_out)


def retry_matching(failed: FailedTasks, match: Match) -> int:
    """Retry every failed task that matches; how many were retried."""
    if not match.scans:
        return failed.retry_all(match.queues or None)
    return _each_match(failed, match, failed.retry_many)


def forget_matching(failed: FailedTasks, match: Match) -> int:
    """Delete every failed task that matches; how many were deleted."""
    if not match.scans:
        return failed.flush(match.queues or None)
    return _each_match(failed, match, failed.forget_many)


def _each_match(failed: FailedTasks, match: Match, act: Callable[[list[FailedTask]], int]) -> int:
    """``act`` on the matches, :data:`~rqueue.failed.STEP` at a time (a retry is one
    script call for them all)."""
    began = time.time()
    done = 0
    for _ in range(MOST_PASSES):
        acted = 0
        matches: list[FailedTask] = []
        for record in failed.iterate(match.queues or None):
            if record.failed_at <= began and match(record):
                matches.append(record)
            if len(matches) == STEP:
                acted += act(matches)
                matches = []
        acted += act(matches)
        done += acted
        if not acted:
            break
    return done
