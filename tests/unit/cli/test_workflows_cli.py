"""The workflow commands, run for real: ``rqueue status`` and ``rqueue batches ...``."""

from __future__ import annotations

import re
import subprocess

import msgpack
import pytest
import workflow_tasks as flows
from support import Workers, cli, wait_for

from rqueue import batch
from rqueue.settings.config import Config
from rqueue.store.batch_store import BatchStore
from rqueue.store.queue import RedisQueue
from rqueue.workflows.prune import Pruned, prune_batches

pytestmark = pytest.mark.topology  # every test here runs on Cluster and Sentinel as well

HOSTILE = "x\x1b]52;c;cHduZWQ=\x07\x1b[2J\nFORGED line\r\u202e\x9b"
"""An OSC 52 clipboard write, a screen clear, a forged line, a bidi override, C1 CSI."""
ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def clean(result: subprocess.CompletedProcess[str]) -> str:
    """Everything the command printed, checked free of what a terminal would act on."""
    text = result.stdout + result.stderr
    assert not any(c in text for c in "\x1b\x07\r\u202e\x9b"), repr(text)
    assert not any(line.startswith("FORGED") for line in text.splitlines()), text
    assert "Traceback (most recent call last)" not in result.stderr, result.stderr
    return text


def fields(output: str) -> dict[str, str]:
    """``label: value`` lines as a dict (the lines that are not, such as a traceback,
    are left out)."""
    found = {}
    for line in output.splitlines():
        label, colon, value = line.partition(":")
        if colon and not line.startswith(" "):
            found[label] = value.strip()
    return found


def redis_ms(queue: RedisQueue) -> int:
    seconds, micros = queue.client.time()
    return int(seconds * 1000 + micros // 1000)


def next_millisecond(queue: RedisQueue) -> None:
    """Wait for Redis's clock to tick, so the next batch is created strictly later."""
    start = redis_ms(queue)
    wait_for(lambda: redis_ms(queue) > start, 5, "Redis's clock to tick")


# -- rqueue status ------------------------------------------------------------------------


def test_status_shows_pending_then_the_result_or_error_and_finds_the_queue(
    queue: RedisQueue, config: Config, workers: Workers
) -> None:
    added = flows.add.dispatch(2, 3)
    elsewhere = flows.add.using(queue="other").dispatch(1, 1)
    exploded = flows.explode.dispatch("boom")
    pending = cli(config, "status", added.id)
    assert pending.returncode == 0, pending.stderr
    shown = fields(pending.stdout)
    assert (shown["id"], shown["queue"], shown["status"]) == (added.id, "default", "pending")
    assert re.fullmatch(ISO, shown["due"])

    code, output = workers.run("default,other", "--stop-when-empty")
    assert code == 0, output
    succeeded = cli(config, "status", added.id)
    assert succeeded.returncode == 0, succeeded.stderr
    shown = fields(succeeded.stdout)
    assert shown["status"] == "succeeded" and shown["result"] == "5"
    assert (shown["task"], shown["attempts"]) == ("workflow_tasks:add", "1")
    assert re.fullmatch(ISO, shown["started"])
    assert re.fullmatch(rf"{ISO} \(took \d+\.\d{{3}} s\)", shown["finished"])

    for extra in ((), ("--queue", "other")):  # found by searching, or where it was told
        found = cli(config, "status", elsewhere.id, *extra)
        assert found.returncode == 0, found.stderr
        assert fields(found.stdout)["queue"] == "other"
        assert fields(found.stdout)["result"] == "2"
    wrong_queue = cli(config, "status", elsewhere.id, "--queue", "default")
    assert wrong_queue.returncode == 1
    assert f"no status for task {elsewhere.id} on queue default" in wrong_queue.stderr

    failed = cli(config, "status", exploded.id)
    assert failed.returncode == 0, failed.stderr
    shown = fields(failed.stdout)
    assert shown["status"] == "failed" and shown["error"] == "ValueError: boom"
    assert "result" not in shown
    assert "\n  Traceback (most recent call last):\n" in failed.stdout  # indented, its own
    assert "raise ValueError(message)" in failed.stdout


def test_status_of_a_delayed_task_an_unknown_one_and_a_bad_queue(
    queue: RedisQueue, config: Config
) -> None:
    later = flows.add.later(3600, 1, 1)
    delayed = cli(config, "status", later.id, "--queue", "default")
    assert delayed.returncode == 0, delayed.stderr
    shown = fields(delayed.stdout)
    assert shown["status"] == "delayed" and re.fullmatch(ISO, shown["due"])
    assert "started" not in shown and "result" not in shown

    unknown = cli(config, "status", "0" * 32)
    assert unknown.returncode == 1 and unknown.stdout == ""
    assert f"no status for task {'0' * 32}: it is not waiting or running" in unknown.stderr

    hostile = cli(config, "status", HOSTILE)
    assert hostile.returncode == 1
    assert "\\x1b]52;c;cHduZWQ=\\x07" in clean(hostile)  # visible, as an escape

    bad_queue = cli(config, "status", later.id, "--queue", "no spaces")
    assert bad_queue.returncode == 2
    assert "Invalid value for '--queue'" in bad_queue.stderr


def test_status_escapes_a_hostile_record_and_refuses_garbage_without_a_traceback(
    queue: RedisQueue, config: Config
) -> None:
    keys = queue.keys("default")

    def stored(task_id: str, record: object) -> subprocess.CompletedProcess[str]:
        raw = record if isinstance(record, bytes) else msgpack.packb(record)
        queue.client.set(keys.result(task_id), raw)
        return cli(config, "status", task_id, "--queue", "default")

    failure = {
        "state": "failed",
        "task": HOSTILE,
        "attempts": 1,
        "started_at": 1e20,  # no date holds it
        "finished_at": 1e20,
        "exception": HOSTILE,
        "message": HOSTILE,
        "traceback": f"Traceback:\n  line {HOSTILE}\n",
    }
    failed = stored("a" * 32, failure)
    assert failed.returncode == 0, failed.stderr
    output = clean(failed)
    assert "\\x1b]52;c;cHduZWQ=\\x07" in output
    assert fields(output)["started"] == "1e+20 (out of range)"
    assert "\n  Traceback:\n    line x" in output  # the traceback's lines, indented

    success = {"state": "succeeded", "result": [HOSTILE, b"\x1b[2J"], "finished_at": -1e300}
    succeeded = stored("b" * 32, success)
    assert succeeded.returncode == 0, succeeded.stderr
    assert "\\x1b[2J" in fields(clean(succeeded))["result"]

    deep: list[object] = []
    for _ in range(1000):  # msgpack decodes it; repr() alone would recurse too deep
        deep = [deep]
    nested = stored("c" * 32, {"state": "succeeded", "result": deep})
    assert nested.returncode == 0, nested.stderr
    assert fields(clean(nested))["result"] == "(a list nested too deeply to show)"

    garbage = stored("d" * 32, b"\xc1" + HOSTILE.encode())
    assert garbage.returncode == 1
    assert f"the result record of task {'d' * 32} is not valid msgpack" in clean(garbage)


# -- rqueue batches -----------------------------------------------------------------------


def test_batches_list_show_cancel_and_retry(
    queue: RedisQueue, config: Config, workers: Workers
) -> None:
    mixed = (
        batch([flows.member_fails.pending(0), flows.member.pending(1)])
        .allow_failures()
        .name("mixed")
        .dispatch()
    )
    next_millisecond(queue)
    waiting = batch([flows.member.using(queue="idle").pending(i) for i in range(3)]).dispatch()
    code, output = workers.run("--stop-when-empty")
    assert code == 0, output

    listed = cli(config, "batches", "list")
    assert listed.returncode == 0, listed.stderr
    header, newest, oldest = listed.stdout.splitlines()
    columns = ["id", "name", "total", "pending", "failed", "progress", "state", "created"]
    assert header.split() == columns
    assert newest.split()[:7] == [waiting.id, "-", "3", "3", "0", "0.0%", "in"]
    assert oldest.split()[:7] == [mixed.id, "mixed", "2", "0", "1", "100.0%", "finished"]
    assert re.fullmatch(ISO, oldest.split()[-1])

    shown = cli(config, "batches", "show", mixed.id)
    assert shown.returncode == 0, shown.stderr
    failed_member = mixed.member_id(0)
    described = fields(shown.stdout)
    assert (described["name"], described["state"], described["queues"]) == (
        "mixed",
        "finished",
        "default",
    )
    assert [described[k] for k in ("total", "pending", "processed", "succeeded")] == [
        "2",
        "0",
        "2",
        "1",
    ]
    assert [described[k] for k in ("failed", "skipped", "progress", "failed ids")] == [
        "1",
        "0",
        "100.0%",
        "1",
    ]
    assert re.fullmatch(ISO, described["created"]) and re.fullmatch(ISO, described["finished"])
    assert described["cancelled"] == "-"
    assert shown.stdout.endswith(f"\n  {failed_member}\n")

    retried = cli(config, "batches", "retry", mixed.id)
    assert retried.returncode == 0, retried.stderr
    assert f"Retried 1 failed member(s) of batch {mixed.id}." in retried.stdout
    code, output = workers.run("--stop-when-empty")
    assert code == 0, output
    assert int(queue.client.get("test:member-runs")) == 3  # the failed member ran again

    cancelled = cli(config, "batches", "cancel", waiting.id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"Cancelled batch {waiting.id}" in cancelled.stdout
    again = cli(config, "batches", "cancel", waiting.id)
    assert again.returncode == 0 and "was cancelled already" in again.stdout
    status = waiting.status()
    assert status is not None and status.cancelled and not status.finished
    skipped = cli(config, "batches", "retry", waiting.id)
    assert skipped.returncode == 0, skipped.stderr
    assert skipped.stdout.splitlines() == [
        f"Retried 0 failed member(s) of batch {waiting.id}.",
        "The batch is cancelled: workers skip its members instead of running them.",
    ]


def test_batches_refuse_a_bad_id_and_report_a_missing_batch(
    queue: RedisQueue, config: Config
) -> None:
    hostile = cli(config, "batches", "show", HOSTILE)  # every command checks it alike
    assert hostile.returncode == 2
    assert "Invalid value for 'BATCH_ID'" in clean(hostile)
    assert "a batch id is 32 lowercase hex digits" in hostile.stderr
    for command in ("show", "cancel", "retry"):
        missing = cli(config, "batches", command, "f" * 32)
        assert missing.returncode == 1
        assert f"no batch {'f' * 32} (expired, pruned, or never dispatched)" in missing.stderr
    assert "(none)" in cli(config, "batches", "list").stdout


def test_batches_list_and_show_escape_what_came_from_redis(
    queue: RedisQueue, config: Config
) -> None:
    named = batch([flows.member.pending(0)]).name(HOSTILE).dispatch()
    store = BatchStore(queue)
    malformed = "0" * 32
    queue.client.hset(store.keys(malformed).state, mapping={"total": HOSTILE})
    queue.client.zadd(queue.global_keys.batches, {HOSTILE: 1, malformed: 2})

    listed = cli(config, "batches", "list")
    assert listed.returncode == 0, listed.stderr
    output = clean(listed)
    assert len(output.splitlines()) == 4  # the header and one row each
    assert sum(line.split()[-2:] == ["unreadable", "-"] for line in output.splitlines()) == 2
    assert "\\x1b]52;c;cHduZWQ=\\x07" in output
    shown = cli(config, "batches", "show", named.id)
    assert shown.returncode == 0, shown.stderr
    assert fields(clean(shown))["name"].startswith("x\\x1b]52;c;cHduZWQ=\\x07")
    broken = cli(config, "batches", "show", malformed)
    assert broken.returncode == 1
    assert f"the state of batch {malformed} is malformed" in clean(broken)


def test_prune_deletes_batches_finished_long_enough_ago_and_drops_gone_entries(
    queue: RedisQueue, config: Config, workers: Workers
) -> None:
    store = BatchStore(queue)
    old = batch([flows.member.pending(0)]).dispatch()
    recent = batch([flows.member.pending(1)]).dispatch()
    running = batch([flows.member.using(queue="idle").pending(2)]).dispatch()
    expired = batch([flows.member.using(queue="idle").pending(3)]).dispatch()
    queue.client.delete(*store.keys(expired.id).all())  # as its TTL would
    queue.client.zadd(queue.global_keys.batches, {HOSTILE: 1})
    code, output = workers.run("--stop-when-empty")
    assert code == 0, output
    old_state = store.keys(old.id).state
    finished_ms = int(queue.client.hget(old_state, "finished_at"))
    queue.client.hset(old_state, "finished_at", finished_ms - 2 * 3600 * 1000)

    pruned = cli(config, "batches", "prune", "--hours", "1")
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.splitlines() == [
        "Pruned 1 batch(es) finished more than 1 hour(s) ago; "
        "dropped 1 list entry(ies) whose batch was gone.",
        "Left 1 unreadable list entry(ies) alone (see batches list).",
    ]
    assert not queue.client.exists(*store.keys(old.id).all())
    left = store.listed()  # and the hostile entry, left alone
    assert len(left) == 3 and {recent.id, running.id} < set(left)

    assert prune_batches(0, queue) == Pruned(finished=1, gone=0, unreadable=1)
    left = store.listed()
    assert len(left) == 2 and running.id in left
    assert store.read(running.id) is not None

    refused = cli(config, "batches", "prune", "--hours", "-1")
    assert refused.returncode == 2
    assert "Invalid value for '--hours': -1 is not in the range x>=0" in refused.stderr
