"""``current_job().progress()``: reported from a sync task, a ``--threads`` thread and an
``async def`` task in real workers, read by ``handle.progress()`` and ``rqueue status``;
checked where it is given; kept in memory by ``rqueue.testing``; hostile records."""

from __future__ import annotations

import math
import time

import progress_tasks as pt
import pytest
from support import Workers, cli, wait_for

from rqueue.errors import InvalidProgress
from rqueue.settings.config import Config
from rqueue.store import progress
from rqueue.store.queue import RedisQueue
from rqueue.tasks.handles import Dispatched

FAST = ("--block-for", "0.5", "--log-level", "warning")


@pytest.mark.parametrize(
    ("mode", "dispatch"),
    [
        ((), pt.steps.dispatch),
        (("--threads", "2"), pt.steps.dispatch),
        ((), pt.async_steps.dispatch),
    ],
    ids=["process", "threads", "async"],
)
def test_a_running_tasks_progress_is_read_by_its_handle_and_rqueue_status(
    config: Config,
    queue: RedisQueue,
    workers: Workers,
    mode: tuple[str, ...],
    dispatch: object,
) -> None:
    handle = dispatch("resized \x1b[31m4 of 10")  # type: ignore[operator]
    assert handle.progress() is None
    workers.start("-c", "1", *mode, *FAST)
    said = wait_for(handle.progress, 10, "the first report")
    assert said.fraction == 0.25
    assert said.message == "resized \x1b[31m4 of 10"
    assert abs(said.at - time.time()) < 30
    shown = cli(config, "status", handle.id)
    assert shown.returncode == 0, shown.stderr
    line = next(line for line in shown.stdout.splitlines() if line.startswith("progress:"))
    assert "25% resized \\x1b[31m4 of 10 (at " in line  # the escape is shown, not sent
    assert "\x1b" not in shown.stdout
    queue.client.rpush(pt.GO, 1)
    assert handle.result(10) == "done"
    final = handle.progress()
    assert final is not None and (final.fraction, final.message) == (0.5, None)
    ttl = queue.client.pttl(queue.keys("default").progress(handle.id))
    assert 0 < ttl <= progress.KEEP_MS


def test_rqueue_status_shows_a_finished_tasks_tags_escaped(
    config: Config, queue: RedisQueue, workers: Workers
) -> None:
    handle = pt.tagged.dispatch("4\x1b[2J2")
    workers.run("--stop-when-empty", *FAST)
    shown = cli(config, "status", handle.id)
    assert shown.returncode == 0, shown.stderr
    assert "tags:      order:4\\x1b[2J2, shipping\n" in shown.stdout
    assert "progress:  100% shipped" in shown.stdout
    assert "\x1b" not in shown.stdout


def test_a_result_record_with_bad_tags_is_refused_by_status(
    config: Config, queue: RedisQueue
) -> None:
    import msgpack

    task_id = "ef" * 16
    record = {"state": "succeeded", "task": "x:y", "tags": ["ok", 5], "result": None}
    queue.client.set(queue.keys("default").result(task_id), msgpack.packb(record))
    shown = cli(config, "status", task_id, "--queue", "default")
    assert shown.returncode == 1
    assert "bad 'tags'" in shown.stderr


@pytest.mark.parametrize("fraction", [-0.1, 1.5, math.nan, math.inf, "0.5", True, None], ids=repr)
def test_a_fraction_that_is_not_one_from_0_to_1_is_refused_by_name(fraction: object) -> None:
    with pytest.raises(InvalidProgress, match="fraction must be a number from 0 to 1"):
        progress.checked(fraction, None)


def test_a_message_must_be_a_short_str() -> None:
    assert progress.checked(1, "x" * progress.MAX_MESSAGE) == (1.0, "x" * progress.MAX_MESSAGE)
    with pytest.raises(InvalidProgress, match="message must be None or a str"):
        progress.checked(0.5, "x" * (progress.MAX_MESSAGE + 1))
    with pytest.raises(InvalidProgress, match="message must be None or a str"):
        progress.checked(0.5, b"bytes")


def test_a_worker_tells_the_task_its_bad_fraction(queue: RedisQueue, workers: Workers) -> None:
    handle = pt.bad_fraction.dispatch(math.nan)
    workers.run("--stop-when-empty", *FAST)
    assert "fraction must be a number from 0 to 1" in handle.result(5)
    assert handle.progress() is None


def test_sync_mode_keeps_progress_in_memory(config: Config) -> None:
    from rqueue import testing

    with testing.sync():
        handle = pt.quick.dispatch(0.75)
        said = handle.progress()
        assert list(handle.events(timeout=5)) == []  # inline runs record no events
    assert said is not None and (said.fraction, said.message) == (0.75, None)


def test_a_fake_batch_adds_up_its_members_in_memory(config: Config) -> None:
    from rqueue import testing
    from rqueue.workflows.pending_batch import batch

    with testing.fake() as fake:
        handle = batch([pt.quick.pending(0.5), pt.quick.pending(0.25)]).dispatch()
        assert handle.progress() == 0.0
        fake.run_all()
        assert handle.progress() == 1.0


def test_outside_a_worker_a_report_goes_nowhere_and_never_fails() -> None:
    from rqueue.encoding.payload import Job

    Job("0" * 32, "x:y", (), {}, "default").progress(0.5, "fine")  # no sink: dropped


@pytest.mark.parametrize(
    "fields",
    [
        {"fraction": "nan", "message": "", "at": "1"},
        {"fraction": "2", "message": "", "at": "1"},
        {"fraction": "inf", "message": "", "at": "1"},
        {"fraction": "0.5", "message": "", "at": "garbage"},
        {"fraction": "0.5"},
        {"junk": "1"},
    ],
)
def test_a_hostile_progress_record_reads_as_none(queue: RedisQueue, fields: dict[str, str]) -> None:
    handle = Dispatched("ab" * 16, "x:y", "default", queue)
    queue.client.hset(queue.keys("default").progress(handle.id), mapping=fields)
    assert handle.progress() is None


def test_a_progress_key_of_another_type_reads_as_none_and_is_replaced(queue: RedisQueue) -> None:
    handle = Dispatched("cd" * 16, "x:y", "default", queue)
    queue.client.set(queue.keys("default").progress(handle.id), "not a hash")
    assert handle.progress() is None
    progress.write(queue, "default", handle.id, "x:y", 1, 0.5, "ok")
    said = handle.progress()
    assert said is not None and (said.fraction, said.message) == (0.5, "ok")


def fields_of(output: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in output.splitlines() if ":" in line)


def test_rqueue_status_of_a_task_that_keeps_no_result_says_where_it_is(
    config: Config, queue: RedisQueue, workers: Workers
) -> None:
    handle = pt.unkept_steps.dispatch("a\x1b[2Jb")

    def status(shown_yet: bool = True) -> dict[str, str]:
        shown = cli(config, "status", handle.id)
        if not shown_yet and shown.returncode == 1:  # taken, not yet in the registry
            return {"status": ""}
        assert shown.returncode == 0, shown.stderr
        assert "\x1b" not in shown.stdout
        return {k.strip(): v.strip() for k, v in fields_of(shown.stdout).items()}

    waiting = status()
    assert (waiting["queue"], waiting["status"]) == ("default", "ready")
    assert waiting["task"] == "progress_tasks:unkept_steps"
    assert waiting["tags"] == "note:a\\x1b[2Jb"
    workers.start("-c", "1", *FAST)
    wait_for(handle.progress, 10, "the first report")
    # Found by the workers' registry, which names a running task within a heartbeat.
    running = wait_for(lambda: (s := status(False))["status"] == "running" and s, 10, "running")
    assert running["attempts"] == "1"
    assert running["progress"].startswith("25% a\\x1b[2Jb (at ")
    queue.client.rpush(pt.GO, 1)
    failed = wait_for(lambda: (s := status())["status"] == "failed" and s, 10, "its failure")
    assert failed["error"] == "ValueError: a\\x1b[2Jb"
