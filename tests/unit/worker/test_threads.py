"""Thread mode's threads (worker/threads.py): a call's end reaches the loop's ``ended``
callback (result, exception), a call given up on is withdrawn if no thread took it and
reported when its thread ends if one did (never to ``ended``), and ends that come
together wake the loop once."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rqueue.worker.threads import Call, TaskThreads


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _raise(message: str) -> None:
    raise ValueError(message)


class Ends:
    """TaskThreads whose ``ended`` callback resolves one future per call, on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int) -> None:
        self.loop = loop
        self.threads = TaskThreads(loop, size, "test", self._ended)
        self.futures: dict[Call, asyncio.Future[Any]] = {}
        self.handed: list[Call] = []

    def run(self, fn: Callable[[Any], Any], arg: Any) -> Call:
        call = self.threads.run(fn, arg, contextvars.copy_context())
        self.futures[call] = self.loop.create_future()
        return call

    def _ended(self, call: Call) -> None:
        self.handed.append(call)
        future = self.futures[call]
        if call.failed:
            future.set_exception(call.value)
        else:
            future.set_result(call.value)

    def settle(self, *calls: Call) -> list[asyncio.Future[Any]]:
        waiters = [self.futures[c] for c in calls]
        done = self.loop.run_until_complete(asyncio.wait(waiters, timeout=10))[0]
        assert done == set(waiters)
        return waiters


def test_a_calls_result_and_exception_reach_the_loop(loop: asyncio.AbstractEventLoop) -> None:
    ends = Ends(loop, 2)
    result, raised = ends.settle(ends.run(lambda n: n * 2, 21), ends.run(_raise, "from the thread"))
    assert result.result() == 42
    with pytest.raises(ValueError, match="from the thread"):
        raised.result()


def _stop(_: None) -> None:
    raise StopIteration("from the thread")


def test_a_call_raising_stop_iteration_ends_as_a_runtime_error(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """As an ``async def`` task raising it does (and a future cannot hold one)."""
    ends = Ends(loop, 2)
    stopped, after = ends.settle(ends.run(_stop, None), ends.run(lambda n: n, 7))
    raised = stopped.exception()
    assert isinstance(raised, RuntimeError)
    assert isinstance(raised.__cause__, StopIteration)
    assert after.result() == 7


def test_a_call_runs_in_the_context_given(loop: asyncio.AbstractEventLoop) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="none")
    var.set("the caller's")
    ends = Ends(loop, 1)
    (result,) = ends.settle(ends.run(lambda _: var.get(), None))
    assert result.result() == "the caller's"


def test_a_call_no_thread_took_is_withdrawn_when_given_up_on(
    loop: asyncio.AbstractEventLoop,
) -> None:
    ends = Ends(loop, 1)
    gate, ran = threading.Event(), threading.Event()
    busy = ends.run(gate.wait, 10)  # the one thread is taken
    queued = ends.run(lambda _: ran.set(), None)
    assert not ends.threads.abandon(queued, lambda: None)  # it never runs
    gate.set()
    ends.settle(busy)
    after = ends.run(lambda _: "next", None)  # the thread took and skipped the withdrawn
    ends.settle(after)
    assert not ran.is_set()
    assert ends.handed == [busy, after]


def test_a_call_given_up_on_while_it_runs_is_reported_when_it_ends(
    loop: asyncio.AbstractEventLoop,
) -> None:
    ends = Ends(loop, 1)
    started, gate = threading.Event(), threading.Event()

    def overrun(_: None) -> str:
        started.set()
        gate.wait(10)
        return "late"

    call = ends.run(overrun, None)
    assert started.wait(10)
    ended = loop.create_future()
    assert ends.threads.abandon(call, lambda: ended.set_result(None))  # a timeout
    gate.set()
    loop.run_until_complete(asyncio.wait_for(ended, 10))
    assert ends.handed == []  # its end was the timeout's, not ``ended``'s


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
    ends = Ends(loop, 8)
    ran = threading.Semaphore(0)

    def identity(n: int) -> int:
        ran.release()
        return n

    calls = [ends.run(identity, n) for n in range(20)]
    for _ in calls:  # all ended before the loop looks
        assert ran.acquire(timeout=10)
    assert [f.result() for f in ends.settle(*calls)] == list(range(20))
    assert len(wakes) <= 2  # the first end wakes it; one may end after the loop looked
