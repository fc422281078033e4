"""Counts what each process of a worker sends to Redis, for benchmarks/speed/breakdown.py.

Python imports ``sitecustomize`` at start-up from its path. breakdown.py alone puts this
folder on the worker's PYTHONPATH, with ``RQUEUE_BENCH_WIRE_DIR`` naming where to count
(and ``RQUEUE_BENCH_WIRE_SHAS`` the scripts to tell apart, comma-separated); without
that variable this module does nothing.

Each process (the worker's parent, and each child after its fork) keeps its counters in
a file of its own, named after its pid and mapped into memory, so the harness can read
them at any moment: a child leaves by ``os._exit``, which runs no exit hook, and a signal
would be one more thing the worker handles. Per process, unsigned 64-bit integers:

- requests: calls of ``AbstractConnection.send_packed_command``: one per command or
  pipeline, so one per round trip (the child's reserve call, sent before its tasks run
  and read after, is one too). Both of a child's paths to Redis, its wire and
  redis-py's pool, send through it;
- writes: the ``sendall`` calls those make (a packed command may be several chunks);
- bytes: what those writes carried;
- main_requests, send_ns, read_ns: the requests the process's main thread sent, and the
  wall nanoseconds it spent in those sends and in ``read_response`` (the event loop's
  thread in thread and slot mode, the only one in process mode): how long its round
  trips held it, waiting for Redis and, once a call returns, for the GIL, which every
  socket call lets go of and takes back;
- then one per script SHA: the EVALSHA calls of it, pipelined ones included (every
  command is packed by the serializer's ``pack``, alone or in a pipeline).

The wrappers add about a microsecond of the worker's CPU per round trip (measured: 0.2
us on a ``pack``), so a few tenths of a microsecond per task.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
import time
from typing import Any

FIELDS = ("requests", "writes", "bytes", "main_requests", "send_ns", "read_ns")
"""The first counters, in file order; the scripts' follow."""
DIRECTORY = os.environ.get("RQUEUE_BENCH_WIRE_DIR")
SHAS = {
    sha: len(FIELDS) + index
    for index, sha in enumerate(
        filter(None, os.environ.get("RQUEUE_BENCH_WIRE_SHAS", "").split(","))
    )
}
"""Each script's counter, by SHA."""

_counts: list[Any] = []
"""This process's counters (replaced after a fork: the parent's file is not ours)."""


def _open() -> None:
    assert DIRECTORY is not None
    fields = len(FIELDS) + len(SHAS)
    with open(os.path.join(DIRECTORY, str(os.getpid())), "w+b") as file:
        file.truncate(8 * fields)
        mapped = mmap.mmap(file.fileno(), 8 * fields)
    _counts[:] = [(ctypes.c_uint64 * fields).from_buffer(mapped)]


def _count_sends() -> None:
    from redis.connection import AbstractConnection

    send = AbstractConnection.send_packed_command

    def counted(connection: Any, command: Any, check_health: bool = True) -> None:
        chunks = command if isinstance(command, list) else [command]
        counts = _counts[0]
        counts[0] += 1
        counts[1] += len(chunks)
        counts[2] += sum(len(chunk) for chunk in chunks)
        if threading.current_thread() is not threading.main_thread():
            send(connection, chunks, check_health)  # type: ignore[no-untyped-call]
            return
        counts[3] += 1
        started = time.perf_counter_ns()
        try:
            send(connection, chunks, check_health)  # type: ignore[no-untyped-call]
        finally:
            counts[4] += time.perf_counter_ns() - started

    AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]


def _time_reads() -> None:
    from redis.connection import AbstractConnection

    read = AbstractConnection.read_response

    def timed(connection: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return read(connection, *args, **kwargs)
        started = time.perf_counter_ns()
        try:
            return read(connection, *args, **kwargs)
        finally:
            _counts[0][5] += time.perf_counter_ns() - started

    AbstractConnection.read_response = timed  # type: ignore[method-assign]


def _count_scripts(serializer: Any) -> None:
    pack = serializer.pack

    def counted(self: Any, *args: Any) -> Any:
        if args[0] in ("EVALSHA", b"EVALSHA"):
            sha = args[1].decode() if isinstance(args[1], bytes) else args[1]
            index = SHAS.get(sha)
            if index is not None:
                _counts[0][index] += 1
        return pack(self, *args)

    serializer.pack = counted


def _install() -> None:
    from redis import connection

    _count_sends()
    _time_reads()
    for name in ("PythonRespSerializer", "HiredisRespSerializer"):
        if hasattr(connection, name):
            _count_scripts(getattr(connection, name))
    _open()
    os.register_at_fork(after_in_child=_open)


if DIRECTORY:
    _install()
