"""Thread mode's handoff (worker/handoff.py): a thread's end reaches the loop as
``wrap_future``'s would (result, exception, cancel), and ends that come together
wake the loop once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_threads
from typing import Any

import pytest

from rqueue.worker.handoff import Handoff


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _raise() -> None:
    raise ValueError("from the thread")


def test_a_threads_result_and_exception_reach_the_loop(loop: asyncio.AbstractEventLoop) -> None:
    handoff = Handoff(loop)
    with ThreadPoolExecutor(2) as pool:
        result = handoff.awaiting(pool.submit(lambda: 42))
        raised = handoff.awaiting(pool.submit(_raise))
        done = loop.run_until_complete(asyncio.wait([result, raised], timeout=10))[0]
    assert done == {result, raised}
    assert result.result() == 42
    with pytest.raises(ValueError, match="from the thread"):
        raised.result()


def test_cancelling_the_waiter_cancels_a_call_not_started(loop: asyncio.AbstractEventLoop) -> None:
    handoff = Handoff(loop)
    gate = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(gate.wait, 10)  # the one thread is taken
        queued: Future[Any] = pool.submit(lambda: "ran")
        waiter = handoff.awaiting(queued)
        waiter.cancel()
        loop.run_until_complete(asyncio.sleep(0))  # its done callbacks run on the loop
        gate.set()
        busy.result(10)
    assert queued.cancelled()


def test_ends_that_come_together_wake_the_loop_once(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails with one wake per thread (``asyncio.wrap_future``)."""
    wakes: list[Callable[..., Any]] = []
    call_soon_threadsafe = loop.call_soon_threadsafe

    def counted(callback: Callable[..., Any], *args: Any) -> asyncio.Handle:
        wakes.append(callback)
        return call_soon_threadsafe(callback, *args)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
    handoff = Handoff(loop)
    with ThreadPoolExecutor(8) as pool:
        running = [pool.submit(lambda n=n: n) for n in range(20)]
        waiters = [handoff.awaiting(future) for future in running]
        wait_threads(running, timeout=10)  # all ended before the loop looks
    loop.run_until_complete(asyncio.wait(waiters, timeout=10))
    assert [w.result() for w in waiters] == list(range(20))
    assert len(wakes) == 1
