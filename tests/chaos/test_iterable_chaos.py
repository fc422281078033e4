"""Iterable tasks under faults (issue 29): 10^5 items in four iterable tasks, worker
children killed (SIGKILL) and the whole worker restarted (SIGTERM, a warm stop) while
they run. Every item must run, and only the items after a killed task's last
checkpoint may run twice: at most one checkpoint window per kill (a warm stop
checkpoints as it stops, so it adds none). Real ``rqueue work``, real Redis.

Each chunk of items is recorded in one pipeline (``HINCRBY`` per item) before its
cursor is yielded, so a checkpoint never covers an item that was not recorded.
The figures it prints are in docs/reliability.md ("Iterable tasks").
"""

from __future__ import annotations

import os
import random
import signal
import time

import iterable_tasks as it
from support import WorkerProcess, Workers, follow_log, wait_for

from rqueue.store.queue import RedisQueue
from rqueue.tasks.iterable import CHECKPOINT_EVERY

TASKS = 4
ITEMS = 25_000
"""Items per task: 10^5 in all."""
CHUNK = 100
PACE = 0.02
"""Seconds each chunk of items takes at least: a task runs at most CHUNK / PACE items a
second (5,000), so one checkpoint window (1 s, and the chunk that crosses it) holds at
most about 5,200."""
WINDOW = round((CHECKPOINT_EVERY + PACE) / PACE * CHUNK) + CHUNK
"""The most items a killed task can have run since its last checkpoint."""
KILLS = 6
RESTARTS = 2
WORKER_ARGS = ("-c", "2", "--block-for", "0.5", "--kill-grace", "2", "--log-level", "warning")


def test_iterable_tasks_survive_killed_children_and_restarts_with_bounded_reruns(
    queue: RedisQueue, workers: Workers
) -> None:
    rng = random.Random(29)
    started = time.monotonic()
    handles = it.chunks.using(keep_result=300).dispatch_many(
        [(ITEMS, CHUNK, PACE) for _ in range(TASKS)]
    )
    logs: list[list[str]] = []

    def start() -> WorkerProcess:
        worker = workers.start(*WORKER_ARGS)
        logs.append(follow_log(worker))
        return worker

    def finished() -> bool:
        return all(h.status() == "succeeded" for h in handles)

    worker = start()
    kills = restarts = 0
    for fault in range(KILLS + RESTARTS):
        time.sleep(rng.uniform(1.0, 2.0))
        if finished():
            break
        if fault in (2, 5):  # a deploy: the worker stops warm, a new one takes over
            worker.signal(signal.SIGTERM)
            assert worker.wait(15) == 0
            worker = start()
            restarts += 1
            continue
        busy = [c.pid for c in worker.children() if "running" in " ".join(c.cmdline())]
        if busy:
            os.kill(rng.choice(busy), signal.SIGKILL)
            kills += 1
    wait_for(finished, 120, "every task to finish")
    wall = time.monotonic() - started
    expected = TASKS * ITEMS
    runs = duplicates = 0
    for handle in handles:
        raw = queue.client.hgetall(f"{it.SEEN}:{handle.id}")
        counts = {int(k): int(v) for k, v in raw.items()}  # type: ignore[union-attr]
        assert sorted(counts) == list(range(ITEMS)), handle.id  # every item of every task
        runs += sum(counts.values())
    duplicates = runs - expected
    attempts = len(queue.client.lrange(it.STARTS, 0, -1))
    print(
        f"\niterable chaos: {expected} items in {TASKS} tasks, {kills} children killed, "
        f"{restarts} warm restarts, {attempts} attempts, {duplicates} items run again "
        f"(bound {kills} x {WINDOW}), {wall:.1f} s wall time"
    )
    assert kills >= 3 and restarts == RESTARTS
    assert 0 <= duplicates <= kills * WINDOW
    assert not any("Traceback" in line for lines in logs for line in lines)
