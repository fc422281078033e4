"""Calls dispatched ``using(after=[...])`` in a test (``sync()``, ``fake().run_all()``):
held until every call they wait for has an outcome, then run as a worker would run
them, right after the last one; or failed unrun with ``DependencyFailed`` when one
failed or was cancelled (run anyway with ``allow_failures``), with the reason a worker
gives (``tasks/dependencies.py``). A call waiting for an id this test never ran (a
``result_of`` of a real task) stays ``waiting``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple, Protocol

from rqueue.errors import DependencyFailed, TaskFailed
from rqueue.store.header import payload_id
from rqueue.tasks.definition import PendingDispatch
from rqueue.tasks.dependencies import Outcome, reason
from rqueue.tasks.handles import Dispatched

_FINAL = ("succeeded", "failed", "cancelled")


class Ended(Protocol):
    """How a call ended, as the inline runner keeps it (``inline.Outcome``)."""

    task: str
    status: str
    failure: TaskFailed | None


class _Waiting(NamedTuple):
    task: str
    payload: bytes
    after: tuple[Dispatched, ...]
    allow_failures: bool


class Waits:
    """The calls of one inline runner that wait for others, by id."""

    def __init__(
        self,
        outcomes: Mapping[str, Ended],
        statuses: dict[str, str],
        fail: Callable[[str, str, TaskFailed], None],
    ) -> None:
        self.outcomes = outcomes
        self.statuses = statuses
        """The runner's statuses of calls not run yet: ``waiting`` while held here."""
        self.fail = fail
        """Records a call failed unrun: its id, its task's name and the failure."""
        self.declared: dict[str, PendingDispatch] = {}
        self.held: dict[str, _Waiting] = {}

    def note(self, task_id: str, call: PendingDispatch) -> None:
        """A call made into a payload: remembered if it waits for others."""
        if call.task.options.after:
            self.declared[task_id] = call

    def holds(self, payload: bytes) -> bool:
        """True if the call must not run now: it waits (until :meth:`release`), or it
        failed unrun just now."""
        task_id = payload_id(payload) if self.declared else None
        call = self.declared.pop(task_id, None) if task_id else None
        if task_id is None or call is None:
            return False
        options = call.task.options
        self.held[task_id] = _Waiting(
            call.task.name, payload, options.after, options.allow_failures
        )
        if self._runs(task_id):
            del self.held[task_id]
            return False
        return True

    def release(self, run: Callable[[bytes], object]) -> None:
        """Run (with ``run``) or fail each held call whose wait is over, until none is."""
        while True:
            # Over a copy: _runs drops a call it fails from self.held.
            due = [task_id for task_id in list(self.held) if self._runs(task_id)]
            if not due:
                return
            for task_id in due:
                run(self.held.pop(task_id).payload)

    def _runs(self, task_id: str) -> bool:
        """True if the held call may run now; it stays held (``waiting``) while a call
        it waits for has no outcome, and is failed (and dropped) when one failed."""
        waiting = self.held[task_id]
        ended = [(h, self.outcomes.get(h.id)) for h in waiting.after]
        if any(found is None or found.status not in _FINAL for _, found in ended):
            self.statuses[task_id] = "waiting"
            return False
        self.statuses.pop(task_id, None)
        for handle, found in ended:
            assert found is not None
            if found.status != "succeeded" and not waiting.allow_failures:
                failure = found.failure
                error = f"{failure.exception}: {failure.message}" if failure else ""
                why = reason(Outcome(handle.id, handle.queue, found.status, found.task, error))
                del self.held[task_id]
                self.fail(
                    task_id, waiting.task, TaskFailed(task_id, DependencyFailed.__name__, why)
                )
                return False
        return True
