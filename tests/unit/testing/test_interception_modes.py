"""A ``fake()`` one task opens in a worker is its own: a run beside it in the same
child, in thread mode or async mode, still dispatches to Redis (issue #26, item 3).
Real ``rqueue work``, real Redis."""

from __future__ import annotations

from typing import Any

import interception_tasks as it
import pytest
from support import Workers, failures, ready, wait_for

from rqueue.store.queue import RedisQueue

FAST = ("-c", "1", "--block-for", "0.5", "--log-level", "warning")


@pytest.mark.parametrize(
    ("mode", "faking", "dispatching"),
    [
        (("--threads", "2"), it.faking, it.dispatching),
        (("--slots", "2"), it.faking_async, it.dispatching_async),
    ],
    ids=["threads", "slots"],
)
def test_a_fake_opened_by_one_run_does_not_take_another_runs_dispatch(
    queue: RedisQueue, workers: Workers, mode: tuple[str, ...], faking: Any, dispatching: Any
) -> None:
    faking.dispatch()
    dispatching.dispatch()
    workers.start(*mode, *FAST)
    wait_for(lambda: queue.client.get(it.RECORDED) is not None, 30, "the fake closed")
    assert queue.client.get(it.RECORDED) == b"0"  # it recorded nothing of the other run
    assert len(ready(queue, "marks")) == 1  # the other run's dispatch reached Redis
    assert not failures(queue)
