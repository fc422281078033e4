"""Pinning: each child runs on one CPU, chosen from the worker's own (by default with a
child for every CPU, or ``--pin-cpus``).

Left to itself the kernel spreads a child's threads over every CPU and moves a busy
child from CPU to CPU. A child's threads take turns at one GIL, so the likely cost is
this: on different CPUs, a hand-off wakes another CPU whose thread finds the GIL taken
again and sleeps; on one CPU, a thread runs only once the one before it lets go.
Measured on 2 CPUs (docs/benchmarks.md, "Children pinned to CPUs"): under
``--threads 100`` a task cost 5 to 6 context switches instead of 16 to 21 and 0.4 to
0.7 of the CPU, and the worker ran 1.1 to 1.6x the tasks/s; process mode ran CPU-light
tasks 1.2 to 1.4x as fast (a child that stays on one CPU likely finds its caches warm).

Left alone, the kernel also tends to put two busy children on one CPU and Redis on
the other: sampled on 2 CPUs with CPU-light tasks (``benchmarks/speed/placement.py``),
both children had last run on the same CPU in about two thirds of the samples, moving
once in 400 tasks or fewer, each paying for the other's turn in its caches (5 to 7 µs
more CPU a task). Two plain redis-py clients crowd the same way but lose less: their
loop is a fraction of a task's code.

The price is the kernel's freedom: a pinned child waits for its CPU while another is
idle, and two workers pinned to the same CPUs share them. So by default children are
pinned only when the worker has a child for every CPU of its own and their number is
fixed (not ``--concurrency-file``): then every CPU gets a child and two such workers
still spread evenly. ``--pin-cpus`` pins them however many there are, ``--no-pin-cpus``
never; the CPUs come from the worker's own set: ``taskset -c 2,3 rqueue work -c 2``
keeps a worker's children on CPUs 2 and 3.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

log = logging.getLogger("rqueue.worker")

CAN_PIN = hasattr(os, "sched_setaffinity")
"""Linux can pin a process to CPUs; macOS and Windows cannot."""


def usable_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on (``taskset``, a container's cpuset), in order."""
    return tuple(sorted(os.sched_getaffinity(0)))


def cpus_to_pin(choice: bool | None, children: int, scaled: bool) -> tuple[int, ...]:
    """The CPUs to pin ``children`` children to, one each (empty: none). ``choice`` is
    ``--pin-cpus`` (True), ``--no-pin-cpus`` (False), or neither (None): pinned when
    there is a child for every CPU of the worker's own, more than one, and ``scaled``
    (their number changes) is False. Fewer children pinned by default would crowd every
    worker's onto the same first CPUs."""
    if choice is False or not CAN_PIN:
        return ()
    cpus = usable_cpus()
    if choice is None and (scaled or len(cpus) < 2 or children < len(cpus)):
        return ()
    return cpus


def cpu_of(number: int, cpus: Sequence[int]) -> int:
    """Child ``number``'s CPU (children are numbered from 1): the n-th, round robin,
    so a child that replaces another runs where it did."""
    return cpus[(number - 1) % len(cpus)]


def pin(number: int, cpus: Sequence[int]) -> None:
    """In a new child, before it starts any thread (they run where it does): run on its
    CPU from now on. A CPU taken from the worker's set since it started leaves the child
    unpinned, logged: never a reason not to run."""
    cpu = cpu_of(number, cpus)
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError as exc:
        log.warning("worker %d: cannot pin it to CPU %d (%s); it runs unpinned", number, cpu, exc)
