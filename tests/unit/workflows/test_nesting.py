"""Workflows that compose, on real workers: a batch as a chain's step, chains as a
batch's members, and the two nested; each level counted once, the chain going on
when its batch finished, stopping when it failed or was cancelled."""

from __future__ import annotations

import time

import pytest
import workflow_tasks as flows
from support import Workers, cli, strings, wait_for

from rqueue import Batch, batch, chain
from rqueue.encoding import codec
from rqueue.encoding.payload import encode
from rqueue.store.batch_store import BatchStore
from rqueue.store.queue import RedisQueue
from rqueue.workflows import effects


def flow(queue: RedisQueue) -> list[str]:
    return strings(queue.client, flows.DONE)


def notes(queue: RedisQueue) -> list[str]:
    return [entry for entry in flow(queue) if entry.startswith("note:")]


@pytest.mark.topology
def test_a_batch_as_a_chain_step_runs_after_the_step_before_and_before_the_next(
    queue: RedisQueue, workers: Workers
) -> None:
    resize = (
        batch([flows.note.pending(f"m{i}") for i in range(5)])
        .name("resize")
        .then(flows.batch_callback.pending("then"))
    )
    dispatched = chain(flows.note.pending("a"), resize, flows.note.pending("c")).dispatch()
    workers.start("--concurrency", "2")
    wait_for(lambda: "note:c" in flow(queue), 30, "the step after the batch")
    ran = notes(queue)
    assert ran[0] == "note:a" and ran[-1] == "note:c"
    assert sorted(ran[1:-1]) == [f"note:m{i}" for i in range(5)]  # each member once
    wait_for(lambda: "then:5/0/5" in flow(queue), 10, "the batch's own then")
    opened = dispatched.steps[1]
    assert isinstance(opened, Batch)
    status = opened.status()
    assert status is not None and status.name == "resize" and status.succeeded == 5
    assert dispatched.status() == ["unknown", "succeeded", "unknown"]  # no result kept


def test_a_batch_that_fails_stops_its_chain_and_fires_the_chains_catch(
    queue: RedisQueue, workers: Workers
) -> None:
    failing = batch([flows.member_fails.pending(0), flows.note.pending("m1")])
    chain(flows.note.pending("a"), failing, flows.note.pending("c")).catch(
        flows.on_failure, "chain"
    ).dispatch()
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    assert "catch:chain:RuntimeError:member 0 fails" in flow(queue)
    assert "note:c" not in flow(queue)


def test_with_allow_failures_the_chain_goes_on_after_its_batch_finished(
    queue: RedisQueue, workers: Workers
) -> None:
    failing = batch([flows.member_fails.pending(0), flows.note.pending("m1")]).allow_failures()
    chain(flows.note.pending("a"), failing, flows.note.pending("c")).catch(
        flows.on_failure, "chain"
    ).dispatch()
    workers.start()
    wait_for(lambda: "note:c" in flow(queue), 30, "the step after the batch")
    assert not [entry for entry in flow(queue) if entry.startswith("catch:")]


@pytest.mark.topology
def test_chains_as_members_count_once_their_whole_chain_finished(
    queue: RedisQueue, workers: Workers
) -> None:
    members = [
        chain(flows.note.pending("x1"), flows.note.pending("y1")),
        chain(flows.note.pending("x2"), flows.note.using(queue="other").pending("y2")),
        flows.note.pending("z"),
    ]
    b = batch(members).then(flows.batch_callback.pending("then")).dispatch()
    workers.start("default,other", "--concurrency", "2")
    wait_for(lambda: any(entry.startswith("then:") for entry in flow(queue)), 30, "then")
    seen = flow(queue)
    assert "then:3/0/3" in seen
    then_at = seen.index("then:3/0/3")
    assert {"note:y1", "note:y2"} <= set(seen[:then_at])  # every chain ended before then
    status = b.status()
    assert status is not None and (status.total, status.succeeded) == (3, 3)


def test_a_failing_step_of_a_member_chain_fails_its_member_and_stops_the_chain(
    queue: RedisQueue, workers: Workers
) -> None:
    members = [
        chain(flows.explode.pending("boom"), flows.note.pending("never")).catch(
            flows.on_failure, "member"
        ),
        flows.note.pending("z"),
    ]
    b = batch(members).allow_failures().finally_(flows.batch_callback.pending("finally"))
    dispatched = b.dispatch()
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    seen = flow(queue)
    assert "finally:1/1/2" in seen and "note:never" not in seen
    assert "catch:member:ValueError:boom" in seen
    status = dispatched.status()
    assert status is not None and len(status.failed_ids) == 1


def test_a_batch_in_a_chain_in_a_batch_counts_each_level_once(
    queue: RedisQueue, workers: Workers
) -> None:
    inner = batch([flows.note.pending("b1"), flows.note.pending("b2")])
    members = [
        chain(flows.note.pending("a"), inner, flows.note.pending("c")),
        batch([flows.note.pending("d1"), flows.note.pending("d2")]),
    ]
    b = batch(members).then(flows.batch_callback.pending("then")).dispatch()
    workers.start("--concurrency", "2")
    wait_for(lambda: "then:2/0/2" in flow(queue), 30, "the outer batch's then")
    seen = flow(queue)
    assert sorted(notes(queue)) == ["note:a", "note:b1", "note:b2", "note:c", "note:d1", "note:d2"]
    assert seen.index("note:c") < seen.index("then:2/0/2")
    assert seen.index("note:a") < min(seen.index("note:b1"), seen.index("note:b2"))
    status = b.status()
    assert status is not None and (status.total, status.succeeded) == (2, 2)
    # The tree, from the outer batch down and back up.
    assert [index for index, _ in status.nested] == [0, 1]
    for index, nested_id in status.nested:
        nested = Batch(nested_id, queue).status()
        assert nested is not None and nested.parent == (b.id, index) and nested.finished
    in_chain = Batch(status.nested[0][1], queue).status()
    assert in_chain is not None and in_chain.after is not None  # the task "a" before it
    shown = cli(queue.config, "batches", "show", b.id)
    assert shown.returncode == 0, shown.stderr
    assert f"member 0: batch {status.nested[0][1]}" in shown.stdout
    shown = cli(queue.config, "batches", "show", status.nested[1][1])
    assert f"part of:    batch {b.id}, member 1" in shown.stdout


def test_a_chain_may_start_with_a_batch(queue: RedisQueue, workers: Workers) -> None:
    first = batch([flows.note.pending("m1"), flows.note.pending("m2")])
    dispatched = chain(first, flows.note.pending("after")).dispatch()
    assert isinstance(dispatched.steps[0], Batch)
    workers.start()
    wait_for(lambda: "note:after" in flow(queue), 30, "the step after the batch")
    assert notes(queue)[-1] == "note:after"


def test_a_cancelled_batch_inside_a_chain_stops_the_chain(
    queue: RedisQueue, workers: Workers
) -> None:
    first = batch([flows.note.pending("m1"), flows.note.pending("m2")])
    dispatched = chain(first, flows.note.pending("after")).dispatch()
    opened = dispatched.steps[0]
    assert isinstance(opened, Batch)
    assert opened.cancel()
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    assert notes(queue) == []  # its members skipped, and the chain stopped
    status = opened.status()
    assert status is not None and status.finished and status.skipped == 2


def test_a_step_completed_twice_opens_its_batch_once(queue: RedisQueue) -> None:
    """The step before the batch completes twice (its worker died before its ack): the
    batch is created, and its members pushed, once; a batch created whose members
    were never pushed (its opener died in between) gets them pushed."""
    members = batch([flows.member.pending(i) for i in range(4)])
    job = chain(flows.note.pending("s"), members, flows.note.pending("c")).first_job()
    completion = effects.on_success(job, encode(job), None, time.time(), None)
    assert completion.opening is not None and completion.follower is None
    for _ in range(2):
        effects.apply(completion, queue)
    ready = queue.keys("default").ready
    assert queue.client.llen(ready) == 4
    status = Batch(completion.opening.batch_id, queue).status()
    assert status is not None and status.total == 4

    again = chain(flows.note.pending("s"), members).first_job()
    opening = effects.on_success(again, encode(again), None, time.time(), None).opening
    assert opening is not None
    BatchStore(queue).open(opening.batch_id, 4, "", False, codec.pack({}), 60_000, ["default"])
    effects.apply(effects.Completion(None, None, None, opening), queue)
    assert queue.client.llen(ready) == 8


def test_pipe_with_a_batch_step_is_refused_when_the_chain_is_built() -> None:
    with pytest.raises(TypeError, match="cannot have a batch as a step"):
        chain(flows.double.pending(1), batch([flows.note.pending(1)]), pipe=True)


def test_rqueue_status_says_where_a_waiting_task_sits_in_its_workflow(queue: RedisQueue) -> None:
    b = batch([flows.note.pending(0), chain(flows.note.pending(1), flows.note.pending(2))])
    opened = b.dispatch()
    shown = cli(queue.config, "status", opened.member_id(1))
    assert shown.returncode == 0, shown.stderr
    assert f"batch:     {opened.id}, member 1" in shown.stdout
    assert "chain:     1 step(s) to come" in shown.stdout


def test_a_member_chain_retried_from_its_failed_step_goes_on_from_there(
    queue: RedisQueue, workers: Workers
) -> None:
    member = chain(
        flows.note.pending("first"),
        flows.fails_first_time.using(queue="other").pending(0),
        flows.note.pending("last"),
    )
    b = batch([member, flows.note.pending("z")]).allow_failures().dispatch()
    code, _ = workers.run("default,other", "--stop-when-empty")
    assert code == 0
    status = b.status()
    assert status is not None and (status.succeeded, status.failed) == (1, 1)
    assert "note:last" not in flow(queue)
    assert b.retry() == 1  # the failed step, on its own queue, not the member's first
    code, _ = workers.run("default,other", "--stop-when-empty")
    assert code == 0
    assert notes(queue).count("note:first") == 1 and "note:last" in flow(queue)
    status = b.status()
    assert status is not None and (status.succeeded, status.failed, status.finished) == (2, 0, True)
