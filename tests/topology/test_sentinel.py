"""Redis Sentinel: what differs from one server, on a real local Sentinel set.

The core suite runs on Sentinel too (``tox -e sentinel``); these tests pin what only
Sentinel has: separate passwords, following the master the sentinels name through a
failover, and waiting for a replica after a dispatch. Each starts its own set (about
0.2 s), since it kills or fails over nodes.
"""

from __future__ import annotations

import apptasks
import pytest
from support import TASKS_DIR, Workers, cli, strings
from topologies import LocalSentinel

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
