"""Tasks of the dependency tests (``using(after=...)``); workers import this module.

Each records its run in Redis (it runs in a worker child), so a test can assert on
the order and the count of runs.
"""

from __future__ import annotations

import os
import signal

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


@task(keep_result=60, queue="other")
def stops_its_parent(name: str) -> str:
    """Freezes its worker's parent, which then cannot apply the notice its ack leaves."""
    os.kill(os.getppid(), signal.SIGSTOP)
    record(name)
    return name


@task
def plain(name: str) -> str:
    record(name)
    return name


seen: list[str] = []
"""What the tasks below ran, in order (inline runs: sync() and fake().run_all())."""


@task(keep_result=60)
def remember(name: str) -> str:
    seen.append(name)
    return name


@task(keep_result=60, tries=1)
def refuse(name: str) -> None:
    seen.append(name)
    raise ValueError(f"{name} refused")
