"""``Batch.add()`` in every way a worker runs tasks: one at a time per child, in a
child's threads (``--threads``), as coroutines on its event loop (``--slots``).

The state of one run (how many ``add()`` calls it made) lives with the run, so runs
that interleave in one child never share it. Real ``rqueue work``, real Redis.
"""

from __future__ import annotations

import pytest
import workflow_tasks as flows
from support import Workers, wait_for

from rqueue import BatchStatus, batch
from rqueue.store.queue import RedisQueue

MEMBERS = 4
FAST = ("--block-for", "0.5", "--log-level", "warning")


@pytest.mark.parametrize(
    ("mode", "adder"),
    [
        (("-c", str(MEMBERS)), flows.adds_twice),
        (("-c", "1", "--threads", str(MEMBERS)), flows.adds_twice),
        (("-c", "1", "--slots", str(MEMBERS)), flows.adds_twice_async),
    ],
    ids=["processes", "threads", "slots"],
)
def test_members_adding_twice_each_add_every_member(
    queue: RedisQueue, workers: Workers, mode: tuple[str, ...], adder: object
) -> None:
    calls = [adder.pending(index, MEMBERS) for index in range(MEMBERS)]  # type: ignore[attr-defined]
    b = batch(calls).dispatch()
    workers.start(*mode, *FAST)

    def finished() -> BatchStatus | None:
        status = b.status()
        return status if status is not None and status.finished else None

    status = wait_for(finished, 30, "the batch to finish")
    assert (status.total, status.succeeded, status.failed) == (3 * MEMBERS, 3 * MEMBERS, 0)
    wait_for(lambda: int(queue.client.get("test:member-runs") or 0) == 2 * MEMBERS, 10)
    assert int(queue.client.get(flows.MET) or 0) == MEMBERS  # each met the others
