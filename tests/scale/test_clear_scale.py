"""``rqueue clear`` of a large queue (#30): one atomic call that leaves no pending state
behind and never frees the tasks' memory itself.

clear.lua unlinks the queue's keys (``UNLINK``), so Redis frees them on its background
thread: the call holds Redis as briefly for 20,000 tasks as for one, where ``DEL`` freed
every element inside it (500,000 tasks: ~100 ms; benchmarks/scale/scale_clear.py). No
test times anything: which command the script ran is read from ``INFO commandstats``,
on every node of a cluster. Run on every topology (``RQUEUE_TEST_TOPOLOGY``).
"""

from __future__ import annotations

import pytest
from support import nodes

from rqueue.encoding.payload import Job, encode, new_id
from rqueue.failed import make_record
from rqueue.store.cancel import CancelOutcome, cancel
from rqueue.store.queue import Push, RedisQueue, UniqueLock

pytestmark = pytest.mark.topology

Q = "bulk"
TASKS = 20_000
PER_PUSH = 1_000


def commands_run(queue: RedisQueue, name: str) -> int:
    """Calls of command ``name`` (scripts' included) since ``CONFIG RESETSTAT``, all nodes."""
    stats = [node.info("commandstats").get(f"cmdstat_{name}", {}) for node in nodes(queue)]
    return sum(int(stat.get("calls", 0)) for stat in stats)


def fill(queue: RedisQueue) -> list[str]:
    """``TASKS`` pending tasks, every fifth push delayed and some unique; their ids."""
    ids: list[str] = []
    for start in range(0, TASKS, PER_PUSH):
        jobs = [Job(new_id(), "tasks:charge", (i,), {}, Q) for i in range(start, start + PER_PUSH)]
        first = jobs[0].id
        lock = UniqueLock(0, f"tasks:charge:{start}", first, 60_000)
        delay_ms = 60_000 if (start // PER_PUSH) % 5 == 0 else 0
        queue.push_many([Push(Q, delay_ms, [encode(job) for job in jobs], locks=[lock])])
        ids += (job.id for job in jobs)
    return ids


def test_a_large_queue_is_cleared_whole_in_one_call_that_frees_nothing_itself(
    queue: RedisQueue,
) -> None:
    ids = fill(queue)
    keys = queue.keys(Q)
    running = queue.reserve(Q, 3, 60_000, 0, 0).payloads
    queue.fail(Q, running[0], make_record(Q, running[0], "E", "failed for good"))
    assert cancel(queue, ids[-1], Q) is CancelOutcome.CANCELLED
    client = queue.client
    assert client.scard(keys.pending_ids) == TASKS - 4  # reserved, or cancelled
    assert client.hlen(keys.unique) == 2 * TASKS // PER_PUSH  # key:... and id:... each
    for node in nodes(queue):
        node.config_resetstat()

    assert queue.clear(Q) == TASKS - 1  # all but the failed one; the cancelled one too

    assert commands_run(queue, "evalsha") == 1
    assert commands_run(queue, "unlink") == 1, "the keys are unlinked, freed in the background"
    assert commands_run(queue, "del") == 0, "DEL would free every element inside the call"
    gone = (keys.ready, keys.delayed, keys.reserved, keys.notify, keys.timer)
    gone += (keys.pending_ids, keys.cancelled, keys.unique)
    assert client.exists(*gone) == 0
    assert client.llen(keys.failed) == client.zcard(keys.failed_lookup) == 1
    assert queue.clear(Q) == 0
