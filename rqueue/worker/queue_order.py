"""Which of its queues a worker child tries for its next batch, and in what order.

A child takes from the first of its queues, in priority order, that has tasks ready
(the queue whose push ended its idle wait first: it had tasks a moment ago, and on a
cluster every queue tried before it is a round trip to another node). With a few
queues it tries each in turn, one reserve call each, until one gives it tasks
(``InTurn``): one call when the first has tasks, nothing else on the hot path.

With more than ``PROBED_ABOVE`` queues that is a call per queue ahead of the one with
tasks: 10^4 queues cost 4,951 round trips per task spread over them, and an idle
child 10^4 a second. So ``Probed`` reads every queue's length in a round trip or two
(``store/probe.py``), and tries, in priority order, only:

- the queues that probe found tasks in;
- the queues whose acknowledgements wait for a reserve call to carry them;
- the queues it took tasks from since a reserve call last found them empty: such a
  call also deletes the queue's push signal (reserve.lua), which would otherwise end
  the child's next idle wait at once for nothing, once for every such queue.

A probe serves the following batches too, for ``REUSE`` times as long as it took
(a child spends at most a twentieth of its time probing): each reserve reply says how
many tasks the queue has left, so a drained queue is known at once, and what a reused
probe misses is a push to a queue it found empty. That push waits for the next probe
when the child is busy with queues of lower priority: up to about 0.2 s with 10^4
queues on one server (a probe takes about 10 ms), 2 s on a cluster (90 ms). A take
that finds nothing through a reused probe probes again before it gives up, so a child
never goes idle on an old one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

from rqueue.store.outages import Outages
from rqueue.store.queue import RedisQueue, Reservation

PROBED_ABOVE = 16
"""Queues a child tries in turn; with more it probes them (the probe is a round trip,
so it pays once the first queues are often empty)."""
REUSE = 20
"""A probe serves for this many times the time it took."""


class InTurn:
    """Every queue, in priority order: today's cost for a child of a few queues."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = names

    def indices(self, first: str | None, owed: Callable[[], set[str]]) -> Iterator[int]:
        """The queues to try (their places in ``names``), ``first`` first; ``owed``
        names the queues with acknowledgements waiting."""
        names = self.names
        return iter(sorted(range(len(names)), key=lambda index: names[index] != first))

    def tried(self, index: int, reservation: Reservation) -> None:
        """What a reserve call on ``names[index]`` returned."""


class Probed(InTurn):
    """Only the queues worth a reserve call, found by a probe (see the module)."""

    def __init__(self, queue: RedisQueue, names: Sequence[str], outages: Outages) -> None:
        super().__init__(names)
        self.queue = queue
        self.outages = outages
        """Queues whose shard is down: not probed until their back-off ends."""
        self._places = {name: index for index, name in enumerate(names)}
        self._ready: set[int] = set()
        """Queues with tasks, as the last probe and the reserve replies since say."""
        self._signalled: set[int] = set()
        """Queues this child took tasks from since a reserve call found them empty."""
        self._probe_serves_until = -float("inf")

    def indices(self, first: str | None, owed: Callable[[], set[str]]) -> Iterator[int]:
        tried: set[int] = set()
        woken = None if first is None else self._places.get(first)
        if woken is not None:
            tried.add(woken)
            yield woken
        reused = time.monotonic() < self._probe_serves_until
        while True:
            if not reused:
                self._probe()
            owing = {self._places[name] for name in owed() if name in self._places}
            for index in sorted((self._ready | self._signalled | owing) - tried):
                tried.add(index)
                yield index
            if not reused:
                return
            reused = False

    def tried(self, index: int, reservation: Reservation) -> None:
        if reservation.payloads:
            self._signalled.add(index)
            if reservation.still_ready:
                self._ready.add(index)
            else:
                self._ready.discard(index)
        else:
            self._signalled.discard(index)
            self._ready.discard(index)

    def _probe(self) -> None:
        began = time.monotonic()
        names, outages = self.names, self.outages
        up: Sequence[int] = range(len(names))
        if outages:  # a queue in its back-off is not probed
            up = [index for index in up if not outages.down(names[index])]
        lengths = self.queue.ready_lengths([names[index] for index in up])
        self._ready = {index for index, length in zip(up, lengths, strict=True) if length}
        ended = time.monotonic()
        self._probe_serves_until = ended + REUSE * (ended - began)


def queue_order(queue: RedisQueue, names: Sequence[str], outages: Outages) -> InTurn:
    """How a child of ``names`` picks the queues for its next batch (``outages``: those
    it leaves alone for now)."""
    return Probed(queue, names, outages) if len(names) > PROBED_ABOVE else InTurn(names)
