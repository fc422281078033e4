"""Failover under load: the master of a busy queue fails mid-run, with exact accounting.

A producer thread dispatches numbered tasks, one ``dispatch()`` at a time at a steady
rate, to the chaos harness's queue while ``rqueue work`` processes (``chaos.Worker``)
run them. Each run of a task adds one to its number in the book (bookkeeping.py), a
plain redis-server that no failover touches, so the counts below are exact. Mid-run
the master serving the queue fails:

- ``kill``: SIGKILL (Cluster: the master of the queue's slot; Sentinel: the master).
  Once the topology has failed over, the killed node is started again from its AOF
  and rejoins as a replica of its successor.
- ``manual``: ``SENTINEL FAILOVER`` (Sentinel only): the demoted master stays up, and
  the sentinels turn it into a replica of the new one.

The producer goes on until ``--after`` more dispatches were acknowledged after the
rejoin; then the run waits for the queue to drain (a reservation the failover
stranded comes back after the worker's timeout + grace + 15 s). Per run:

- acknowledged: ``dispatch()`` returned; errors: it raised (with ``wait-replicas 1``
  a ReplicasNotReached says the task was queued but no replica confirmed it in time);
- ran: acknowledged tasks that ran; lost: acknowledged, never ran, neither failed nor
  still waiting in the queue; duplicated: ran more than once (at-least-once);
  refused but ran: the dispatch raised, yet the task ran;
- failovers: how many the faults set off (the epoch's step); more than faults means a
  freshly promoted master was itself taken for down and failed over again;
- failover s: from the fault until the sentinels or the cluster named a new master;
  write pause s: the longest gap between two acknowledgements from the fault on;
  resumed s: from the fault until the acknowledgement that ended that gap (beside
  failover s: how long after the switch rqueue's writes went on);
- ran twice, and why, from each run's attempt number and time (the task records
  them): with a later attempt, its acknowledgement was lost (the reservation, kept,
  expired and was given back); with the same attempt, first run before the new master
  took over, the worker's reserve was lost (the task was back in ready on the new
  master, and reserved again); with the same attempt, both after, it was queued twice
  (its dispatch lost its reply as the master died, and was sent again).

``--faults K`` fails the serving master K times in one run (each once the previous
failed node is back as a replica), as the issue's 3 failovers under 150 dispatches a
second: ``--runs sentinel-manual --replicas 2 --rate 150 --faults 3``. ``--repeat N``
runs each case N times.

Every run goes with and without ``min-replicas-to-write 1`` on every data node, and
with and without ``RQUEUE_WAIT_REPLICAS=1`` (each dispatch waits for one replica to
have the task: Redis ``WAIT``)::

    python benchmarks/reliability/failover.py
    python benchmarks/reliability/failover.py --runs sentinel-manual \
        --min-replicas 0 --wait-replicas 0
    python benchmarks/reliability/failover.py --runs sentinel-manual --replicas 2 \
        --min-replicas 1 --wait-replicas 0   # two replicas: no pause for want of one
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import chaos
import redis
from bookkeeping import book, open_book
from common import BENCH_DIR, machine_summary, table, wait_until

from rqueue import current_job, task
from rqueue.encoding.payload import decode
from rqueue.failed import FailedTasks
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

sys.path.insert(0, str(BENCH_DIR.parent / "tests"))  # the tests' local topologies
from topologies import LocalCluster, LocalSentinel, Node

DONE = "failover:done"
RUNS_LOG = "failover:runs"
"""Each run of a task: ``number attempt monotonic-time``, in the order they ran."""
RUNS = ("cluster-kill", "sentinel-kill", "sentinel-manual")
PREFETCH = 10
"""Tasks a worker child reserves at once: few, so that a failover strands few."""

Topology = LocalCluster | LocalSentinel


@task(queue=chaos.QUEUE)
def numbered(number: int) -> None:
    """Count one run of task ``number`` in the book, and note its attempt and time."""
    job = current_job()
    attempt = job.attempts if job is not None else 0
    pipe = book().pipeline(transaction=False)
    pipe.hincrby(DONE, str(number), 1)
    pipe.rpush(RUNS_LOG, f"{number} {attempt} {time.monotonic():.4f}")
    pipe.execute()


@dataclass(frozen=True)
class Scenario:
    run: str
    """One of RUNS: the topology, then the fault."""
    min_replicas: int = 0
    wait_replicas: int = 0

    @property
    def label(self) -> str:
        return (
            f"{self.run}, min-replicas-to-write {self.min_replicas}, "
            f"wait-replicas {self.wait_replicas}"
        )


@dataclass(frozen=True)
class Params:
    rate: float = 500.0
    """Dispatches a second."""
    before: int = 1500
    """Acknowledged dispatches before the fault."""
    after: int = 1000
    """Acknowledged dispatches after the failed node is back (as a replica)."""
    workers: int = 1
    concurrency: int = 2
    drain: float = 60.0
    """Seconds the queue may take to drain after the producer stopped."""
    faults: int = 1
    """Faults in one run, one after another."""
    replicas: int = 1
    """Replicas of each master: with ``min-replicas-to-write``, run two, or a promoted
    replica refuses writes until the old master has rejoined it."""


@dataclass
class Outcome:
    scenario: Scenario
    acknowledged: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    """Dispatch errors by exception class."""
    ran: int = 0
    lost: int = 0
    pending: int = 0
    failed: int = 0
    duplicated: int = 0
    reserve_lost: int = 0
    """Of ``duplicated``: ran again at the same attempt, first before the new master took
    over (its reserve was lost)."""
    ack_lost: int = 0
    """Of ``duplicated``: ran again at a later attempt (its acknowledgement was lost)."""
    queued_twice: int = 0
    """Of ``duplicated``: ran twice at the same attempt, both after the new master took
    over (its dispatch was sent again after its reply was lost)."""
    twice: list[tuple[int, list[tuple[int, float]]]] = field(default_factory=list)
    """Each duplicated task's number and runs: (attempt, seconds after the last fault
    before it)."""
    refused_but_ran: int = 0
    acknowledged_after_fault: int = 0
    failovers: int = 0
    failover_s: list[float] = field(default_factory=list)
    """Per fault."""
    write_pause_s: float = 0.0
    resumed_s: float = 0.0
    tracebacks: int = 0
    load: float = 0.0
    lost_tasks: list[tuple[int, float]] = field(default_factory=list)
    """Each lost task's number, and how many seconds after the fault its dispatch
    returned (which says in which window of the failover it was lost)."""
    evidence: Path | None = None
    """Where the nodes' folders and the worker logs were kept, after a surprise."""

    def row(self) -> tuple[Any, ...]:
        errors = ", ".join(f"{n} {kind}" for kind, n in sorted(self.errors.items())) or "0"
        return (
            self.scenario.run,
            self.scenario.min_replicas,
            self.scenario.wait_replicas,
            self.acknowledged,
            errors,
            self.ran,
            self.lost,
            self.pending,
            self.failed,
            f"{self.duplicated} ({self.reserve_lost} / {self.ack_lost} / {self.queued_twice})"
            if self.duplicated
            else 0,
            self.refused_but_ran,
            self.failovers,
            " / ".join(f"{s:.1f}" for s in self.failover_s),
            f"{self.write_pause_s:.1f}",
            f"{self.resumed_s:.1f}",
            self.tracebacks,
            f"{self.load:.1f}",
        )


HEADERS = (
    "run",
    "min-replicas",
    "wait",
    "acknowledged",
    "dispatch errors",
    "ran",
    "lost",
    "pending",
    "failed",
    "ran twice (lost reserve / lost ack / queued twice)",
    "refused but ran",
    "failovers",
    "failover s",
    "write pause s",
    "resumed s",
    "tracebacks",
    "load",
)


class Producer(threading.Thread):
    """Dispatches 0, 1, 2, ... at ``rate`` a second until stopped, noting each outcome."""

    def __init__(self, queue: RedisQueue, rate: float) -> None:
        super().__init__(daemon=True)
        self.task = numbered.using(connection=queue)
        self.interval = 1 / rate
        self.acknowledged: list[tuple[int, float]] = []
        """(number, time.monotonic() when dispatch() returned), in order."""
        self.errors: dict[int, str] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        next_at = time.monotonic()
        for number in itertools.count():
            if self.halt.is_set():
                return
            try:
                self.task.dispatch(number)
                self.acknowledged.append((number, time.monotonic()))
            except Exception as exc:  # every kind is reported, none ends the run
                self.errors[number] = type(exc).__name__
            # After a stall, carry on at the rate rather than catch up in a burst.
            next_at = max(next_at + self.interval, time.monotonic())
            self.halt.wait(next_at - time.monotonic())

    def await_acknowledged(self, count: int, rate: float) -> None:
        """Until ``count`` dispatches were acknowledged (bounded: an outage may last)."""
        wait_until(lambda: len(self.acknowledged) >= count, timeout=count / rate + 60)


@contextlib.contextmanager
def topology(scenario: Scenario, replicas: int) -> Iterator[tuple[Topology, str]]:
    """The topology of ``scenario``, started, and the URL rqueue reaches it by."""
    if scenario.run.startswith("cluster"):
        with LocalCluster(
            replicas_per_master=replicas, min_replicas_to_write=scenario.min_replicas
        ) as cluster:
            yield cluster, cluster.seed_url
    else:
        with LocalSentinel(replicas, min_replicas_to_write=scenario.min_replicas) as sentinel:
            yield sentinel, sentinel.url


def serving(nodes: Topology, queue: RedisQueue) -> Node:
    """The master that holds the busy queue's keys now."""
    if isinstance(nodes, LocalCluster):
        return nodes.master_of(queue.keys(chaos.QUEUE).ready)
    return nodes.master()


def epoch(nodes: Topology) -> int:
    """A count that every failover moves on: the sentinels' config epoch of the master,
    or the cluster's current epoch (which a failed election moves on too)."""
    if isinstance(nodes, LocalCluster):
        info = next(n for n in nodes.nodes if n.running).ask("CLUSTER", "INFO")
        return int(info.split("cluster_current_epoch:")[1].split()[0])
    sentinel = next(n for n in nodes.sentinels if n.running)
    return int(sentinel.ask("SENTINEL", "MASTER", nodes.master_name)["config-epoch"])


def fail(nodes: Topology, victim: Node, run: str) -> float:
    """Fail ``victim`` as ``run`` says and bring it back as a replica; return the
    seconds until the topology named another master."""
    started = time.monotonic()
    if run.endswith("manual"):
        assert isinstance(nodes, LocalSentinel)
        nodes.failover()
    else:
        nodes.kill(victim)
    nodes.wait_for_failover(victim)
    failover_s = time.monotonic() - started
    if run.endswith("manual"):  # it stays up; the sentinels demote it in a while
        wait_until(lambda: _is_synced_replica(victim), timeout=60, interval=0.05)
    else:
        nodes.restart(victim)
    return failover_s


def _is_synced_replica(node: Node) -> bool:
    try:
        info = node.ask("INFO", "replication")
    except redis.RedisError:
        return False
    return bool(info["role"] == "slave" and info.get("master_link_status") == "up")


def drained(queue: RedisQueue) -> bool:
    try:
        size = queue.sizes([chaos.QUEUE])[0]
    except redis.RedisError:
        return False
    return size.ready + size.delayed + size.reserved == 0


def waiting_numbers(queue: RedisQueue) -> set[int]:
    """Numbers of the tasks still in the queue: ready, delayed or reserved."""
    keys, client = queue.keys(chaos.QUEUE), queue.client
    payloads = [
        *client.lrange(keys.ready, 0, -1),
        *client.zrange(keys.delayed, 0, -1),
        *client.zrange(keys.reserved, 0, -1),
    ]
    return {int(decode(payload).args[0]) for payload in payloads}


def failed_numbers(queue: RedisQueue) -> set[int]:
    jobs = (failed.job() for failed in FailedTasks(queue).list([chaos.QUEUE]))
    return {int(job.args[0]) for job in jobs if job is not None}


def account(outcome: Outcome, producer: Producer, queue: RedisQueue, faults: list[float]) -> None:
    """Fill in the counts from the book, the queue and what the producer saw; ``faults``:
    when each fault was set off (monotonic)."""
    counts = {int(k): int(v) for k, v in book().hgetall(DONE).items()}
    failed, waiting = failed_numbers(queue), waiting_numbers(queue)
    acknowledged = [number for number, _ in producer.acknowledged]
    outcome.acknowledged = len(acknowledged)
    for kind in producer.errors.values():
        outcome.errors[kind] = outcome.errors.get(kind, 0) + 1
    outcome.ran = sum(1 for n in acknowledged if counts.get(n))
    outcome.failed = sum(1 for n in acknowledged if not counts.get(n) and n in failed)
    outcome.pending = sum(
        1 for n in acknowledged if not counts.get(n) and n not in failed and n in waiting
    )
    outcome.lost_tasks = [
        (n, round(at - _last_fault(faults, at), 3))
        for n, at in producer.acknowledged
        if not counts.get(n) and n not in failed and n not in waiting
    ]
    outcome.lost = len(outcome.lost_tasks)
    outcome.duplicated = sum(1 for c in counts.values() if c >= 2)
    _explain_twice(outcome, {n for n, c in counts.items() if c >= 2}, faults)
    outcome.refused_but_ran = sum(1 for n in producer.errors if counts.get(n))
    times = [at for _, at in producer.acknowledged]
    outcome.acknowledged_after_fault = sum(1 for at in times if at > faults[0])
    since = [at for at in times if at > faults[0]]
    last_before = max((at for at in times if at <= faults[0]), default=faults[0])
    gaps = list(itertools.pairwise([last_before, *since]))
    if gaps:
        start, end = max(gaps, key=lambda gap: gap[1] - gap[0])
        outcome.write_pause_s = end - start
        outcome.resumed_s = end - _last_fault(faults, end)


def _last_fault(faults: list[float], at: float) -> float:
    """When the last fault before ``at`` was set off (the first, if none was)."""
    return max((fault for fault in faults if fault <= at), default=faults[0])


def _explain_twice(outcome: Outcome, numbers: set[int], faults: list[float]) -> None:
    """Sort each task that ran more than once by what the failover lost: its
    acknowledgement (ran again at a later attempt), its reserve (at the same attempt,
    first before the new master took over) or its dispatch's reply (the same attempt,
    both after: queued twice)."""
    runs: dict[int, list[tuple[int, float]]] = {}
    for line in book().lrange(RUNS_LOG, 0, -1):
        number, attempt, at = line.split()
        if int(number) in numbers:
            runs.setdefault(int(number), []).append((int(attempt), float(at)))
    took_over = [fault + seconds for fault, seconds in zip(faults, outcome.failover_s, strict=True)]
    for number, seen in sorted(runs.items()):
        attempts = [attempt for attempt, _ in seen]
        first = min(at for _, at in seen)
        before = [over for fault, over in zip(faults, took_over, strict=True) if fault <= first]
        if len(set(attempts)) == len(attempts):
            outcome.ack_lost += 1
        elif not before or first < before[-1]:  # reserved from the old master
            outcome.reserve_lost += 1
        else:
            outcome.queued_twice += 1
        timeline = [(attempt, round(at - _last_fault(faults, at), 3)) for attempt, at in seen]
        outcome.twice.append((number, timeline))


def keep_evidence(nodes: Topology, logs: Path) -> Path:
    """Copy every node's folder (its log, AOF, nodes.conf or sentinel.conf) and the
    worker logs out of the topology's temporary folder, for a post-mortem."""
    kept = Path(tempfile.mkdtemp(prefix="rqueue-failover-kept-"))
    every = (
        nodes.nodes if isinstance(nodes, LocalCluster) else [*nodes.data_nodes, *nodes.sentinels]
    )
    for node in every:
        shutil.copytree(node.data_dir, kept / f"node-{node.port}")
    shutil.copytree(logs, kept / "workers")
    return kept


def run(scenario: Scenario, params: Params) -> Outcome:
    """One run of ``scenario`` on a topology of its own, start to finish."""
    outcome = Outcome(scenario)
    logs = Path(tempfile.mkdtemp(prefix="rqueue-failover-"))
    with open_book(), topology(scenario, params.replicas) as (nodes, url):
        queue = RedisQueue(Config(redis_url=url, wait_replicas=scenario.wait_replicas))
        producer = Producer(queue, params.rate)
        # A short timeout brings stranded reservations back within the run.
        worker_params = chaos.Params(timeout=2.0, prefetch=PREFETCH, concurrency=params.concurrency)
        workers = [chaos.Worker(url, worker_params, logs, index) for index in range(params.workers)]
        try:
            producer.start()
            producer.await_acknowledged(params.before, params.rate)
            faults, epoch_before = [], epoch(nodes)
            for _ in range(params.faults):
                faults.append(time.monotonic())
                outcome.failover_s.append(fail(nodes, serving(nodes, queue), scenario.run))
                producer.await_acknowledged(len(producer.acknowledged) + params.after, params.rate)
            producer.halt.set()
            producer.join()
            with contextlib.suppress(TimeoutError):  # what is left is reported as pending
                wait_until(lambda: drained(queue), timeout=params.drain, interval=0.1)
            account(outcome, producer, queue, faults)
            outcome.failovers = epoch(nodes) - epoch_before
        finally:
            producer.halt.set()
            for worker in workers:
                worker.stop()
            queue.client.close()
        outcome.tracebacks = sum(
            w.log_path.read_text(errors="replace").count("Traceback (most recent call")
            for w in workers
        )
        # More repeats than tasks in flight at the fault is more than a failover explains;
        # tasks left waiting say a worker stopped running them (its log says why).
        in_flight = params.workers * params.concurrency * PREFETCH * params.faults
        surprising = outcome.lost or outcome.pending or outcome.duplicated > in_flight
        if surprising or outcome.tracebacks:
            outcome.evidence = keep_evidence(nodes, logs)
    shutil.rmtree(logs)
    outcome.load = os.getloadavg()[0]
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default=",".join(RUNS), help=f"any of {', '.join(RUNS)}")
    parser.add_argument("--min-replicas", default="0,1", help="min-replicas-to-write values")
    parser.add_argument("--wait-replicas", default="0,1", help="RQUEUE_WAIT_REPLICAS values")
    parser.add_argument("--rate", type=float, default=Params.rate, help="dispatches a second")
    parser.add_argument("--before", type=int, default=Params.before, help="acks before the fault")
    parser.add_argument("--after", type=int, default=Params.after, help="acks after the rejoin")
    parser.add_argument("--workers", type=int, default=Params.workers)
    parser.add_argument("--concurrency", type=int, default=Params.concurrency)
    parser.add_argument("--replicas", type=int, default=Params.replicas, help="per master")
    parser.add_argument("--faults", type=int, default=Params.faults, help="faults in each run")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case")
    args = parser.parse_args()
    runs = args.runs.split(",")
    if unknown := set(runs) - set(RUNS):
        parser.error(f"unknown runs {sorted(unknown)}; choose from {', '.join(RUNS)}")
    if args.faults < 1 or args.repeat < 1:
        parser.error("--faults and --repeat must be at least 1")
    params = Params(
        args.rate,
        args.before,
        args.after,
        args.workers,
        args.concurrency,
        replicas=args.replicas,
        faults=args.faults,
    )
    print(f"command: python benchmarks/reliability/failover.py {' '.join(sys.argv[1:])}".rstrip())
    print(machine_summary(), flush=True)
    outcomes = []
    for wait_replicas, name, min_replicas, _ in itertools.product(
        [int(v) for v in args.wait_replicas.split(",")],
        runs,
        [int(v) for v in args.min_replicas.split(",")],
        range(args.repeat),
    ):
        outcome = run(Scenario(name, min_replicas, wait_replicas), params)
        outcomes.append(outcome)
        print(f"  {outcome.scenario.label}: lost {outcome.lost}", flush=True)
        if outcome.lost_tasks:
            print(f"    lost (task, s after the fault), first 10: {outcome.lost_tasks[:10]}")
        for number, seen in outcome.twice[:10]:
            print(f"    task {number} ran at (attempt, s after the fault): {seen}")
        if outcome.evidence:
            print(f"    kept the nodes' folders and worker logs in {outcome.evidence}", flush=True)
    table(
        HEADERS,
        [o.row() for o in outcomes],
        f"Failover under load ({params.rate:g} dispatches/s, {params.workers} worker(s) x "
        f"{params.concurrency}, {params.replicas} replica(s) per master, {params.faults} "
        "fault(s) a run; "
        "load = 1-minute load average at the end of each run)",
    )


if __name__ == "__main__":
    main()
