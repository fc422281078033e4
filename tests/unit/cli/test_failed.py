"""Failed tasks: listing, showing, retrying, forgetting and flushing, through the CLI."""

from __future__ import annotations

import apptasks
import pytest
from support import TASKS_DIR, Workers, cli, push_job, ready, strings, wait_for

from rqueue.encoding.payload import decode
from rqueue.failed import FailedTasks, make_record
from rqueue.settings.config import Config
from rqueue.store.header import payload_attempts
from rqueue.store.queue import RedisQueue

pytestmark = pytest.mark.topology  # every test here runs on Cluster and Sentinel as well


def fail_by_hand(queue: RedisQueue, value: object, name: str = "default") -> str:
    """Put a ``record`` call straight into ``name``'s failed list, as a worker would."""
    job = push_job(queue, "apptasks:record", value, queue=name, tries=1)
    (reserved,) = queue.reserve(name, 1, 60_000, 0, 0).payloads
    record = make_record(
        name,
        reserved,
        "ValueError",
        f"bad value {value}",
        "Traceback: here",
        decode(reserved),
    )
    assert queue.fail(name, reserved, record)
    return job.id


def failed_ids(queue: RedisQueue, *names: str) -> list[str]:
    return [f.id for f in FailedTasks(queue).list(names or None)]


def test_a_task_that_keeps_failing_is_listed_and_shown(
    queue: RedisQueue, workers: Workers, config: Config
) -> None:
    handle = apptasks.always_fails.dispatch("boom")  # queue emails, tries 3
    workers.start("emails", "--kill-grace", "0.5", "--block-for", "0.5")
    wait_for(lambda: failed_ids(queue, "emails"), 15, "the task to fail for good")
    listed = cli(config, "failed", "list")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.strip().splitlines()
    assert header.split()[:4] == ["id", "queue", "task", "attempts"]
    assert row.split()[:4] == [handle.id, "emails", "apptasks:always_fails", "3"]
    assert "ValueError: failing on purpose: boom" in row
    shown = cli(config, "failed", "show", handle.id)
    assert shown.returncode == 0, shown.stderr
    for expected in (
        f"id:        {handle.id}",
        "queue:     emails",
        "task:      apptasks:always_fails",
        "args:      ['boom']",
        "attempts:  3",
        "timed out: no",
        "error:     ValueError: failing on purpose: boom",
        "Traceback (most recent call last)",
        'raise ValueError(f"failing on purpose: {value}")',
    ):
        assert expected in shown.stdout


def test_list_filters_by_queue_and_says_when_there_is_nothing(
    queue: RedisQueue, config: Config
) -> None:
    assert "(none)" in cli(config, "failed", "list").stdout
    first = fail_by_hand(queue, 1)
    second = fail_by_hand(queue, 2, "emails")
    everything = cli(config, "failed", "list").stdout
    assert first in everything and second in everything
    only = cli(config, "failed", "list", "--queue", "emails").stdout
    assert second in only and first not in only


def test_show_a_payload_that_never_decoded(queue: RedisQueue, config: Config) -> None:
    queue.client.rpush(queue.keys("default").ready, b"\x00garbage")
    (reserved,) = queue.reserve("default", 1, 60_000, 0, 0).payloads
    queue.fail(
        "default",
        reserved,
        make_record("default", reserved, "InvalidPayload", "nope"),
    )
    queue.remember_queues(["default"])
    (found,) = FailedTasks(queue).list()
    shown = cli(config, "failed", "show", found.id)
    assert shown.returncode == 0, shown.stderr
    assert "payload:   b'\\x00garbage'" in shown.stdout
    assert "error:     InvalidPayload: nope" in shown.stdout


def test_retry_one_task_resets_its_attempts_and_it_runs_again(
    queue: RedisQueue, config: Config
) -> None:
    first = fail_by_hand(queue, "one")
    second = fail_by_hand(queue, "two")
    result = cli(config, "failed", "retry", first)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"Retried {first} on queue default."
    assert failed_ids(queue) == [second]
    (payload,) = ready(queue)
    assert decode(payload).id == first and payload_attempts(payload) == 0
    ran = cli(config, "work", "--stop-when-empty", "--block-for", "0.5", cwd=TASKS_DIR)
    assert ran.returncode == 0, ran.stderr
    assert strings(queue.client, apptasks.DONE) == ["one"]


def test_retry_several_ids_at_once(queue: RedisQueue, config: Config) -> None:
    ids = [fail_by_hand(queue, i) for i in range(3)]
    result = cli(config, "failed", "retry", ids[0], ids[2])
    assert result.returncode == 0, result.stderr
    assert failed_ids(queue) == [ids[1]]
    assert [decode(p).id for p in ready(queue)] == [ids[0], ids[2]]


def test_retry_all_re_runs_every_failed_task(queue: RedisQueue, config: Config) -> None:
    for i in range(3):
        fail_by_hand(queue, f"d{i}")
    for i in range(2):
        fail_by_hand(queue, f"e{i}", "emails")
    result = cli(config, "failed", "retry", "--all")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Retried 5 failed task(s)."
    assert failed_ids(queue) == []
    ran = cli(
        config, "work", "default,emails", "--stop-when-empty", "--block-for", "0.5", cwd=TASKS_DIR
    )
    assert ran.returncode == 0, ran.stderr
    assert sorted(strings(queue.client, apptasks.DONE)) == ["d0", "d1", "d2", "e0", "e1"]
    assert failed_ids(queue) == []


def test_retry_all_of_one_queue(queue: RedisQueue, config: Config) -> None:
    kept = fail_by_hand(queue, "d")
    fail_by_hand(queue, "e", "emails")
    result = cli(config, "failed", "retry", "--all", "--queue", "emails")
    assert result.stdout.strip() == "Retried 1 failed task(s)."
    assert failed_ids(queue) == [kept]
    assert queue.sizes(["emails", "default"])[0].ready == 1
    assert queue.sizes(["default"])[0].ready == 0


def test_unknown_ids_are_reported(queue: RedisQueue, config: Config) -> None:
    fail_by_hand(queue, 1)
    for command in ("show", "retry", "forget"):
        result = cli(config, "failed", command, "0" * 32)
        assert result.returncode == 1
        assert result.stderr.strip() == f"rqueue: no failed task with id {'0' * 32}"
        assert "Traceback" not in result.stderr
    assert len(failed_ids(queue)) == 1


def test_forget_deletes_one_failed_task(queue: RedisQueue, config: Config) -> None:
    gone = fail_by_hand(queue, 1)
    kept = fail_by_hand(queue, 2)
    result = cli(config, "failed", "forget", gone)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"Forgot failed task {gone}."
    assert failed_ids(queue) == [kept]
    assert queue.sizes(["default"])[0].ready == 0  # forgotten, not retried


def test_flush_deletes_failed_tasks(queue: RedisQueue, config: Config) -> None:
    fail_by_hand(queue, 1)
    kept = fail_by_hand(queue, 2, "emails")
    fail_by_hand(queue, 3)
    one_queue = cli(config, "failed", "flush", "--queue", "default")
    assert one_queue.stdout.strip() == "Flushed 2 failed task(s)."
    assert failed_ids(queue) == [kept]
    everything = cli(config, "failed", "flush")
    assert everything.stdout.strip() == "Flushed 1 failed task(s)."
    assert failed_ids(queue) == []
    assert queue.known_queues() == ["default", "emails"]  # queues stay known


def test_retry_all_through_the_api(queue: RedisQueue) -> None:
    fail_by_hand(queue, 1)
    fail_by_hand(queue, 2, "emails")
    tasks = FailedTasks(queue)
    assert tasks.retry_all(["emails"]) == 1
    assert tasks.retry_all() == 1
    assert tasks.retry_all() == 0
    assert [s.ready for s in queue.sizes(["default", "emails"])] == [1, 1]


def test_failed_list_by_tag_shows_only_the_tasks_with_every_tag_given(
    queue: RedisQueue, workers: Workers, config: Config
) -> None:
    order = apptasks.always_raises.using(tags=["order:42", "shipping"], tries=1).dispatch("a")
    other = apptasks.always_raises.using(tags=["order:7", "shipping"], tries=1).dispatch("b")
    apptasks.always_raises.using(tries=1).dispatch("untagged")
    code, output = workers.run("--stop-when-empty", "--block-for", "0.2", "--log-level", "warning")
    assert code == 0, output
    assert len(failed_ids(queue)) == 3
    result = cli(config, "failed", "list", "--tag", "order:42")
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()[1:]] == [order.id]
    assert "1-1 of the failed tasks tagged order:42." in result.stderr
    both = cli(config, "failed", "list", "--tag", "shipping", "--tag", "order:7").stdout
    assert [line.split()[0] for line in both.splitlines()[1:]] == [other.id]
    paged = cli(config, "failed", "list", "--tag", "shipping", "--limit", "1")
    assert [line.split()[0] for line in paged.stdout.splitlines()[1:]] == [other.id]  # newest
    assert "Next page: rqueue failed list --offset 1 --limit 1 --tag shipping" in paged.stderr
    second = cli(config, "failed", "list", "--tag", "shipping", "--limit", "1", "--offset", "1")
    assert [line.split()[0] for line in second.stdout.splitlines()[1:]] == [order.id]
    none = cli(config, "failed", "list", "--tag", "order:1")
    assert none.returncode == 0 and "No failed tasks tagged order:1." in none.stderr
