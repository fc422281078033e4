"""A worker parent moves due tasks back for all its queues in pipelined calls (#16).

One migrate.lua call per queue, each its own round trip, cost a parent of 10^4
queues 1.5 s every tick; ``migrate_all`` sends them ``_MIGRATE_QUEUES``
to a pipeline. Each call stays bounded (``_MIGRATE_LIMIT`` tasks per set).
"""

from __future__ import annotations

import apptasks
from support import Workers, wait_for

from rqueue.encoding.payload import encode
from rqueue.store.consumer import _MIGRATE_QUEUES
from rqueue.store.queue import Migration, RedisQueue


def test_migrate_all_moves_the_due_tasks_of_every_queue_in_its_order(queue: RedisQueue) -> None:
    names = [f"tenant-{i}" for i in range(_MIGRATE_QUEUES + 5)]  # more than one pipeline
    due = [*names[::100], names[-1]]
    for name in due:
        queue.push(name, [encode(apptasks.record.make_job((name,), {}))], delay_ms=1)
    moved: dict[str, int] = dict.fromkeys(names, 0)

    def all_moved() -> bool:
        migrations = queue.migrate_all(names)
        assert len(migrations) == len(names)
        for name, migration in zip(names, migrations, strict=True):
            moved[name] += migration.moved
        return sum(moved.values()) == len(due)

    wait_for(all_moved, 10)
    assert {name for name, count in moved.items() if count} == set(due)
    assert all(queue.client.llen(queue.keys(name).ready) == 1 for name in due)
    idle = queue.migrate_all(names)
    assert all(m.moved == 0 and m.next_due_ms is None for m in idle)
    assert queue.migrate_all([]) == []


def test_migrate_all_reports_the_next_due_time_per_queue(queue: RedisQueue) -> None:
    job = apptasks.record.make_job(("later",), {})
    queue.push("b", [encode(job)], delay_ms=60_000)
    first, second = queue.migrate_all(["a", "b"])
    assert first == Migration(0, None, first.now_ms)
    assert second.moved == 0 and second.next_due_ms is not None
    assert 59_000 <= second.next_due_ms - second.now_ms <= 60_000


def test_a_worker_of_many_queues_runs_a_delayed_task_on_its_last(
    queue: RedisQueue, workers: Workers
) -> None:
    names = [f"tenant-{i}" for i in range(_MIGRATE_QUEUES + 5)]
    worker = workers.start(",".join(names))
    worker.wait_for_children(1)
    apptasks.record.on_queue(names[-1]).later(0.2, "last")
    wait_for(lambda: queue.client.lrange(apptasks.DONE, 0, -1) == [b"last"], 20)
