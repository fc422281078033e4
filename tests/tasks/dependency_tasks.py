"""Tasks of the dependency tests (``using(after=...)``); workers import this module.

Each records its run in Redis (it runs in a worker child), so a test can assert on
the order and the count of runs.
"""

from __future__ import annotations

from rqueue import task
from rqueue.store.default import default_queue

RUNS = "test:dependencies"


def record(entry: str) -> None:
    default_queue().client.rpush(RUNS, entry)


@task(keep_result=60)
def step(name: str) -> str:
    record(name)
    return name


@task(keep_result=60, queue="other")
def elsewhere(name: str) -> str:
    record(name)
    return name


@task(keep_result=60, tries=1)
def broken(name: str) -> None:
    record(name)
    raise ValueError(f"{name} is broken")


@task
def plain(name: str) -> str:
    record(name)
    return name
