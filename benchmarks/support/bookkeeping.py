"""The book: a plain redis-server where benchmark tasks record what they did.

On a Redis Cluster or Sentinel set a failover may lose writes (failover.py measures
how many), and a record kept there would be wrong exactly when it matters. So the
tasks of shards.py and failover.py record into a server of their own that no fault
touches and no topology shares. Worker processes find it through :data:`BOOK_URL_ENV`,
which :func:`open_book` sets in the environment they inherit.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from rqueue.server import RedisServer

BOOK_URL_ENV = "RQUEUE_BENCH_BOOK_URL"

_clients: dict[tuple[int, str], redis.Redis] = {}


def book() -> redis.Redis:
    """This process's client of the current book, opened on first use after a fork.

    Patient (30 s socket timeout): a task whose record timed out might have landed,
    and recording it again would count a run that did not happen.
    """
    key = (os.getpid(), os.environ[BOOK_URL_ENV])
    client = _clients.get(key)
    if client is None:
        _clients.clear()  # a parent's, or an earlier book's
        client = _clients[key] = redis.Redis.from_url(key[1], socket_timeout=30)
    return client


@contextmanager
def open_book() -> Iterator[redis.Redis]:
    """Start the book's server and name it in this process's environment (so workers
    started meanwhile find it); yield a client of it."""
    with RedisServer() as server:
        os.environ[BOOK_URL_ENV] = server.url
        client = redis.Redis.from_url(server.url)
        try:
            yield client
        finally:
            client.close()
            os.environ.pop(BOOK_URL_ENV, None)
