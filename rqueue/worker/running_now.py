"""What a worker's children run at this moment, read from the scoreboard.

The parent writes it into the worker registry with each heartbeat (``rqueue
workers``, the dashboard): one entry per running task, whether a child runs one task
after another or many at once (coroutines, threads). Read only, never to decide
anything: a write under way is simply seen on the next heartbeat.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rqueue.metrics.registry import Running
from rqueue.worker.scoreboard import Entry, Scoreboard, State


def running_now(board: Scoreboard, numbers: Iterable[int], queues: Sequence[str]) -> list[Running]:
    """The tasks the children ``numbers`` (from 1) run, by the scoreboard ``board``;
    ``queues`` are the worker's, in the order the slots' queue indexes count them."""
    running = []
    for number in numbers:
        slot = number - 1
        view = board.read(slot)
        if view is None:
            continue
        if view.state == State.CONCURRENT:
            running += [
                Running(number, e.held.id, queues[e.queue_index], board.task_name(slot, entry))
                for entry, e in enumerate(view.entries)
                if e.state == Entry.RUNNING
            ]
        elif view.state == State.RUNNING and view.current < len(view.held):
            held, name = view.held[view.current], board.task_name(slot, view.current)
            running.append(Running(number, held.id, queues[view.queue_index], name))
    return running
