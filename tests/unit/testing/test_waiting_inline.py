"""``sync()`` and ``fake().run_all()`` run a call dispatched ``using(after=[...])`` as
workers would: after the calls it waits for, or failed unrun when one failed."""

from __future__ import annotations

from collections.abc import Iterator

import dependency_tasks as deps
import pytest

from rqueue import TaskFailed
from rqueue.tasks.handles import Dispatched
from rqueue.testing import fake, sync


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    deps.seen.clear()
    yield
    deps.seen.clear()


def test_sync_runs_it_after_what_it_waits_for() -> None:
    with sync():
        first = deps.remember.dispatch("a")
        report = deps.remember.using(after=[first]).dispatch("report")
        assert report.result() == "report"
        bad = deps.refuse.dispatch("bad")
        failing = deps.remember.using(after=[first, bad]).dispatch("never")
        with pytest.raises(TaskFailed) as failure:
            failing.result()
        allowed = deps.remember.using(after=[bad], allow_failures=True).dispatch("anyway")
        assert allowed.result() == "anyway"
    assert failure.value.exception == "DependencyFailed"
    assert bad.id in failure.value.message and "ValueError: bad refused" in failure.value.message
    assert deps.seen == ["a", "report", "bad", "anyway"]


def test_fake_records_the_after_ids_and_run_all_keeps_the_order() -> None:
    with fake() as recorded:
        first = deps.remember.dispatch("a")
        report = deps.remember.using(after=[first]).dispatch("report")
        recorded.assert_dispatched(
            deps.remember,
            times=1,
            where=lambda c: [h.id for h in c.task.options.after] == [first.id],
        )
        assert report.status() == "pending"
        last = deps.remember.using(after=[report]).dispatch("last")
        # Recorded before what it waits for: held until then, as on a worker.
        bad = deps.refuse.dispatch("bad")
        failing = deps.remember.using(after=[bad]).dispatch("never")
        recorded.run_all()
    assert deps.seen == ["a", "report", "last", "bad"]
    assert last.result() == "last"
    with pytest.raises(TaskFailed):
        failing.result()


def test_a_call_waiting_for_a_call_that_never_ran_stays_waiting() -> None:
    with fake() as recorded:
        first = deps.remember.dispatch("a")
        report = deps.remember.using(after=[first]).dispatch("report")
        assert first.cancel()
        recorded.run_all()
    assert report.status() == "failed"
    with fake() as recorded:
        elsewhere = Dispatched("f" * 32, "x:y", "default")
        waiting = deps.remember.using(after=[elsewhere]).dispatch("w")
        recorded.run_all()
        assert waiting.status() == "waiting"
    assert deps.seen == []
