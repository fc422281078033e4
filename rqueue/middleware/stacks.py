"""The middleware a job runs through: its task's, what its payload carries, the
``Concurrency`` of a ``concurrency=N`` option, and the worker's limits on its group.

Apart from ``base.py`` because it builds a built-in (``Concurrency``), which is
itself a middleware defined on top of ``base.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from rqueue.encoding.payload import GROUP, Job
from rqueue.errors import InvalidPayload
from rqueue.middleware.base import MIDDLEWARE, Middleware, carried
from rqueue.middleware.concurrency import OPTION_KEY, Concurrency
from rqueue.middleware.group_limits import GroupLimits

CONCURRENCY = "concurrency"
"""The ``meta`` entry of a call of a task with ``concurrency=N``: N."""
_STACKING = frozenset({MIDDLEWARE, CONCURRENCY, GROUP})
"""The ``meta`` entries that add middleware: a job with none runs its task's own."""


def stack_of(
    declared: Sequence[Middleware], job: Job, groups: GroupLimits | None = None
) -> Sequence[Middleware]:
    """The middleware a job runs through: its group's limits (``groups``, the
    worker's) and the slot of its ``concurrency`` option first (a call waiting for
    one runs nothing else), then its task's declared ones, then its own
    (InvalidPayload if any cannot be built)."""
    if not job.meta or _STACKING.isdisjoint(job.meta):  # a batch's member, say
        return declared
    stack = (*declared, *carried(job.meta[MIDDLEWARE])) if MIDDLEWARE in job.meta else declared
    if CONCURRENCY in job.meta:
        stack = (_option_slots(job.meta[CONCURRENCY]), *stack)
    if groups is not None and GROUP in job.meta:
        stack = (*groups.of_group(job.meta[GROUP]), *stack)
    return stack


def _option_slots(limit: object) -> Concurrency:
    try:
        return Concurrency(OPTION_KEY, limit)  # type: ignore[arg-type]
    except ValueError as refused:
        raise InvalidPayload(f"the payload's concurrency: {refused}") from None
