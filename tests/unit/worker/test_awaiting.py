"""Async hooks and listeners awaited from sync code: by several threads at once
(``--threads``), each runs to its end, none waits for ever (issue #26, item 3)."""

from __future__ import annotations

import asyncio
import logging
import threading

from rqueue.tasks import awaiting


def test_coroutines_finished_from_threads_at_once_each_run_to_their_end() -> None:
    """A thread once handed its coroutine to the loop another thread was running for
    its own only, which stopped when that one ended: the hand-over never ran."""
    ran: list[int] = []

    async def hook(number: int) -> None:
        await asyncio.sleep(0)
        ran.append(number)

    for _ in range(50):
        start = threading.Event()
        count = len(ran)

        def finish(number: int, start: threading.Event = start) -> None:
            start.wait(10)
            awaiting.finish(hook(number), logging.getLogger("test"), "hook %s raised", number)

        threads = [threading.Thread(target=finish, args=(n,), daemon=True) for n in range(6)]
        for thread in threads:
            thread.start()
        start.set()
        for thread in threads:
            thread.join(timeout=10)
        assert not any(thread.is_alive() for thread in threads), "a thread waits for ever"
        assert len(ran) == count + 6
