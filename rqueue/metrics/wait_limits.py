"""How long a queue's oldest ready task may wait before the queue is flagged.

Like Horizon's ``waits``: a threshold per queue, and one for every queue not named,
given as ``QUEUE=SECONDS`` and ``SECONDS`` (``rqueue dashboard --wait``, ``rqueue
monitor --wait``). The wait compared is the real age of the head of the ready list
(:func:`rqueue.metrics.read.oldest_waits`), so a queue is flagged as soon as its next
task has waited too long, whatever its throughput says.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rqueue.errors import InvalidQueueName
from rqueue.store.keys import validate_queue_name


@dataclass(frozen=True)
class WaitLimits:
    """Seconds the oldest ready task of each queue may wait (None: no limit)."""

    by_queue: Mapping[str, float] = field(default_factory=dict)
    default: float | None = None
    """For every queue not in ``by_queue``."""

    def limit(self, queue: str) -> float | None:
        return self.by_queue.get(queue, self.default)

    def over(self, queue: str, wait: float | None) -> bool:
        """The queue's oldest ready task has waited longer than its limit."""
        limit = self.limit(queue)
        return limit is not None and wait is not None and wait > limit

    @classmethod
    def parse(cls, specs: Iterable[str], default: float | None = None) -> WaitLimits:
        """From ``QUEUE=SECONDS`` (a queue's) and ``SECONDS`` (every other queue's)
        texts; ``default`` is a limit for every queue given otherwise (``--max-wait``).
        ValueError, saying which text and why, for anything else: a queue named twice,
        two defaults, a name no queue can have, or seconds that are not a finite
        number from 0."""
        by_queue: dict[str, float] = {}
        for spec in specs:
            name, sep, seconds = spec.rpartition("=")
            limit = _seconds(spec, seconds)
            if not sep:
                if default is not None:
                    raise ValueError(f"{spec!r}: a limit for every queue is given already")
                default = limit
                continue
            try:
                validate_queue_name(name)
            except InvalidQueueName as exc:
                raise ValueError(f"{spec!r}: {exc}") from None
            if name in by_queue:
                raise ValueError(f"{spec!r}: queue {name!r} is given twice")
            by_queue[name] = limit
        return cls(by_queue, default)


def _seconds(spec: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value < math.inf:  # NaN fails too
        raise ValueError(f"{spec!r}: use QUEUE=SECONDS or SECONDS, seconds a finite number from 0")
    return value
