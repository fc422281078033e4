"""The tasks the rqueue benchmarks dispatch, and how a benchmark reads what they report.

Workers import this module from benchmarks/support/ (its PYTHONPATH).

``incr`` uses its own Redis client (opened once per process, after the fork), as
the peers' INCR tasks and the bare-INCR processes do, so the comparison is like for like.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time

import msgpack
import redis
import redis.asyncio
from peers._runner import IO_WAIT

from rqueue import current_job, task
from rqueue.errors import InvalidTaskOption
from rqueue.middleware import Middleware, RateLimited, WithoutOverlapping

COUNTER = "bench:done"
STARTS = "bench:starts"

_client: list[redis.Redis] = []


def client() -> redis.Redis:
    if not _client:
        _client.append(redis.Redis.from_url(os.environ["REDIS_URL"]))
    return _client[0]


@task
def empty() -> None:
    """Does nothing: what is left is the queue's own cost."""


@task
def takes(order: dict[str, object]) -> None:
    """Takes an order (an email, a name, an amount) and does nothing: what its
    arguments cost, encrypted or not (speed/encryption.py)."""


@task
def small_value() -> str:
    """Returns a value the size of a path or an id: what a chord's member sends."""
    return "thumbs/0123456789abcdef-200.jpg"


@task(queue="bench-callbacks")
def results_seen(found: object, results: list[object]) -> None:
    """A callback that gets the results, on a queue the benchmark's child does not serve."""


@task
async def empty_async() -> None:
    """Does nothing, as an ``async def`` task: the queue's own cost under ``--slots``."""


@task
def incr() -> None:
    """One Redis round trip, so completion can be counted (as most published benchmarks do)."""
    client().incr(COUNTER)


@task
def record_start(due: float = 0.0) -> None:
    """Report when this task started (and when it was due) for the latency benchmark."""
    client().rpush(STARTS, f"{time.time()!r} {due!r}")


IDLE_PAUSE = 0.005
"""Seconds between samples: enough for the child to go back to its blocking wait."""


def wait_start(redis_client: redis.Redis, timeout: float = 10.0) -> tuple[float, float]:
    """Pop one report of ``record_start``: (started_at, due_at), both epoch seconds."""
    popped = redis_client.blpop([STARTS], timeout=timeout)
    if popped is None:
        raise TimeoutError("no task started in time")
    started, due = popped[1].split()
    return float(started), float(due)


def _trace(label: str) -> None:
    """A mark in wake_trace.py's trace, in a process that keeps one (support/wake_trace)."""
    tracing = sys.modules.get("sitecustomize")
    if getattr(tracing, "DIRECTORY", None):
        tracing.mark(label)  # type: ignore[union-attr]


@task
def traced_start() -> None:
    """``record_start`` for wake_trace.py: marks its start in the trace first."""
    _trace("task started")
    client().rpush(STARTS, f"{time.time()!r} 0.0")


_start_log: list[int] = []


@task
def log_start(due: float) -> None:
    """Append when this task started, and when it was due, to the file in ``START_LOG``.

    For a burst of delayed tasks: a local append costs microseconds where an RPUSH
    costs a round trip, so recording a start does not hold up the tasks behind it.
    """
    if not _start_log:
        _start_log.append(os.open(os.environ["START_LOG"], os.O_WRONLY | os.O_APPEND))
    os.write(_start_log[0], f"{time.time()!r} {due!r}\n".encode())


@task(middleware=[Middleware()])
def empty_passthrough() -> None:
    """Empty, through one middleware that only calls the next: the stack's own cost."""


@task(middleware=[RateLimited("bench", 1_000_000, 1.0)])
def empty_rate_limited() -> None:
    """Empty, under a limit it never reaches: the cost of the check (one script call)."""


@task
def one_ms() -> None:
    """A millisecond's work, unlimited: what the worker sends for any task."""
    time.sleep(0.001)


@task(concurrency=1)
def one_at_a_time() -> None:
    """A millisecond's work, one run at a time: calls waiting for the slot are parked
    and woken (benchmarks/speed/concurrency_waiters.py)."""
    time.sleep(0.001)


@task(middleware=[WithoutOverlapping("bench")])
def one_at_a_time_locked() -> None:
    """The same under a WithoutOverlapping lock: locked-out calls knock again."""
    time.sleep(0.001)


@task(unique=lambda number: number)
def empty_unique(number: int) -> None:
    """Empty, unique per number: a lock taken at dispatch and released on success."""


@task(debounce=600, debounce_by=lambda number: number)
def empty_debounced(number: int) -> None:
    """Empty, debounced per number for ten minutes: a burst per number (debounce_cost.py)."""


@task
def wait_then_incr() -> None:
    """compare.py's io workload, sync: a blocking 20 ms wait (a call to an HTTP API or a
    database), then the INCR."""
    time.sleep(IO_WAIT)
    client().incr(COUNTER)


WAITS = "bench:waits"
"""Where ``timed_wait_then_incr`` reports: msgpack arrays of [sleep overshoot, INCR] pairs."""
REPORT_EVERY = 500
_waits: list[tuple[float, float]] = []
_waits_lock = threading.Lock()


def wait_then_incr_timed() -> None:
    """``wait_then_incr``, timing in this thread how much longer than asked its sleep
    took and how long its INCR took (on a thread, each is mostly the wait for the GIL
    once the call returns); the timings go to ``WAITS``, ``REPORT_EVERY`` at a time."""
    asleep = time.perf_counter()
    time.sleep(IO_WAIT)
    awake = time.perf_counter()
    client().incr(COUNTER)
    done = time.perf_counter()
    with _waits_lock:
        _waits.append((awake - asleep - IO_WAIT, done - awake))
        if len(_waits) < REPORT_EVERY:
            return
        batch = msgpack.packb(_waits)
        _waits.clear()
    client().rpush(WAITS, batch)


timed_wait_then_incr = task(wait_then_incr_timed)


_async_clients: dict[asyncio.AbstractEventLoop, redis.asyncio.Redis] = {}


def async_client() -> redis.asyncio.Redis:
    """An asyncio Redis client of the running loop (a client belongs to the loop it
    first ran on), opened lazily as ``client()`` is."""
    loop = asyncio.get_running_loop()
    if loop not in _async_clients:
        # Room for every coroutine of a child at once (its slots, and a batch read while
        # they run): redis-py's asyncio pool refuses a connection past its maximum.
        _async_clients[loop] = redis.asyncio.Redis.from_url(
            os.environ["REDIS_URL"], max_connections=1000
        )
    return _async_clients[loop]


async def wait_then_incr_async() -> None:
    """compare.py's io workload, async: ``await asyncio.sleep`` 20 ms, then an async INCR."""
    await asyncio.sleep(IO_WAIT)
    await async_client().incr(COUNTER)


# A task only where ``@task`` takes ``async def`` (async mode); before that it stays a
# plain coroutine function, so the other benchmarks' workers can still import this.
with contextlib.suppress(InvalidTaskOption):
    wait_then_incr_async = task(wait_then_incr_async)  # type: ignore[assignment]


# -- async mode (issue 14): latency.py, stuck_loop.py and slot_memory.py -------------------

STUCK_EVENTS = "bench:stuck"
HOLDING = "bench:holding"
RELEASE = "bench:release"


async def record_start_async(due: float = 0.0) -> None:
    """``record_start``'s twin for async mode: latency.py measures both in one run."""
    await async_client().rpush(STARTS, f"{time.time()!r} {due!r}")


async def traced_start_async() -> None:
    """``traced_start``'s twin for async mode (wake_trace.py)."""
    _trace("task started")
    await async_client().rpush(STARTS, f"{time.time()!r} 0.0")


def _stuck_event(event: str, label: str) -> str:
    """One line of stuck_loop.py's record: what happened, to which task, on which
    attempt, in which child, when."""
    job = current_job()
    attempts = job.attempts if job is not None else 0
    return f"{event} {label} {attempts} {os.getpid()} {time.time()!r}"


async def block_loop(seconds: float) -> None:
    """stuck_loop.py's poison task: reports its start, then blocks its child's event
    loop with sync code (no ``await``), as a sync client call in an ``async def`` would.
    No coroutine of that child runs again: only the parent's kill ends it."""
    client().rpush(STUCK_EVENTS, _stuck_event("start", "blocker"))
    time.sleep(seconds)


async def sleep_then_report(label: str, seconds: float) -> None:
    """A well-behaved coroutine beside ``block_loop``: reports its start and its end.

    The start is reported on the sync client, before the first ``await``: an async
    report would still be waiting for its connection when a blocker stops the loop."""
    client().rpush(STUCK_EVENTS, _stuck_event("start", label))
    await asyncio.sleep(seconds)
    await async_client().rpush(STUCK_EVENTS, _stuck_event("done", label))


async def hold_slot() -> None:
    """Reports its start and its child's pid, then holds its slot until the benchmark
    pushes to ``RELEASE``: blocked in a Redis call, as a task awaiting a database is.
    slot_memory.py fills every slot with these; latency.py keeps a child in async mode."""
    await async_client().rpush(HOLDING, f"{os.getpid()} {time.time()!r}")
    # BLPOP for a second at a time: redis-py's read timeout (5 s) would end a longer one.
    while await async_client().blpop([RELEASE], timeout=1) is None:
        pass


with contextlib.suppress(InvalidTaskOption):  # as for wait_then_incr_async above
    record_start_async = task(record_start_async)  # type: ignore[assignment]
    traced_start_async = task(traced_start_async)  # type: ignore[assignment]
    # Only the blocker's own timeout counts, and it fails at once: the others outlast
    # it and may be retried after the kill, so what recovery does with each shows.
    block_loop = task(tries=1)(block_loop)  # type: ignore[assignment]
    sleep_then_report = task(timeout=60, tries=3)(sleep_then_report)  # type: ignore[assignment]
    hold_slot = task(hold_slot)  # type: ignore[assignment]


# -- scale (issue 16): scale_memory.py ----------------------------------------------------


@task(tries=1)
def fail_at_once() -> None:
    """Raises on its one try: scale_memory.py fills a failed list with real records."""
    raise RuntimeError("failed on purpose")
