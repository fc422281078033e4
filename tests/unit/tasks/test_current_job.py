from __future__ import annotations

import apptasks
import pytest
from support import Workers

from rqueue import current_job
from rqueue.store.queue import RedisQueue


@pytest.mark.topology
def test_a_task_sees_its_own_job_id_and_attempt(queue: RedisQueue, workers: Workers) -> None:
    handle = apptasks.reports_current_job.dispatch(True)
    code, output = workers.run("--stop-when-empty")
    assert code == 0, output
    assert queue.client.lrange(apptasks.DONE, 0, -1) == [
        f"{handle.id}:1".encode(),
        f"{handle.id}:2".encode(),
    ]


def test_there_is_no_current_job_outside_a_worker() -> None:
    assert current_job() is None
