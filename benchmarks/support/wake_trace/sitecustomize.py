"""Marks the steps of a wake-up in each process of a worker, for benchmarks/speed/wake_trace.py.

Python imports ``sitecustomize`` at start-up from its path. wake_trace.py alone puts this
folder on the worker's PYTHONPATH, with ``RQUEUE_BENCH_TRACE_DIR`` naming where each
process writes its marks; without that variable this module does nothing.

A mark is a label, the monotonic clock (the same in every process) and the thread's CPU
time, both in ns, and the thread. Marked: every command sent (before and after the write) and every
reply read, on redis-py's connections (the child's wire and pool alike); the child's
wait for a push (``_block``), its ``claim`` and ``take``, a reserve call built and sent
(``send_reserve``), the scoreboard's ``hold`` and ``start``, the lifecycle's ``admit``
and ``start``, the time limit armed, the process title set; and the traced task's own
start (``bench_tasks.traced_start``). Each wrapper costs about a microsecond, so the
steps read a little slower than they run.

A process writes its marks to ``<dir>/<pid>`` as it sends a BLPOP (an idle wait begins:
nothing on the measured path) and at exit; a forked child starts with none.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from typing import Any

DIRECTORY = os.environ.get("RQUEUE_BENCH_TRACE_DIR")
WRITE_AT_WAITS = True
"""Write the marks as a BLPOP is sent (the dispatching process writes only at its end)."""
_marks: list[tuple[int, int, int, str]] = []
_clock = time.monotonic_ns
_cpu = time.thread_time_ns
_thread = threading.get_native_id


def mark(label: str) -> None:
    _marks.append((_clock(), _cpu(), _thread(), label))


def write() -> None:
    """Append this process's marks to its file, and forget them."""
    if not _marks or DIRECTORY is None:
        return
    with open(os.path.join(DIRECTORY, str(os.getpid())), "a") as file:
        file.write("".join(f"{at} {cpu} {thread} {label}\n" for at, cpu, thread, label in _marks))
    _marks.clear()


def _command(packed: Any) -> str:
    """The command's name, from the start of its packed bytes."""
    first = packed[0] if isinstance(packed, list) else packed
    parts = bytes(first[:64]).split(b"\r\n")
    return parts[2].decode() if len(parts) > 2 else "?"


def _around(owner: Any, name: str, label: str) -> None:
    """Mark ``label >`` as ``owner.name`` is called and ``label <`` as it returns."""
    function = getattr(owner, name)

    @functools.wraps(function)
    def marked(*args: Any, **kwargs: Any) -> Any:
        mark(f"{label} >")
        try:
            return function(*args, **kwargs)
        finally:
            mark(f"{label} <")

    setattr(owner, name, marked)


def _trace_redis() -> None:
    from redis.connection import AbstractConnection

    send = AbstractConnection.send_packed_command

    def sent(connection: Any, command: Any, check_health: bool = True) -> None:
        name = _command(command)
        if name == "BLPOP" and WRITE_AT_WAITS:
            write()  # an idle wait begins
        mark(f"send {name} >")
        send(connection, command, check_health)
        mark(f"send {name} <")

    AbstractConnection.send_packed_command = sent  # type: ignore[method-assign]
    _around(AbstractConnection, "read_response", "read reply")
    _around(AbstractConnection, "pack_command", "pack")


def _trace_dispatch() -> None:
    from rqueue.store import producer
    from rqueue.tasks import definition

    _around(definition.Task, "make_job", "make_job")
    _around(definition, "encode", "encode")
    _around(producer.Producer, "push", "push")


def _trace_worker() -> None:
    from rqueue.store import consumer
    from rqueue.worker import child, lifecycle, reservations, scoreboard, timeouts, titles

    _around(consumer.Consumer, "_block", "wait for a push")
    _around(consumer.Consumer, "send_reserve", "send_reserve")
    _around(child.ChildWorker, "claim", "claim")
    _around(reservations.Reservations, "take", "take")
    _around(scoreboard.Slot, "hold", "scoreboard hold")
    _around(scoreboard.Slot, "start", "scoreboard start")
    _around(lifecycle.Lifecycle, "admit", "admit")
    _around(lifecycle.Lifecycle, "start", "lifecycle start")
    _around(timeouts.TimeLimit, "arm", "time limit armed")
    _around(titles.ProcessTitle, "show", "process title")


def install() -> None:
    _trace_redis()
    _trace_dispatch()
    _trace_worker()
    import atexit

    atexit.register(write)
    os.register_at_fork(after_in_child=_marks.clear)


if DIRECTORY:
    install()
