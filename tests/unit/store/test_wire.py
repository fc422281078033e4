"""The wire's connection after a send whose reply was not read: a signal handler that
raises (a worker parent's ``Interrupted``, ``KeyboardInterrupt``) runs between two steps
of Python, so it may land after a command left and before its reply was read, or
before the reader is even called. The next call on the wire must get its own reply,
never that one, and find the wire free. Real Redis; the exception is raised at an
exact step by a trace function, standing in for a signal handled there.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest

from rqueue.store.queue import RedisQueue
from rqueue.store.wire import Wire
from rqueue.worker.interrupts import Interrupted

BLPOP = ("BLPOP", "nothing-here", 0.05)
"""A wait nobody ends: its reply, nil, comes 50 ms later."""


@contextmanager
def raised_at(name: str, event: str) -> Iterator[None]:
    """Raise ``Interrupted`` once, as the first function called ``name`` starts
    (``event`` "call") or returns ("return")."""
    armed = [True]

    def local(frame: FrameType, happened: str, arg: Any) -> Any:
        if armed[0] and happened == event:
            armed[0] = False
            raise Interrupted()
        return local

    def tracer(frame: FrameType, happened: str, arg: Any) -> Any:
        if not armed[0] or frame.f_code.co_name != name:
            return None
        return local(frame, happened, arg)

    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(None)


def assert_free(wire: Wire) -> None:
    """The next call reads its own reply, on the wire (not the pool's: not left busy)."""
    read = wire.send("ECHO", "mine")
    assert read is not None, "the wire was left busy"
    assert read() == b"mine"


@pytest.mark.parametrize(
    ("name", "event"),
    [
        ("send_packed_command", "return"),
        ("send", "return"),
        ("read_response", "call"),
    ],
    ids=["once the command left", "before the reader is called", "as redis-py starts reading"],
)
def test_an_exception_between_a_send_and_its_read_leaves_no_reply_for_the_next_call(
    queue: RedisQueue, name: str, event: str
) -> None:
    """A worker parent's wait on its timer lists (``Wire.call``) cut short by a SIGCHLD:
    its cleanup's release.lua call once read that BLPOP's nil as its count."""
    assert queue.wire.call("PING")  # connected: what is raised is not the handshake's
    try:
        with raised_at(name, event):
            queue.wire.call(*BLPOP)
    except Interrupted:
        pass
    else:
        pytest.fail(f"no exception raised at the {event} of {name}")
    assert_free(queue.wire)


def test_a_reader_dropped_unread_leaves_no_reply_for_the_next_call(queue: RedisQueue) -> None:
    """A worker child sends its next reserve call, then runs tasks: an exception there
    drops the reader of that call's reply."""
    assert queue.wire.call("PING")
    read = queue.wire.send(*BLPOP)
    assert read is not None
    del read
    assert_free(queue.wire)
