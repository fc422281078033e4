"""Tasks and registered types of the argument-type tests.

Workers preload this module (``rqueue work -A typed_tasks``): a worker decodes a
task's arguments before it imports the task's module, so the types must be
registered by then. Each task records what it was given in Redis (it runs in a
worker child) as ``repr((args, kwargs))``, for a test to compare.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from rqueue import register_type, task
from rqueue.store.default import default_queue

SEEN = "test:typed"


@register_type
class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@register_type
@dataclass(frozen=True)
class Point:
    x: int
    y: Decimal


@dataclass
class Shape:
    name: str
    corners: list[Point]
    colour: Colour
    area: Decimal | None = field(default=None, init=False)


register_type(Shape, name="shapes:Shape")


class Money:
    """A plain class: registered with its own encode and decode."""

    def __init__(self, cents: int, currency: str) -> None:
        self.cents, self.currency = cents, currency

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and (self.cents, self.currency) == (
            other.cents,
            other.currency,
        )

    def __hash__(self) -> int:
        return hash((self.cents, self.currency))

    def __repr__(self) -> str:
        return f"Money({self.cents}, {self.currency!r})"


register_type(Money, encode=lambda m: [m.cents, m.currency], decode=lambda v: Money(*v))


@task(tries=1)
def record(*args: Any, **kwargs: Any) -> None:
    default_queue().client.rpush(SEEN, repr((args, kwargs)))


@task(keep_result=60, tries=1)
def total(prices: list[Decimal]) -> Decimal:
    return sum(prices, Decimal(0))


@task(keep_result=60, tries=1)
def moved(point: Point, by: Decimal) -> Point:
    return Point(point.x, point.y + by)
