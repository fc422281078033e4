"""``rqueue work --pin-cpus``: each child runs on one CPU of the worker's own (child n on
the n-th, round robin), and the threads it starts with it. Real ``rqueue work``, real
Redis; the CPUs are read from the kernel (``sched_getaffinity``)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import pytest
import thread_tasks as tt
from support import WorkerProcess, Workers, strings, title, wait_for

from rqueue.store.queue import RedisQueue
from rqueue.worker.cpus import pin

FAST = ("--block-for", "0.5", "--log-level", "warning")
CPUS = sorted(os.sched_getaffinity(0))
"""The CPUs this test (and a worker it starts) may run on."""


def numbered(worker: WorkerProcess, count: int) -> dict[int, psutil.Process]:
    """The worker's ``count`` children by number, once each has its title (``rqueue:
    worker 2/3 ...``): set up then, pinned too (one just forked has the master's)."""

    def titled() -> dict[int, psutil.Process]:
        found = {c: re.match(r"rqueue: worker (\d+)/", title(c.pid)) for c in worker.children()}
        return {int(match[1]): c for c, match in found.items() if match}

    return wait_for(lambda: found if len(found := titled()) == count else None, 10, "children")


@contextmanager
def run_on(cpus: set[int]) -> Iterator[None]:
    """Run this process on ``cpus`` for a while: what it starts meanwhile inherits them."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def test_each_child_runs_on_one_cpu_of_its_own_and_its_threads_with_it(
    queue: RedisQueue, workers: Workers
) -> None:
    count = 3  # one more than CPUs on a 2-CPU machine: the third shares the first's
    worker = workers.start("-c", str(count), "--threads", "4", "--pin-cpus", *FAST)
    children = numbered(worker, count)
    assert sorted(children) == [1, 2, 3]
    for number, child in children.items():
        assert child.cpu_affinity() == [CPUS[(number - 1) % len(CPUS)]]
    tt.cpus.dispatch_many([()] * 20)
    wait_for(lambda: len(strings(queue.client, tt.CPUS)) == 20, 30, "every run")
    by_pid = {c.pid: c.cpu_affinity() for c in children.values()}
    for line in strings(queue.client, tt.CPUS):  # each written from the task's own thread
        pid, allowed = line.split()
        assert [int(cpu) for cpu in allowed.split(",")] == by_pid[int(pid)]


def test_children_are_pinned_within_the_cpus_the_worker_was_given(
    queue: RedisQueue, workers: Workers
) -> None:
    """``taskset -c 0 rqueue work --pin-cpus``: the worker's own set is all its children
    get (child 2 is not on the second CPU of the machine)."""
    with run_on({CPUS[0]}):
        worker = workers.start("-c", "2", "--pin-cpus", *FAST)
    for child in numbered(worker, 2).values():
        assert child.cpu_affinity() == [CPUS[0]]


def test_without_it_children_may_run_on_every_cpu_of_the_worker(
    queue: RedisQueue, workers: Workers
) -> None:
    worker = workers.start("-c", "2", *FAST)
    for child in numbered(worker, 2).values():
        assert child.cpu_affinity() == CPUS


def test_a_cpu_no_longer_allowed_leaves_the_child_unpinned_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``pin`` as a new child calls it, here in this process: a CPU the kernel refuses
    (taken from the worker's set since it started; here, one past any CPU) is logged,
    and the process keeps running where it could before."""
    before = os.sched_getaffinity(0)
    gone = max(CPUS) + 4096
    with caplog.at_level(logging.WARNING, logger="rqueue.worker"):
        pin(1, [gone])
    assert os.sched_getaffinity(0) == before
    assert f"worker 1: cannot pin it to CPU {gone}" in caplog.text
    assert "it runs unpinned" in caplog.text
