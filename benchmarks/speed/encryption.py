"""What an encrypted task costs next to a plain one: its dispatch, its run in a worker
child, and its Redis memory while it waits (issue #33).

The same task (``bench_tasks.takes``, one order: an email, a name, an amount) is
dispatched plain and with ``using(encrypted=True)`` (AES-256-GCM, rqueue/encoding/
sealing.py), in rounds interleaved so the machine's neighbours weigh on both alike:

- dispatch: wall and CPU microseconds per ``dispatch()`` to a local Redis;
- per task: the child's per-task entry (``Lifecycle.process``) on one held payload,
  CPU microseconds, as speed/per_task.py measures it (admit, open, run, settle);
- memory: what the keys of a queue holding ``--pending`` tasks of one kind take in
  Redis (``MEMORY USAGE``), per task, and each kind's payload size.

Medians of ``--rounds`` rounds (best for the CPU-only per-task figure, as per_task.py):

    python benchmarks/speed/encryption.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH_DIR / "support"))

KEY = "ebdSJ7c_zzVvOPcz2NzJXWW6bcLQc7wBV2b9NVfjy6w="
ORDER = {"email": "jane.doe@example.com", "name": "Jane Doe", "amount_cents": 129_900}


def timed(dispatch: Callable[[], object], count: int) -> tuple[float, float]:
    """Wall and CPU microseconds per dispatch, one round."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(count):
        dispatch()
    return (
        (time.perf_counter() - wall) / count * 1e6,
        (time.process_time() - cpu) / count * 1e6,
    )


def per_task(url: str, encrypted: bool, tasks: int) -> float:
    """CPU microseconds per call of the child's per-task entry, one round."""
    import bench_tasks
    from in_process import in_process_child

    from rqueue.encoding.payload import encode
    from rqueue.store.header import header

    worker = in_process_child(url, 100, False)
    job = bench_tasks.takes.using(encrypted=encrypted).make_job((ORDER,), {}, task_id="0" * 32)
    payload = encode(job, None, worker.config.keyring)
    fixed = header(payload)
    worker.slot.hold(0, [fixed])
    run, held = worker.lifecycle.process, worker.reservations.pending.plain
    start = time.process_time()
    for _ in range(tasks):
        run(0, "default", payload, fixed, time.monotonic() + 100)
    held.clear()
    return (time.process_time() - start) / tasks * 1e6


def memory(queue: Any, task: Any, name: str, pending: int) -> tuple[float, int]:
    """Bytes of Redis memory per pending task of ``task`` on queue ``name`` (``MEMORY
    USAGE ... SAMPLES 0`` of every key of the queue: exact, where ``used_memory``
    moves with the allocator), and the size of one payload."""
    queue.clear(name)
    on_queue = task.using(queue=name)
    for start in range(0, pending, 1000):
        on_queue.dispatch_many([(ORDER,)] * min(1000, pending - start))
    client = queue.client
    keys = list(client.scan_iter(f"queues:{name}*"))
    used = sum(int(client.memory_usage(key, samples=0) or 0) for key in keys)
    size = len(client.lindex(f"queues:{name}", 0))
    queue.clear(name)
    return used / pending, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dispatches", type=int, default=5_000, help="per kind per round")
    parser.add_argument("--tasks", type=int, default=20_000, help="per-task calls per round")
    parser.add_argument("--pending", type=int, default=20_000, help="tasks kept per kind")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    import bench_tasks

    from rqueue.server import RedisServer
    from rqueue.settings.config import Config
    from rqueue.store.default import use
    from rqueue.store.queue import RedisQueue

    with RedisServer() as server:
        os.environ["REDIS_URL"] = server.url
        os.environ["RQUEUE_ENCRYPTION_KEYS"] = KEY  # the in-process child's too
        queue = RedisQueue(Config.resolve(redis_url=server.url))
        use(queue)
        kinds = {"plain": bench_tasks.takes, "encrypted": bench_tasks.takes.using(encrypted=True)}
        dispatch: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
        child: dict[str, list[float]] = {kind: [] for kind in kinds}
        for _ in range(options.rounds):
            for kind, task in kinds.items():
                dispatch[kind].append(timed(partial(task.dispatch, ORDER), options.dispatches))
                queue.clear("default")
                child[kind].append(per_task(server.url, kind == "encrypted", options.tasks))
        sizes = {
            kind: memory(queue, task, f"mem-{kind}", options.pending)
            for kind, task in kinds.items()
        }
        queue.client.close()
    print(f"encryption: {options.rounds} interleaved rounds, AES-256-GCM, one order argument")
    for kind in kinds:
        wall = statistics.median(w for w, _ in dispatch[kind])
        cpu = statistics.median(c for _, c in dispatch[kind])
        per_byte, size = sizes[kind]
        print(
            f"  {kind:<9} dispatch {wall:6.1f} us wall, {cpu:6.1f} us CPU (median); "
            f"per task in the child {min(child[kind]):6.2f} us CPU (best); "
            f"pending: {per_byte:5.0f} B of Redis memory each, payload {size} B"
        )


if __name__ == "__main__":
    main()
