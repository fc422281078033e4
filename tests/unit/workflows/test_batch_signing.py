"""With a secret, a worker never signs what it read from Redis: a batch's callbacks
and a chain's steps carry the signature of the process that wrote them, bound to
where they belong, and one that does not verify is refused with a log line.

Real ``rqueue work`` with ``RQUEUE_SECRET``, real Redis; the attacker writes to Redis.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timezone
from decimal import Decimal

import pytest
import workflow_tasks as flows
from support import Workers, strings

from rqueue import batch, chain
from rqueue.encoding import codec
from rqueue.encoding.payload import CHAIN, encode
from rqueue.failed import FailedTasks, make_record
from rqueue.settings.config import Config
from rqueue.store.batch_store import BatchStore
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue
from rqueue.store.signing import sign
from rqueue.workflows.batches import member_job
from rqueue.workflows.steps import step_of

SECRET = "a-long-random-secret-for-workflows"
ENV = {"RQUEUE_SECRET": SECRET}


@pytest.fixture
def signing(config: Config, queue: RedisQueue) -> Iterator[RedisQueue]:
    """The test process dispatches as an application with the secret does."""
    connection = RedisQueue(replace(config, secret=SECRET), queue.client)
    use(connection)
    yield connection
    use(queue)


def flow(queue: RedisQueue) -> list[str]:
    return strings(queue.client, flows.DONE)


def run_worker(workers: Workers) -> str:
    code, output = workers.run("--stop-when-empty", env=ENV)
    assert code == 0, output
    return output


def plant_callbacks(queue: RedisQueue, batch_id: str, **steps: object) -> None:
    """What someone with write access to Redis does: rewrite a batch's callbacks."""
    state = BatchStore(queue).keys(batch_id).state
    queue.client.hset(state, "callbacks", codec.pack(steps))
    if "progress" in steps:
        queue.client.hset(state, "progress", "1")


def then_with_a_chain(label: str) -> dict[str, object]:
    """A ``then`` callback whose meta carries a chain naming another registered task."""
    step = step_of(flows.batch_callback.pending(label))
    step["meta"] = {CHAIN: [step_of(flows.note.pending(f"{label}-chained"))]}
    return step


def test_a_rewritten_then_whose_meta_carries_a_chain_is_refused_and_logged(
    signing: RedisQueue, workers: Workers
) -> None:
    b = batch([flows.member.pending(0)]).then(flows.batch_callback.pending("then")).dispatch()
    plant_callbacks(signing, b.id, then=then_with_a_chain("pwned"))
    output = run_worker(workers)
    assert flow(signing) == []  # neither the planted callback nor its chain ran
    assert "then callback is refused" in output and "is not signed" in output
    status = b.status()
    assert status is not None and status.finished and status.succeeded == 1


def test_a_rewritten_catch_is_refused_and_logged(signing: RedisQueue, workers: Workers) -> None:
    b = batch([flows.member_fails.pending(0)]).catch(flows.batch_callback.pending("c")).dispatch()
    plant_callbacks(signing, b.id, catch=step_of(flows.batch_callback.pending("pwned-catch")))
    output = run_worker(workers)
    assert flow(signing) == []
    assert "catch callback is refused" in output
    status = b.status()
    assert status is not None and status.failed == 1


def test_a_planted_progress_callback_is_refused_and_logged(
    signing: RedisQueue, workers: Workers
) -> None:
    b = batch([flows.member.pending(i) for i in range(3)]).dispatch()
    plant_callbacks(signing, b.id, progress=step_of(flows.batch_callback.pending("pwned")))
    output = run_worker(workers)
    assert flow(signing) == []
    assert output.count("progress callback is refused") == 3


def test_a_callback_moved_from_another_batch_is_refused(
    signing: RedisQueue, workers: Workers
) -> None:
    """Signed, but for another batch: a signature is bound to its batch and role."""
    first = batch([flows.member.pending(0)]).then(flows.batch_callback.pending("A")).dispatch()
    second = batch([flows.member.pending(1)]).dispatch()
    store = BatchStore(signing)
    callbacks = signing.client.hget(store.keys(first.id).state, "callbacks")
    signing.client.hset(store.keys(second.id).state, "callbacks", callbacks)  # type: ignore[arg-type]
    output = run_worker(workers)
    assert flow(signing) == ["A:1/0/1"]  # once: its own batch's
    assert f"batch {second.id}: its then callback is refused" in output


def test_signed_callbacks_and_chains_run_with_a_secret(
    signing: RedisQueue, workers: Workers
) -> None:
    """What the dispatching process signed runs, arguments of every codec type too."""
    when = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
    b = (
        batch([flows.member.pending(0), flows.member_fails.pending(1)])
        .allow_failures()
        .then(flows.batch_callback.pending("then"))
        .catch(flows.batch_callback.pending("catch"))
        .finally_(flows.batch_callback.pending("finally"))
        .progress(flows.batch_callback.pending("progress"))
        .dispatch()
    )
    chain(
        flows.note.pending(Decimal("1.10")),
        flows.note.pending(when),
        flows.grow_chain.pending("x"),  # appends and prepends steps: the worker's own
        flows.explode.pending("bad"),
    ).catch(flows.on_failure.pending("chain")).dispatch()
    output = run_worker(workers)
    assert "refused" not in output, output
    done = flow(signing)
    assert sorted(s for s in done if s.startswith(("then", "catch", "finally"))) == [
        "catch:1/1/2",
        "catch:chain:ValueError:bad",
        "finally:1/1/2",
    ]
    assert len([s for s in done if s.startswith("progress:")]) == 1
    assert [s for s in done if s.startswith(("note:", "explode"))] == [
        "note:1.10",
        f"note:{when}",
        "note:prepended-after-x",
        "explode:bad",
    ]
    assert b.status() is not None


def test_an_unsigned_chain_step_in_a_signed_payload_is_refused(
    queue: RedisQueue, signing: RedisQueue, workers: Workers
) -> None:
    """A payload signed before steps were (or by a producer that signs no steps): its
    own task runs, the step it carries is not signed by a worker on trust."""
    job = flows.note.make_job(("first",), {}, {CHAIN: [step_of(flows.note.pending("next"))]})
    queue.push("default", [sign(encode(job), SECRET, "default")])  # signed once, here
    output = run_worker(workers)
    assert flow(signing) == ["note:first"]
    assert "refused the chain step 'workflow_tasks:note'" in output


def test_retry_leaves_a_planted_failed_member_alone(
    signing: RedisQueue, workers: Workers, caplog: pytest.LogCaptureFixture
) -> None:
    """A failed record planted for a batch, with a payload nobody signed, is not pushed
    back by ``Batch.retry()`` (nor the dashboard's, nor ``rqueue batches retry``)."""
    b = batch([flows.member_fails.pending(0), flows.member.pending(1)]).allow_failures().dispatch()
    run_worker(workers)
    planted = member_job(flows.member.pending(666), b.id, 1)
    payload = encode(planted)
    record = make_record("default", payload, "RuntimeError", "planted", "", planted, False)
    assert signing.fail("default", payload, record, force=True)
    signing.client.sadd(BatchStore(signing).keys(b.id).failed_ids, planted.id)
    with caplog.at_level(logging.ERROR, "rqueue.worker"):
        assert b.retry() == 1  # the genuine failed member only
    assert f"failed task {planted.id} is not retried" in caplog.text
    ready = signing.client.lrange(signing.keys("default").ready, 0, -1)
    assert len(ready) == 1 and planted.id.encode() not in ready[0]
    assert FailedTasks(signing).find_all({planted.id}, ["default"])  # left where it was


def test_a_planted_member_is_refused_and_not_counted(
    queue: RedisQueue, signing: RedisQueue, workers: Workers
) -> None:
    """An unsigned payload claiming a member's id and batch: refused before it runs,
    so it can neither count (finish the batch early) nor fire its callbacks."""
    b = (
        batch([flows.member.pending(0), flows.member.pending(1)])
        .then(flows.batch_callback.pending("then"))
        .dispatch()
    )
    planted = member_job(flows.member_fails.pending(9), b.id, 1)
    queue.push("default", [encode(planted)])  # no secret: not signed
    run_worker(workers)
    assert flow(signing) == ["then:2/0/2"]
    [refused] = FailedTasks(signing).list()
    assert refused.exception == "InvalidSignature" and refused.id == planted.id
