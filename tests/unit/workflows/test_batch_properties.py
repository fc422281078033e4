"""A state machine of batch counting (issue 12) on the real Lua scripts and Redis.

Random sequences of members succeeding, failing, being skipped, running again (a
worker that died before its ack), being retried after failing, adds, cancels and
batch retries go through ``BatchStore`` (batch_open/member/add/cancel/retry.lua);
after every step Redis must agree with the plain-Python model of
``rqueue.testing.batch_counting`` (the one the inline runner counts by): the counts,
the failed ids, the pending count, cancelled and finished, the callbacks due in
each call (in the script's order), each of then/catch/finally due in exactly one
counted call, and a finished batch expiring whole. Successes may send a value
(a callback gets the results): Redis keeps exactly the values of the successes the
model counted, each once, and counts as failed ('x') the success that would take them
over their bound.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import msgpack
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from support import run_machine

from rqueue.encoding.payload import new_id
from rqueue.settings.config import Config
from rqueue.store.batch_store import BatchStore, Counted
from rqueue.store.queue import RedisQueue
from rqueue.testing.batch_counting import ONCE, MemberCounting
from rqueue.workflows.batches import Batch, member_id

CALLBACKS = msgpack.packb({"then": {}, "catch": {}, "finally": {}})
KEEP_MS = 3_600_000
MOST_BYTES = 40
"""RQUEUE_MAX_BATCH_RESULTS_BYTES of the machine: a few values reach it."""


class BatchMachine(RuleBasedStateMachine):
    """One batch in Redis, and what it should hold: each member's outcome by index."""

    connection: RedisQueue

    def __init__(self) -> None:
        super().__init__()
        self.connection.client.flushall()
        self.store = BatchStore(self.connection)
        self.batch_id = new_id()
        self.model = MemberCounting(0, False, False, MOST_BYTES)
        self.outcomes = self.model.outcomes
        """Index -> 's', 'f' or 'k': how each counted member stands now."""
        self.due_by = self.model.due_by
        """Callback -> the index of the member whose counted call made it due."""
        self.fired: Counter[str] = Counter()
        """How many counted calls said each callback was due: never more than one."""
        self.finished = False
        """Set by any member call that finds nothing pending; a batch retry clears it."""
        self.tokens: dict[str, tuple[int, int]] = {}
        """An add() call's token -> (first index, count)."""
        self.last: tuple[int, str, bytes | None] | None = None
        self.values: dict[int, bytes] = {}
        """Index -> the value Redis should keep: sent with the success that counted."""

    @property
    def total(self) -> int:
        return self.model.total

    @total.setter
    def total(self, total: int) -> None:
        self.model.total = total

    @property
    def cancelled(self) -> bool:
        return self.model.cancelled

    @cancelled.setter
    def cancelled(self, cancelled: bool) -> None:
        self.model.cancelled = cancelled

    # -- the model -------------------------------------------------------------------

    def _count(self, outcome: str) -> int:
        return self.model.count_of(outcome)

    def _pending(self) -> int:
        return self.model.pending()

    def _report(
        self, reported: list[tuple[int, str]] | list[tuple[int, str, bytes | None]]
    ) -> None:
        """Count members in one call (a worker counts the successes it finished since
        its last reserve call so); the model counts them one after another. A member
        is (index, outcome) or (index, outcome, the value a success sends)."""
        members = [(m[0], m[1], m[2] if len(m) > 2 else None) for m in reported]
        calls = [(i, outcome, member_id(self.batch_id, i), value) for i, outcome, value in members]
        reply = self.store.count(self.batch_id, calls)
        assert reply.exists
        counted, due = "", []
        for index, outcome, value in members:
            size = None if value is None else len(value)
            if outcome == "s" and self.model.over(index, size):
                changed, names = self.model.count(index, "f")
                counted += "x"
            else:
                changed, names = self.model.count(index, outcome, size)
                counted += "1" if changed else "0"
                if changed and outcome == "s" and value is not None:
                    self.values[index] = value
            if names:
                due.append((index, tuple(names)))
            if changed:
                self.fired.update(name for name in names if name in ONCE)
        if self._pending() == 0:
            self.finished = True
        assert reply.counted == counted, (members, self.outcomes)
        assert [(d.member_index, d.names) for d in reply.due] == due, (members, self.due_by)
        assert reply.callbacks == (CALLBACKS if due else b"")
        assert reply.cancelled == self.cancelled
        self.last = members[-1]

    # -- the rules -------------------------------------------------------------------
    # Members are drawn by a number used modulo the total, so a sequence replays
    # whatever adds came before it.

    @initialize(total=st.integers(1, 6), allow_failures=st.booleans(), progress=st.booleans())
    def open(self, total: int, allow_failures: bool, progress: bool) -> None:
        self.total, self.model.allow_failures = total, allow_failures
        self.model.progress = progress
        options = (allow_failures, CALLBACKS, KEEP_MS, ["default"], progress)
        assert self.store.open(self.batch_id, total, "props", *options, results=True) > 0
        # Opened once: a second open resets nothing.
        again = (not allow_failures, b"", 1, ["other"])
        assert self.store.open(self.batch_id, total + 1, "again", *again) == 0

    @rule(number=st.integers(0, 50))
    def succeed(self, number: int) -> None:
        self._report([(number % self.total, "s")])

    @rule(number=st.integers(0, 50), value=st.binary(max_size=20))
    def succeed_with_value(self, number: int, value: bytes) -> None:
        """A member of a batch whose callback gets the results sends its value."""
        self._report([(number % self.total, "s", value)])

    @rule(
        numbers=st.lists(
            st.tuples(st.integers(0, 50), st.binary(max_size=12)), min_size=1, max_size=6
        )
    )
    def succeed_together_with_values(self, numbers: list[tuple[int, bytes]]) -> None:
        self._report([(number % self.total, "s", value) for number, value in numbers])

    @rule(numbers=st.lists(st.integers(0, 50), min_size=2, max_size=6))
    def succeed_together(self, numbers: list[int]) -> None:
        """Successes counted in one call, before the call carrying their acks: the
        same as one call each (a member may come twice: it ran twice meanwhile)."""
        self._report([(number % self.total, "s") for number in numbers])

    @rule(number=st.integers(0, 50))
    def fail(self, number: int) -> None:
        self._report([(number % self.total, "f")])

    @rule(number=st.integers(0, 50))
    def skip(self, number: int) -> None:
        self._report([(number % self.total, "k")])

    @precondition(lambda self: self.last is not None)
    @rule()
    def run_again(self) -> None:
        """The last member's worker died before its ack: it runs and reports again."""
        assert self.last is not None
        self._report([self.last])

    @precondition(lambda self: "f" in self.outcomes.values())
    @rule(number=st.integers(0, 50))
    def retry_failed(self, number: int) -> None:
        """A member that failed for good is retried (``rqueue batches retry``) and succeeds."""
        failed = sorted(i for i, o in self.outcomes.items() if o == "f")
        self._report([(failed[number % len(failed)], "s")])

    @precondition(lambda self: self._pending() > 0)
    @rule(count=st.integers(1, 3))
    def add(self, count: int) -> None:
        """A running member (so the batch is not finished) adds members."""
        token = f"{new_id()}:1"
        first, results = self.store.add(self.batch_id, token, count, ["default", "other"])
        assert (first, results) == (self.total, True)
        self.tokens[token] = (first, count)
        self.total += count

    @precondition(lambda self: bool(self.tokens))
    @rule(number=st.integers(0, 50))
    def add_again(self, number: int) -> None:
        """The adding member runs again: the same call gets the same indexes, adds none."""
        tokens = sorted(self.tokens)
        token = tokens[number % len(tokens)]
        first, count = self.tokens[token]
        assert self.store.add(self.batch_id, token, count, ["default"]) == (first, True)

    @rule()
    def retry_batch(self) -> None:
        """``rqueue batches retry``: its failed members are pending again, and the batch
        opened again (not cancelled, finished nor expiring), before they are pushed
        back; ``retry_failed`` then runs them."""
        failed = sorted(i for i, o in self.outcomes.items() if o == "f")
        members = [(i, member_id(self.batch_id, i)) for i in failed]
        assert self.store.reopen(self.batch_id, members) == len(failed)
        for index in failed:
            del self.outcomes[index]
        if failed:
            self.cancelled = self.finished = False

    @rule()
    def cancel(self) -> None:
        """A finished batch is not cancelled after the fact (2): nothing is left to skip."""
        if self.cancelled:
            assert self.store.cancel(self.batch_id) == 0
        elif self.finished:
            assert self.store.cancel(self.batch_id) == 2
        else:
            assert self.store.cancel(self.batch_id) == 1
            self.cancelled = True

    @rule(beyond=st.integers(0, 5))
    def not_a_member(self, beyond: int) -> None:
        """An index past the total (a forged payload) is refused and changes nothing."""
        reply = self.store.count(self.batch_id, [(self.total + beyond, "s", "x" * 32, None)])
        assert reply.exists and reply.counted == "-" and not reply.due

    # -- the invariants --------------------------------------------------------------

    @invariant()
    def counts_agree_with_the_model(self) -> None:
        state = self.store.read(self.batch_id)
        assert state is not None
        succeeded, failed, skipped = self._count("s"), self._count("f"), self._count("k")
        assert (state.total, state.succeeded, state.failed, state.skipped) == (
            self.total,
            succeeded,
            failed,
            skipped,
        )
        failed_ids = sorted(
            member_id(self.batch_id, i) for i, o in self.outcomes.items() if o == "f"
        )
        assert list(state.failed_ids) == failed_ids
        assert state.queues == (("default", "other") if self.tokens else ("default",))
        status = Batch(self.batch_id, self.connection).status()
        assert status is not None
        assert status.pending == self.total - succeeded - failed - skipped == self._pending()
        assert status.processed == succeeded + failed
        assert status.cancelled == self.cancelled == (self.store.cancelled(self.batch_id) is True)
        assert status.finished == self.finished

    @invariant()
    def the_values_kept_are_those_of_the_successes_counted(self) -> None:
        client, keys = self.connection.client, self.store.keys(self.batch_id)
        kept = {int(index): value for index, value in client.hgetall(keys.results).items()}
        assert kept == self.values
        held = int(client.hget(keys.state, "results_bytes") or 0)
        assert held == sum(map(len, self.values.values())) == self.model.results_bytes
        assert held <= MOST_BYTES

    @invariant()
    def each_callback_is_due_in_at_most_one_counted_call(self) -> None:
        assert all(self.fired[name] <= 1 for name in ONCE), self.fired
        assert set(self.due_by) == {name for name in ONCE if self.fired[name]}
        # Due once its condition held: all finished, all succeeded, a failure.
        if self.finished:
            assert "finally" in self.due_by
        if self._count("s") == self.total:
            assert "then" in self.due_by
        if self._count("f"):
            assert "catch" in self.due_by

    @invariant()
    def a_finished_batch_expires_whole(self) -> None:
        """Once finished every key of the batch has a TTL; none outlives the others."""
        client, keys = self.connection.client, self.store.keys(self.batch_id)
        ttls = {key: client.pttl(key) for key in keys.all() if client.exists(key)}
        if self.finished:
            assert all(0 < ttl <= KEEP_MS for ttl in ttls.values()), ttls
        else:
            assert all(ttl == -1 for ttl in ttls.values()), ttls


def due_names(reply: Counted) -> tuple[str, ...]:
    """The callbacks one member's count made due."""
    return reply.due[0].names if reply.due else ()


def test_a_member_retried_after_its_batch_finished_still_expires_with_it(
    queue: RedisQueue,
) -> None:
    """Every member of a batch that allows failures failed, so it finished; then one
    is retried as any failed task (``rqueue failed retry``, not ``rqueue batches
    retry``) and succeeds. The bitmap that success creates must expire with the
    batch, not outlive it for ever."""
    store = BatchStore(queue)
    batch_id = new_id()
    store.open(batch_id, 2, "", True, CALLBACKS, KEEP_MS, ["default"])
    assert due_names(store.count(batch_id, [(0, "f", member_id(batch_id, 0), None)])) == ("catch",)
    assert due_names(store.count(batch_id, [(1, "f", member_id(batch_id, 1), None)])) == (
        "finally",
    )
    assert store.count(batch_id, [(0, "s", member_id(batch_id, 0), None)]).counted == "1"
    keys = store.keys(batch_id)
    ttls = {key: queue.client.pttl(key) for key in keys.all() if queue.client.exists(key)}
    assert keys.succeeded in ttls
    assert all(0 < ttl <= KEEP_MS for ttl in ttls.values()), ttls


def test_a_missing_batch_counts_nothing(queue: RedisQueue) -> None:
    store = BatchStore(queue)
    batch_id = new_id()
    reply = store.count(batch_id, [(0, "s", member_id(batch_id, 0), None)])
    assert not reply.exists and not reply.counted and not reply.due
    assert store.add(batch_id, "token", 1, ["default"]) == (-1, False)
    assert store.cancel(batch_id) == -1
    assert store.read(batch_id) is None and store.cancelled(batch_id) is None
    assert not queue.client.keys("*")  # nothing was created by the calls above


@pytest.mark.timeout(120)
def test_batch_counts_are_exact_after_any_sequence(config: Config) -> None:
    run_machine(BatchMachine, replace(config, max_batch_results_bytes=MOST_BYTES), 80, 30)
