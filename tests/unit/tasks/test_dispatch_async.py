"""``dispatch_async``, ``later_async`` and ``result_async``: dispatching from async code
without blocking the event loop, through the same code as ``dispatch()``."""

from __future__ import annotations

import asyncio
import threading
import time

import apptasks
import pytest
from support import Workers, ready

from rqueue.encoding.payload import decode
from rqueue.errors import UnserializableArgument
from rqueue.store.queue import RedisQueue


def test_dispatch_async_queues_calls_made_concurrently(queue: RedisQueue) -> None:
    async def main() -> list[str]:
        handles = await asyncio.gather(*(apptasks.record.dispatch_async(i) for i in range(20)))
        return [handle.id for handle in handles]

    ids = asyncio.run(main())
    queued = {decode(payload).id: decode(payload).args for payload in ready(queue)}
    assert set(ids) == set(queued) and len(ids) == 20
    assert sorted(queued.values()) == [(i,) for i in range(20)]


def test_the_event_loop_runs_on_while_a_dispatch_waits(queue: RedisQueue) -> None:
    """The push happens on another thread: the loop keeps ticking meanwhile."""
    threads: set[int] = set()
    real_send = apptasks.record._send

    def recorded_send(*args: object) -> object:
        threads.add(threading.get_ident())
        return real_send(*args)  # type: ignore[arg-type]

    async def main() -> None:
        apptasks.record._send = recorded_send  # type: ignore[method-assign]
        try:
            await apptasks.record.dispatch_async(1)
        finally:
            del apptasks.record._send

    asyncio.run(main())
    assert threads and threading.get_ident() not in threads
    assert len(ready(queue)) == 1


def test_later_async_reads_its_time_at_the_call(queue: RedisQueue) -> None:
    before = time.time()
    handle = asyncio.run(apptasks.record.later_async(3600, 1))
    due = queue.client.zscore(
        queue.keys("default").delayed, queue.client.zrange(queue.keys("default").delayed, 0, 0)[0]
    )
    assert handle.id and due is not None and due / 1000 >= before + 3600 - 1


def test_an_unencodable_argument_is_refused_as_by_dispatch(queue: RedisQueue) -> None:
    with pytest.raises(UnserializableArgument, match="args\\[0\\]"):
        asyncio.run(apptasks.record.dispatch_async(object()))
    assert ready(queue) == []


def test_result_async_waits_for_a_worker(queue: RedisQueue, workers: Workers) -> None:
    async def main() -> int:
        handle = await apptasks.record.using(keep_result=60).dispatch_async(5)
        return int(await handle.result_async(timeout=20))

    workers.start("--block-for", "0.5")
    assert asyncio.run(main()) == 5
