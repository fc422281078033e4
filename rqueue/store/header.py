"""The payload's fixed header: the bytes the Lua scripts read and patch in place.

A payload is an ordinary msgpack array whose first three elements (the attempt
count, the timeout in ms and the task id) are always written with fixed widths at
fixed offsets. The scripts read the timeout and the id there and bump the attempt
count by patching four bytes, instead of decoding and re-encoding the payload in Lua
(which would lose floats, bytes and big integers). So this layout is a contract
between :mod:`rqueue.encoding.payload`, which writes it, and the store, which reads it: it
lives here, at the bottom, and ``lua/header.lua`` mirrors it for the scripts;
``tests/unit/encoding/test_payload.py`` pins both.

The header is 29 bytes: a fixarray marker, the attempt count and the timeout as
msgpack uint32 (``0xce`` and four bytes each), and the id as its 16 raw bytes
(``0xc4 0x10``, bin 8). The id is 32 hex digits everywhere else (the API, logs, key
names); stored raw it costs half, in the payload and in the pending-ids set.
"""

from __future__ import annotations

import struct

HEADER = struct.Struct(">BBIBIBB16s")
HEADER_SIZE = HEADER.size  # 29
ATTEMPTS_OFFSET = 2
TIMEOUT_OFFSET = 7
ID_OFFSET = 13
RAW_ID_LENGTH = 16
ID_LENGTH = 32
"""A task id's length as text: 32 hex digits."""
ARRAY = 0x90
"""A fixarray's marker; its low four bits are the element count."""
SMALLEST, LARGEST = 9, 15
"""A payload array's element count: 9 (10 signed); 15 is the most a fixarray holds."""
_FIELDS = struct.Struct(">2xI1xI2x16s")
_MARKERS = (0xCE, 0xCE, 0xC4, RAW_ID_LENGTH)


def attempts_offset(data: bytes) -> int | None:
    """Where the attempt counter sits in ``data``, or None if it has no header."""
    if (
        len(data) > HEADER_SIZE
        and SMALLEST <= data[0] - ARRAY <= LARGEST
        and (data[1], data[6], data[11], data[12]) == _MARKERS
    ):
        return ATTEMPTS_OFFSET
    return None


def has_header(data: bytes) -> bool:
    return attempts_offset(data) is not None


def header(data: bytes) -> tuple[str, int, int] | None:
    """``(id, attempts, timeout_ms)`` read straight from the fixed header, or None.

    A worker reads this for every task it reserves, so it costs one unpack.
    """
    if attempts_offset(data) is None:
        return None
    attempts, timeout_ms, stored = _FIELDS.unpack_from(data)
    return stored.hex(), attempts, timeout_ms


def raw_id(task_id: str) -> bytes:
    """A task id as stored in a payload and the pending-ids set: ValueError unless it is
    32 hex digits."""
    try:
        raw = bytes.fromhex(task_id)
    except (TypeError, ValueError):
        raw = b""
    if len(raw) != RAW_ID_LENGTH or raw.hex() != task_id:
        raise ValueError(f"a task id is {ID_LENGTH} lowercase hex digits, got {task_id!r}")
    return raw


def payload_id(data: bytes) -> str | None:
    """The task id read straight from the fixed header, without decoding the rest."""
    fields = header(data)
    return fields[0] if fields else None


def with_attempts(data: bytes, attempts: int) -> bytes:
    """The same payload with its attempt counter set, every other byte untouched."""
    offset = attempts_offset(data)
    if offset is None:
        return data
    return data[:offset] + struct.pack(">I", attempts) + data[offset + 4 :]


def payload_attempts(data: bytes) -> int:
    """The attempt counter read straight from the fixed header (0 for foreign bytes)."""
    fields = header(data)
    return fields[1] if fields else 0
