"""Job middleware: code that wraps each run of a task (docs/middleware.md)."""

from rqueue.middleware.base import Middleware, Release
from rqueue.middleware.concurrency import Concurrency
from rqueue.middleware.rate_limited import RateLimited
from rqueue.middleware.skip import Skip
from rqueue.middleware.throttles_exceptions import ThrottlesExceptions
from rqueue.middleware.without_overlapping import WithoutOverlapping

__all__ = [
    "Concurrency",
    "Middleware",
    "RateLimited",
    "Release",
    "Skip",
    "ThrottlesExceptions",
    "WithoutOverlapping",
]
