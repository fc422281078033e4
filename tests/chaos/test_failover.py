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

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "reliability"))
import failover

SMALL = failover.Params(rate=300, before=300, after=300, drain=40)
"""Enough dispatches on each side of the failover to keep the queue busy through it."""


def run_killing_the_master(run: str) -> None:
    outcome = failover.run(failover.Scenario(run, min_replicas=1, wait_replicas=1), SMALL)
    print(outcome.row())
    assert outcome.lost == 0, f"lost {outcome.lost_tasks[:20]}; evidence in {outcome.evidence}"
    assert outcome.pending == 0, "the queue did not drain after the failover"
    assert outcome.ran == outcome.acknowledged  # none failed either
    assert outcome.acknowledged_after_fault >= SMALL.after  # dispatching went on


@pytest.mark.cluster
def test_killing_a_busy_queues_cluster_master_loses_no_acknowledged_task() -> None:
    run_killing_the_master("cluster-kill")


@pytest.mark.sentinel
def test_killing_the_sentinel_master_under_load_loses_no_acknowledged_task() -> None:
    run_killing_the_master("sentinel-kill")
