"""The local Cluster and Sentinel topologies themselves, checked with plain redis-py.

The Cluster and Sentinel tests of rqueue trust these fixtures to route keys, fail over
and keep passwords apart, so each of those is shown here without rqueue's client.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry
from topologies import HOST, LocalCluster, LocalSentinel, Node

from rqueue.server import RedisServerError

KEYS = ["alpha", "bravo", "charlie", "delta", "echo"]


def client(node: Node, password: str | None = None) -> redis.Redis:
    """No retries: redis-py would back off for seconds on each refused password."""
    return redis.Redis(
        HOST, node.port, password=password, decode_responses=True, retry=Retry(NoBackoff(), 0)
    )


def replica_port(master: Node) -> int:
    """The port of the one replica ``master`` has, in its own words (ROLE)."""
    role, _, replicas = master.ask("ROLE")
    assert role == "master" and len(replicas) == 1, replicas
    return int(replicas[0][1])


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster() as started:
        yield started


@pytest.mark.cluster
def test_each_key_is_served_by_the_master_of_its_slot(cluster: LocalCluster) -> None:
    assert len(set(cluster.masters())) == 3
    for key in KEYS:
        owner = client(cluster.master_of(key))
        assert owner.set(key, key)
        assert owner.get(key) == key
        others = [port for _, port in cluster.masters() if port != cluster.master_of(key).port]
        with pytest.raises(redis.exceptions.MovedError):
            redis.Redis(HOST, others[0]).get(key)
    seeded = RedisCluster(HOST, cluster.nodes[0].port, decode_responses=True)
    assert [seeded.get(key) for key in KEYS] == KEYS
    seeded.close()
    cluster.flush()
    assert all(client(cluster.master_of(key)).get(key) is None for key in KEYS)


@pytest.mark.cluster
def test_a_killed_master_is_replaced_by_its_replica(cluster: LocalCluster) -> None:
    old = cluster.master_of("alpha")
    client(old).set("alpha", "kept")
    assert client(old).wait(1, 5000) == 1  # on the replica before the crash
    successor = replica_port(old)
    cluster.kill(old)
    cluster.wait_for_failover(old)
    new = cluster.master_of("alpha")
    assert new.port == successor
    assert client(new).get("alpha") == "kept"
    assert client(new).set("alpha", "after")
    cluster.restart(old)
    assert old.ask("ROLE")[:3] == ["slave", HOST, successor]
    assert (HOST, old.port) not in cluster.masters()


@pytest.mark.sentinel
def test_sentinels_promote_the_replica_of_a_killed_master() -> None:
    with LocalSentinel() as sentinel:
        old = sentinel.master()
        client(old).set("key", "kept")
        assert client(old).wait(1, 5000) == 1
        successor = replica_port(old)
        sentinel.kill(old)
        sentinel.wait_for_failover(old)
        new = sentinel.master()
        assert new.port == successor
        named = {
            tuple(node.ask("SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinel.master_name))
            for node in sentinel.sentinels
        }
        assert named == {(HOST, str(new.port))}
        assert client(new).get("key") == "kept"
        assert client(new).set("key", "after")
        sentinel.restart(old)
        assert old.ask("ROLE")[:3] == ["slave", HOST, successor]
        sentinel.flush()
        assert client(new).get("key") is None


@pytest.mark.sentinel
def test_sentinels_and_data_nodes_keep_separate_passwords() -> None:
    with LocalSentinel(password="data-pw", sentinel_password="sentinel-pw") as sentinel:
        assert sentinel.url.startswith("redis+sentinel://:data-pw@127.0.0.1:")
        assert sentinel.url.endswith(f"/{sentinel.master_name}/0?sentinel_password=sentinel-pw")
        with pytest.raises(redis.AuthenticationError):
            client(sentinel.sentinels[0], "data-pw").ping()
        with pytest.raises(redis.AuthenticationError):
            client(sentinel.master(), "sentinel-pw").ping()
        assert client(sentinel.sentinels[0], "sentinel-pw").ping()
        old = sentinel.master()
        assert client(old, "data-pw").set("key", "kept")
        assert client(old, "data-pw").wait(1, 5000) == 1
        # No failover unless the sentinels reach each other and the data nodes.
        sentinel.kill(old)
        sentinel.wait_for_failover(old)
        assert client(sentinel.master(), "data-pw").get("key") == "kept"


@pytest.mark.sentinel
def test_a_requested_failover_promotes_the_replica() -> None:
    with LocalSentinel() as sentinel:
        old = sentinel.master()
        successor = replica_port(old)
        sentinel.failover()
        sentinel.wait_for_failover(old)
        assert sentinel.master().port == successor
        assert client(sentinel.master()).set("key", "value")


@pytest.mark.sentinel
def test_min_replicas_to_write_is_set_on_every_data_node() -> None:
    with LocalSentinel(min_replicas_to_write=1) as sentinel:
        for node in sentinel.data_nodes:
            assert client(node).config_get("min-replicas-to-write") == {
                "min-replicas-to-write": "1"
            }
        assert client(sentinel.master()).set("key", "value")  # its replica is connected


@pytest.mark.sentinel
def test_a_start_that_fails_half_way_stops_what_it_started() -> None:
    topology = LocalSentinel(master_name="two words")  # no sentinel accepts this config
    with pytest.raises(RedisServerError, match="did not start"):
        topology.start()
    assert len(topology.data_nodes) == 2
    assert not any(node.running for node in topology.data_nodes)
