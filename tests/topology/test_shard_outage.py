"""Redis Cluster: one shard down holds up no queue of the others (issue #34).

A worker serves three queues whose slots are on three masters. One master is killed
and, with no replica and ``cluster-require-full-coverage no``, its shard stays down
until the test restarts it: tasks dispatched meanwhile to the two healthy shards (ready
at once, delayed: moved by the parent's tick, and a schedule's: fired by its scheduler)
must run while it is still down, even where those shards lost their scripts. How
fast they start is ``benchmarks/shard_outage.py``'s to print, not a test's to time.
"""

from __future__ import annotations

from collections.abc import Iterator

import apptasks
import pytest
from support import Workers, strings, wait_for
from test_cluster import masters, on_each_shard
from topologies import LocalCluster, Node

from rqueue.schedules.api import Schedules
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.worker.queue_order import PROBED_ABOVE

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def lonely_cluster() -> Iterator[LocalCluster]:
    """Masters without replicas that serve while one of them is down."""
    with LocalCluster(replicas_per_master=0, full_coverage=False) as cluster:
        yield cluster


@pytest.fixture
def config(lonely_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> Config:
    monkeypatch.setenv("REDIS_URL", lonely_cluster.seed_url)
    return Config.resolve(redis_url=lonely_cluster.seed_url)


def victim_of(cluster: LocalCluster, queue: RedisQueue, names: list[str]) -> str:
    """A queue whose master holds neither the global keys nor the tasks' record."""
    spared = {
        cluster.master_of(queue.global_keys.known_queues).port,
        cluster.master_of(apptasks.DONE).port,
    }
    return next(n for n in names if cluster.master_of(f"queues:{{{n}}}").port not in spared)


def flush_scripts_of_running_masters(cluster: LocalCluster) -> None:
    """As if they had restarted: each script must be loaded again on the node that
    lost it, and on it alone, since a ``SCRIPT LOAD`` to every primary fails now."""
    for master in masters(cluster):
        if master.running:
            master.ask("SCRIPT", "FLUSH")


@pytest.mark.parametrize("fillers", [0, PROBED_ABOVE], ids=["in-turn", "probed"])
def test_tasks_of_healthy_shards_run_while_another_is_down(
    lonely_cluster: LocalCluster, queue: RedisQueue, workers: Workers, fillers: int
) -> None:
    """``fillers``: more empty queues on the worker, so many that its children probe
    their lengths (``queue_order.py``) rather than try each in turn."""
    names = on_each_shard(lonely_cluster)
    victim = victim_of(lonely_cluster, queue, names)
    healthy = [name for name in names if name != victim]
    # The down queue first: a child that stopped at it would never reach the others.
    others = [f"filler{i}" for i in range(fillers)]
    workers.start(",".join([victim, *healthy, *others]), "-c", "1")
    for name in names:
        apptasks.record.using(queue=name).dispatch(f"before:{name}")
    wait_for(lambda: len(strings(queue.client, apptasks.DONE)) == 3, 30, "the first three tasks")
    node: Node = lonely_cluster.master_of(f"queues:{{{victim}}}")
    lonely_cluster.kill(node)
    try:
        flush_scripts_of_running_masters(lonely_cluster)
        for name in healthy:
            apptasks.record.using(queue=name).dispatch(f"during:{name}")
        apptasks.record.using(queue=healthy[0]).later(0.2, "during:delayed")
        Schedules(queue).add(
            "during", apptasks.record, every=1, args=("during:schedule",), queue=healthy[1]
        )
        expected = {f"during:{name}" for name in healthy} | {"during:delayed", "during:schedule"}
        wait_for(
            lambda: expected <= set(strings(queue.client, apptasks.DONE)),
            30,
            "the healthy shards' tasks, ready, delayed and scheduled, to run",
        )
        assert not node.running, "they ran while the shard was still down"
    finally:
        lonely_cluster.restart(node)
    # Back: its queue is served again, and what was lost there is given back.
    apptasks.record.using(queue=victim).dispatch(f"after:{victim}")
    wait_for(
        lambda: f"after:{victim}" in strings(queue.client, apptasks.DONE),
        30,
        "the restarted shard's task to run",
    )


@pytest.fixture
def first_primary_down(lonely_cluster: LocalCluster) -> Iterator[Node]:
    """The primary a command sent to every primary meets first, killed for the test: a
    healthy shard's call that went through it would fail, not just be slowed."""
    down = min(masters(lonely_cluster), key=lambda node: node.port)
    lonely_cluster.kill(down)
    try:
        yield down
    finally:
        lonely_cluster.restart(down)


def test_a_script_a_healthy_shard_lost_is_sent_to_it_alone_while_another_is_down(
    lonely_cluster: LocalCluster, queue: RedisQueue, first_primary_down: Node
) -> None:
    """NOSCRIPT sends the script whole to the node that answered it, where a ``SCRIPT
    LOAD`` would go to every primary and stop at the one that is down."""
    name = next(
        name
        for name in on_each_shard(lonely_cluster)
        if lonely_cluster.master_of(f"queues:{{{name}}}").port != first_primary_down.port
    )
    flush_scripts_of_running_masters(lonely_cluster)
    queue.push(name, [b"called"])
    flush_scripts_of_running_masters(lonely_cluster)
    queue.push_many([(name, 0, [b"pipelined"])])
    assert sorted(queue.reserve(name, 5, 1000, 0, 0).payloads) == [b"called", b"pipelined"]


def test_a_setting_is_read_and_a_ping_answered_while_a_shard_is_down(
    queue: RedisQueue, first_primary_down: Node
) -> None:
    """A worker reads ``proto-max-bulk-len`` before it keeps a result, and pings at its
    start: any primary that answers does, not every one."""
    assert int(queue.client.config_get("proto-max-bulk-len")["proto-max-bulk-len"]) > 0
    queue.ping()
