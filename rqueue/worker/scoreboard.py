"""Shared memory between the worker parent and its children, as in Apache's scoreboard.

Each child writes, without any system call, which tasks it holds and when the one it
runs must end. The parent reads that to kill a child that overruns and, when a child
dies, to give its tasks back at once instead of waiting for reservations to expire.
A sequence counter (a seqlock) lets the parent read a consistent slot without locks.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import struct
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple


class State(IntEnum):
    STARTING = 0
    WAITING = 1  # no task held; polling or blocked on an empty queue
    HOLDING = 2  # holds reserved tasks, none running (between tasks)
    RUNNING = 3  # entry ``current`` is running
    REPORTING = 4  # entry ``current - 1`` finished; hooks and listeners are running
    EMPTY = 5  # like WAITING, after finding every queue empty


class Held(NamedTuple):
    """A reserved task as the scoreboard knows it: its id and its attempt count."""

    id: str
    attempts: int


@dataclass(frozen=True)
class SlotView:
    state: State
    queue_index: int
    held: tuple[Held, ...]
    current: int
    deadline: float
    processed: int


_GLOBAL = struct.Struct("<Bxxxxxxxq")  # paused flag, tasks processed by exited children
_HEADER = struct.Struct("<qiiiidq")  # seq, state, queue, count, current, deadline, processed
_ENTRY = struct.Struct("<32sI")
_SEQ = struct.Struct("<q")
_TORN_AFTER = 0.05  # seconds a write may stay unfinished before the slot counts as torn
_GLOBAL_SIZE = _GLOBAL.size


class Scoreboard:
    """One slot per child, in an anonymous shared mapping created before forking."""

    def __init__(self, slots: int, max_held: int) -> None:
        self.slots = slots
        self.max_held = max_held
        self.slot_size = _HEADER.size + _ENTRY.size * max_held
        self._memory = mmap.mmap(-1, _GLOBAL_SIZE + self.slot_size * slots)
        # Under --max-jobs, children lock this around "how many may I take" + reserve
        # + hold, so that a limit counted over all children is never overshot. A POSIX
        # record lock, so a child killed while holding it cannot wedge its siblings.
        self._claims = tempfile.TemporaryFile()  # noqa: SIM115  (lives as long as the board)

    def slot(self, index: int) -> Slot:
        return Slot(self, index)

    @property
    def paused(self) -> bool:
        return bool(self._memory[0])

    @paused.setter
    def paused(self, value: bool) -> None:
        self._memory[0] = 1 if value else 0

    def retire(self, index: int) -> None:
        """Fold a dead child's processed count into the total and empty its slot."""
        paused, retired = _GLOBAL.unpack_from(self._memory, 0)
        _GLOBAL.pack_into(self._memory, 0, paused, retired + self._processed(index))
        self.clear(index)

    def offset(self, index: int) -> int:
        return _GLOBAL_SIZE + index * self.slot_size

    def read(self, index: int) -> SlotView | None:
        """A consistent view of a slot, or None if a write stays unfinished.

        A live child finishes a write within microseconds, so this retries briefly.
        A child killed halfway through one never finishes it: waiting for it would
        hang the parent, and the half-written slot may pair an old header (say,
        twenty tasks done) with a new batch's entries, so it must not be trusted.
        """
        deadline = time.monotonic() + _TORN_AFTER
        while (view := self._read_once(index)) is None:
            if time.monotonic() > deadline:
                return None
        return view

    def _processed(self, index: int) -> int:
        """A slot's processed count, read without waiting (a count, not a decision)."""
        processed: int = _HEADER.unpack_from(self._memory, self.offset(index))[6]
        return processed

    def _read_once(self, index: int) -> SlotView | None:
        offset = self.offset(index)
        memory = self._memory
        seq, state, queue, count, current, deadline, processed = _HEADER.unpack_from(memory, offset)
        held = tuple(
            Held(raw.decode("ascii", "replace"), attempts)
            for raw, attempts in _ENTRY.iter_unpack(
                memory[offset + _HEADER.size : offset + _HEADER.size + _ENTRY.size * count]
            )
        )
        if seq % 2 == 0 and _HEADER.unpack_from(memory, offset)[0] == seq:
            return SlotView(State(state), queue, held, current, deadline, processed)
        return None

    def clear(self, index: int) -> None:
        offset = self.offset(index)
        self._memory[offset : offset + self.slot_size] = bytes(self.slot_size)

    def total_processed(self) -> int:
        retired: int = _GLOBAL.unpack_from(self._memory, 0)[1]
        return retired + sum(self._processed(i) for i in range(self.slots))

    @contextlib.contextmanager
    def claiming(self) -> Iterator[None]:
        fcntl.lockf(self._claims, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.lockf(self._claims, fcntl.LOCK_UN)

    def taken(self) -> int:
        """Tasks processed, plus those children hold and have not processed yet.

        Each slot is read once, as one view: a child that finishes a task moves it from
        held to processed in a single write, so the sum never dips while it does. (Two
        passes, processed then held, could miss a task between them, and ``--max-jobs``
        would let one task too many be taken.) A torn slot counts what it processed.
        """
        total: int = _GLOBAL.unpack_from(self._memory, 0)[1]
        for index in range(self.slots):
            view = self.read(index)
            if view is None:
                total += self._processed(index)
            else:
                total += view.processed
                if view.state in (State.HOLDING, State.RUNNING, State.REPORTING):
                    total += len(view.held) - view.current
        return total


class Slot:
    """The writer side, used only by the child that owns the slot."""

    def __init__(self, board: Scoreboard, index: int) -> None:
        self._memory = board._memory
        self._offset = board.offset(index)
        self._seq = _HEADER.unpack_from(self._memory, self._offset)[0]
        self.board = board
        self.state = State.STARTING
        self.queue_index = 0
        self.count = 0
        self.current = 0
        self.deadline = 0.0
        self.processed = 0

    def hold(self, queue_index: int, headers: Sequence[tuple[str, int, int]]) -> None:
        """Record a new batch of reserved tasks, none started.

        ``headers`` are the tasks' ``(id, attempts, timeout_ms)`` as
        :func:`rqueue.payload.header` reads them; the timeout is not kept.
        """
        memory, offset, pack_into = self._memory, self._offset + _HEADER.size, _ENTRY.pack_into
        self._begin()
        for task_id, attempts, _ in headers:
            pack_into(memory, offset, task_id.encode("ascii", "replace"), attempts)
            offset += _ENTRY.size
        self.queue_index, self.count, self.current = queue_index, len(headers), 0
        self.state = State.HOLDING if headers else State.WAITING
        self.deadline = 0.0
        self._end()

    def set(self, state: State, current: int | None = None, deadline: float = 0.0) -> None:
        self._begin()
        self.state = state
        if current is not None:
            self.current = current
        if state in (State.WAITING, State.EMPTY):
            self.count = self.current = 0
        self.deadline = deadline
        self._end()

    def count_processed(self) -> None:
        self.processed += 1

    def _begin(self) -> None:
        self._seq += 1
        _SEQ.pack_into(self._memory, self._offset, self._seq)

    def _end(self) -> None:
        _HEADER.pack_into(
            self._memory,
            self._offset,
            self._seq + 1,
            self.state,
            self.queue_index,
            self.count,
            self.current,
            self.deadline,
            self.processed,
        )
        self._seq += 1
