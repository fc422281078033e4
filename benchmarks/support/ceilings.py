"""Ceilings: what this machine does with the benchmarks' work and no queue at all.

A queue's figure means something only beside its ceiling measured in the same sitting
(this machine drifts by 2-4x within minutes). Both ceilings run in forked processes
let go at once, so start-up counts for none of them, and are counted the way a queue's
run of the same tasks is: from the first INCR to the last.

- CPU-light: ``processes`` plain redis-py clients doing nothing but INCR, ``tasks`` in
  all: the ceiling of 2 worker processes whose tasks each do one INCR.
- I/O-bound: ``processes`` asyncio loops, each running ``per_process`` coroutines at a
  time that wait ``wait`` seconds and then INCR through ``redis.asyncio``: the ceiling
  of ``rqueue work -c 2 --slots 100`` (or ``--threads 100``) running such tasks.

Both use the interpreter's redis-py as the workers do, with hiredis if it is installed
(``machine_summary`` says which): a ceiling measured without it while the workers have
it, or the other way round, would not be the same work.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import redis
import redis.asyncio
from common import let_go_at_once

COUNTER = "bench:ceiling"


def _shares(tasks: int, processes: int) -> list[int]:
    return [tasks // processes + (1 if i < tasks % processes else 0) for i in range(processes)]


def _rate(tasks: int, spans: list[tuple[float, float]]) -> float:
    """Tasks per second from the first process's first INCR to the last one's last."""
    return tasks / (max(last for _, last in spans) - min(first for first, _ in spans))


def _incr(url: str, count: int, ready: Any, go: Any, done: Any) -> None:
    client = redis.Redis.from_url(url)
    client.ping()
    ready.release()
    go.wait()
    incr = client.incr
    first = time.perf_counter()
    for _ in range(count):
        incr(COUNTER)
    done.put((first, time.perf_counter()))


def bare_incr_rate(url: str, tasks: int, processes: int) -> float:
    """INCRs per second of ``processes`` plain redis-py processes, ``tasks`` in all."""
    _, spans = let_go_at_once(_incr, [(url, n) for n in _shares(tasks, processes)])
    return _rate(tasks, spans)


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
    return _rate(tasks, spans)
