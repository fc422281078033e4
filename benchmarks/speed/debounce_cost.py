"""What a debounced dispatch costs next to a plain one, and how racing dispatchers fare.

Times ``dispatch()`` to a local Redis, in rounds interleaved so the machine's
neighbours weigh on each kind alike, wall time and the dispatching process's CPU:

- plain: ``empty.dispatch()``, one push.lua call; delayed: ``empty.later(600)``, the
  same into the delayed set, as a debounced call goes;
- unique: ``empty_unique.dispatch(n)``, a new key each (push.lua with its lock);
- debounced, first of a burst: ``empty_debounced.dispatch(n)``, a new key each (one
  debounce.lua call);
- debounced, replacing: the same key each time (two debounce.lua calls: the first
  learns the pending call's id, the second replaces it).

Then ``--threads`` threads, each with its own connection, released at once, dispatch
over ``--keys`` keys: how many script calls that took, and how many calls are
pending after (one per key).

    python benchmarks/speed/debounce_cost.py --rounds 5
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH_DIR / "support"))


def timed(dispatch: Callable[[int], object], count: int) -> tuple[float, float]:
    """Wall and CPU microseconds per dispatch, one round."""
    wall, cpu = time.perf_counter(), time.process_time()
    for number in range(count):
        dispatch(number)
    return (
        (time.perf_counter() - wall) / count * 1e6,
        (time.process_time() - cpu) / count * 1e6,
    )


def script_calls(client: object) -> int:
    stats = client.info("commandstats")  # type: ignore[attr-defined]
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def race(url: str, threads: int, keys: int) -> tuple[int, int, float]:
    """Script calls made, calls pending after, seconds from first send to last reply."""
    import bench_tasks

    from rqueue.settings.config import Config
    from rqueue.store.queue import RedisQueue

    connections = [RedisQueue(Config.resolve(redis_url=url)) for _ in range(threads)]
    numbers = itertools.count()
    barrier = threading.Barrier(threads)
    times: list[float] = []

    def run() -> None:
        number = next(numbers)
        task = bench_tasks.empty_debounced.using(connection=connections[number])
        barrier.wait(10)
        times.append(time.perf_counter())
        task.dispatch(10_000_000 + number % keys)
        times.append(time.perf_counter())

    before = script_calls(connections[0].client)
    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    calls = script_calls(connections[0].client) - before
    pending = connections[0].sizes(["default"])[0].delayed
    for connection in connections:
        connection.client.close()
    return calls, pending, max(times) - min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dispatches", type=int, default=2_000, help="per kind and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=100)
    parser.add_argument("--keys", type=int, default=4)
    options = parser.parse_args()
    logging.getLogger("rqueue").setLevel(logging.WARNING)
    import bench_tasks

    from rqueue.server import RedisServer
    from rqueue.settings.config import Config
    from rqueue.store.default import use
    from rqueue.store.queue import RedisQueue

    kinds: dict[str, Callable[[int], object]] = {
        "plain": lambda _: bench_tasks.empty.dispatch(),
        "delayed (later)": lambda _: bench_tasks.empty.later(600),
        "unique, a new key each": bench_tasks.empty_unique.dispatch,
        "debounced, first of a burst": bench_tasks.empty_debounced.dispatch,
        "debounced, replacing": lambda _: bench_tasks.empty_debounced.dispatch(-1),
    }
    figures: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
    with RedisServer() as server:
        os.environ["REDIS_URL"] = server.url
        queue = RedisQueue(Config.resolve(redis_url=server.url))
        use(queue)
        for dispatch in kinds.values():  # warm up: scripts loaded, connections open
            timed(dispatch, 50)
        for _ in range(options.rounds):
            for kind, dispatch in kinds.items():
                queue.client.flushall()
                figures[kind].append(timed(dispatch, options.dispatches))
        queue.client.flushall()
        calls, pending, took = race(server.url, options.threads, options.keys)
    plain_wall = min(wall for wall, _ in figures["plain"])
    print(f"per dispatch, best of {options.rounds} rounds of {options.dispatches}:")
    for kind, rounds in figures.items():
        wall, cpu = min(w for w, _ in rounds), min(c for _, c in rounds)
        print(f"  {kind:28} wall {wall:7.1f} us ({wall / plain_wall:4.2f}x)  CPU {cpu:6.1f} us")
    print(
        f"race: {options.threads} threads over {options.keys} keys: {calls} script calls, "
        f"{pending} calls pending after, {took * 1000:.0f} ms from first send to last reply"
    )


if __name__ == "__main__":
    main()
