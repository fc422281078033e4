"""Encrypted tasks beyond one dispatch (issue #33): a schedule's arguments, a chain's
later step and a batch's callback are stored sealed, and run with the key."""

from __future__ import annotations

import signal
from dataclasses import replace
from decimal import Decimal
from typing import Any

import apptasks
import chord_tasks as chords
import pytest
import redis
import workflow_tasks as flows
from support import cli, strings, wait_for

from rqueue import batch, chain
from rqueue.errors import InvalidSchedule
from rqueue.schedules.api import Schedules
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

KEY = "ebdSJ7c_zzVvOPcz2NzJXWW6bcLQc7wBV2b9NVfjy6w="
SECRET_ARG = "jane.doe@example.com"


def _everything(client: redis.Redis) -> bytes:
    """Every byte rqueue keeps in Redis: its keys' values, whatever their type."""
    found = []
    for key in client.scan_iter("*"):
        kind = client.type(key)
        if kind == b"string":
            found.append(client.get(key) or b"")
        elif kind == b"list":
            found.extend(client.lrange(key, 0, -1))
        elif kind == b"hash":
            found.extend(b"%s=%s" % item for item in client.hgetall(key).items())
        elif kind in (b"set", b"zset"):
            found.extend(client.zrange(key, 0, -1) if kind == b"zset" else client.smembers(key))
    return b"\n".join(found)


def test_an_encrypted_schedule_keeps_its_arguments_sealed_and_fires_only_with_the_key(
    config: Config, queue: RedisQueue, workers: Any
) -> None:
    keyed = RedisQueue(replace(config, encryption_keys=KEY))
    Schedules(keyed).add(
        "nightly", apptasks.record.using(encrypted=True), every=1, args=[SECRET_ARG]
    )
    assert SECRET_ARG.encode() not in _everything(queue.client)
    shown = cli(config, "schedule", "show", "nightly")
    assert "args: encrypted  kwargs: encrypted" in shown.stdout, shown.stderr
    opened = cli(config, "schedule", "show", "nightly", env={"RQUEUE_ENCRYPTION_KEYS": KEY})
    assert f"args: ['{SECRET_ARG}']" in opened.stdout
    # a worker without the key takes it off the timeline, saying why
    refusing = workers.start("--log-level", "WARNING")
    wait_for(lambda: Schedules(queue).get("nightly").next_ms is None, 20, "the shelved schedule")
    refusing.process.send_signal(signal.SIGTERM)
    assert refusing.wait(20) == 0
    assert "encrypted and this worker has no key" in refusing.output()
    assert strings(queue.client, apptasks.DONE) == []
    # resumed, a worker with the key fires it; its runs are sealed too
    Schedules(keyed).resume("nightly")
    workers.start("--log-level", "WARNING", env={"RQUEUE_ENCRYPTION_KEYS": KEY})
    wait_for(lambda: strings(queue.client, apptasks.DONE), 20, "a run of the schedule")
    assert strings(queue.client, apptasks.DONE)[0] == SECRET_ARG
    keyed.client.close()


def _chain_and_batch_travel_sealed(
    queue: RedisQueue, workers: Any, keyed: RedisQueue, secret: dict[str, Any]
) -> None:
    """A chain whose later step, and a batch whose callback, are dispatched through
    ``keyed`` (``secret``: those two's ``using()``): no secret argument in Redis, and
    a worker with the key runs them all."""
    secretly = flows.note.using(connection=keyed, **secret)
    plainly = flows.note.using(connection=keyed)
    chain(plainly.pending("first"), secretly.pending(f"{SECRET_ARG}-chain")).dispatch()
    callback = flows.batch_callback.using(connection=keyed, **secret)
    batch([plainly.pending("member")]).then(callback, f"{SECRET_ARG}-then").dispatch()
    assert SECRET_ARG.encode() not in _everything(queue.client)
    worker = workers.start("--stop-when-empty", env={"RQUEUE_ENCRYPTION_KEYS": KEY})
    assert worker.wait(30) == 0, worker.output()
    assert set(strings(queue.client, flows.DONE)) == {
        "note:first",
        f"note:{SECRET_ARG}-chain",
        "note:member",
        f"{SECRET_ARG}-then:1/0/1",
    }
    keyed.client.close()


def test_a_chain_s_encrypted_step_and_a_batch_s_encrypted_callback_travel_sealed(
    config: Config, queue: RedisQueue, workers: Any
) -> None:
    keyed = RedisQueue(replace(config, encryption_keys=KEY))
    _chain_and_batch_travel_sealed(queue, workers, keyed, {"encrypted": True})


def test_the_results_a_batch_keeps_of_encrypted_members_are_sealed_for_its_callback(
    config: Config, queue: RedisQueue, workers: Any
) -> None:
    keyed = RedisQueue(replace(config, encryption_keys=KEY))
    member = flows.note.using(connection=keyed, encrypted=True)  # returns its argument
    callback = chords.record.using(connection=keyed)
    members = [member.pending(f"{SECRET_ARG}-{index}") for index in range(3)]
    batch(members).then(callback, "then", results=True).dispatch()
    worker = workers.start("--stop-when-empty", env={"RQUEUE_ENCRYPTION_KEYS": KEY})
    assert worker.wait(30) == 0, worker.output()
    assert chords.got() == [("then", [f"{SECRET_ARG}-{index}" for index in range(3)])]
    chords.redis().delete(chords.GOT, flows.DONE)  # what the tasks wrote, in clear
    assert SECRET_ARG.encode() not in _everything(queue.client)  # the batch's results too
    keyed.client.close()


def test_encrypt_all_seals_a_chain_s_later_step_and_a_batch_s_callback_too(
    config: Config, queue: RedisQueue, workers: Any
) -> None:
    every = RedisQueue(replace(config, encryption_keys=KEY, encrypt_all=True))
    _chain_and_batch_travel_sealed(queue, workers, every, {})  # plain tasks, all sealed


def test_a_schedule_updated_to_a_plain_task_leaves_its_sealed_arguments_behind(
    config: Config, queue: RedisQueue
) -> None:
    keyed = RedisQueue(replace(config, encryption_keys=KEY))
    Schedules(keyed).add(
        "nightly", apptasks.record.using(encrypted=True), every=60, args=[SECRET_ARG]
    )
    Schedules(keyed).update("nightly", task=apptasks.record, args=["plain"])
    for reader in (keyed, queue):  # with the key, and without
        schedule = Schedules(reader).get("nightly")
        assert (schedule.args, schedule.encrypted, schedule.hidden) == (("plain",), False, False)
    keyed.client.close()


def test_an_encrypted_schedule_s_arguments_are_refused_as_a_plain_one_s_are(
    config: Config, queue: RedisQueue
) -> None:
    keyed = RedisQueue(replace(config, encryption_keys=KEY))
    for name, target in (
        ("plain", apptasks.record),
        ("sealed", apptasks.record.using(encrypted=True)),
    ):
        with pytest.raises(InvalidSchedule, match="msgpack's own types"):
            Schedules(keyed).add(name, target, every=60, args=[Decimal("1.5")])
    keyed.client.close()
