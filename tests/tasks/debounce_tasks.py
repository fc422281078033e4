"""Tasks for the debounce tests (tests/unit/tasks/test_debounce.py); workers import this
module from tests/tasks/. Each records its run in Redis (``RUNS``: ``<key>=<value>``),
so a test counts the runs and sees which arguments each carried."""

from __future__ import annotations

from rqueue import task
from rqueue.store.default import default_queue

RUNS = "test:debounce:runs"


def record(key: str, value: str) -> str:
    default_queue().client.rpush(RUNS, f"{key}={value}")
    return value


def by_doc(doc: str, text: str) -> str:
    return doc


@task(debounce=0.6, keep_result=60)
def save(value: str) -> str:
    """One key for the whole task."""
    return record("save", value)


@task(debounce=0.6, debounce_by=by_doc, keep_result=60)
def edit(doc: str, text: str) -> str:
    """A key per document."""
    return record(doc, text)


@task(debounce=0.6, debounce_by=by_doc, keep_result=60)
async def edit_async(doc: str, text: str) -> str:
    """``edit`` as an ``async def`` task (a worker with ``--slots``)."""
    return record(doc, text)


@task(debounce=0.4, debounce_max=1.2)
def capped(value: str) -> str:
    """Due 0.4 s after its last call, but at most 1.2 s after its burst's first."""
    return record("capped", value)


@task(debounce=4, debounce_by=by_doc)
def raced(doc: str, text: str) -> str:
    """The race test's: a window long enough for 100 threads on a slow machine."""
    return record(doc, text)


def no_key(value: str) -> None:
    """Not a key: a debounce_by callable must return a str or an int."""


@task(debounce=1, debounce_by=no_key)
def keyless(value: str) -> None:
    """Its dispatch is refused: its key function returns None."""


@task
def plain() -> None:
    """Not debounced: a workflow's other member."""
