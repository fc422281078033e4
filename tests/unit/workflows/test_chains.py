"""Chains: order, failure and catch, pipe, append/prepend, and a step killed mid-run."""

from __future__ import annotations

import pytest
import workflow_tasks as flows
from support import Workers, strings, wait_for

import rqueue
from rqueue import TaskFailed, chain
from rqueue.encoding.payload import decode
from rqueue.store.queue import RedisQueue
from rqueue.workflows import effects


def flow(queue: RedisQueue) -> list[str]:
    return strings(queue.client, flows.DONE)


@pytest.mark.topology
def test_steps_run_in_order_each_after_the_one_before_succeeded(
    queue: RedisQueue, workers: Workers
) -> None:
    steps = chain(
        flows.note.pending("a"),
        flows.note.using(queue="other").pending("b"),
        flows.add.pending(1, 2),
    ).dispatch()
    workers.start("default,other", "--concurrency", "2")
    assert steps.result(timeout=20) == 3
    assert flow(queue) == ["note:a", "note:b", "add:1+2"]
    assert steps.status() == ["unknown", "unknown", "succeeded"]


def test_only_the_first_step_is_queued_until_it_succeeds(queue: RedisQueue) -> None:
    chain(flows.note.pending("a"), flows.note.pending("b")).dispatch()
    assert queue.client.llen(queue.keys("default").ready) == 1


@pytest.mark.topology
def test_a_failed_step_stops_the_chain_and_dispatches_catch_with_the_failure(
    queue: RedisQueue, workers: Workers
) -> None:
    steps = (
        chain(flows.note.pending("a"), flows.explode.pending("bad"), flows.note.pending("never"))
        .catch(flows.on_failure.pending("chain-1"))
        .dispatch()
    )
    workers.start()
    wait_for(lambda: any(s.startswith("catch:") for s in flow(queue)), 20)
    assert flow(queue) == ["note:a", "explode:bad", "catch:chain-1:ValueError:bad"]
    with pytest.raises(TaskFailed):
        steps.steps[1].result(timeout=0)


def test_pipe_passes_each_return_value_as_the_next_first_argument(
    queue: RedisQueue, workers: Workers
) -> None:
    steps = chain(
        flows.add.pending(1, 2), flows.double.pending(), flows.double.pending(), pipe=True
    ).dispatch()
    workers.start()
    assert steps.result(timeout=20) == 12
    assert flow(queue) == ["add:1+2", "double:3", "double:6"]


def test_a_delayed_step_keeps_its_delay(queue: RedisQueue, workers: Workers) -> None:
    chain(flows.note.pending("a"), flows.note.pending("b").delayed(3600)).dispatch()
    workers.start()
    wait_for(lambda: queue.client.zcard(queue.keys("default").delayed) == 1, 20)
    assert flow(queue) == ["note:a"]


def test_a_running_step_can_append_and_prepend_steps(queue: RedisQueue, workers: Workers) -> None:
    chain(flows.grow_chain.pending("x"), flows.note.pending("last")).dispatch()
    workers.start()
    wait_for(lambda: len(flow(queue)) == 3, 20)
    assert flow(queue) == ["note:prepended-after-x", "note:last", "note:appended-after-x"]


def test_a_step_killed_mid_run_dispatches_its_successor_once(
    queue: RedisQueue, workers: Workers
) -> None:
    chain(flows.die_once.pending("k"), flows.note.pending("after")).dispatch()
    workers.start("--timeout", "2")
    wait_for(lambda: "note:after" in flow(queue), 30)
    # the killed attempt is retried (a lost worker), succeeds, and dispatches once
    assert flow(queue) == ["die-once:k", "note:after"]
    wait_for(lambda: queue.client.llen(queue.keys("default").ready) == 0, 10)
    assert flow(queue).count("note:after") == 1


def test_a_step_that_runs_twice_dispatches_its_successor_once(
    queue: RedisQueue, workers: Workers
) -> None:
    """Its worker dies after the step's effects but before its ack: the same payload
    runs again, and the derived id's marker keeps the second push out."""
    steps = chain(flows.note.pending("twice"), flows.note.pending("next")).dispatch()
    payload = queue.client.lindex(queue.keys("default").ready, 0)
    queue.client.rpush(queue.keys("default").ready, payload)  # the same step, queued twice
    code, _ = workers.run("--stop-when-empty")
    assert code == 0
    assert flow(queue) == ["note:twice", "note:twice", "note:next"]
    assert queue.client.exists(queue.keys("default").once(steps.steps[1].id))


def test_a_step_whose_child_dies_after_it_succeeded_runs_once(
    queue: RedisQueue, workers: Workers
) -> None:
    """Its child dies just after the step succeeded (an after_succeeded hook kills it):
    the step is not run again, and its successor is pushed once."""
    chain(flows.step_then_die.pending("s"), flows.note.pending("after")).dispatch()
    workers.start()
    wait_for(lambda: "note:after" in flow(queue), 30)
    wait_for(lambda: queue.client.zcard(queue.keys("default").reserved) == 0, 10)
    assert flow(queue) == ["step-then-die:s", "note:after"]


@pytest.mark.topology
def test_a_step_is_acknowledged_in_the_script_call_that_pushes_its_successor(
    queue: RedisQueue,
) -> None:
    chain(flows.add.pending(1, 1), flows.note.pending("next")).dispatch()
    [reserved] = queue.reserve("default", 1, 60_000, 1_000, 1_000).payloads
    step = decode(reserved)
    completion = effects.on_success(step, reserved, 2, 0.0, None)
    assert completion.kept is not None and completion.follower is not None
    assert effects.apply(completion, queue, ("default", reserved)) is True
    assert queue.client.zcard(queue.keys("default").reserved) == 0  # acked by that call
    assert queue.client.llen(queue.keys("default").ready) == 1  # the next step, pushed
    assert rqueue.result_of(step.id, "default").result(timeout=0) == 2
    # run again (a lost reply): nothing more is pushed, and it stays acked
    assert effects.apply(completion, queue, ("default", reserved)) is True
    assert queue.client.llen(queue.keys("default").ready) == 1


def test_dispatch_many_keeps_each_pending_calls_delay(queue: RedisQueue) -> None:
    rqueue.dispatch_many([flows.note.pending("now"), flows.note.pending("later").delayed(3600)])
    assert queue.client.llen(queue.keys("default").ready) == 1
    assert queue.client.zcard(queue.keys("default").delayed) == 1
