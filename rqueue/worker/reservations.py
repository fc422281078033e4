"""Where a worker child's batches come from, and where its acknowledgements go.

A child reserves tasks in batches (``reserve.lua``) and hands the acknowledgements of
finished tasks to its next reserve call (held meanwhile: ``pending_acks.py``), so a
busy child makes well under one round trip per task. Batch members' counts wait with
their acks and go just before the call that carries them, one call per batch
(``member_counts.py``). Two refinements live here:

- Batches start at one task after an idle spell and grow fourfold up to
  ``--prefetch``: the first task of a burst starts at once, and a long first task
  leaves the rest of the burst to the other children.
- An idle child of one queue sends its reserve call behind its wait for a push, in the
  same write, so that Redis reserves the task the moment the push ends the wait, with
  no round trip between (``wait_then_reserve``). Redis may run that call for a child
  that died while it waited (its socket still open until the kernel tears it down, or
  its host cut off), so what it reserves is unconfirmed: it lasts the margin alone,
  the child confirms it as the task starts (renew.lua, not waited for), and one that
  runs out unconfirmed goes back with its attempt given back (migrate.lua).
- Reading ahead: when a batch came from the first (highest-priority) queue and enough
  tasks are left there for every child's next batch, the child sends its next reserve
  call before running the batch and reads the reply after it. Redis reserves the next
  batch while the child works, instead of the child waiting for it between batches.
  A child running tasks at once (threads, slots) whose tasks end a few at a time sends
  it once a batch has started, for a fifth of what it runs at once, and reads it when
  one frees (concurrent.py).
  Every reserve call also records its batch under the child's claims key, so if the
  child dies with a batch reserved but unread, its parent still gives those tasks
  back at once (``recovery.py``).
- On a queue with priority levels, batches are cut to a short time's work and none is
  read ahead, so a task of a higher level pushed meanwhile runs next (``held_work.py``).

Which queues a batch is tried from, and in what order, is ``queue_order.py``'s: with
many queues a probe of their lengths picks the few worth a reserve call.

A queue with a rate limit (``--rate``) hands out no more tasks than the limit frees
(reserve.lua); when it held tasks back, the reply says when it frees the next one,
and ``limited`` tells the child how long to wait for it.

On Redis Cluster one shard may be down while the others serve: a queue whose call
meets an outage is left for a back-off of its own (``outages.py``) and the child goes
on to its other queues at once; only when no queue answered does the call raise, for
the child to back off as a whole (one server down). What such a call may have
reserved is given back once the queue answers again (``_reclaim``), before anything
else is reserved from it; its acks wait for it meanwhile.

Redis may refuse a call that carries acknowledgements with a command error (not an
outage): a result record it will not take. Sending the same call again would meet
the same refusal for ever, so the acks are then sent one at a time, and each one
refused is handed to the child (``refused``), which fails that task alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from rqueue.errors import describe
from rqueue.store.consumer import BehindWait, Waiting
from rqueue.store.outages import Outages
from rqueue.store.queue import Kept, RedisQueue, Reservation
from rqueue.store.retry import REDIS_ERRORS, refusal
from rqueue.worker.held_work import HeldWork
from rqueue.worker.options import WorkerOptions
from rqueue.worker.pending_acks import PendingAcks
from rqueue.worker.queue_order import queue_order
from rqueue.worker.reserved import ReadAhead, Refused, Reserved

_GROWTH = 4


class Reservations:
    """Reserves a child's batches and carries its acknowledgements."""

    def __init__(self, store: RedisQueue, options: WorkerOptions, claims: str) -> None:
        self.store = store
        self.options = options
        self.claims = claims
        self.pending = PendingAcks()
        """Successes whose acks (and counts) wait for a call to carry them."""
        self._size = 1
        self._ahead: ReadAhead | None = None
        self.outages = Outages()
        """Queues whose Redis did not answer, left alone for a back-off (see the module)."""
        self._order = queue_order(store, options.queues, self.outages)
        self._lost: set[str] = set()
        """Queues whose last reserve call's reply was lost: what it reserved goes back."""
        self._rates = {name: (r.limit, r.period_ms) for name, r in options.rates.items()}
        self.limited: dict[str, float] = {}
        """After a ``take`` that found nothing: queues whose rate limit held back ready
        tasks, and the seconds until it lets the next one start."""
        self.refused: list[Refused] = []
        """Acknowledgements Redis refused, for the child to fail (see the module doc)."""
        self.held = HeldWork(store)
        """How much a child holds of a queue with priority levels (``held_work.py``)."""
        self._confirming: Callable[[], bool] | None = None
        """The reader of the last :meth:`confirm`'s reply."""

    def take(
        self, allowed: int, first: str | None = None, at_once: bool = False
    ) -> Reserved | None:
        """The next batch: the one read ahead if it has tasks, else reserve now, from the
        queues in priority order, but from ``first`` first: the queue whose push just
        woke an idle child (all were empty a moment ago, and on a cluster each other
        queue tried before it would be a round trip to another node).

        A batch whose tasks will run one after another takes, from a queue with priority
        levels, only what ``held_work.py`` allows; one whose tasks all start ``at_once``
        (in free threads or slots: ``allowed`` counts them) takes ``allowed``."""
        if self._lost:
            self._reclaim()
        self._count_owed()
        outages: list[BaseException] = []
        try:
            batch = self.settle()
        except REDIS_ERRORS as exc:
            if not self.store.config.cluster:
                raise
            batch = None  # that queue is down: settle marked it
            outages.append(exc)
        if batch is not None:
            self._order.tried(batch.queue_index, batch.reservation)
            if batch.reservation.payloads:
                return self._grown(batch)
        count = min(allowed, self._size)
        self.limited = {}
        answered = batch is not None
        for index in self._order.indices(first, self.pending.queues):
            name = self.options.queues[index]
            if self.outages and self.outages.down(name):
                continue  # in its back-off (and reclaimed, if lost, before it is tried)
            if batch is not None and batch.unconfirmed and index == batch.queue_index:
                continue  # Redis looked there as the wait ended: nothing

            acks, kept = self.pending.of(name)
            size = self.held.count(name, count, at_once)
            sent_at = time.monotonic()
            try:
                reservation = self._reserve(name, size, acks, kept)()
            except BaseException as exc:
                if self._reply_lost(name, exc):  # its shard alone: on to the next queue
                    outages.append(exc)
                    continue
                if not (refusal(exc) and (acks or kept)):
                    raise
                self._ack_each(name)  # then reserve without them
                reservation = self._reserve(name, size, [], [])()
            answered = True
            if self.outages:
                self.outages.answered(name)
            if acks or kept:
                self.pending.take(name)
            self._order.tried(index, reservation)
            if reservation.payloads:
                return self._grown(Reserved(index, reservation, sent_at))
            if reservation.rate_wait_ms and reservation.still_ready:
                self.limited[name] = reservation.rate_wait_ms / 1000
        if outages and not answered:
            raise outages[0]  # nothing answered: the child backs off as a whole
        self._size = 1
        return None

    def read_ahead(self, batch: Reserved, size: int = 0) -> None:
        """Send the next reserve call now, for ``size`` tasks (0: as many as batches grew
        to), if the first queue is deep (see the module doc).

        Never with ``--prefetch 1``, whose promise is one task held at a time, nor on a
        queue with priority levels (``held_work.py``); and a short queue is left to the
        idle children rather than reserved ahead by one.
        """
        size = min(size, self.options.batch_limit) or self._size
        deep = size * self.options.effective_concurrency
        name = self.options.queues[0]
        if (
            self.options.batch_limit == 1
            or batch.queue_index != 0
            or batch.reservation.still_ready < deep
            or not self.held.ahead(name)
        ):
            return
        self._count_owed()
        acks, kept = self.pending.take(name)
        try:
            reply = self._reserve(name, size, acks, kept)
        except BaseException as exc:
            # Not sent, or not all of it (a connection broken by a Redis restart): the
            # acks go with the next call, and whatever it may have reserved is reclaimed.
            self._restore(name, acks, kept, exc)
            raise
        self._ahead = ReadAhead(0, time.monotonic(), reply, acks, kept)

    def reserve_woken(self, queue: str) -> None:
        """A push to ``queue`` just woke this idle child: send the reserve call its next
        ``take`` would make (one task, no acks: an idle child sent them before it
        waited), read there like a call read ahead. It leaves at once, before the loop
        comes round to it, and the child's bookkeeping until ``take`` runs while Redis
        answers: how soon the task starts is the wake-up and this one round trip.

        Nothing is sent if anything else would go first (acks, counts, a lost reply).

        A child whose wait covers one queue sends this call earlier, behind the wait
        itself (:meth:`wait_then_reserve`, :meth:`reserve_behind`); one BLPOP on several
        queues cannot say which queue the call is for until it ends, and a push that
        ends an event loop's wait while coroutines run is read between them
        (``listener.py``), so those wake-ups come here.
        """
        if not self._clear_ahead():
            return
        index, sent_at = self.options.queues.index(queue), time.monotonic()
        try:
            reply = self._reserve(queue, 1, [], [])
        except BaseException as exc:
            self._reply_lost(queue, exc)  # it may have gone
            raise
        self._ahead = ReadAhead(index, sent_at, reply, [], [])

    def wait_then_reserve(self, queue: str, timeout: float) -> bool | None:
        """Wait for a push to ``queue`` with a reserve call of one task sent behind the
        wait, which Redis runs the moment the wait ends (``send_wait_then_reserve``):
        whether a push ended it. What it reserved is read by the next ``take``, as a
        call read ahead; unconfirmed, its task is confirmed as it starts
        (:meth:`confirm`). None: not waited, for the caller to wait as usual, if
        anything else must go first (acks, counts, a lost reply) or the queue's calls
        do not fit behind a wait: its priority levels take two calls, and its rate
        limit (``--rate``) must say how long to wait when it holds tasks back.
        """
        if not self._fits_behind_a_wait(queue):
            return None
        sent_at = time.monotonic()
        read = self.store.send_wait_then_reserve(queue, timeout, self._unconfirmed())
        return None if read is None else self._reserved_behind(queue, sent_at, read)

    def reserve_behind(self, waiting: Waiting) -> Callable[[], str | None] | None:
        """The reserve call of :meth:`wait_then_reserve`, sent behind a wait already on
        its way: an event loop's (``listener.py``), whose child has just gone idle. The
        call returned reads both, as the wait's own reader would (the queue pushed to,
        or None), what was reserved kept for the next ``take``. None: not sent, for the
        same reasons, or the wait covers several queues."""
        if len(waiting.queues) != 1 or not self._fits_behind_a_wait(waiting.queues[0]):
            return None
        queue, sent_at = waiting.queues[0], time.monotonic()
        try:
            read = waiting.then_reserve(self._unconfirmed())
        except BaseException as exc:
            self._reply_lost(queue, exc)  # it may have gone
            raise
        if read is None:
            return None
        return lambda: queue if self._reserved_behind(queue, sent_at, read) else None

    def _clear_ahead(self) -> bool:
        """Whether a reserve call may go before ``take`` asks: no reply is on its way or
        lost, and no acks or counts wait (they go first, with the next call)."""
        return (
            self._ahead is None and not self._lost and not self.pending and not self.pending.counts
        )

    def _fits_behind_a_wait(self, queue: str) -> bool:
        """Whether ``queue``'s next reserve call may go behind a wait (wait_then_reserve)."""
        return self._clear_ahead() and not (self.store.leveled(queue) or queue in self._rates)

    def _unconfirmed(self) -> BehindWait:
        """This child's settings of a reserve call behind a wait."""
        options = self.options
        return BehindWait(
            int(options.timeout * 1000),
            int(options.kill_grace * 1000),
            int(options.reservation_margin * 1000),
            options.effective_concurrency,
            self.claims,
        )

    def _reserved_behind(
        self, queue: str, sent_at: float, read: Callable[[], tuple[bool, Reservation]]
    ) -> bool:
        """Read a wait and the reserve call behind it: whether a push ended the wait;
        what was reserved is read ahead, unconfirmed, for the next ``take``."""
        try:
            woken, reservation = read()
        except BaseException as exc:
            self._reply_lost(queue, exc)  # it may have run
            raise
        index = self.options.queues.index(queue)
        self._ahead = ReadAhead(index, sent_at, lambda: reservation, [], [], unconfirmed=True)
        return woken

    def confirm(self, queue: str, payload: bytes, lasting: float) -> None:
        """Confirm an unconfirmed reservation as its task starts: renew.lua, sent now
        and read before the next call (``_confirmed``), so the task starts with no
        round trip. Sent only while a second of the margin is left (``run_batch``
        checks), so it lands before the reservation could run out."""
        self._confirmed()
        self._confirming = self.store.send_renew(queue, payload, lasting)

    def _confirmed(self) -> None:
        """Read the reply of the last :meth:`confirm`, if it is on its way. Not renewed
        says nothing to act on: the task was settled already (a failure goes by
        another connection, and may reach Redis first), since a confirmation goes
        only while a second of the margin is left."""
        if self._confirming is not None:
            renewed, self._confirming = self._confirming, None
            renewed()

    def settle(self) -> Reserved | None:
        """Read the reply of a call read ahead, if one is on its way.

        A stopping child calls this too, and gives back what it holds.
        """
        self._confirmed()
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        try:
            reservation = ahead.reply()
        except BaseException as exc:
            # Whether the acks landed is unknown: send them again (ZREM is idempotent),
            # before the next task starts.
            self._restore(self.options.queues[ahead.queue_index], ahead.acks, ahead.kept, exc)
            if refusal(exc) and (ahead.acks or ahead.kept):
                return None  # the next call carries them, and meets the refusal (take)
            raise
        return Reserved(ahead.queue_index, reservation, ahead.sent_at, ahead.unconfirmed)

    def _restore(self, name: str, acks: list[bytes], kept: list[Kept], exc: BaseException) -> None:
        """Put back acks a reserve call may not have delivered, due at once, and mark
        its reply lost so that what it may have reserved is given back (_reclaim);
        the queue is down for a back-off if ``exc`` is an outage."""
        self.pending.put_back(name, acks, kept)
        self._reply_lost(name, exc)

    def _reply_lost(self, name: str, exc: BaseException) -> bool:
        """A reserve call to ``name`` may have run, its reply unread: what it reserved is
        given back (_reclaim). Whether ``exc`` is its shard's outage alone (_shard_down)."""
        self._lost.add(name)
        return self._shard_down(name, exc)

    def flush(self, skip_down: bool = False) -> None:
        """Send the pending acks now (``ack.lua``), with no reserve call to carry them.

        With ``skip_down``, a running child's flush: the acks of a queue that is down
        (or goes down now) wait for it, and the child goes on with its other queues.
        Without, every ack is sent or the outage raised (for the caller to retry).
        """
        self._confirmed()
        self._count_owed()
        for name in self.pending.queues():
            if skip_down and self.outages.down(name):
                continue
            try:
                self.store.ack(name, *self.pending.of(name))
            except REDIS_ERRORS as exc:
                if not (self._shard_down(name, exc) and skip_down):
                    raise
                continue
            except redis.ResponseError as exc:
                if not refusal(exc):
                    raise
                self._ack_each(name)
            self.pending.take(name)

    def _ack_each(self, name: str) -> None:
        """Redis refused a call carrying ``name``'s acks: send the plain ones together
        (only a broken queue refuses those: that is raised) and each kept one alone,
        the ones refused going to ``refused``. ack.lua leaves a kept task reserved
        until its record is written, so the refused one is still there to fail."""
        acks, kept = self.pending.take(name)
        try:
            self.store.ack(name, acks)
            acks = []
            while kept:
                try:
                    self.store.ack(name, [], kept[:1])
                except redis.ResponseError as exc:
                    if not refusal(exc):
                        raise
                    reason = f"Redis refused its acknowledgement: {describe(exc)[1]}"
                    self.refused.append(Refused(name, kept[0].payload, reason))
                del kept[0]
        except BaseException as exc:
            self._restore(name, acks, kept, exc)
            raise

    def _count_owed(self) -> None:
        """Count the members whose acks are pending, before any call carries those acks;
        one whose batch Redis refused to count is not acked but failed (``refused``)."""
        if not self.pending.counts:
            return
        for uncounted in self.pending.counts.settle(self.store):
            queue, payload = uncounted.queue, uncounted.payload
            self.pending.drop(queue, payload)
            reason = uncounted.reason
            if uncounted.kind == "ResponseError":
                reason = f"Redis refused its batch's count of it: {reason}"
            self.refused.append(Refused(queue, payload, reason, uncounted.kind))

    def _reclaim(self) -> None:
        """Give back what a reserve call whose reply was lost may have reserved.

        Redis may have run the call (a timeout, a connection cut after the request
        left). If it did, its batch is under our claims key, and nobody else would
        give it back before the reservations expire. Tasks we finished (acks still
        pending) stay; release.lua moves only what is still reserved with these bytes.
        Only the queues whose call was lost: every other call's reply was read. A
        queue that is down keeps its place here (``take`` reserves nothing from it)
        until it answers.
        """
        for name in sorted(self._lost):
            if self.outages.down(name):
                continue
            finished = self.pending.finished(name)
            try:
                claimed = self.store.claimed(name, self.claims)
                unstarted = [p for p in claimed if p not in finished]
                self.store.release(name, unstarted, unstarted=True, claims=self.claims)
            except REDIS_ERRORS as exc:
                if not self._shard_down(name, exc):
                    raise
                continue
            self._lost.discard(name)

    def _shard_down(self, name: str, exc: BaseException) -> bool:
        """Whether ``exc`` is an outage of ``name``'s shard of a Redis Cluster, the
        queue then left for a back-off; on one server an outage is every queue's."""
        if not (self.store.config.cluster and isinstance(exc, REDIS_ERRORS)):
            return False
        self.outages.failed(name)
        return True

    def _reserve(
        self, name: str, count: int, acks: list[bytes], kept: list[Kept]
    ) -> Callable[[], Reservation]:
        options = self.options
        return self.store.send_reserve(
            name,
            count,
            int(options.timeout * 1000),
            int(options.kill_grace * 1000),
            int(options.reservation_margin * 1000),
            share=options.effective_concurrency,
            ack=acks,
            claims=self.claims,
            kept=kept,
            rate=self._rates.get(name),
        )

    def _grown(self, batch: Reserved) -> Reserved:
        self._size = min(self._size * _GROWTH, self.options.batch_limit)
        return batch
