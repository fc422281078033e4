"""Dependencies (``task.using(after=[...])``) on real workers and the real scripts: a
task runs once every task it waits for succeeded, fails unrun when one fails or is
cancelled (or runs anyway with ``allow_failures``), across queues and hash slots,
exactly once when a worker dies between an outcome and its notice being applied, and
a garbage notice or waiting entry fails alone."""

from __future__ import annotations

import os
import re
import signal

import dependency_tasks as deps
import httpx
import msgpack
import pytest
from browser import served_dashboard
from support import Workers, cli, failures, load_scripts, nodes, ready, strings, wait_for

import rqueue
from rqueue import CancelOutcome, TaskFailed
from rqueue.encoding.codec import pack
from rqueue.errors import InvalidTaskOption
from rqueue.failed import FailedTasks
from rqueue.settings.config import Config
from rqueue.store.queue import Kept, RedisQueue
from rqueue.tasks.dependencies import apply, outcome_of


def runs(queue: RedisQueue) -> list[str]:
    return strings(queue.client, deps.RUNS)


def failed_message(queue: RedisQueue, task_id: str, name: str = "default") -> str:
    found = [r for r in FailedTasks(queue).list([name]) if r.id == task_id]
    assert len(found) == 1, found
    assert found[0].exception == "DependencyFailed"
    return found[0].message


@pytest.mark.topology
def test_runs_once_after_every_task_it_waits_for_even_on_other_queues(
    queue: RedisQueue, workers: Workers
) -> None:
    first = deps.step.dispatch("a")
    second = deps.elsewhere.dispatch("b")  # queue "other": another slot on a cluster
    report = deps.step.using(after=[first, second]).dispatch("report")
    assert report.status() == "waiting"
    assert ready(queue) == [ready(queue)[0]]  # only "a": the report waits elsewhere
    workers.start("default,other")
    assert report.result(timeout=20) == "report"
    assert runs(queue)[-1] == "report"
    assert sorted(runs(queue)) == ["a", "b", "report"]
    assert queue.client.hlen(queue.keys("default").waiting) == 0


@pytest.mark.topology
def test_a_failed_dependency_fails_it_unrun_with_the_reason(
    queue: RedisQueue, workers: Workers
) -> None:
    good = deps.step.dispatch("good")
    bad = deps.broken.dispatch("bad")
    report = deps.step.using(after=[good, bad]).dispatch("report")
    workers.start("default")
    with pytest.raises(TaskFailed) as failure:
        report.result(timeout=20)
    assert failure.value.exception == "DependencyFailed"
    message = failed_message(queue, report.id)
    assert message == failure.value.message
    assert bad.id in message and "dependency_tasks:broken" in message
    assert "ValueError: bad is broken" in message
    assert "report" not in runs(queue)


def test_allow_failures_runs_it_once_all_finished(queue: RedisQueue, workers: Workers) -> None:
    bad = deps.broken.dispatch("bad")
    report = deps.step.using(after=[bad], allow_failures=True).dispatch("report")
    workers.start("default")
    assert report.result(timeout=20) == "report"
    assert runs(queue) == ["bad", "report"]


def test_a_dependant_of_a_failed_dependant_fails_too(queue: RedisQueue, workers: Workers) -> None:
    bad = deps.broken.dispatch("bad")
    middle = deps.step.using(after=[bad]).dispatch("middle")
    last = deps.step.using(after=[middle]).dispatch("last")
    workers.start("default")
    with pytest.raises(TaskFailed):
        last.result(timeout=20)
    assert middle.id in failed_message(queue, last.id)
    assert runs(queue) == ["bad"]


@pytest.mark.topology
def test_a_dependency_that_finished_before_the_dispatch_is_applied_at_once(
    queue: RedisQueue, workers: Workers
) -> None:
    good = deps.elsewhere.dispatch("good")
    bad = deps.broken.dispatch("bad")
    workers.run("default,other", "--stop-when-empty")
    runnable = deps.step.using(after=[rqueue.result_of(good.id, queue="other")]).dispatch("r")
    assert runnable.status() == "pending"  # in the ready list already: no worker involved
    failing = deps.step.using(after=[good, bad]).dispatch("f")
    assert failing.status() == "failed"
    assert bad.id in failed_message(queue, failing.id)


def test_a_cancelled_dependency_fails_it(queue: RedisQueue, workers: Workers) -> None:
    gone = deps.step.dispatch("gone")
    report = deps.step.using(after=[gone]).dispatch("report")
    assert gone.cancel() is CancelOutcome.CANCELLED
    workers.start("default")  # its parent applies the notice the cancel left
    with pytest.raises(TaskFailed):
        report.result(timeout=20)
    assert "which was cancelled" in failed_message(queue, report.id)


def test_cancelling_a_waiting_task_drops_it(queue: RedisQueue, workers: Workers) -> None:
    first = deps.step.dispatch("a")
    never = deps.elsewhere.dispatch("b")  # no worker for its queue here: never finishes
    report = deps.step.using(after=[first, never]).dispatch("report")
    assert report.cancel() is CancelOutcome.CANCELLED
    assert report.status() == "cancelled"
    workers.start("default")  # the first outcome that comes drops it
    wait_for(lambda: queue.client.hlen(queue.keys("default").waiting) == 0, 20, "the drop")
    assert runs(queue) == ["a"]
    assert queue.client.scard(queue.keys("default").cancelled) == 0


def test_clear_deletes_the_waiting_tasks(queue: RedisQueue, config: Config) -> None:
    first = deps.step.dispatch("a")
    deps.step.using(after=[first]).dispatch("report")
    done = cli(config, "clear", "default", "--force")
    assert done.returncode == 0, done.stderr
    assert "2" in done.stdout  # the ready task and the waiting one
    assert queue.client.exists(queue.keys("default").waiting) == 0


def test_what_cannot_be_waited_for_is_refused_at_dispatch(queue: RedisQueue) -> None:
    plain = deps.plain.dispatch("p")
    with pytest.raises(InvalidTaskOption, match="keeps no result"):
        deps.step.using(after=[plain]).dispatch("x")
    unknown = rqueue.result_of("0" * 32, queue="default")
    with pytest.raises(InvalidTaskOption, match="has no record"):
        deps.step.using(after=[unknown]).dispatch("x")
    assert queue.client.hlen(queue.keys("default").waiting) == 0  # nothing left behind
    first = deps.step.dispatch("a")
    waiting = deps.step.using(after=[first])
    with pytest.raises(InvalidTaskOption):
        waiting.later(10, "x")
    with pytest.raises(InvalidTaskOption):
        waiting.pending("x")
    with pytest.raises(InvalidTaskOption, match="after="):
        deps.step.using(after=["not a handle"])  # type: ignore[list-item]
    with pytest.raises(InvalidTaskOption, match="allow_failures"):
        deps.step.using(allow_failures=True)


def _ack_by_hand(queue: RedisQueue, value: str) -> bytes:
    """Run the ready task as a worker's scripts would (reserve, then ack with its kept
    result) and return its record: the notice is left in the resolved list."""
    reserved = queue.reserve("default", 1, 60_000, 1_000, 15_000).payloads[0]
    task_id = reserved[13:29].hex()
    record = pack({"state": "succeeded", "task": deps.step.name, "result": value})
    queue.ack("default", [], [Kept(reserved, task_id, record, 60_000)])
    return record


@pytest.mark.topology
def test_a_notice_applied_before_its_parent_died_runs_the_task_once(
    queue: RedisQueue, workers: Workers
) -> None:
    first = deps.step.dispatch("a")
    report = deps.step.using(after=[first]).dispatch("report")
    record = _ack_by_hand(queue, "a")
    resolved = queue.keys("default").resolved
    assert queue.client.llen(resolved) == 1
    # The parent applied it, then was killed before it removed the notice:
    apply(queue, "default", report.id, 0, outcome_of("default", first.id, record))
    workers.run("default", "--stop-when-empty")  # the next parent applies it again
    assert report.result(timeout=0) == "report"
    assert runs(queue) == ["report"]
    assert queue.client.llen(resolved) == 0
    assert ready(queue) == []


@pytest.mark.topology
def test_a_worker_killed_between_an_ack_and_its_notice_runs_the_task_once(
    queue: RedisQueue, workers: Workers
) -> None:
    first = deps.stops_its_parent.dispatch("a")  # on queue "other"
    report = deps.step.using(after=[first]).dispatch("report")
    killed = workers.start("other")
    resolved = queue.keys("other").resolved
    wait_for(lambda: queue.client.llen(resolved) == 1, 20, "the ack and its notice")
    os.killpg(killed.pid, signal.SIGKILL)
    killed.process.wait(10)
    assert report.status() == "waiting"
    workers.start("default,other")
    assert report.result(timeout=20) == "report"
    assert runs(queue) == ["a", "report"]
    # The notice is removed after it is applied, so maybe after the report ran.
    wait_for(lambda: queue.client.llen(resolved) == 0, 20, "the notice to be removed")


def test_a_notice_left_by_a_dead_parent_is_applied_by_the_next(
    queue: RedisQueue, workers: Workers
) -> None:
    first = deps.step.dispatch("a")
    report = deps.step.using(after=[first]).dispatch("report")
    _ack_by_hand(queue, "a")  # its worker died before the notice was read
    worker = workers.start("default")
    assert report.result(timeout=20) == "report"
    worker.process.terminate()
    assert runs(queue) == ["report"]


def test_garbage_notices_and_waiting_entries_fail_alone(
    queue: RedisQueue, workers: Workers
) -> None:
    keys = queue.keys("default")
    first = deps.step.dispatch("a")
    report = deps.step.using(after=[first]).dispatch("report")
    junk_id, bad_state_id = "1" * 32, "2" * 32
    queue.client.hset(keys.waiting, mapping={f"p:{junk_id}": b"junk", f"s:{junk_id}": b"n-"})
    queue.client.hset(
        keys.waiting, mapping={f"p:{bad_state_id}": b"junk", f"s:{bad_state_id}": b"zz"}
    )
    dependents = keys.dependents(first.id)
    queue.client.sadd(dependents, f"0:{junk_id}:default", f"0:{bad_state_id}:default", "x:y")
    queue.client.rpush(keys.resolved, b"not msgpack \xc1", msgpack.packb([1, 2]))
    workers.start("default")
    assert report.result(timeout=20) == "report"
    wait_for(lambda: len(failures(queue)) == 2, 20, "the garbage entries to fail")
    assert failures(queue) == [" InvalidPayload", " InvalidPayload"]
    # Notices are removed after they are applied, so maybe after their failures.
    wait_for(lambda: queue.client.llen(keys.resolved) == 0, 20, "the notices to be removed")
    assert queue.client.hlen(keys.waiting) == 0


def test_a_task_nobody_waits_for_costs_no_command_more(queue: RedisQueue, workers: Workers) -> None:
    load_scripts(queue)
    for node in nodes(queue):
        node.config_resetstat()
    for i in range(10):
        deps.plain.dispatch(f"p{i}")
        deps.step.dispatch(f"k{i}")
    workers.run("default", "--stop-when-empty")
    stats: dict[str, int] = {}
    for node in nodes(queue):
        for name, stat in node.info("commandstats").items():
            stats[name] = stats.get(name, 0) + int(stat["calls"])
    # The parent learns of notices from migrate.lua's reply (no read of its own), and
    # the script writing an outcome finds no dependents set (nothing to move).
    drained = {"cmdstat_lrange", "cmdstat_hmget", "cmdstat_lrem", "cmdstat_smembers"}
    assert not set(stats) & drained
    assert len(runs(queue)) == 20


def test_rqueue_status_and_the_task_page_say_it_waits(queue: RedisQueue, config: Config) -> None:
    first = deps.step.dispatch("a")
    kept = deps.step.using(after=[first]).dispatch("kept")
    unkept = deps.plain.using(after=[first]).dispatch("unkept")
    for handle in (kept, unkept):
        shown = cli(config, "status", handle.id)
        assert shown.returncode == 0, shown.stderr
        assert re.search(r"status:\s+waiting", shown.stdout), shown.stdout
    assert unkept.task in shown.stdout  # read from its payload, in the waiting hash
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as client:
        page = client.get(f"/tasks/{unkept.id}")
        assert page.status_code == 200
        assert "waiting" in page.text and "Cancel" in page.text
