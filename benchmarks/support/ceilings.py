"""Ceilings: what this machine does with the benchmarks' work and no queue at all.

A queue's figure means something only beside its ceiling measured in the same sitting
(this machine drifts by 2-4x within minutes). Both ceilings run in forked processes
let go at once, so start-up counts for none of them, and are counted the way a queue's
run of the same tasks is: from the first INCR to the last.

- CPU-light: ``processes`` plain redis-py clients doing nothing but INCR, ``tasks`` in
  all: the ceiling of 2 worker processes whose tasks each do one INCR. With ``work``,
  each also spends that many seconds of its CPU on Python work after each INCR: what a
  queue's cost per task does to the same clients on the same machine (cpu_light.py);
  shared, they share the INCRs as a queue's workers share its tasks (cpu_light.py).
- I/O-bound: ``processes`` asyncio loops, each running ``per_process`` coroutines at a
  time that wait ``wait`` seconds and then INCR through ``redis.asyncio``: the ceiling
  of ``rqueue work -c 2 --slots 100`` (or ``--threads 100``) running such tasks.

Both use the interpreter's redis-py as the workers do, with hiredis if it is installed
(``machine_summary`` says which): a ceiling measured without it while the workers have
it, or the other way round, would not be the same work.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
import redis.asyncio
from common import let_go_at_once

COUNTER = "bench:ceiling"


def _shares(tasks: int, processes: int) -> list[int]:
    return [tasks // processes + (1 if i < tasks % processes else 0) for i in range(processes)]


def spans_rate(tasks: int, spans: Sequence[tuple[float, ...]]) -> float:
    """Tasks per second from the first process's first INCR to the last one's last."""
    return tasks / (max(span[1] for span in spans) - min(span[0] for span in spans))


def _incr(
    url: str, count: int, work: float, shared: bool, cpu: int | None, ready: Any, go: Any, done: Any
) -> None:
    if cpu is not None:  # as ``rqueue work --pin-cpus`` pins its children
        os.sched_setaffinity(0, {cpu})
    client = redis.Redis.from_url(url)
    client.ping()
    ready.release()
    go.wait()
    incr, turns = client.incr, round(work * _turns_per_second())
    first = time.perf_counter()
    if shared:  # until the counter reaches ``count``, whoever takes the last INCR
        done_here = 1
        while incr(COUNTER) < count:
            done_here += 1
        count = done_here
    elif turns:
        for _ in range(count):
            incr(COUNTER)
            _busy(turns)
    else:
        for _ in range(count):
            incr(COUNTER)
    done.put((first, time.perf_counter(), count))


_SOME_DATA = {"id": "0" * 32, "args": [1, 2], "kwargs": {}}


def _busy(turns: int) -> None:
    """Python work, a fraction of a microsecond a turn: new dicts, as a task's path makes."""
    for _ in range(turns):
        {**_SOME_DATA, "tries": len(_SOME_DATA["args"])}


def _turns_per_second() -> float:
    """How many turns of ``_busy`` this process does in a second of its CPU."""
    turns, started = 100_000, time.thread_time()
    _busy(turns)
    return turns / (time.thread_time() - started)


def bare_incr_spans(
    url: str,
    tasks: int,
    processes: int,
    work: float = 0.0,
    on_ready: Callable[[list[int]], None] | None = None,
    shared: bool = False,
    pinned: bool = False,
) -> list[tuple[float, float, int]]:
    """Each process's (first INCR, end, INCRs) of a ``bare_incr_rate`` run, ``work`` seconds
    of Python work after each INCR; ``on_ready`` is given their pids before they go.

    ``shared``: the processes share the ``tasks`` INCRs as a queue's workers share its
    tasks, each going on until the counter reaches ``tasks`` (its reply says), instead of
    doing a fixed share each: a process slowed by the machine then leaves no other to
    finish alone (``work`` does not apply). ``pinned``: each process on one CPU of this
    one's, the n-th on the n-th, as ``rqueue work --pin-cpus`` runs its children."""
    usable = sorted(os.sched_getaffinity(0))
    cpus = [usable[i % len(usable)] if pinned else None for i in range(processes)]
    if shared:
        redis.Redis.from_url(url).delete(COUNTER)
        argsets = [(url, tasks, 0.0, True, cpu) for cpu in cpus]
    else:
        shares = zip(_shares(tasks, processes), cpus, strict=True)
        argsets = [(url, n, work, False, cpu) for n, cpu in shares]
    _, spans = let_go_at_once(_incr, argsets, on_ready=on_ready)
    return list(spans)


def bare_incr_rate(url: str, tasks: int, processes: int) -> float:
    """INCRs per second of ``processes`` plain redis-py processes, ``tasks`` in all."""
    return spans_rate(tasks, bare_incr_spans(url, tasks, processes))


async def _waits_then_incrs(url: str, count: int, at_once: int, wait: float) -> tuple[float, float]:
    client = redis.asyncio.Redis.from_url(url)
    gate = asyncio.Semaphore(at_once)
    firsts: list[float] = []

    async def one() -> None:
        async with gate:
            await asyncio.sleep(wait)
            await client.incr(COUNTER)
            if not firsts:
                firsts.append(time.perf_counter())

    await asyncio.gather(*(one() for _ in range(count)))
    last = time.perf_counter()
    await client.aclose()
    return firsts[0], last


def _io(url: str, count: int, at_once: int, wait: float, ready: Any, go: Any, done: Any) -> None:
    redis.Redis.from_url(url).ping()
    ready.release()
    go.wait()
    done.put(asyncio.run(_waits_then_incrs(url, count, at_once, wait)))


def bare_io_rate(url: str, tasks: int, processes: int, per_process: int, wait: float) -> float:
    """Tasks per second of ``processes`` asyncio loops running ``per_process`` coroutines
    at a time, each waiting ``wait`` seconds and then doing one INCR, ``tasks`` in all."""
    argsets = [(url, n, per_process, wait) for n in _shares(tasks, processes)]
    _, spans = let_go_at_once(_io, argsets)
    return spans_rate(tasks, spans)
