"""Redis Sentinel: what differs from one server, on a real local Sentinel set.

The core suite runs on Sentinel too (``tox -e sentinel``); these tests pin what only
Sentinel has: separate passwords, following the master the sentinels name through a
failover (as they announce it), and waiting for a replica after a dispatch. Each starts
its own set (about 0.2 s), since it kills or fails over nodes.
"""

from __future__ import annotations

import os
import re
import signal
import threading

import apptasks
import pytest
import redis
from support import TASKS_DIR, Workers, cli, strings, wait_for
from topologies import LocalSentinel, Node

from rqueue.errors import ReplicasNotReached
from rqueue.failed import FailedTasks
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

pytestmark = pytest.mark.sentinel


def test_the_data_and_sentinel_passwords_are_each_used_where_they_belong(
    config: Config,
) -> None:
    with LocalSentinel(password="data-secret", sentinel_password="watch-secret") as sentinel:
        queue = RedisQueue(Config.resolve(redis_url=sentinel.url))
        queue.push("default", [b"task"])
        assert sentinel.master().ask("LLEN", "queues:default") == 1
        wrong = sentinel.url.replace("watch-secret", "not-it")
        result = cli(config, "size", "--redis-url", wrong)
        assert result.returncode == 1, result.stderr
        assert "no sentinel" in result.stderr and "mymaster" in result.stderr
        assert "not-it" not in result.stderr and "data-secret" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        result = cli(config, "size", "--redis-url", sentinel.url)
        assert result.returncode == 0, result.stderr
        assert "default" in result.stdout


def test_a_dispatch_rides_out_the_death_of_the_master(config: Config) -> None:
    with LocalSentinel() as sentinel:
        queue = RedisQueue(Config.resolve(redis_url=sentinel.url))
        apptasks.record.using(connection=queue, wait_replicas=1).dispatch("before")
        old = sentinel.master()
        sentinel.kill(old)
        # Sent while no master is known: retried until the sentinels name a new one.
        apptasks.record.using(connection=queue).dispatch("after")
        # Sent as soon as the promoted replica was announced, maybe before every
        # sentinel names it.
        sentinel.wait_for_failover(old)
        new = sentinel.master()
        assert new is not old
        assert new.ask("LLEN", "queues:default") == 2
        assert len(queue.reserve("default", 5, 1000, 0, 0).payloads) == 2


def test_a_connection_kept_open_follows_a_manual_failover(config: Config) -> None:
    with LocalSentinel() as sentinel:
        queue = RedisQueue(Config.resolve(redis_url=sentinel.url))
        queue.push("default", [b"first"])
        old = sentinel.master()
        sentinel.failover()
        sentinel.wait_for_failover(old)
        new = sentinel.master()
        # The old master may take writes until the sentinels demote it; the client asks
        # them again within a second, so pushes soon land on the new master only.
        pushed = 0
        while new.ask("LLEN", "queues:default") <= 1:
            queue.push("default", [b"more"])
            pushed += 1
            assert pushed < 100_000, "pushes never reached the new master"
        assert new.ask("ROLE")[0] == "master"


def test_a_dispatch_that_no_replica_confirms_says_so_and_stays_queued(config: Config) -> None:
    with LocalSentinel() as sentinel:
        queue = RedisQueue(Config.resolve(redis_url=sentinel.url, wait_replicas_timeout=0.2))
        task = apptasks.record.using(connection=queue, wait_replicas=1)
        task.dispatch(1)
        replica = next(node for node in sentinel.data_nodes if node is not sentinel.master())
        sentinel.kill(replica)
        with pytest.raises(ReplicasNotReached, match=r"queued, but only 0 of 1 replicas"):
            task.dispatch(2)
        assert sentinel.master().ask("LLEN", "queues:default") == 2


def test_work_wait_replicas_makes_the_tasks_own_dispatches_wait(config: Config) -> None:
    with LocalSentinel() as sentinel:
        sentinel_config = Config.resolve(redis_url=sentinel.url)
        queue = RedisQueue(sentinel_config)
        apptasks.dispatches_record.using(connection=queue).dispatch("inner")
        sentinel.kill(next(n for n in sentinel.data_nodes if n is not sentinel.master()))
        workers = Workers(sentinel_config, cwd=TASKS_DIR)
        try:
            code, output = workers.run(
                "--wait-replicas",
                "1",
                "--stop-when-empty",
                env={"RQUEUE_WAIT_REPLICAS_TIMEOUT": "0.2"},
            )
        finally:
            workers.kill_all()
        assert code == 0, output
        (failure,) = FailedTasks(queue).list()
        assert failure.exception.endswith("ReplicasNotReached"), failure.exception
        assert "queued, but only 0 of 1" in failure.message
        # The inner task was queued all the same, and this worker ran it.
        assert strings(queue.client, apptasks.DONE) == ["inner"]
        result = cli(config, "work", "--wait-replicas", "-1", "--once")
        assert result.returncode == 2
        assert "Invalid value for --wait-replicas" in result.stderr


FOLLOW_ONLY = "?sentinel_check_interval=86400"
"""Never ask the sentinels again on a timer: only their announcements (or a refusal)
can move the client."""


def _subscribed(sentinel: Node) -> bool:
    """Whether a client listens to ``sentinel``'s announcements now."""
    return re.search(r"\bsub=[1-9]", sentinel.ask("CLIENT", "LIST")) is not None


def _following(sentinel: LocalSentinel, queue: RedisQueue) -> None:
    """Push once (which starts the process's watcher), then until it listens to every
    running sentinel: an announcement made before it subscribed is not heard."""
    queue.push("default", [b"first"])
    running = [node for node in sentinel.sentinels if node.running]
    wait_for(lambda: all(_subscribed(node) for node in running), 30, "never subscribed")


def _failover_followed(sentinel: LocalSentinel, queue: RedisQueue) -> None:
    """A manual failover; the push after it lands on the new master, none on the old.

    The old master takes writes for seconds after it (until the sentinels demote it),
    and the client never asks the sentinels on a timer: only the announcements, heard
    from the sentinels still running, can have moved it."""
    sentinel.wait_for_replicas()  # one failover after another: the last one is over
    old = sentinel.master()
    before = old.ask("LLEN", "queues:default")
    sentinel.failover()
    sentinel.wait_for_failover(old)
    new = sentinel.master()
    queue.push("default", [b"after"])
    lengths = {node.port: node.ask("LLEN", "queues:default") for node in sentinel.data_nodes}
    assert lengths[new.port] == before + 1, f"{before} before, now {lengths}, {new.port} new"


def test_a_manual_failover_is_followed_through_the_announcements(config: Config) -> None:
    with LocalSentinel() as sentinel:
        queue = RedisQueue(Config.resolve(redis_url=sentinel.url + FOLLOW_ONLY))
        _following(sentinel, queue)
        _failover_followed(sentinel, queue)


def test_the_chosen_replica_is_followed_once_it_answers_as_master(config: Config) -> None:
    """Every sentinel is frozen (SIGSTOP) as soon as the leader told the replica it chose
    to become master: none can announce it promoted or name it, and the client asks the
    sentinels on no timer. It can reach the new master only by asking that replica's
    role itself (``sentinel_watch.py``); without, its push goes to the old master."""
    with LocalSentinel() as sentinel:
        # A frozen sentinel answers nothing: the client's connect asks each, and gives
        # up on it after the socket timeout. Short, so that they are frozen well under
        # the 2 s after which a sentinel goes into TILT mode and stops acting for 30 s.
        url = sentinel.url + FOLLOW_ONLY
        queue = RedisQueue(Config.resolve(redis_url=url, socket_timeout=0.2))
        _following(sentinel, queue)
        sentinel.wait_for_replicas()
        old = sentinel.master()
        (chosen,) = [node for node in sentinel.data_nodes if node.port != old.port]
        before = chosen.ask("LLEN", "queues:default")
        pubsubs = [
            redis.Redis(port=node.port, socket_timeout=30).pubsub() for node in sentinel.sentinels
        ]
        for pubsub in pubsubs:
            pubsub.subscribe("+failover-state-wait-promotion")
        sentinel.failover()
        frozen: list[int] = []
        try:
            leader = wait_for(
                lambda: next(
                    (n for n, p in zip(sentinel.sentinels, pubsubs, strict=True) if _message(p)),
                    None,
                ),
                30,
                "the leader never sent the chosen replica SLAVEOF NO ONE",
            )

            def freeze(node: Node) -> None:
                assert node.pid is not None
                os.kill(node.pid, signal.SIGSTOP)
                frozen.append(node.pid)

            # The leader announces that state as it queues the command, and sends it on
            # its next turn: the others are frozen at once, the leader once the replica
            # answers as master (it names it to no one before its next INFO, 1 s later).
            # Frozen earlier, it could keep the command, and a push that went to the old
            # master would show on the replica too, still replicating it.
            for node in sentinel.sentinels:
                if node is not leader:
                    freeze(node)
            wait_for(
                lambda: _role(chosen) == "master",
                10,
                "the chosen replica never answered as master",
            )
            freeze(leader)
            queue.push("default", [b"early"])
            assert chosen.ask("LLEN", "queues:default") == before + 1
            # Not written to the old master: unless the leader, before it froze, had
            # made it a replica of the new one already (it then holds the push's copy).
            if old.ask("ROLE")[0] == "master":
                assert old.ask("LLEN", "queues:default") == before
        finally:
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
            for pubsub in pubsubs:
                pubsub.close()
        # A sentinel frozen past about 2 s on a loaded machine goes into TILT mode and
        # acts again only 30 s later, and its leader may then abort the failover (its
        # promotion timed out meanwhile): the set is waited for past that, to settle with
        # one master, either node.
        sentinel.wait_for_one_master(timeout=75)


def _role(node: Node) -> str | None:
    """``node``'s role, or None when its answer was cut: the promotion that the leader
    sends is one transaction with ``CLIENT KILL TYPE normal``, which may close the
    connection that asks."""
    try:
        return str(node.ask("ROLE")[0])
    except redis.ConnectionError:
        return None


def _message(pubsub: redis.client.PubSub) -> bool:
    """Whether a message other than the subscription's own came on ``pubsub``."""
    message = pubsub.get_message(timeout=0.01)
    return message is not None and message["type"] == "message"


def test_a_lost_sentinel_is_subscribed_again_and_the_others_drive_the_switch(
    config: Config,
) -> None:
    with LocalSentinel() as sentinel:
        queue = RedisQueue(Config.resolve(redis_url=sentinel.url + FOLLOW_ONLY))
        _following(sentinel, queue)
        sentinel.kill(sentinel.sentinels[0])
        _failover_followed(sentinel, queue)
        # Its connection lost (as to a sentinel restarted, without a port to race for):
        cut = sentinel.sentinels[1]
        cut.ask("CLIENT", "KILL", "TYPE", "pubsub")
        wait_for(lambda: _subscribed(cut), 30, "the sentinel lost was never subscribed again")
        sentinel.sentinels[2].ask("CLIENT", "KILL", "TYPE", "pubsub")
        wait_for(lambda: _subscribed(sentinel.sentinels[2]), 30, "never subscribed again")
        _failover_followed(sentinel, queue)


def test_no_dispatch_is_lost_across_three_manual_failovers_under_load(config: Config) -> None:
    with LocalSentinel(replicas=2, min_replicas_to_write=1) as sentinel:
        queue = RedisQueue(Config.resolve(redis_url=sentinel.url))
        _following(sentinel, queue)
        acknowledged: list[str] = []
        errors: list[Exception] = []
        stop = threading.Event()

        def produce() -> None:
            while not stop.is_set():
                payload = str(len(acknowledged))
                try:
                    queue.push("default", [payload.encode()])
                except Exception as exc:  # said below, with the count
                    errors.append(exc)
                    return
                acknowledged.append(payload)

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        try:
            for _ in range(3):
                old, more = sentinel.master(), len(acknowledged) + 100
                wait_for(lambda: len(acknowledged) > more, 30, "no dispatch went through")  # noqa: B023
                sentinel.failover()
                sentinel.wait_for_failover(old)
                # Until every replica (the old master too) is in sync and known again,
                # so the next failover has a replica to choose.
                sentinel.wait_for_replicas()
        finally:
            stop.set()
            producer.join(30)
        assert not producer.is_alive() and not errors, errors
        kept = set(sentinel.master().ask("LRANGE", "queues:default", 0, -1))
        lost = [payload for payload in acknowledged if payload not in kept]
        assert not lost, f"{len(lost)} of {len(acknowledged)} acknowledged dispatches lost"
