"""Commands packed in one step (``store/resp.py``) are the bytes redis-py would send, and
what redis-py refuses is refused; a real Redis reads what the wire sends that way.
"""

from __future__ import annotations

import pytest
from redis.connection import Connection
from redis.exceptions import DataError

from rqueue.store import resp
from rqueue.store.queue import RedisQueue
from rqueue.store.wire import Wire

COMMANDS = [
    (b"EVALSHA", b"f" * 40, 3, "queues:default", "queues:default:delayed", "x", b"\x00\xff"),
    ("SET", "ünïcode key", 1733500000.125, -7, 0, 2**70, 1e20, 0.1, ""),
    ("PING",),
]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_packs_to_the_bytes_redis_py_packs(command: tuple[object, ...]) -> None:
    assert resp.pack(command) == b"".join(Connection().pack_command(*command))


@pytest.mark.parametrize("refused", [True, None, [1], {"a": 1}])
def test_what_redis_py_refuses_is_refused(refused: object) -> None:
    with pytest.raises(DataError):
        Connection().pack_command("SET", "k", refused)
    with pytest.raises(DataError):
        resp.pack(("SET", "k", refused))  # type: ignore[arg-type]


def test_redis_reads_what_the_wire_packs(queue: RedisQueue) -> None:
    wire = Wire(queue.client)
    assert wire.call("SET", "resp:ü", 2.5) == b"OK"
    assert wire.call("INCRBYFLOAT", "resp:ü", 0.5) == b"3"
    assert wire.call("RPUSH", b"resp:list", b"\x00\xff", 7, "ü") == 3
    assert queue.client.lrange("resp:list", 0, -1) == [b"\x00\xff", b"7", "ü".encode()]


def test_only_redis_py_s_default_encoding_is_packed_in_one_step(
    queue: RedisQueue,
) -> None:
    """``pack`` writes UTF-8: a client set to another encoding keeps redis-py's packing."""
    url = queue.config.redis_url
    assert resp.packs_as_redis_py(queue.client)
    assert not resp.packs_as_redis_py(type(queue.client).from_url(url, encoding="latin-1"))
