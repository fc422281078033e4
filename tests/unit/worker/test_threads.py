"""Thread mode's threads (worker/threads.py): a call's end reaches the loop as
``wrap_future``'s would (result, exception), a call given up on is withdrawn if no
thread took it and reported when its thread ends if one did, and ends that come
together wake the loop once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rqueue.worker.threads import TaskThreads


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _raise(message: str) -> None:
    raise ValueError(message)


def _settle(loop: asyncio.AbstractEventLoop, waiters: list[asyncio.Future[Any]]) -> None:
    done = loop.run_until_complete(asyncio.wait(waiters, timeout=10))[0]
    assert done == set(waiters)


def test_a_calls_result_and_exception_reach_the_loop(loop: asyncio.AbstractEventLoop) -> None:
    threads = TaskThreads(loop, 2, "test")
    result = threads.run(lambda n: n * 2, 21).waiter
    raised = threads.run(_raise, "from the thread").waiter
    _settle(loop, [result, raised])
    assert result.result() == 42
    with pytest.raises(ValueError, match="from the thread"):
        raised.result()


def _stop(_: None) -> None:
    raise StopIteration("from the thread")


def test_a_call_raising_stop_iteration_ends_as_a_runtime_error(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """A future cannot hold a ``StopIteration``: setting one raised in the loop's
    settling callback, so neither that call nor any settled after it in the bunch ended."""
    threads = TaskThreads(loop, 2, "test")
    stopped, after = threads.run(_stop, None), threads.run(lambda n: n, 7)
    _settle(loop, [stopped.waiter, after.waiter])
    raised = stopped.waiter.exception()
    assert isinstance(raised, RuntimeError)
    assert isinstance(raised.__cause__, StopIteration)
    assert after.waiter.result() == 7


def test_a_call_runs_in_the_callers_context(loop: asyncio.AbstractEventLoop) -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="none")
    var.set("the caller's")
    call = TaskThreads(loop, 1, "test").run(lambda _: var.get(), None)
    _settle(loop, [call.waiter])
    assert call.waiter.result() == "the caller's"


def test_a_call_no_thread_took_is_withdrawn_when_given_up_on(
    loop: asyncio.AbstractEventLoop,
) -> None:
    threads = TaskThreads(loop, 1, "test")
    gate, ran = threading.Event(), threading.Event()
    busy = threads.run(gate.wait, 10)  # the one thread is taken
    queued = threads.run(lambda _: ran.set(), None)
    queued.waiter.cancel()
    assert not threads.abandon(queued, lambda: None)  # it never runs
    gate.set()
    _settle(loop, [busy.waiter])
    after = threads.run(lambda _: "next", None)  # the thread took and skipped the withdrawn
    _settle(loop, [after.waiter])
    assert not ran.is_set()


def test_a_call_given_up_on_while_it_runs_is_reported_when_it_ends(
    loop: asyncio.AbstractEventLoop,
) -> None:
    threads = TaskThreads(loop, 1, "test")
    started, gate = threading.Event(), threading.Event()

    def overrun(_: None) -> str:
        started.set()
        gate.wait(10)
        return "late"

    call = threads.run(overrun, None)
    assert started.wait(10)
    call.waiter.cancel()  # a timeout
    ended = loop.create_future()
    assert threads.abandon(call, lambda: ended.set_result(None))
    gate.set()
    loop.run_until_complete(asyncio.wait_for(ended, 10))


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
    threads = TaskThreads(loop, 8, "test")
    ran = threading.Semaphore(0)

    def identity(n: int) -> int:
        ran.release()
        return n

    calls = [threads.run(identity, n) for n in range(20)]
    for _ in calls:  # all ended before the loop looks
        assert ran.acquire(timeout=10)
    _settle(loop, [c.waiter for c in calls])
    assert [c.waiter.result() for c in calls] == list(range(20))
    assert len(wakes) <= 2  # the first end wakes it; one may end after the loop looked
