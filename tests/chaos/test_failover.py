"""A master killed under load loses no acknowledged task with ``min-replicas-to-write 1``
and dispatches that wait for a replica (``WAIT``), the settings docs/deployment.md
recommends: replication is asynchronous, so without ``WAIT`` a write the master
acknowledged a moment before it died may be on no replica, and no test could promise
otherwise.

Each test is one small run of the failover benchmark's harness (benchmarks/reliability/failover.py)
on a topology of its own, since it kills a node, which the session's shared topologies
must not suffer: numbered tasks are dispatched while the master of their queue is
killed, a worker runs them, and the book (a plain redis-server no failover touches)
counts every run exactly. A dispatch that raised is not counted as acknowledged.
"""

from __future__ import annotations

import sys
from pathlib import Path

import apptasks
import pytest
from support import TASKS_DIR, Workers, wait_for
from topologies import LocalCluster

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "reliability"))
import failover

SMALL = failover.Params(rate=300, before=300, after=300, drain=40)
"""Enough dispatches on each side of the failover to keep the queue busy through it."""


def run_killing_the_master(run: str) -> None:
    outcome = failover.run(failover.Scenario(run, min_replicas=1, wait_replicas=1), SMALL)
    print(outcome.row())
    assert outcome.lost == 0, f"lost {outcome.lost_tasks[:20]}; evidence in {outcome.evidence}"
    assert outcome.pending == 0, f"the queue did not drain; evidence in {outcome.evidence}"
    assert outcome.ran == outcome.acknowledged  # none failed either
    assert outcome.acknowledged_after_fault >= SMALL.after  # dispatching went on


@pytest.mark.cluster
def test_killing_a_busy_queues_cluster_master_loses_no_acknowledged_task() -> None:
    run_killing_the_master("cluster-kill")


@pytest.mark.sentinel
def test_killing_the_sentinel_master_under_load_loses_no_acknowledged_task() -> None:
    run_killing_the_master("sentinel-kill")


@pytest.mark.cluster
def test_a_worker_started_while_a_cluster_master_is_down_runs_tasks_once_it_is_back() -> None:
    """``rqueue work`` started while a master is down (a failover under way; here, with
    no replica, until it is back) starts, and runs tasks once the cluster serves again.
    It once quit at start-up with one line and no traceback, doing nothing: its PING
    went to a random primary, and its check for unknown queues read the down one."""
    with LocalCluster(replicas_per_master=0) as cluster:
        config = Config(redis_url=cluster.seed_url)
        queue = RedisQueue(config)
        victim = cluster.master_of(queue.keys("default").ready)
        cluster.kill(victim)
        for _ in range(20):  # a fresh client's PING: to the down primary a third of the time
            fresh = RedisQueue(config)
            fresh.ping()
            fresh.client.close()
        workers = Workers(config, TASKS_DIR)
        try:
            worker = workers.start("-c", "1")
            worker.wait_for_children(1, timeout=20)
            cluster.restart(victim)
            apptasks.record.using(connection=queue).dispatch("after the outage")
            wait_for(lambda: queue.client.lrange(apptasks.DONE, 0, -1), 30, "the task's run")
            assert worker.process.poll() is None
        finally:
            workers.kill_all()
            queue.client.close()
