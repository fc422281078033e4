"""Nested workflows give the same outcomes on real workers, under ``sync()`` and in a
fake's ``run_all()``; and a fake records them with their structure."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import workflow_tasks as flows
from support import Workers, strings, wait_for

from rqueue import Batch, batch, chain
from rqueue.store.queue import RedisQueue
from rqueue.testing import fake, sync

EXPECTED = sorted(
    [
        "note:a",
        "note:x1",
        "note:y1",
        "note:d1",
        "note:d2",
        "then:2/0/2",
        "note:c",
        "explode:boom",
        "catch:member:ValueError:boom",
        "note:z",
        "finally:1/1/2",
    ]
)


def dispatch_all() -> Callable[[], tuple[object, ...]]:
    """Dispatch two nested workflows; return what reads their counts once they ran."""
    inner = batch([chain(flows.note.pending("x1"), flows.note.pending("y1"))])
    inner = batch([*inner.calls, batch([flows.note.pending("d1"), flows.note.pending("d2")])])
    inner = inner.then(flows.batch_callback.pending("then"))
    chain(flows.note.pending("a"), inner, flows.note.pending("c")).dispatch()
    failing = chain(flows.explode.pending("boom"), flows.note.pending("never"))
    members = [failing.catch(flows.on_failure, "member"), flows.note.pending("z")]
    opened = (
        batch(members).allow_failures().finally_(flows.batch_callback.pending("finally")).dispatch()
    )

    def counts() -> tuple[object, ...]:
        status = opened.status()
        assert status is not None
        return status.total, status.succeeded, status.failed, status.finished

    return counts


@pytest.mark.parametrize("mode", ["workers", "sync", "fake"])
def test_every_way_of_running_gives_the_same_outcomes(
    queue: RedisQueue, workers: Workers, mode: str
) -> None:
    if mode == "sync":
        with sync():
            counts = dispatch_all()
    elif mode == "fake":
        with fake() as recorded:
            counts = dispatch_all()
            recorded.run_all()
    else:
        counts = dispatch_all()
        workers.start("--concurrency", "2")
        wait_for(lambda: len(strings(queue.client, flows.DONE)) == len(EXPECTED), 30, "all")
    assert sorted(strings(queue.client, flows.DONE)) == EXPECTED
    assert counts() == (2, 1, 1, True)


def test_a_fake_records_nested_workflows_with_their_shape() -> None:
    with fake() as recorded:
        resize = batch(
            [flows.note.pending(1), chain(flows.note.pending(2), flows.double.pending(3))]
        )
        chain(flows.note.pending("a"), resize, flows.note.pending("c")).dispatch()
    recorded.assert_chained([flows.note, [flows.note, (flows.note, flows.double)], flows.note])
    recorded.assert_chained(
        [flows.note.pending("a"), [flows.note.pending(1), (flows.note, flows.double)], flows.note]
    )
    with pytest.raises(AssertionError, match=r"batch\(\[workflow_tasks:note\(1\), chain\("):
        recorded.assert_chained([flows.note, [flows.note, flows.note], flows.note])
    recorded.assert_dispatched(flows.note, times=1)  # the first step only, as a worker


def test_a_chain_run_inline_gives_a_handle_on_its_batch_step(queue: RedisQueue) -> None:
    with sync():
        steps = chain(
            flows.note.pending("a"), batch([flows.note.pending("b")]), flows.note.pending("c")
        )
        dispatched = steps.dispatch()
    opened = dispatched.steps[1]
    assert isinstance(opened, Batch)
    status = opened.status()
    assert status is not None and (status.total, status.succeeded, status.finished) == (1, 1, True)
    assert dispatched.status()[1] == "succeeded"
