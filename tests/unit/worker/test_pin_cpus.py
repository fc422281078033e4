"""``rqueue work --pin-cpus``: each child runs on one CPU of the worker's own (child n on
the n-th, round robin), and the threads it starts with it; by default when the worker has
a fixed child for every CPU of its own, and never with ``--no-pin-cpus``. Real ``rqueue
work``, real Redis; the CPUs are read from the kernel (``sched_getaffinity``)."""

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
from rqueue.worker.cpus import cpus_to_pin, pin

FAST = ("--block-for", "0.5", "--log-level", "warning")
CPUS = sorted(os.sched_getaffinity(0))
"""The CPUs this test (and a worker it starts) may run on."""
PAIR = set(CPUS[:2])
"""Two of them (one on a machine with one): a worker's own set for the default's tests."""


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


def test_by_default_a_child_for_every_cpu_of_the_worker_is_pinned_to_it(
    queue: RedisQueue, workers: Workers
) -> None:
    with run_on(PAIR):
        worker = workers.start("-c", str(len(PAIR)), *FAST)
    children = numbered(worker, len(PAIR))
    assert {number: child.cpu_affinity() for number, child in children.items()} == {
        number: [cpu] for number, cpu in enumerate(sorted(PAIR), start=1)
    }


def test_by_default_fewer_children_than_cpus_may_run_on_every_cpu_of_the_worker(
    queue: RedisQueue, workers: Workers
) -> None:
    """Pinned, every worker's one child would crowd onto the same first CPU."""
    fewer = len(PAIR) - 1 or 1
    with run_on(PAIR):
        worker = workers.start("-c", str(fewer), *FAST)
    for child in numbered(worker, fewer).values():
        assert child.cpu_affinity() == sorted(PAIR)


def test_no_pin_cpus_leaves_a_child_for_every_cpu_free_to_move(
    queue: RedisQueue, workers: Workers
) -> None:
    with run_on(PAIR):
        worker = workers.start("-c", str(len(PAIR)), "--no-pin-cpus", *FAST)
    for child in numbered(worker, len(PAIR)).values():
        assert child.cpu_affinity() == sorted(PAIR)


def test_the_default_leaves_a_changing_number_of_children_free() -> None:
    """With ``--concurrency-file`` the count may drop below the CPUs (and ``rqueue
    supervise`` runs several such workers on one machine): none is pinned unasked."""
    with run_on(PAIR):
        assert cpus_to_pin(None, len(PAIR), scaled=True) == ()
        assert cpus_to_pin(True, len(PAIR), scaled=True) == tuple(sorted(PAIR))
        assert cpus_to_pin(None, len(PAIR), scaled=False) == (
            tuple(sorted(PAIR)) if len(PAIR) > 1 else ()
        )
        assert cpus_to_pin(False, len(PAIR), scaled=False) == ()


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
