"""The payload's fixed header: the bytes the Lua scripts read and patch in place.

A payload is an ordinary msgpack map whose first three entries (``attempts``,
``timeout_ms`` and ``id``) are always written with fixed widths at fixed offsets. The
scripts read the timeout and the id there and bump the attempt count by patching four
bytes, instead of decoding and re-encoding the map in Lua (which would lose floats,
bytes and big integers). So this layout is a contract between :mod:`rqueue.payload`,
which writes it, and the store, which reads it: it lives here, at the bottom, and the
offsets are mirrored in ``lua/*.lua``; ``tests/test_payload.py`` pins them.
"""

from __future__ import annotations

import struct

# 0xde + uint16 entry count, then three fixed entries.
HEADER = struct.Struct(">BHB8sBIB10sBIB2sBB32s")
HEADER_SIZE = HEADER.size  # 70
ATTEMPTS_OFFSET = 13
TIMEOUT_OFFSET = 29
ID_OFFSET = 38
ID_LENGTH = 32
FIXED_ENTRIES = 3
# The header's variable parts alone (attempts, timeout_ms, id), read in one unpack.
_VARIABLE = struct.Struct(">13xI12xI5x32s")
_MARKERS = b"\xa8attempts\xce"


def has_header(data: bytes) -> bool:
    return (
        len(data) > HEADER_SIZE
        and data[0] == 0xDE
        and data[3:13] == _MARKERS
        and data[36:38] == b"\xd9\x20"
    )


def header(data: bytes) -> tuple[str, int, int] | None:
    """``(id, attempts, timeout_ms)`` read straight from the fixed header, or None.

    A worker reads this for every task it reserves, so it costs one unpack.
    """
    if not has_header(data):
        return None
    attempts, timeout_ms, raw_id = _VARIABLE.unpack_from(data)
    return raw_id.decode("ascii", "replace"), attempts, timeout_ms


def payload_id(data: bytes) -> str | None:
    """The task id read straight from the fixed header, without decoding the rest."""
    fields = header(data)
    return fields[0] if fields else None


def with_attempts(data: bytes, attempts: int) -> bytes:
    """The same payload with its attempt counter set, every other byte untouched."""
    if not has_header(data):
        return data
    return data[:ATTEMPTS_OFFSET] + struct.pack(">I", attempts) + data[ATTEMPTS_OFFSET + 4 :]


def payload_attempts(data: bytes) -> int:
    """The attempt counter read straight from the fixed header (0 for foreign bytes)."""
    fields = header(data)
    return fields[1] if fields else 0
