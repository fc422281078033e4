"""batch_member.lua's counting rule, in Python: one model for inline batches and tests.

A worker counts a batch member's outcome in Redis (store/lua/batch_member.lua); the
inline runner (``sync()``, ``fake().run_all()``) counts it in memory by this model,
and tests/unit/workflows/test_batch_properties.py checks the model against the script after random
sequences of outcomes, re-runs, retries and adds. So "what an inline batch does" and
"what the script does" cannot drift apart unnoticed.

The rule: a member is counted once per outcome it moves to (a success replaces a
failure or a skip, a failure replaces a skip, a skip replaces nothing). Each of
``catch``, ``then`` and ``finally`` is due in one counted call only, the one whose
member made it due (a re-run of that same member sees it due again; the worker's push
is idempotent). The first failure cancels the batch unless it allows failures.
``progress`` is due after every success. A success that sends its value (for a
callback that gets the results) is counted as a failure instead if the values kept
would go over their bound (:meth:`MemberCounting.over`).
"""

from __future__ import annotations

ONCE = ("catch", "then", "finally")
"""The callbacks due in exactly one counted call, in the order the script names them."""


class MemberCounting:
    """One batch's members by outcome (``s`` succeeded, ``f`` failed, ``k`` skipped)."""

    def __init__(
        self, total: int, allow_failures: bool, progress: bool, most_bytes: int = 2**63
    ) -> None:
        self.total = total
        self.allow_failures = allow_failures
        self.progress = progress
        self.most_bytes = most_bytes
        """What the values kept may weigh together (RQUEUE_MAX_BATCH_RESULTS_BYTES)."""
        self.results_bytes = 0
        self.outcomes: dict[int, str] = {}
        """Index -> how each counted member stands now."""
        self.due_by: dict[str, int] = {}
        """Callback -> the index of the member whose counted call made it due."""
        self.cancelled = False

    def count_of(self, outcome: str) -> int:
        return sum(1 for counted in self.outcomes.values() if counted == outcome)

    def pending(self) -> int:
        return self.total - len(self.outcomes)

    def changes(self, index: int, outcome: str) -> bool:
        """Whether reporting ``outcome`` for ``index`` counts (the script's rule)."""
        now = self.outcomes.get(index)
        if outcome == "s":
            return now != "s"
        if outcome == "f":
            return now in (None, "k")
        return now is None

    def over(self, index: int, size: int | None) -> bool:
        """Whether a success sending a value of ``size`` bytes (None: none) is counted
        as a failure instead: its value would take the values kept over their bound."""
        if size is None or self.outcomes.get(index) == "s":
            return False
        return self.results_bytes + size > self.most_bytes

    def count(self, index: int, outcome: str, size: int | None = None) -> tuple[bool, list[str]]:
        """Report a member's outcome (with a success, the size of the value it sends, if
        any): whether it counted, and the callbacks due now, in the script's order. Ask
        :meth:`over` first: a success over the bound is reported as ``f``."""
        counted = self.changes(index, outcome)
        if counted and outcome == "s" and size is not None:
            self.results_bytes += size
        if counted:
            self.outcomes[index] = outcome
            succeeded = self.count_of("s")
            conditions = {
                "catch": outcome == "f",
                "then": succeeded == self.total,
                "finally": len(self.outcomes) == self.total,
            }
            due = [name for name in ONCE if conditions[name] and name not in self.due_by]
            self.due_by.update(dict.fromkeys(due, index))
            if "catch" in due and not self.allow_failures:
                self.cancelled = True  # the first failure cancels the batch
        else:
            due = [name for name in ONCE if self.due_by.get(name) == index]
        if outcome == "s" and self.progress:
            due.append("progress")
        return counted, due
