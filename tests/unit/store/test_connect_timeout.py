"""A dispatch to a host that never answers the connect is retried, not reported as
"may have been queued": nothing was sent. That is what a failover looks like when the
old master's machine is gone rather than refusing (no RST, only silence)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import apptasks
import pytest

from rqueue.errors import QueueConnectionError
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose accept queue is full: the kernel drops new SYNs, so a connect to it
    times out instead of being refused."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(8):  # more than the queue holds, whatever the kernel rounds 0 up to
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for filler in fillers:
        filler.close()
    listener.close()


def test_a_connect_that_times_out_is_retried_as_never_sent(silent_port: int) -> None:
    config = Config(
        redis_url=f"redis://127.0.0.1:{silent_port}/0", socket_timeout=0.2, dispatch_retry=1.0
    )
    with pytest.raises(QueueConnectionError, match=r"to dispatch \(tried [2-9]\d* times") as caught:
        apptasks.record.using(connection=RedisQueue(config)).dispatch(1)
    assert "Timeout connecting" in str(caught.value)
    assert "may or may not" not in str(caught.value)
