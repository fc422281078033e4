"""Issue 10, security: schedules and the report task under signing, signatures bound to
their queue, escaping of what came from Redis, credentials kept out of output and ps."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import apptasks
import msgpack
import pytest
from support import TASKS_DIR, Workers, cli, follow_log, logged, push_job, strings, title, wait_for

from rqueue import task
from rqueue.encoding.payload import encode
from rqueue.errors import InvalidTaskOption
from rqueue.failed import FailedTasks, make_record
from rqueue.schedules.api import Schedules
from rqueue.server import RedisServer
from rqueue.settings.config import Config, ConfigError
from rqueue.store.queue import RedisQueue
from rqueue.store.schedule_store import ScheduleStore
from rqueue.store.signing import InvalidSignature, sign_definition, verify_definition
from rqueue.text import printable, redact
from rqueue.worker.parent_failures import REPORT_TASK
from rqueue.worker.supervisor import without_redis_url

SECRET = "a-long-random-secret"
SIGNED = {"RQUEUE_SECRET": SECRET}
HOSTILE = "x\x1b]52;c;cHduZWQ=\x07\x1b[2J\nFORGED 2030-01-01 INFO [1] all good\r\u202e\x9b"
"""An OSC 52 clipboard write, a screen clear, a forged log line, a bidi override, C1 CSI."""


def _signing(config: Config) -> RedisQueue:
    return RedisQueue(replace(config, secret=SECRET))


def _no_control_characters(text: str) -> None:
    assert not any(c in text for c in "\x1b\x07\r\u202e\x9b"), repr(text)
    assert not any(line.startswith("FORGED") for line in text.splitlines()), text


# -- 1. schedules carry their own signature -------------------------------------------


def test_a_schedule_added_without_the_secret_is_refused_logged_and_never_fired(
    queue: RedisQueue, config: Config, workers: Workers
) -> None:
    added = cli(
        config,
        *("schedule", "add", "x", "apptasks:record", "--every", "1", "--args", "[4242]"),
        cwd=TASKS_DIR,
    )
    assert added.returncode == 0, added.stderr
    worker = workers.start("--log-level", "WARNING", env=SIGNED)
    lines = follow_log(worker)
    wait_for(lambda: logged(lines, "schedule x on queue default cannot fire"), 15, "refusal")
    assert logged(lines, "not signed")
    # Shelved: off the timeline, so it is neither fired nor refused again on every tick.
    assert queue.client.zcard("queues:default:schedules") == 0
    assert queue.client.llen("queues:default") == 0 and strings(queue.client, apptasks.DONE) == []
    listed = cli(config, "schedule", "list", env=SIGNED)
    assert "refused (not signed with RQUEUE_SECRET)" in listed.stdout, listed.stdout


def test_a_signed_schedule_fires_and_the_same_one_altered_in_redis_does_not(
    queue: RedisQueue, config: Config, workers: Workers
) -> None:
    signed = Schedules(_signing(config))
    signed.add("honest", apptasks.record, every=1, args=("honest",))
    signed.add("altered", apptasks.record, every=1, args=("original",))
    definitions = "queues:default:schedule-defs"
    fields = msgpack.unpackb(queue.client.hget(definitions, "altered"), raw=False)
    fields["args"] = ["HACKED"]  # its signature kept, its arguments changed
    queue.client.hset(definitions, "altered", msgpack.packb(fields, use_bin_type=True))
    worker = workers.start("--log-level", "WARNING", env=SIGNED)
    lines = follow_log(worker)
    wait_for(lambda: "honest" in strings(queue.client, apptasks.DONE), 15, "the signed one")
    wait_for(lambda: logged(lines, "schedule altered on queue default cannot fire"), 15)
    assert logged(lines, "signature does not match")
    assert not {"HACKED", "original"} & set(strings(queue.client, apptasks.DONE))


def test_a_definition_signature_is_bound_to_its_queue_and_name() -> None:
    signed = sign_definition(msgpack.packb({"task": "apptasks:record"}), SECRET, "default", "a")
    verify_definition(signed, SECRET, "default", "a")
    for queue, name, secret in (("high", "a", SECRET), ("default", "b", SECRET)):
        with pytest.raises(InvalidSignature, match="does not match"):
            verify_definition(signed, secret, queue, name)
    with pytest.raises(InvalidSignature, match="does not match"):
        verify_definition(signed, "another-secret", "default", "a")
    with pytest.raises(InvalidSignature, match="not signed"):
        verify_definition(msgpack.packb({"task": "x"}), SECRET, "default", "a")


def test_the_cli_with_the_secret_will_not_sign_an_unsigned_schedule_by_changing_it(
    queue: RedisQueue, config: Config
) -> None:
    Schedules(queue).add("planted", apptasks.record, every=60, args=("planted",))
    for command in (("run-now", "planted"), ("resume", "planted"), ("update", "planted")):
        extra = ("--every", "30") if command[0] == "update" else ()
        result = cli(config, "schedule", *command, *extra, env=SIGNED)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        assert "is not signed with this RQUEUE_SECRET" in result.stderr
    assert queue.client.llen("queues:default") == 0
    assert cli(config, "schedule", "remove", "planted", env=SIGNED).returncode == 0


def test_a_declared_schedule_left_unsigned_is_declared_again_signed_by_the_worker(
    queue: RedisQueue, workers: Workers
) -> None:
    declared = apptasks.declared_every_two_seconds
    Schedules(queue).add(declared.name, declared, every=3600, declared=True)  # no secret
    workers.start("declared", "-A", "apptasks", "--log-level", "WARNING", env=SIGNED)
    wait_for(lambda: queue.client.llen("test:declared") >= 1, 30, "the declared schedule's run")
    stored = ScheduleStore(_signing(queue.config)).get(declared.name)
    assert stored is not None and stored.trusted


# -- 2. the internal report task, and queue-bound signatures ----------------------------


def test_a_forged_failure_report_runs_no_hook_without_a_secret(
    queue: RedisQueue, workers: Workers
) -> None:
    victim = apptasks.dies_with_hook.make_job((), {})
    payload = encode(victim)
    record = make_record("default", payload, "WorkerLost", "forged", job=victim)
    push_job(queue, REPORT_TASK, payload, "WorkerLost", "forged")  # the old arguments
    push_job(queue, REPORT_TASK, record)  # a record that is not in the failed list
    code, output = workers.run("--stop-when-empty")
    assert code == 0, output
    assert queue.client.lrange(apptasks.HOOKS, 0, -1) == []
    assert "ignored the failure report" in output and "no such record" in output


def test_a_report_dispatched_with_the_secret_is_refused_as_internal(
    queue: RedisQueue, config: Config, workers: Workers
) -> None:
    from rqueue.worker.parent_failures import report

    victim = apptasks.dies_with_hook.make_job((), {})
    payload = encode(victim)
    record = make_record("default", payload, "WorkerLost", "forged", job=victim)
    queue.client.rpush("queues:default:failed", record)  # even a real-looking record
    signing = _signing(config)
    with pytest.raises(TypeError, match="parent_failures:report"):  # not even sent
        report.using(connection=signing).dispatch(payload, "WorkerLost", "forged")
    report.using(connection=signing).dispatch(record)
    code, output = workers.run("--stop-when-empty", env=SIGNED)
    assert code == 0, output
    assert queue.client.lrange(apptasks.HOOKS, 0, -1) == []
    failed = FailedTasks(queue).list(["default"])
    refused = [f for f in failed if f.exception == "InvalidSignature"]
    assert len(refused) == 1 and len(failed) == 2  # and the record planted above
    assert all("internal to rqueue" in f.message for f in refused)


@pytest.mark.parametrize("name", ["rqueue.parent_failures:report", "rqueue.mine:job"])
def test_a_user_task_may_not_take_a_name_in_rqueues_own_namespace(name: str) -> None:
    with pytest.raises(InvalidTaskOption, match="namespace"):

        @task(name=name)
        def impostor() -> None: ...


def test_a_genuine_report_still_runs_the_hook_with_a_secret(
    queue: RedisQueue, config: Config, workers: Workers
) -> None:
    apptasks.dies_with_hook.using(connection=_signing(config)).dispatch()
    workers.start("--log-level", "WARNING", env=SIGNED)
    wait_for(
        lambda: queue.client.lrange(apptasks.HOOKS, 0, -1) == [b"failed:WorkerLost:1"],
        20,
        "after_failed with WorkerLost",
    )


def test_a_signed_payload_moved_to_another_queue_is_refused(
    queue: RedisQueue, config: Config, workers: Workers
) -> None:
    signing = _signing(config)
    apptasks.record.using(connection=signing).dispatch("for default")
    moved = queue.client.lpop("queues:default")
    queue.push("high", [moved])  # this connection has no secret: the bytes go as they are
    apptasks.record.using(connection=signing, queue="high").dispatch("for high")
    code, output = workers.run("high", "--stop-when-empty", env=SIGNED)
    assert code == 0, output
    assert strings(queue.client, apptasks.DONE) == ["for high"]
    [refused] = FailedTasks(queue).list(["high"])
    assert refused.exception == "InvalidSignature" and "another queue" in refused.message


# -- 3. escaping what came from Redis or from task code ---------------------------------


def test_failed_list_and_show_escape_every_field(queue: RedisQueue, config: Config) -> None:
    job = apptasks.record.make_job((HOSTILE,), {"k": HOSTILE})
    job = replace(job, task=f"apptasks:{HOSTILE}", meta={"m": HOSTILE})
    record = msgpack.unpackb(make_record("default", encode(job), HOSTILE, HOSTILE, job=job))
    record.update(host=HOSTILE, traceback=f"Traceback:\n  line {HOSTILE}\n")
    queue.client.rpush("queues:default:failed", msgpack.packb(record, use_bin_type=True))
    queue.client.sadd("rqueue:queues", "default")
    listed = cli(config, "failed", "list")
    assert listed.returncode == 0, listed.stderr
    _no_control_characters(listed.stdout)
    assert len(listed.stdout.splitlines()) == 2  # the header and one row
    shown = cli(config, "failed", "show", job.id)
    assert shown.returncode == 0, shown.stderr
    _no_control_characters(shown.stdout)
    assert "\\x1b]52;c;cHduZWQ=\\x07" in shown.stdout  # visible, as an escape
    assert "\n  Traceback:\n    line x" in shown.stdout  # its own lines, indented


def test_schedule_list_and_show_escape_what_the_definition_holds(
    queue: RedisQueue, config: Config
) -> None:
    Schedules(queue).add("hostile", apptasks.record, every=60, args=(HOSTILE,))
    for args in (("list",), ("show", "hostile")):
        result = cli(config, "schedule", *args)
        assert result.returncode == 0, result.stderr
        _no_control_characters(result.stdout)


def test_text_logs_escape_a_task_name_from_redis(queue: RedisQueue, workers: Workers) -> None:
    push_job(queue, f"apptasks:{HOSTILE}")
    code, output = workers.run("--stop-when-empty")
    assert code == 0
    _no_control_characters(output)
    assert "FORGED 2030" in output  # still there to read, on the refusal's own line


def test_printable_escapes_controls_and_keeps_text() -> None:
    assert printable("plain ünïcode ✓ text") == "plain ünïcode ✓ text"
    assert printable("a\x1b[31mb\nc\rd\x9b\u2028") == "a\\x1b[31mb\\nc\\rd\\x9b\\u2028"
    assert printable("one\ntwo\x1b", multiline=True) == "  one\n  two\\x1b"


# -- 4. credentials in output and in ps -------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
        ("rediss://user:p@ss@host/0", "rediss://user:***@host/0"),
        ("redis://barepassword@host", "redis://***@host"),
        ("redis://host/0?password=pw&db=1", "redis://host/0?password=***&db=1"),
        ("unix:///run/redis.sock?db=0&password=pw", "unix:///run/redis.sock?db=0&password=***"),
        ("unix://:pw@/run/redis.sock", "unix://:***@/run/redis.sock"),
        ("error at redis://u:pw@h/0: refused", "error at redis://u:***@h/0: refused"),
        ("redis://localhost:6379/0 mail@example.com", "redis://localhost:6379/0 mail@example.com"),
    ],
)
def test_every_form_of_credential_is_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected
    try:
        target = Config(redis_url=text).target
    except ConfigError as exc:  # not a Redis URL at all: refused, the refusal redacted too
        assert redact(str(exc)) == str(exc)
    else:
        assert Config(redis_url=text).redacted_url() == expected, target


def test_a_password_query_is_masked_in_connection_errors(config: Config) -> None:
    for url in (
        f"{config.redis_url}?username=nobody&password=hunter2",  # AUTH fails
        "unix:///nonexistent/redis.sock?password=hunter2",
    ):
        result = cli(config, "size", env={"REDIS_URL": url})
        assert result.returncode == 1, result.stderr
        assert "hunter2" not in result.stderr and "password=***" in result.stderr
    assert "hunter2" not in repr(Config(redis_url="redis://:hunter2@h/0"))


def test_the_command_line_is_scrubbed_before_the_worker_connects(
    workers: Workers, tmp_path: Path
) -> None:
    """``-A hold`` stops the parent before it sets its own title: ps must not show the
    password even then."""
    (tmp_path / "hold.py").write_text(
        "import os, time\n"
        f"open({str(tmp_path / 'ready')!r}, 'w').close()\n"
        "deadline = time.monotonic() + 20\n"
        f"while not os.path.exists({str(tmp_path / 'go')!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.01)\n"
    )
    with RedisServer(password="hunter2") as server:
        url = f"redis://:hunter2@127.0.0.1:{server.port}/0"
        env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
        worker = workers.start("--redis-url", url, "-A", "hold", "--stop-when-empty", env=env)
        wait_for(lambda: (tmp_path / "ready").exists(), 20, "the held start")
        shown = title(worker.pid)
        (tmp_path / "go").touch()
        assert worker.wait(30) == 0, worker.output()
    assert "hunter2" not in shown and "redis://:***@127.0.0.1" in shown, shown


def test_the_url_can_come_from_a_file(config: Config, tmp_path: Path) -> None:
    url_file = tmp_path / "redis-url"
    url_file.write_text(config.redis_url + "\n")
    nowhere = {"REDIS_URL": "redis://127.0.0.1:1/0"}
    result = cli(config, "size", "--redis-url-file", str(url_file), env=nowhere)
    assert result.returncode == 0, result.stderr
    from_env = cli(config, "size", env={"REDIS_URL": "", "REDIS_URL_FILE": str(url_file)})
    assert from_env.returncode == 0, from_env.stderr
    missing = cli(config, "size", "--redis-url-file", str(tmp_path / "none"))
    assert missing.returncode == 2 and "--redis-url-file: cannot read" in missing.stderr


# -- 19. a bad URL is reported where it came from ---------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        ((), {"REDIS_URL": "foo://:hunter2@x"}, "invalid REDIS_URL (from the environment)"),
        (("--redis-url", "foo://:hunter2@x"), {}, "invalid --redis-url:"),
    ],
)
def test_a_bad_redis_url_names_where_it_came_from(
    config: Config, args: tuple[str, ...], env: dict[str, Any], named: str
) -> None:
    result = cli(config, "size", *args, env=env)
    assert result.returncode == 2
    assert named in result.stderr and "hunter2" not in result.stderr, result.stderr
    if not args:
        assert "--redis-url" not in result.stderr


def test_a_reload_passes_the_redis_url_in_its_environment_not_its_command_line() -> None:
    args = ["work", "--redis-url", "redis://:pw@h/0", "-c", "2", "--redis-url=redis://:x@h", "q"]
    assert without_redis_url(args) == ["work", "-c", "2", "q"]
