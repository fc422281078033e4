"""Redis Cluster: what differs from one server, on a real local 3-master cluster.

The core suite runs on a cluster too (``tox -e cluster``); these tests pin what only
a cluster has: queues on different shards, redirects, one slot for the global keys,
scripts missing on one node, and a blocking wait that spans shards.
"""

from __future__ import annotations

import threading

import apptasks
import pytest
import redis
from redis.crc import key_slot
from support import Workers, cli, strings, wait_for
from topologies import LocalCluster, Node

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

pytestmark = pytest.mark.cluster


@pytest.fixture
def config(local_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> Config:
    """The cluster, whatever RQUEUE_TEST_TOPOLOGY says: conftest's ``queue`` and
    ``workers`` then use it."""
    monkeypatch.setenv("REDIS_URL", local_cluster.seed_url)
    return Config.resolve(redis_url=local_cluster.seed_url)


def on_each_shard(cluster: LocalCluster, count: int = 3) -> list[str]:
    """Queue names whose keys live on ``count`` different masters."""
    names: dict[int, str] = {}
    for i in range(1000):
        name = f"shard{i}"
        names.setdefault(cluster.master_of(f"queues:{{{name}}}").port, name)
        if len(names) == count:
            return list(names.values())
    raise AssertionError("no names found on enough masters")


def test_one_worker_serves_queues_on_three_shards(
    local_cluster: LocalCluster, queue: RedisQueue, workers: Workers
) -> None:
    names = on_each_shard(local_cluster)
    for name in names:
        apptasks.record.using(queue=name).dispatch(name)
    assert queue.known_queues() == sorted(names)
    code, output = workers.run(",".join(names), "--stop-when-empty", "-c", "1")
    assert code == 0, output
    assert sorted(strings(queue.client, apptasks.DONE)) == sorted(names)
    assert [s.ready + s.reserved for s in queue.sizes(names)] == [0, 0, 0]


def test_a_wait_on_queues_of_three_shards_wakes_for_the_last_one(
    local_cluster: LocalCluster, queue: RedisQueue, config: Config
) -> None:
    names = on_each_shard(local_cluster)
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(queue.wait_for_ready(names, 60)))
    waiter.start()
    # Once the waiter's BLPOPs are in, push to the last queue from another connection.
    wait_for(
        lambda: (
            sum(
                int(node.ask("INFO", "clients")["blocked_clients"])
                for node in masters(local_cluster)
            )
            >= 3
        ),
        message="three blocked clients",
    )
    RedisQueue(config).push(names[-1], [b"task"])
    waiter.join(60)
    assert woken == [names[-1]], "a push to the third shard wakes the wait, and names its queue"
    # The other two BLPOPs were ended, not left to take the next push's wake-up.
    wait_for(
        lambda: (
            sum(
                int(node.ask("INFO", "clients")["blocked_clients"])
                for node in masters(local_cluster)
            )
            == 0
        ),
        message="no client left blocked",
    )
    RedisQueue(config).push(names[0], [b"task"])
    assert queue.client.llen(queue.keys(names[0]).notify) == 1


def masters(cluster: LocalCluster) -> list[Node]:
    ports = {port for _, port in cluster.masters()}
    return [node for node in cluster.nodes if node.port in ports]


def test_the_global_keys_live_in_one_slot_of_their_own(
    queue: RedisQueue, local_cluster: LocalCluster
) -> None:
    keys = queue.global_keys
    slots = {key_slot(k.encode()) for k in (keys.known_queues, keys.restart, keys.schedule_index)}
    assert len(slots) == 1
    queue.request_restart(123.0)
    assert queue.check_in(on_each_shard(local_cluster)) == b"123.0"


def test_scripts_lost_on_every_node_are_loaded_again_where_needed(
    local_cluster: LocalCluster, queue: RedisQueue
) -> None:
    names = on_each_shard(local_cluster)
    queue.push(names[0], [b"warm"])
    queue.client.script_flush()  # on every primary
    queue.push_many([(name, 0, [name.encode()]) for name in names])
    for name in names:
        reservation = queue.reserve(name, 5, 1000, 0, 0)
        assert name.encode() in reservation.payloads


def test_a_moved_slot_is_followed_by_every_path(
    local_cluster: LocalCluster, queue: RedisQueue, config: Config
) -> None:
    """Move a queue's slot to another master under a client with a warm slot map:
    its next dispatch, reserve and pipeline get MOVED and follow it."""
    name = on_each_shard(local_cluster)[0]
    keys = queue.keys(name)
    queue.push(name, [b"before"])
    source = local_cluster.master_of(keys.ready)
    target = next(node for node in masters(local_cluster) if node is not source)
    slot = key_slot(keys.ready.encode())
    moving = source.ask("CLUSTER", "GETKEYSINSLOT", slot, 100)
    target.ask("CLUSTER", "SETSLOT", slot, "IMPORTING", source.node_id)
    source.ask("CLUSTER", "SETSLOT", slot, "MIGRATING", target.node_id)
    # Mid-migration, a key not yet moved is still served by the source; one that is
    # missing there gets ASK, which the client follows with ASKING to the target.
    fresh = "fresh-{" + name + "}"
    assert queue.client.rpush(fresh, "x") == 1
    source.ask("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *moving)
    for node in masters(local_cluster):
        node.ask("CLUSTER", "SETSLOT", slot, "NODE", target.node_id)
    assert target.ask("LLEN", fresh) == 1, "ASK was followed to the importing node"
    queue.push(name, [b"after"])  # Wire: MOVED, followed
    assert queue.sizes([name])[0].ready == 2  # pipeline
    assert queue.reserve(name, 5, 1000, 0, 0).payloads == [b"before", b"after"]
    assert target.ask("ZCARD", keys.reserved) == 2


def test_a_cluster_whose_seeds_are_all_down_is_a_connection_error() -> None:
    config = Config.resolve(redis_url="redis+cluster://127.0.0.1:1,127.0.0.1:2/0")
    with pytest.raises(redis.ConnectionError, match="no node of the cluster answered"):
        RedisQueue(config).client.llen("anything")


def test_the_cluster_flag_with_any_one_node_finds_the_others(
    local_cluster: LocalCluster, queue: RedisQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RQUEUE_CLUSTER", "1")
    one_node = Config.resolve(redis_url=local_cluster.url)
    names = on_each_shard(local_cluster)
    for name in names:
        apptasks.record.using(queue=name, connection=RedisQueue(one_node)).dispatch(name)
    result = cli(one_node, "size", *names, env={"RQUEUE_CLUSTER": "1"})
    assert result.returncode == 0, result.stderr
    for name in names:
        assert any(line.split()[:2] == [name, "1"] for line in result.stdout.splitlines())
