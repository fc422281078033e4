"""The scoreboard's counts, read by one process while another writes: ``--max-jobs``
counts over all children, so a count that misses a task lets one too many be taken.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from rqueue.worker import scoreboard
from rqueue.worker.scoreboard import Scoreboard, SlotView, State

_DONE = 3


class _RetiringBoard(Scoreboard):
    """A board that retires slot 0 just before its ``retire_at``-th read."""

    def __init__(self, retire_at: int) -> None:
        super().__init__(slots=2, max_held=4)
        self.retire_at, self.reads = retire_at, 0

    def _before_read(self) -> None:
        self.reads += 1
        if self.reads == self.retire_at:
            self.retire(0)

    def read(self, index: int) -> SlotView | None:
        self._before_read()
        return super().read(index)

    def _processed(self, index: int) -> int:
        self._before_read()
        return super()._processed(index)

    def _retired(self) -> int:
        self._before_read()
        return super()._retired()


def _finished_child(board: Scoreboard) -> None:
    """Child 0 took and processed ``_DONE`` tasks, then exited."""
    slot = board.slot(0)
    slot.hold(0, [("a" * 32, 1, 0)] * _DONE)
    for current in range(1, _DONE + 1):
        slot.count_processed()
        slot.set(State.HOLDING, current)


@pytest.mark.parametrize("retire_at", range(1, 4))  # a count reads the board 3 times
def test_a_count_never_misses_a_child_retired_meanwhile(retire_at: int) -> None:
    """Children used to read the total first: a retire just after it hid the child's
    tasks from both, and --max-jobs let a fourth task of three be taken."""
    board = _RetiringBoard(retire_at)
    _finished_child(board)
    assert board.taken() >= _DONE
    assert Scoreboard._retired(board) == _DONE  # the retire did happen mid-count

    board = _RetiringBoard(retire_at)
    _finished_child(board)
    assert board.total_processed() >= _DONE
    assert Scoreboard._retired(board) == _DONE


def test_counts_are_exact_once_retired() -> None:
    board = Scoreboard(slots=2, max_held=4)
    _finished_child(board)
    board.retire(0)
    assert (board.taken(), board.total_processed()) == (_DONE, _DONE)


class _RecordingHeader:
    """The header's layout, recording the counter each write leaves in the slot."""

    def __init__(self, layout: struct.Struct, memory: Any, offset: int) -> None:
        self._layout, self._memory, self._offset = layout, memory, offset
        self.size = layout.size
        self.counters: list[int] = []

    def pack_into(self, buffer: Any, offset: int, *fields: Any) -> None:
        self._layout.pack_into(buffer, offset, *fields)
        self.counters.append(struct.unpack_from("<q", self._memory, self._offset)[0])

    def unpack_from(self, buffer: Any, offset: int = 0) -> tuple[Any, ...]:
        return self._layout.unpack_from(buffer, offset)


def test_a_header_write_leaves_the_slot_marked_unfinished(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The counter went even in the same write as the fields: a reader could load it
    first and accept a new ``current`` beside an old ``processed``."""
    board = Scoreboard(slots=1, max_held=4)
    slot = board.slot(0)
    header = _RecordingHeader(scoreboard._HEADER, board._memory, board.offset(0))
    monkeypatch.setattr(scoreboard, "_HEADER", header)
    slot.hold(0, [("a" * 32, 1, 0)])
    slot.count_processed()
    slot.set(State.HOLDING, 1)
    assert header.counters and all(counter % 2 == 1 for counter in header.counters)
    view = board.read(0)
    assert view is not None and (view.processed, view.unfinished()) == (1, 0)


def test_a_started_task_is_named_in_its_entry_until_the_entry_holds_another() -> None:
    board = Scoreboard(slots=1, max_held=3)
    slot = board.slot(0)
    slot.hold(0, [("a" * 32, 1, 0), ("b" * 32, 1, 0)])
    assert board.task_name(0, 0) is None  # held, not started: no name yet
    slot.start(0, "app:send_welcome", 0.0)
    assert board.task_name(0, 0) == "app:send_welcome"
    slot.start(1, "mod:" + "x" * 200, 0.0)  # too long for the entry: left to a lookup
    assert board.task_name(0, 1) is None
    assert board.read(0) == SlotView(
        State.RUNNING, 0, (scoreboard.Held("a" * 32, 1), scoreboard.Held("b" * 32, 1)), 1, 0.0, 0
    )
    slot.hold(0, [("c" * 32, 1, 0)])
    assert board.task_name(0, 0) is None  # a new batch's entry forgets the old name
    assert board.task_name(0, 5) is None  # out of range: nothing


def _concurrent(board: Scoreboard) -> scoreboard.Slot:
    """Slot 0 in concurrent mode, its first task (``app:first``, entry 0) running."""
    slot = board.slot(0)
    slot.hold(0, [("a" * 32, 1, 0)])
    slot.start(0, "app:first", 5.0)
    slot.enter_concurrent()
    return slot


def test_a_slot_mode_entry_is_named_when_it_starts() -> None:
    board = Scoreboard(slots=1, max_held=4)
    slot = _concurrent(board)
    (entry,) = slot.hold(0, [("b" * 32, 1, 0)])
    assert board.task_name(0, entry) is None
    slot.start(entry, "app:second", 6.0)
    assert (board.task_name(0, 0), board.task_name(0, entry)) == ("app:first", "app:second")
    view = board.read(0)
    assert view is not None and [e.state for e in view.entries][:2] == [
        scoreboard.Entry.RUNNING,
        scoreboard.Entry.RUNNING,
    ]


def test_a_concurrent_batch_takes_the_lowest_free_entries_however_they_were_freed() -> None:
    board = Scoreboard(slots=1, max_held=6)
    slot = _concurrent(board)
    assert list(slot.hold(0, [("b" * 32, 1, 0)] * 3)) == [1, 2, 3]
    slot.finished(2)
    slot.linger(1, 9.0)  # done, but its thread runs on: not free until it ends
    slot.finished(0)
    slot.forget([3])  # given back unstarted: free at once
    slot.recycle_done()  # 0 and 2 are free now; 1 keeps its deadline
    assert (slot.free(), slot.running()) == (5, 0)
    assert list(slot.hold(0, [("c" * 32, 1, 0)] * 4)) == [0, 2, 3, 4]
    slot.finished(1)
    slot.recycle_done()
    assert list(slot.hold(0, [("d" * 32, 1, 0)] * 2)) == [1, 5]
    with pytest.raises(RuntimeError, match="full"):
        slot.hold(0, [("e" * 32, 1, 0)])
    view = board.read(0)
    assert view is not None and [e.held.id[0] for e in view.entries] == list("cdcccd")
