"""``rqueue work --pin-cpus``: each child runs on one CPU, chosen from the worker's own.

Left to itself the kernel spreads a child's threads over every CPU and moves a busy
child from CPU to CPU. A child's threads take turns at one GIL, so the likely cost is
this: on different CPUs, a hand-off wakes another CPU whose thread finds the GIL taken
again and sleeps; on one CPU, a thread runs only once the one before it lets go.
Measured on 2 CPUs (docs/benchmarks.md, "Children pinned to CPUs"): under
``--threads 100`` a task cost 5 to 6 context switches instead of 16 to 21 and 0.4 to
0.7 of the CPU, and the worker ran 1.1 to 1.6x the tasks/s; process mode ran CPU-light
tasks 1.2 to 1.4x as fast (a child that stays on one CPU likely finds its caches warm).

The price is the kernel's freedom: a pinned child waits for its CPU while another is
idle, and two workers pinned to the same CPUs share them. So it is an option, and the
CPUs come from the worker's own set: ``taskset -c 2,3 rqueue work --pin-cpus`` keeps a
worker's children on CPUs 2 and 3.
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
