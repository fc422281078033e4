"""Commands packed in Redis's protocol (RESP) in one step, without redis-py's per-argument
ones.

redis-py packs a command by passing each argument through its ``Encoder`` (a chain of
``isinstance`` checks, in a generator), then through its Python packer or hiredis's:
for a plain dispatch's ``push.lua`` call (14 arguments), 14 µs and 12 µs. :func:`pack`
gives the same bytes in 5 µs, the common types (bytes, str) tested first, in one list
comprehension (``benchmarks/speed/packing.py``). On a processor that was idle the
difference is several times larger, and a dispatch waits for it before its push
leaves (docs/benchmarks.md, "Idle dispatch-to-start").

It writes str as UTF-8, as redis-py's default encoding does, and rqueue opens its
clients so: :func:`packs_as_redis_py` says whether a client's connections would pack
the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import redis
from redis._parsers.encoders import Encoder

KeyOrArg = str | bytes | int | float
"""What a command's keys and arguments may be."""

_encode: Callable[[object], bytes] = Encoder("utf-8", "strict", False).encode  # type: ignore[no-untyped-call]
"""What redis-py makes of any other argument (a number, a subclass of str), or refuses."""


def pack(args: Sequence[KeyOrArg]) -> bytes:
    """One command, packed as redis-py's ``pack_command`` packs it (DataError for an
    argument it refuses: a bool, None, a list)."""
    parts = [
        arg if type(arg) is bytes else arg.encode() if type(arg) is str else _encode(arg)
        for arg in args
    ]
    return b"*%d\r\n" % len(parts) + b"".join([b"$%d\r\n%b\r\n" % (len(p), p) for p in parts])


def packs_as_redis_py(client: redis.Redis) -> bool:
    """Whether :func:`pack` gives this client's connections the bytes they would pack."""
    encoder = client.get_encoder()
    return encoder.encoding.lower().replace("_", "-") in ("utf-8", "utf8") and (
        encoder.encoding_errors == "strict"
    )
