"""How much work a worker child holds on a queue with priority levels.

A child reserves a batch of up to ``--prefetch`` tasks and runs them one after another,
and from a deep queue it reserves its next batch while it runs this one
(``reservations.py``). The tasks it holds are out of Redis's order: a priority-0 task
dispatched meanwhile waits until the child has run all of them. Behind 10^5 priority-9
tasks at the default ``--prefetch 100``, its dispatch-to-start was 3.5 ms at p50,
against 0.6 ms on an empty queue (``benchmarks/speed/priorities.py``).

So while a queue is known to use levels (a reserve call found them: ``store/consumer.py``),
a child holds little of its work:

- each reserve call there takes as many tasks as the child runs in ``HELD_FOR``, by its
  time per task over its last batch of that queue; at least one, and one until a batch
  of it was timed;
- it never reserves its next batch there early: that batch, taken before an urgent
  task came, would run before it. (Reading ahead, each batch half the time, was
  measured too: about a third more tasks/s on empty tasks, but a p50 of 1.16 ms
  against 0.90 ms for batches of 0.5 ms not read ahead.)

An urgent task then waits for at most ``HELD_FOR`` of work and one reserve call. The
time is the child's own running the batch, not the reserve call's: a count sized by
that too would shrink the batches that pay for it, down to one task a call. Empty tasks
go about twenty a call; a task longer than ``HELD_FOR`` goes alone, as with
``--prefetch 1``. Only batches run one after another are cut and timed: in thread and
async modes a batch is sized by the free threads and slots, and its tasks start at once.
A process-mode batch that turns out to be ``async def`` waits for free slots
(``concurrent.py``): it is not timed, so until a batch run here was, one task a call.

A queue with fair groups counts as one with levels (reserve.lua keeps the groups'
turns among the levels): a quiet group's task waits for no batch of a busy group's
either. A queue without levels or groups keeps the plain path: its batch sizes and
reading ahead. A child that found levels on a queue keeps this rule there until it is
replaced.
"""

from __future__ import annotations

from rqueue.store.queue import RedisQueue

HELD_FOR = 0.00025
"""Seconds of work a child takes in one reserve call of a queue with levels. The p50
dispatch-to-start of a priority-0 task behind 10^5 priority-9 empty tasks, in one
sitting (an empty queue: 0.6 ms; full batches read ahead: 3.5 ms): one task a call
0.48 ms, 0.25 ms of work 0.70 ms, 0.5 ms 0.90 ms. Empty tasks drained with levels,
against without, in one child: one task a call about 7%, 0.25 ms about 55-65%, 0.5 ms
about 60-70%, full batches 75-90%."""


class HeldWork:
    """One child's time per task on each queue with levels, and the batches it allows."""

    def __init__(self, store: RedisQueue) -> None:
        self.store = store
        self._per_task: dict[str, float] = {}
        """Queue -> seconds per task over this child's last batch of it (levels only)."""

    def count(self, queue: str, count: int, at_once: bool = False) -> int:
        """How many tasks of ``queue`` to reserve where ``count`` would be taken; all of
        them if they start ``at_once`` (in free threads or slots: none is held)."""
        if at_once or not self.store.leveled(queue):
            return count
        per_task = self._per_task.get(queue)
        if per_task is None:
            return 1
        return max(1, min(count, int(HELD_FOR / max(per_task, 1e-9))))

    def ahead(self, queue: str) -> bool:
        """Whether the next batch of ``queue`` may be reserved before this one has run."""
        return not self.store.leveled(queue)

    def ran(self, queue: str, tasks: int, seconds: float) -> None:
        """The child ran (or started) a batch of ``tasks`` tasks of ``queue`` in ``seconds``."""
        if tasks and self.store.leveled(queue):
            self._per_task[queue] = seconds / tasks
