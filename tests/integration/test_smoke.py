from __future__ import annotations

import apptasks
import pytest

from rqueue.store.queue import RedisQueue


@pytest.mark.topology
def test_dispatched_tasks_complete_under_a_real_worker(queue: RedisQueue, workers) -> None:  # type: ignore[no-untyped-def]
    for i in range(20):
        apptasks.record.dispatch(i)
    code, output = workers.run("--stop-when-empty", "-c", "2")
    assert code == 0, output
    assert sorted(int(v) for v in queue.client.lrange(apptasks.DONE, 0, -1)) == list(range(20))
    assert queue.sizes(["default"])[0].reserved == 0
