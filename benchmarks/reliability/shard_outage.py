"""One shard of a Redis Cluster down: the pickup latency of the worker's other queues.

One ``rqueue work -c 1`` serves three queues whose slots are on three masters of a
local cluster (tests/topologies.py, one replica each). A producer dispatches a task
every ``--every`` seconds, in turn to the two queues whose masters stay up, every
other one delayed by ``--delay`` (moved to ready by the worker parent's tick); each
task records how long it waited from its dispatch (a delayed one: from when it was
due) to its start. After ``--before``
seconds the third queue's master is killed (SIGKILL) and the run goes on until the
cluster has failed over (its replica serves the slots: 2-3 s here). Printed per run:
the pickup p50/p99/max of the healthy queues' ready tasks dispatched before the kill
and of those dispatched during the outage (from the kill until the failover was
seen), and the p99/max of the delayed ones due during the outage.

By default the cluster requires full coverage (Redis's default): from the moment the
nodes mark the master failed until its replica is promoted, every shard answers
``CLUSTERDOWN``, and no worker can take anything anywhere. ``--no-full-coverage``
(``cluster-require-full-coverage no``) keeps the other shards serving meanwhile.

    python benchmarks/reliability/shard_outage.py --runs 3 [--no-full-coverage]
    PYTHONPATH=/tmp/base python benchmarks/reliability/shard_outage.py  # another tree
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import outage_tasks
from common import BENCH_DIR, machine_summary, median, percentile, table, wait_until

from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue

sys.path.insert(0, str(BENCH_DIR.parent / "tests"))  # the tests' local topologies
from topologies import LocalCluster


def on_three_masters(cluster: LocalCluster, spared: set[int]) -> tuple[str, list[str]]:
    """A queue whose master holds none of ``spared`` ports, and two on the others."""
    found: dict[int, str] = {}
    for i in range(1000):
        found.setdefault(cluster.master_of(f"queues:{{outage{i}}}").port, f"outage{i}")
        if len(found) == 3:
            break
    victim = next(name for port, name in found.items() if port not in spared)
    return victim, [name for name in found.values() if name != victim]


def one_run(
    every: float, delay: float, before: float, full_coverage: bool, log: IO[bytes] | None
) -> tuple[list[float], list[float], list[float]]:
    with LocalCluster(full_coverage=full_coverage) as cluster:
        config = Config.resolve(redis_url=cluster.seed_url)
        queue = RedisQueue(config)
        use(queue)  # the producer's dispatches
        spared = {cluster.master_of(queue.global_keys.known_queues).port}
        victim, healthy = on_three_masters(cluster, spared)
        keys = {name: f"bench:{{{name}}}:pickup" for name in healthy}
        env = {**os.environ, "REDIS_URL": cluster.seed_url}
        worker = subprocess.Popen(
            [sys.executable, "-m", "rqueue", "work", ",".join([victim, *healthy]), "-c", "1"],
            cwd=Path(outage_tasks.__file__).parent,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        stop = threading.Event()
        sent: list[tuple[float, str]] = []

        def produce() -> None:
            turn = 0
            while not stop.is_set():
                name = healthy[turn % 2]
                on, at = outage_tasks.picked.using(queue=name), time.time()
                if turn % 4 < 2:
                    on.dispatch(at, keys[name])
                else:
                    on.later(delay, at + delay, keys[name], "delayed")
                sent.append((at, name))
                turn += 1
                stop.wait(every)

        try:
            for name in healthy:
                outage_tasks.picked.using(queue=name).dispatch(time.time(), keys[name])
            wait_until(lambda: all(queue.client.llen(k) for k in keys.values()), 60)
            for key in keys.values():
                queue.client.delete(key)
            producer = threading.Thread(target=produce)
            producer.start()
            time.sleep(before)
            node = cluster.master_of(f"queues:{{{victim}}}")
            killed = time.time()
            cluster.kill(node)
            cluster.wait_for_failover(node)
            back = time.time()
            stop.set()
            producer.join()
            wait_until(lambda: sum(queue.client.llen(k) for k in keys.values()) >= len(sent), 60)
            records = [r.decode() for k in keys.values() for r in queue.client.lrange(k, 0, -1)]
        finally:
            stop.set()
            worker.terminate()
            worker.wait(30)
        waits = [(k, float(a), float(w)) for k, a, w in (r.split(":") for r in records)]
        earlier = [w for k, a, w in waits if k == "ready" and a < killed]
        during = [w for k, a, w in waits if k == "ready" and killed <= a <= back]
        late = [w for k, a, w in waits if k == "delayed" and killed <= a <= back]
        return earlier, during, late


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--every", type=float, default=0.02, help="seconds between dispatches")
    parser.add_argument("--delay", type=float, default=0.1, help="delayed tasks' delay, s")
    parser.add_argument("--before", type=float, default=2.0, help="seconds before the kill")
    parser.add_argument(
        "--full-coverage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="cluster-require-full-coverage (yes: every shard refuses while one is failed)",
    )
    parser.add_argument("--log", type=Path, help="the worker's log, appended to this file")
    args = parser.parse_args()
    log = args.log.open("ab") if args.log else None
    print(machine_summary())
    rows, p99s = [], []
    for run in range(1, args.runs + 1):
        runs = one_run(args.every, args.delay, args.before, args.full_coverage, log)
        earlier, during, late = runs
        ms = [1000 * percentile(v, s) for v in (earlier, during) for s in (0.5, 0.99, 1.0)]
        ms += [1000 * percentile(late, s) for s in (0.99, 1.0)]
        p99s.append(ms[4])
        counts = (len(earlier), len(during), len(late))
        cells = [f"{x:.1f}" for x in ms]
        rows.append((run, counts[0], *cells[:3], counts[1], *cells[3:6], counts[2], *cells[6:]))
    head = (
        *("run", "before n", "p50 ms", "p99 ms", "max ms"),
        *("outage n", "p50 ms", "p99 ms", "max ms", "delayed n", "late p99 ms", "max ms"),
    )
    table(head, rows)
    print(f"median pickup p99 on the healthy shards during the outage: {median(p99s):.1f} ms")


if __name__ == "__main__":
    main()
