"""Shared memory between the worker parent and its children, as in Apache's scoreboard.

Each child writes, without any system call, which tasks it holds and when the one it
runs must end. The parent reads that to kill a child that overruns and, when a child
dies, to give its tasks back at once instead of waiting for reservations to expire.
A sequence counter (a seqlock) lets the parent read a consistent slot without locks.

A child in process mode runs its batch in order, so one index (``current``) says
which tasks are done, running and not started. A child running ``async def`` tasks
(concurrent mode, ``concurrent.py``) has many running at once, from several batches: its slot
is then ``CONCURRENT``, each entry carries its own state, queue and kill deadline,
and the header's deadline is the earliest of them.

One region goes the other way: the parent writes there, per entry, the id of a
running task whose cancel it is delivering (``cancels.py``), then signals the child,
which compares it with the id of the task it runs in that entry. The parent is that
region's only writer, as each child is its slot's, so no seqlock is shared: a child
that reads an id another task's cancel left there sees it differ, and ignores it.
"""

from __future__ import annotations

import contextlib
import fcntl
import heapq
import mmap
import struct
import tempfile
import time
from collections.abc import Iterator, Sequence

from rqueue.worker.scoreboard_views import Entry, EntryView, Held, SlotView, State

# A slot's states and views live in scoreboard_views.py; their users import them from
# here, beside the board that reads them and the slot that writes them.
__all__ = ["Entry", "EntryView", "Held", "Scoreboard", "Slot", "SlotView", "State"]

_UNFINISHED = (Entry.UNSTARTED, Entry.RUNNING)
_FREE_ENTRY = Entry.FREE
_WAITING, _EMPTY = State.WAITING, State.EMPTY
"""Module constants for the per-task writes: an enum's attribute costs a lookup."""

_GLOBAL = struct.Struct("<Bxxxxxxxq")  # paused flag, tasks processed by exited children
_HEADER = struct.Struct("<qiiiidq")  # seq, state, queue, count, current, deadline, processed
_ENTRY = struct.Struct("<32sIHBxd96s")  # id, attempts, queue, entry state, deadline, name
_ENTRY_TAIL = struct.Struct("<Bxd")  # an entry's state and deadline, which concurrent mode rewrites
_TAIL_AT = 38  # their offset in the entry
_NAME = struct.Struct("<96s")
"""The task's name, written when it starts (``Slot.start``); empty if longer than this."""
_NAME_AT = 48
_NAMES_KEPT = 1000
_SEQ = struct.Struct("<q")
_TORN_AFTER = 0.05  # seconds a write may stay unfinished before the slot counts as torn
_GLOBAL_SIZE = _GLOBAL.size
_CANCEL = struct.Struct("<32s")
"""An entry's cancel: the id of the task the parent asks it to stop (cancels.py)."""


class Scoreboard:
    """One slot per child, in an anonymous shared mapping created before forking."""

    def __init__(self, slots: int, max_held: int) -> None:
        self.slots = slots
        self.max_held = max_held
        self.slot_size = _HEADER.size + _ENTRY.size * max_held
        self._cancels_at = _GLOBAL_SIZE + self.slot_size * slots
        self._memory = mmap.mmap(-1, self._cancels_at + _CANCEL.size * max_held * slots)
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
        """Fold a dead child's processed count into the total and empty its slot.

        In that order, while children may be counting: they read the slots before the
        total (:meth:`taken`), so one that reads between the two writes counts this
        child twice (it waits a turn), never not at all (it would overshoot the limit).
        """
        paused, retired = _GLOBAL.unpack_from(self._memory, 0)
        _GLOBAL.pack_into(self._memory, 0, paused, retired + self._processed(index))
        self.clear(index)

    def _retired(self) -> int:
        """Tasks processed by children that have exited (read after the slots)."""
        retired: int = _GLOBAL.unpack_from(self._memory, 0)[1]
        return retired

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
        # The counter on its own, before and after the rest: read as part of the header,
        # nothing says it was loaded before the fields it vouches for.
        seq = _SEQ.unpack_from(memory, offset)[0]
        if seq % 2 != 0:
            return None
        _, state, queue, count, current, deadline, processed = _HEADER.unpack_from(memory, offset)
        count = max(0, min(count, self.max_held))  # torn, if out of range: the seq tells
        raw_entries = list(
            _ENTRY.iter_unpack(
                memory[offset + _HEADER.size : offset + _HEADER.size + _ENTRY.size * count]
            )
        )
        if _SEQ.unpack_from(memory, offset)[0] != seq:
            return None
        held = tuple(
            Held(raw.decode("ascii", "replace"), attempts) for raw, attempts, *_ in raw_entries
        )
        entries: tuple[EntryView, ...] = ()
        if state == State.CONCURRENT:
            entries = tuple(
                EntryView(h, Entry(e[3]), e[2], e[4])
                for h, e in zip(held, raw_entries, strict=True)
            )
        return SlotView(State(state), queue, held, current, deadline, processed, entries)

    def task_name(self, index: int, entry: int) -> str | None:
        """The name of the task entry ``entry`` of slot ``index`` runs (None: not known).

        Read for ``rqueue workers`` only, never to decide anything: a write under way is
        given up on (the next heartbeat reads it again), not waited for.
        """
        offset = self.offset(index)
        if not 0 <= entry < self.max_held:
            return None
        seq = _SEQ.unpack_from(self._memory, offset)[0]
        at = offset + _HEADER.size + entry * _ENTRY.size + _NAME_AT
        raw: bytes = _NAME.unpack_from(self._memory, at)[0]
        if seq % 2 or _SEQ.unpack_from(self._memory, offset)[0] != seq:
            return None
        return raw.rstrip(b"\0").decode("utf-8", "replace") or None

    def clear(self, index: int) -> None:
        offset = self.offset(index)
        self._memory[offset : offset + self.slot_size] = bytes(self.slot_size)
        cancels = self._cancel_offset(index, 0)
        self._memory[cancels : cancels + _CANCEL.size * self.max_held] = bytes(
            _CANCEL.size * self.max_held
        )

    def request_cancel(self, index: int, entry: int, task_id: str) -> None:
        """The parent's side: ask slot ``index``'s entry ``entry`` to stop ``task_id``
        (the caller then signals the child)."""
        if 0 <= entry < self.max_held:
            encoded = task_id.encode("ascii", "replace")
            _CANCEL.pack_into(self._memory, self._cancel_offset(index, entry), encoded)

    def cancel_requested(self, index: int, entry: int) -> str:
        """The child's side: the id whose cancel entry ``entry`` was asked for ('' none)."""
        if not 0 <= entry < self.max_held:
            return ""
        raw: bytes = _CANCEL.unpack_from(self._memory, self._cancel_offset(index, entry))[0]
        return raw.rstrip(b"\0").decode("ascii", "replace")

    def _cancel_offset(self, index: int, entry: int) -> int:
        return self._cancels_at + (index * self.max_held + entry) * _CANCEL.size

    def total_processed(self) -> int:
        processed = sum(self._processed(i) for i in range(self.slots))
        return processed + self._retired()

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
        would let one task too many be taken.) A torn slot may hold a whole batch: it
        counts as full until the child finishes the write or the parent retires it.
        """
        total = 0
        for index in range(self.slots):
            view = self.read(index)
            if view is None:
                total += self._processed(index) + self.max_held
            else:
                total += view.processed + view.unfinished()
        return total + self._retired()


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
        self.concurrent = False
        """Concurrent mode: entries carry their own states (see the module doc)."""
        self.live_async: set[int] = set()
        """Entries whose coroutine runs: finishing a step of the batch loop is not
        finishing them (``set(HOLDING, ...)`` leaves them running)."""
        self._entries: list[Entry] = []
        self._deadlines: dict[int, float] = {}
        self._earliest: list[tuple[float, int]] = []
        """A heap over ``_deadlines``, cleared lazily: a pair whose entry's deadline
        changed since stays until it comes to the top (``_earliest_deadline``)."""
        self._unfinished = 0
        self._free = 0
        """Counts of the entries' states, kept as they change: ``running()`` and
        ``free()`` are asked once per turn of concurrent mode's loop."""
        self._names: dict[str, bytes] = {}
        """Task names as ``start`` writes them, encoded once per name."""
        self._names_at = self._offset + _HEADER.size + _NAME_AT
        self._index = index

    def cancel_requested(self, entry: int) -> str:
        """The id of the task the parent asked entry ``entry`` to stop ('' none)."""
        return self.board.cancel_requested(self._index, entry)

    def hold(self, queue_index: int, headers: Sequence[tuple[str, int, int]]) -> Sequence[int]:
        """Record a new batch of reserved tasks, none started; return their entries.

        ``headers`` are the tasks' ``(id, attempts, timeout_ms)`` as
        :func:`rqueue.encoding.payload.header` reads them; the timeout is not kept. In process
        mode the batch replaces the last one (entries 0 to n - 1); in concurrent mode it
        takes free entries (the caller made sure there are enough: :meth:`free`).
        """
        if self.concurrent:
            return self._hold_more(queue_index, headers)
        memory, offset, pack_into = self._memory, self._offset + _HEADER.size, _ENTRY.pack_into
        self._begin()
        for task_id, attempts, _ in headers:
            encoded = task_id.encode("ascii", "replace")
            pack_into(memory, offset, encoded, attempts, queue_index, 0, 0.0, b"")
            offset += _ENTRY.size
        self.queue_index, self.count, self.current = queue_index, len(headers), 0
        self.state = State.HOLDING if headers else State.WAITING
        self.deadline = 0.0
        self._end()
        return range(len(headers))

    def set(self, state: State, current: int | None = None, deadline: float = 0.0) -> None:
        if self.concurrent:
            self._set_entry(state, current, deadline)
            return
        # _begin() and _end() written out: process mode sets its slot twice per task.
        memory, offset, seq = self._memory, self._offset, self._seq + 1
        _SEQ.pack_into(memory, offset, seq)
        self.state = state
        if current is not None:
            self.current = current
        if state in (_WAITING, _EMPTY):
            self.count = self.current = 0
        self.deadline = deadline
        _HEADER.pack_into(
            memory, offset, seq, state, self.queue_index, self.count, self.current, deadline,
            self.processed,
        )  # fmt: skip
        self._seq = seq + 1
        _SEQ.pack_into(memory, offset, seq + 1)

    def start(self, entry: int, name: str, deadline: float) -> None:
        """``set(RUNNING, entry, deadline)``, and the task's name beside its id: so the
        parent's heartbeat names it from the first beat, with no Redis call (a name
        too long for the entry is left out, and looked up as before: registry.py)."""
        encoded = self._names.get(name)
        if encoded is None:  # a task's first run in this child
            encoded = name.encode("utf-8", "replace")
            encoded = encoded if len(encoded) <= _NAME.size else b""
            if len(self._names) < _NAMES_KEPT:  # names come from payloads: bounded
                self._names[name] = encoded
        # Written before the entry is marked running: a reader never sees it half way.
        _NAME.pack_into(self._memory, self._names_at + entry * _ENTRY.size, encoded)
        self.set(State.RUNNING, entry, deadline)

    def count_processed(self) -> None:
        self.processed += 1

    # -- concurrent mode ------------------------------------------------------------------

    def enter_concurrent(self) -> None:
        """Switch to concurrent mode from process mode, while entry ``current`` runs (the
        first coroutine): the entries before it are done, those after it unstarted."""
        self._begin()
        states = [Entry.DONE] * self.current + [Entry.RUNNING]
        states += [Entry.UNSTARTED] * (self.count - len(states))
        states += [Entry.FREE] * (self.board.max_held - self.count)
        self._entries = states
        self._unfinished = self.count - self.current
        self._free = self.board.max_held - self.count
        for entry in range(self.count):
            self._write_entry(entry)
        self._deadlines = {self.current: self.deadline} if self.deadline > 0 else {}
        self._earliest = [(self.deadline, self.current)] if self.deadline > 0 else []
        self.concurrent, self.state = True, State.CONCURRENT
        self._end()

    def leave_concurrent(self) -> None:
        """Back to process mode once no task is held (every ack sent)."""
        self.concurrent = False
        self._entries, self._deadlines, self._earliest = [], {}, []
        self._unfinished = self._free = 0
        self.live_async.clear()
        self.set(State.WAITING)

    def running(self) -> int:
        """Entries not finished (running or not started yet)."""
        return self._unfinished

    def free(self) -> int:
        return self._free

    def recycle_done(self) -> None:
        """Finished entries whose acks have all been sent hold nothing any more."""
        deadlines = self._deadlines  # a finished entry with one still runs its hooks
        done = [i for i, e in enumerate(self._entries) if e == Entry.DONE and i not in deadlines]
        if done:
            self._mark(done, Entry.FREE)

    def finished(self, entry: int) -> None:
        """A coroutine ended (its outcome is reported): its entry is done."""
        self.live_async.discard(entry)
        self._mark((entry,), Entry.DONE)

    def linger(self, entry: int, deadline: float) -> None:
        """A finished entry whose thread runs on (thread mode, past its timeout): the
        parent kills the child at ``deadline`` unless :meth:`finished` comes first."""
        self._mark((entry,), Entry.DONE, deadline)

    def forget(self, entries: Sequence[int]) -> None:
        """Tasks given back unstarted: in process mode the slot holds nothing now."""
        if self.concurrent:
            self._mark(entries, Entry.FREE)
        else:
            self.set(State.WAITING)

    def _hold_more(
        self, queue_index: int, headers: Sequence[tuple[str, int, int]]
    ) -> Sequence[int]:
        entries = [i for i, e in enumerate(self._entries) if e == Entry.FREE][: len(headers)]
        if len(entries) < len(headers):
            raise RuntimeError("scoreboard slot full")  # the caller checks free() first
        memory, base, pack_into = self._memory, self._offset + _HEADER.size, _ENTRY.pack_into
        self._begin()
        for entry, (task_id, attempts, _) in zip(entries, headers, strict=True):
            self._entries[entry] = Entry.UNSTARTED
            self._free -= 1
            self._unfinished += 1
            pack_into(
                memory,
                base + entry * _ENTRY.size,
                task_id.encode("ascii", "replace"),
                attempts,
                queue_index,
                Entry.UNSTARTED,
                0.0,
                b"",
            )
        self.count = max(self.count, entries[-1] + 1) if entries else self.count
        self._end()
        return entries

    def _set_entry(self, state: State, current: int | None, deadline: float) -> None:
        """What process mode's writes mean for one entry (``current`` as they pass it)."""
        if current is None:  # WAITING/EMPTY: nothing is held while concurrent mode lasts
            return
        if state == State.RUNNING:
            self._mark([current], Entry.RUNNING, deadline)
        elif state == State.REPORTING:  # entry current - 1 finished; its hooks run
            self._mark([current - 1], Entry.DONE, deadline)
        elif current - 1 not in self.live_async:  # HOLDING: a step of the batch is over
            self._mark([current - 1], Entry.DONE)

    def _mark(self, entries: Sequence[int], state: Entry, deadline: float = 0.0) -> None:
        unfinished, free = state in _UNFINISHED, state is _FREE_ENTRY
        self._begin()
        for entry in entries:
            was = self._entries[entry]
            self._entries[entry] = state
            self._unfinished += unfinished - (was in _UNFINISHED)
            self._free += free - (was is _FREE_ENTRY)
            if deadline > 0:
                self._deadlines[entry] = deadline
                heapq.heappush(self._earliest, (deadline, entry))
            else:
                self._deadlines.pop(entry, None)
            self._write_entry(entry)
        self._end()

    def _earliest_deadline(self) -> float:
        """The earliest of the entries' deadlines (0: none), in O(log n) per write
        where a ``min`` over them all would cost O(n)."""
        earliest, deadlines = self._earliest, self._deadlines
        while earliest and deadlines.get(earliest[0][1]) != earliest[0][0]:
            heapq.heappop(earliest)  # that entry's deadline went or changed
        if len(earliest) > 4 * self.board.max_held:  # stale pairs below a long deadline
            self._earliest = earliest = [(d, e) for e, d in deadlines.items()]
            heapq.heapify(earliest)
        return earliest[0][0] if earliest else 0.0

    def _write_entry(self, entry: int) -> None:
        offset = self._offset + _HEADER.size + entry * _ENTRY.size + _TAIL_AT
        _ENTRY_TAIL.pack_into(
            self._memory, offset, self._entries[entry], self._deadlines.get(entry, 0.0)
        )

    def _begin(self) -> None:
        self._seq += 1
        _SEQ.pack_into(self._memory, self._offset, self._seq)

    def _end(self) -> None:
        """Write the header, then make the counter even: a reader that sees it even
        sees every field of this write. (Written with the header, the counter could
        land first, and a reader accept a new ``current`` beside an old ``processed``:
        a task in neither count, and ``--max-jobs`` overshot.)"""
        if self.concurrent:
            self.deadline = self._earliest_deadline()
        _HEADER.pack_into(
            self._memory,
            self._offset,
            self._seq,
            self.state,
            self.queue_index,
            self.count,
            self.current,
            self.deadline,
            self.processed,
        )
        self._seq += 1
        _SEQ.pack_into(self._memory, self._offset, self._seq)
