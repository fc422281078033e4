"""The inline runner (``sync()``) settles a task that raised ``TaskCancelled`` as a
worker does: ``cancelled``, not retried, its ``after_cancelled`` hook called, its
chain stopped."""

from __future__ import annotations

import cancel_tasks as ct

from rqueue import chain
from rqueue.testing import sync


def test_a_task_raising_task_cancelled_is_cancelled_inline_not_retried() -> None:
    ct.GAVE_UP.clear()
    with sync():
        handle = ct.gives_up.dispatch("alone")
        steps = chain(ct.gives_up.pending("first"), ct.gives_up.pending("second")).dispatch()
    assert handle.status() == "cancelled"
    assert [s.status() for s in steps.steps] == ["cancelled", "unknown"]
    assert ct.GAVE_UP == ["alone", "first"]  # once each: no retry, the chain stopped
