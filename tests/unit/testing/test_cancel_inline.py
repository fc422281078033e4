"""The inline runner (``sync()``) decides a cancel as a worker does: by whether the
run was asked to stop, not by the exception's type. A task that raises
``TaskCancelled`` with no cancel asked for it (``result()`` of a cancelled task) failed:
retried, then failed, its ``after_cancelled`` hook never called."""

from __future__ import annotations

import cancel_tasks as ct
import pytest

from rqueue import TaskFailed, chain
from rqueue.testing import sync


def test_a_task_raising_task_cancelled_unasked_is_retried_and_fails_inline() -> None:
    ct.GAVE_UP.clear()
    ct.RAN.clear()
    with sync():
        handle = ct.gives_up.dispatch("alone")
        steps = chain(ct.gives_up.pending("first"), ct.gives_up.pending("second")).dispatch()
    assert handle.status() == "failed"
    with pytest.raises(TaskFailed) as raised:
        handle.result()
    assert raised.value.exception == "TaskCancelled"
    assert [s.status() for s in steps.steps] == ["failed", "unknown"]  # the chain stopped
    assert ct.RAN == ["alone"] * 3 + ["first"] * 3  # every try used: retried as any error
    assert ct.GAVE_UP == []  # not cancelled: no after_cancelled
