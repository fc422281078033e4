"""Encrypted tasks (issue #33): arguments and kept results sealed with AES-GCM in Redis,
opened by the processes that hold a key, shown as "encrypted" by those that do not."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import apptasks
import httpx
import pytest
from browser import served_dashboard
from support import cli, strings

from rqueue.encoding.payload import Job, decode, encode, new_id
from rqueue.encoding.sealing import Keyring, NotDecrypted, key_id, parse_keys
from rqueue.failed import FailedTasks
from rqueue.settings.config import Config, ConfigError
from rqueue.store.queue import RedisQueue

OLD, NEW = (
    "_IYSnjMGT14jqiot6nBG7_VO6gAGEK_2EHW0_1vxIcw=",
    "Qgov8rENOIgrSqL70X3tzLnBhhKCg3mwPwoRy-ZV5fI=",
)
"""Fixed keys: pytest-xdist collects the parametrised ids of every worker alike."""
SECRET_ARG = "jane.doe@example.com"


def _connection(config: Config, keys: str, **changes: Any) -> RedisQueue:
    return RedisQueue(replace(config, encryption_keys=keys, **changes))


def _ready(queue: RedisQueue, name: str = "default") -> list[bytes]:
    return queue.client.lrange(f"queues:{name}", 0, -1)  # type: ignore[return-value]


def _sealed_with(payload: bytes, key: str) -> bool:
    """Whether ``payload``'s sealed arguments name ``key`` as the one that sealed them."""
    return key_id(parse_keys(key)[0]) in payload


# -- the payload, as bytes -----------------------------------------------------------


def test_an_encrypted_call_s_arguments_are_not_in_its_payload_and_decode_with_the_key() -> None:
    keyring = Keyring(parse_keys(NEW))
    job = Job(new_id(), "apptasks:record", (SECRET_ARG,), {"note": "private"}, "default")
    job.encrypted, job.meta = True, {"priority": 2, "group": "tenant-1"}
    payload = encode(job, None, keyring)
    assert SECRET_ARG.encode() not in payload and b"private" not in payload
    assert b"tenant-1" in payload  # what lua/levels.lua reads stays readable
    opened = decode(payload, None, keyring)
    assert (opened.args, opened.kwargs, opened.meta) == (job.args, job.kwargs, job.meta)
    assert not opened.sealed
    shown = decode(payload)  # no key: sealed, its arguments empty
    assert shown.sealed and shown.encrypted and (shown.args, shown.kwargs) == ((), {})


def test_sealed_arguments_are_bound_to_their_task_id_and_queue() -> None:
    keyring = Keyring(parse_keys(NEW))
    job = replace(Job(new_id(), "apptasks:record", (SECRET_ARG,), {}, "default"), encrypted=True)
    payload = encode(job, None, keyring)
    moved = encode(replace(job, id=new_id()), None, keyring)
    # the sealed element of one call, spliced into another's payload
    spliced = moved[:29] + payload[29:]
    with pytest.raises(NotDecrypted, match="do not authenticate"):
        decode(spliced, None, keyring)
    other_queue = encode(replace(job, queue="other"), None, keyring)
    renamed = payload.replace(b"\xa7default", b"\xa5other")
    assert len(other_queue) != len(renamed) or renamed != other_queue
    with pytest.raises(NotDecrypted, match="do not authenticate"):
        decode(renamed, None, keyring)


def test_a_process_without_keys_refuses_to_dispatch_an_encrypted_task(queue: RedisQueue) -> None:
    with pytest.raises(Exception, match="RQUEUE_ENCRYPTION_KEYS"):
        apptasks.record.using(encrypted=True).dispatch(SECRET_ARG)
    assert _ready(queue) == []


# -- settings --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "keys",
    [
        "short",
        "YD3En0mzCHi4ogGgezXPdkNrxnMDZBSyGzTxPlAn7ok="[:-4],
        "YD3En0mzCHi4ogGgezXPdkNrxnMDZBSyGzTxPlAn7ok=,",
        "A" * 44,
        f"{OLD},not-a-key",
    ],
)
def test_a_key_that_is_not_32_bytes_of_base64_is_a_usage_error_naming_the_setting(
    config: Config, keys: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="RQUEUE_ENCRYPTION_KEYS"):
        Config(encryption_keys=keys)
    monkeypatch.setenv("RQUEUE_ENCRYPTION_KEYS", keys)
    with pytest.raises(ConfigError, match="RQUEUE_ENCRYPTION_KEYS"):
        Config.resolve()
    result = cli(config, "size", env={"RQUEUE_ENCRYPTION_KEYS": keys})
    assert result.returncode == 2, result.stderr
    assert "RQUEUE_ENCRYPTION_KEYS" in result.stderr
    # a key is a secret: never echoed, even a wrong one
    assert not any(len(key) > 8 and key in result.stderr for key in keys.split(","))


def test_encrypt_all_without_keys_and_a_bad_flag_are_usage_errors(config: Config) -> None:
    for env, named in (
        ({"RQUEUE_ENCRYPT_ALL": "1"}, "RQUEUE_ENCRYPTION_KEYS"),
        ({"RQUEUE_ENCRYPT_ALL": "maybe", "RQUEUE_ENCRYPTION_KEYS": NEW}, "RQUEUE_ENCRYPT_ALL"),
    ):
        result = cli(config, "size", env=env)
        assert result.returncode == 2 and named in result.stderr, (env, result.stderr)


def test_key_generate_prints_a_new_valid_key_each_time(config: Config) -> None:
    first, second = (cli(config, "key", "generate").stdout.strip() for _ in range(2))
    assert first != second
    assert [len(key) for key in parse_keys(f"{first},{second}")] == [32, 32]


# -- end to end, with real workers -----------------------------------------------------


def test_an_encrypted_task_runs_and_its_kept_result_is_read_back_with_the_key(
    config: Config, queue: RedisQueue, workers: Any
) -> None:
    keyed = _connection(config, NEW)
    handle = apptasks.record.using(connection=keyed, encrypted=True, keep_result=60).dispatch(
        SECRET_ARG
    )
    [payload] = _ready(queue)
    assert SECRET_ARG.encode() not in payload
    worker = workers.start("--stop-when-empty", env={"RQUEUE_ENCRYPTION_KEYS": NEW})
    assert worker.wait(30) == 0, worker.output()
    assert strings(queue.client, apptasks.DONE) == [SECRET_ARG]
    stored = queue.client.get(f"queues:default:result:{handle.id}")
    assert stored is not None and SECRET_ARG.encode() not in stored
    assert handle.result(timeout=5) == SECRET_ARG
    shown = cli(config, "status", handle.id)  # no key: the result says "encrypted"
    assert "result:    encrypted" in shown.stdout and SECRET_ARG not in shown.stdout
    with_key = cli(config, "status", handle.id, env={"RQUEUE_ENCRYPTION_KEYS": NEW})
    assert SECRET_ARG in with_key.stdout
    keyed.client.close()


def test_signing_and_encryption_compose(config: Config, queue: RedisQueue, workers: Any) -> None:
    secret = "a-long-random-secret"
    both = _connection(config, NEW, secret=secret)
    apptasks.record.using(connection=both, encrypted=True).dispatch(SECRET_ARG)
    [payload] = _ready(queue)
    # encrypted, then signed: the signature covers the sealed bytes
    tampered = bytearray(payload)
    tampered[-40] ^= 1
    queue.client.lset("queues:default", 0, bytes(tampered))
    apptasks.record.using(connection=both, encrypted=True).dispatch("second")
    env = {"RQUEUE_ENCRYPTION_KEYS": NEW, "RQUEUE_SECRET": secret}
    assert workers.start("--stop-when-empty", env=env).wait(30) == 0
    assert strings(queue.client, apptasks.DONE) == ["second"]
    [failed] = FailedTasks(queue).list(["default"])
    assert failed.exception == "InvalidSignature"
    both.client.close()


def test_key_rotation_the_first_key_encrypts_and_every_key_decrypts(
    config: Config, queue: RedisQueue, workers: Any
) -> None:
    before = _connection(config, OLD)
    apptasks.record.using(connection=before, encrypted=True).dispatch("sealed with old")
    rotated = _connection(config, f"{NEW},{OLD}")
    apptasks.record.using(connection=rotated, encrypted=True).dispatch("sealed with new")
    first, second = _ready(queue)
    assert _sealed_with(first, OLD) and _sealed_with(second, NEW)
    worker = workers.start("--stop-when-empty", env={"RQUEUE_ENCRYPTION_KEYS": f"{NEW},{OLD}"})
    assert worker.wait(30) == 0, worker.output()
    assert strings(queue.client, apptasks.DONE) == ["sealed with old", "sealed with new"]
    assert FailedTasks(queue).list(["default"]) == []
    before.client.close()
    rotated.client.close()


def test_a_worker_without_the_key_fails_the_encrypted_task_alone_and_goes_on(
    config: Config, queue: RedisQueue, workers: Any
) -> None:
    keyed = _connection(config, NEW)
    encrypted = apptasks.record.using(connection=keyed, encrypted=True).dispatch(SECRET_ARG)
    apptasks.record.dispatch("plain")
    other_key = apptasks.record.using(connection=_connection(config, OLD), encrypted=True)
    unknown = other_key.dispatch("another key's")
    assert workers.start("--stop-when-empty").wait(30) == 0  # no keys at all
    assert strings(queue.client, apptasks.DONE) == ["plain"]
    by_id = {f.id: f for f in FailedTasks(queue).list(["default"])}
    assert by_id[encrypted.id].exception == "NotDecrypted"
    assert "has no key to decrypt its arguments" in by_id[encrypted.id].message
    assert "RQUEUE_ENCRYPTION_KEYS" in by_id[encrypted.id].message
    # a worker with a key, but not the one that sealed it, says so
    assert cli(config, "failed", "retry", "--all").returncode == 0
    assert workers.start("--stop-when-empty", env={"RQUEUE_ENCRYPTION_KEYS": NEW}).wait(30) == 0
    assert strings(queue.client, apptasks.DONE) == ["plain", SECRET_ARG]
    [left] = FailedTasks(queue).list(["default"])
    assert left.id == unknown.id and "a key this process does not have" in left.message
    keyed.client.close()


def test_a_flipped_byte_in_sealed_arguments_fails_authentication_as_a_poison_task(
    config: Config, queue: RedisQueue, workers: Any
) -> None:
    keyed = _connection(config, NEW)
    apptasks.record.using(connection=keyed, encrypted=True).dispatch(SECRET_ARG)
    apptasks.record.dispatch("after it")
    [payload, _] = _ready(queue)
    tampered = bytearray(payload)
    tampered[payload.index(key_id(parse_keys(NEW)[0])) + 20] ^= 0x01  # in the ciphertext
    queue.client.lset("queues:default", 0, bytes(tampered))
    env = {"RQUEUE_ENCRYPTION_KEYS": NEW}
    assert workers.start("--stop-when-empty", env=env).wait(30) == 0
    assert strings(queue.client, apptasks.DONE) == ["after it"]
    [failed] = FailedTasks(queue).list(["default"])
    assert failed.exception == "NotDecrypted" and "do not authenticate" in failed.message
    assert failed.attempts <= 1  # refused before it ran: not retried
    keyed.client.close()


def test_failed_show_and_the_dashboard_say_encrypted_without_the_key(
    config: Config, queue: RedisQueue, workers: Any
) -> None:
    keyed = _connection(config, NEW)
    failing = apptasks.fails_until.using(connection=keyed, encrypted=True, tries=1)
    handle = failing.dispatch(SECRET_ARG, 5)  # its error does not name its argument
    env = {"RQUEUE_ENCRYPTION_KEYS": NEW}
    assert workers.start("--stop-when-empty", env=env).wait(30) == 0
    [record] = FailedTasks(queue).list(["default"])
    assert SECRET_ARG.encode() not in record.payload
    shown = cli(config, "failed", "show", handle.id)
    assert "args:      encrypted" in shown.stdout
    assert SECRET_ARG not in shown.stdout
    opened = cli(config, "failed", "show", handle.id, env=env)
    assert f"args:      ['{SECRET_ARG}', 5]" in opened.stdout
    apptasks.record.using(connection=keyed, encrypted=True).dispatch(SECRET_ARG)
    for connection, readable in ((queue, False), (keyed, True)):
        with served_dashboard(connection) as served, httpx.Client(base_url=served.url) as web:
            for page in (f"/failed/{handle.id}", "/queue/ready/default"):
                html = web.get(page).text
                assert ('class="args">encrypted<' not in html) is readable, page
                assert (SECRET_ARG in html) is readable, page
    keyed.client.close()


def test_encrypt_all_encrypts_plain_tasks_and_their_results(
    config: Config, queue: RedisQueue, workers: Any
) -> None:
    every = _connection(config, NEW, encrypt_all=True)
    handle = apptasks.record.using(connection=every, keep_result=60).dispatch(SECRET_ARG)
    apptasks.record.using(connection=every).dispatch_many(
        [(f"{SECRET_ARG}-{i}",) for i in range(3)]
    )
    assert not any(SECRET_ARG.encode() in payload for payload in _ready(queue))
    assert workers.start("--stop-when-empty", env={"RQUEUE_ENCRYPTION_KEYS": NEW}).wait(30) == 0
    assert len(strings(queue.client, apptasks.DONE)) == 4
    stored = queue.client.get(f"queues:default:result:{handle.id}")
    assert stored is not None and SECRET_ARG.encode() not in stored
    assert handle.result(timeout=5) == SECRET_ARG
    every.client.close()


def test_rqueue_testing_runs_encrypted_tasks_and_their_chains_without_keys(
    queue: RedisQueue,
) -> None:
    from rqueue import chain, testing

    secretly = apptasks.record.using(encrypted=True)
    with testing.fake() as fake:
        secretly.dispatch(SECRET_ARG)
        chain(apptasks.record.pending("first"), secretly.pending("second")).dispatch()
        fake.assert_dispatched(apptasks.record)
        fake.run_all()
    assert strings(queue.client, apptasks.DONE) == [SECRET_ARG, "first", "second"]
    assert _ready(queue) == []  # nothing reached Redis, so nothing needed a key


@pytest.mark.parametrize("size", [0, 255, 256, 65535, 65536])
def test_a_sealed_value_is_packed_as_msgpack_packs_its_ext_type(size: int) -> None:
    import msgpack

    from rqueue.encoding.sealing import Sealed, pack_sealed

    blob = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert pack_sealed(blob) == msgpack.packb(Sealed(blob))
