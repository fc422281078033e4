"""Issue 10, items 9 and 10: names that map onto keys, and the registry of queues.

No legal queue name may map onto another queue's keys, nor a prefix break the
cluster hash tag; names read back from Redis are not trusted. The registry
(``rqueue:queues``) and the restart marker survive FLUSHALL: workers and producers
re-register their queues, and only a new marker means "restart".
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import apptasks
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import Workers, cli, follow_log, logged, wait_for

from rqueue import task
from rqueue.errors import InvalidQueueName, RQueueError
from rqueue.settings.config import Config
from rqueue.store import base as store_base
from rqueue.store.keys import KEY_PARTS, QueueKeys, validate_queue_name
from rqueue.store.queue import RedisQueue
from rqueue.worker.options import WorkerOptions

FAST = ("--kill-grace", "0.5", "--block-for", "0.5")

COLLIDING = [
    "default:notify",  # was popped as a wake-up token: tasks lost silently
    "default:delayed",  # WRONGTYPE in the default worker's parent
    "default:reserved",
    "default:pending-ids",  # WRONGTYPE on every later dispatch to default
    "default:failed",  # hid the failed records of default
    "default:claims:0123abcd",  # a worker child's claims key
    "mail:high:timer",
    "a::cancelled",
]


def _all_keys(name: str, cluster: bool) -> set[str]:
    keys = QueueKeys.for_queue(name, "app:", cluster)
    plain = {getattr(keys, field) for field in keys.__dataclass_fields__ if field != "name"}
    levels = set(keys.levels) - {keys.ready}  # level 5's list is the ready list
    return plain | levels | {keys.claims("0123abcd"), keys.claims("x")}


@pytest.mark.parametrize("name", COLLIDING)
def test_a_name_that_maps_onto_another_queues_key_is_refused_with_the_rule(name: str) -> None:
    with pytest.raises(InvalidQueueName, match="reserved for the keys of queue") as refused:
        validate_queue_name(name)
    assert "a part after a ':' may not be any of" in str(refused.value)
    with pytest.raises(InvalidQueueName):
        task(queue=name)(lambda: None)
    with pytest.raises(InvalidQueueName):
        apptasks.record.using(queue=name)
    with pytest.raises(InvalidQueueName):
        WorkerOptions(queues=(name,))


def test_colliding_names_are_usage_errors_on_the_command_line(config: Config) -> None:
    for args in (("work", "default:notify"), ("size", "default:failed")):
        result = cli(config, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert "reserved for the keys of queue 'default'" in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("name", ["x\n", "default\n", "x\r", "\nx"])
def test_a_trailing_newline_is_not_a_legal_name(name: str) -> None:
    with pytest.raises(InvalidQueueName, match="invalid queue name"):
        validate_queue_name(name)


def test_names_without_a_reserved_part_keep_their_keys() -> None:
    """What existing deployments use stays valid and maps to the same keys as before."""
    for name in ("default", "emails", "mail:high", "a/b@c.d", "delayed", "x:delays"):
        assert validate_queue_name(name) == name
    assert QueueKeys.for_queue("mail:high").delayed == "queues:mail:high:delayed"


words = st.sampled_from([*sorted(KEY_PARTS), "a", "b", "default", "0123abcd", "x", ""])
names = st.lists(words, min_size=1, max_size=4).map(":".join)


@settings(max_examples=300, deadline=None)
@given(first=names, second=names, cluster=st.booleans())
def test_no_two_legal_names_share_a_key(first: str, second: str, cluster: bool) -> None:
    legal = []
    for name in (first, second):
        try:
            legal.append(validate_queue_name(name))
        except InvalidQueueName:
            continue
    if len(set(legal)) == 2:
        assert not _all_keys(legal[0], cluster) & _all_keys(legal[1], cluster)


def test_every_reserved_part_is_refused_after_every_legal_name() -> None:
    for base, part in itertools.product(("default", "a:b", "q"), sorted(KEY_PARTS)):
        with pytest.raises(InvalidQueueName):
            validate_queue_name(f"{base}:{part}")


@pytest.mark.parametrize("prefix", ["{app}:", "app{", "}"])
def test_braces_in_the_key_prefix_are_refused_naming_the_option(
    config: Config, prefix: str
) -> None:
    with pytest.raises(RQueueError, match=r"--prefix, RQUEUE_PREFIX"):
        RedisQueue(replace(config, prefix=prefix))
    result = cli(config, "size", "--prefix", prefix)
    assert result.returncode != 0
    assert "--prefix" in result.stderr and "braces" in result.stderr
    assert "Traceback" not in result.stderr


def test_names_in_the_registry_are_not_trusted(queue: RedisQueue, config: Config) -> None:
    apptasks.record.dispatch(1)
    queue.client.sadd("rqueue:queues", b"two words", b"\xff\xfe", b"default:failed", b"x{y}")
    assert queue.known_queues() == ["default"]
    result = cli(config, "size")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[5:7] == ["default", "1"]
    assert cli(config, "failed", "list").returncode == 0


# -- item 10: the registry and the restart marker survive FLUSHALL -------------------


def test_a_dispatch_costs_one_round_trip_and_registers_its_queue_once(
    queue: RedisQueue,
) -> None:
    # The push script loaded first (a fresh server answers its first EVALSHA with
    # NOSCRIPT, and the client sends it again), through another queue: the count below
    # still sees the default queue registered.
    apptasks.record.using(queue="warm-up").dispatch(0)
    queue.client.config_resetstat()
    for i in range(200):
        apptasks.record.dispatch(i)
    stats = queue.client.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] == 200  # one script call per dispatch ...
    # ... whose SADD of the task id counts here too, and the registry's once, on its own.
    assert stats["cmdstat_sadd"]["calls"] == 200 + 1
    assert "cmdstat_exists" not in stats and "cmdstat_smembers" not in stats


def test_a_long_lived_producer_registers_its_queue_again(
    queue: RedisQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    apptasks.record.dispatch(1)
    queue.client.flushall()  # the registry is gone; the producer process lives on
    apptasks.record.dispatch(2)
    assert queue.known_queues() == []  # within the refresh interval: not yet
    monkeypatch.setattr(store_base, "REGISTRY_REFRESH", 0.0)
    queue.client.config_resetstat()
    apptasks.record.dispatch(3)  # the interval is over: registered again, just before
    assert queue.known_queues() == ["default"]
    assert queue.client.info("commandstats")["cmdstat_evalsha"]["calls"] == 1


def test_a_worker_registers_its_queues_again_and_flushall_is_no_restart(
    queue: RedisQueue, workers: Workers, config: Config
) -> None:
    assert cli(config, "restart").returncode == 0  # a marker from an earlier restart
    worker = workers.start("default,emails", "-c", "1", *FAST)
    lines = follow_log(worker)
    worker.wait_for_children(1)
    apptasks.always_fails.using(tries=1).dispatch("x")  # a failed record on emails
    wait_for(lambda: queue.sizes(["emails"])[0].failed == 1, 10, "a failed record")
    queue.client.delete("rqueue:queues", "rqueue:restart")  # what FLUSHALL does to them
    wait_for(lambda: queue.known_queues() == ["default", "emails"], 10, "the registry rebuilt")
    # The tick that rebuilt it read the missing marker in the same round trip.
    result = cli(config, "failed", "list")
    assert "always_fails" in result.stdout, result.stdout
    assert not logged(lines, "restart requested")
    assert worker.process.poll() is None
    assert cli(config, "restart").returncode == 0  # a new marker is a request
    wait_for(lambda: logged(lines, "restart requested"), 10, "the reload")
