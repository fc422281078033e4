"""Optional payload signing: an HMAC-SHA256 over every byte a worker trusts.

With a secret configured (``RQUEUE_SECRET``), producers append a ``sig`` entry to
each payload map and workers refuse a payload whose signature is missing or wrong,
before its task name is looked up (so its module is never imported). Anyone who can
write to Redis but does not hold the secret can then no longer choose which tasks
run with which arguments. See docs/security.md for what this does and does not cover.

The signature covers the whole payload except the four attempt-counter bytes, which
the Lua scripts patch in place on every reservation, release and retry. The map's
entry count in the header is bumped to include ``sig`` before signing, so a signed
payload is still an ordinary msgpack map that any reader can decode.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

from rqueue.errors import InvalidPayload
from rqueue.store.header import ATTEMPTS_OFFSET, has_header

_ENTRY_COUNT = struct.Struct(">H")
_ENTRY_COUNT_OFFSET = 1
_DIGEST_SIZE = 32
# fixstr "sig" then bin8 of 32 bytes: a fixed 6-byte prefix before the digest.
_TRAILER = b"\xa3sig\xc4\x20"
_SIGNED_TAIL = len(_TRAILER) + _DIGEST_SIZE


class InvalidSignature(InvalidPayload):
    """A payload that is unsigned or whose signature does not match the secret."""


def _mac(secret: str, unsigned: bytes) -> bytes:
    covered = unsigned[:ATTEMPTS_OFFSET] + unsigned[ATTEMPTS_OFFSET + 4 :]
    return hmac.new(secret.encode("utf-8"), covered, hashlib.sha256).digest()


def sign(payload: bytes, secret: str) -> bytes:
    """Append the ``sig`` entry to an encoded payload."""
    if not has_header(payload):
        raise InvalidPayload("only rqueue payloads can be signed")
    (entries,) = _ENTRY_COUNT.unpack_from(payload, _ENTRY_COUNT_OFFSET)
    unsigned = (
        payload[:_ENTRY_COUNT_OFFSET]
        + _ENTRY_COUNT.pack(entries + 1)
        + payload[_ENTRY_COUNT_OFFSET + _ENTRY_COUNT.size :]
    )
    return unsigned + _TRAILER + _mac(secret, unsigned)


def verify(payload: bytes, secret: str) -> None:
    """Raise InvalidSignature unless ``payload`` was signed with ``secret``."""
    if len(payload) <= _SIGNED_TAIL or payload[-_SIGNED_TAIL:-_DIGEST_SIZE] != _TRAILER:
        raise InvalidSignature(
            "payload is not signed, but this worker requires signed payloads (RQUEUE_SECRET)"
        )
    unsigned, digest = payload[: -_DIGEST_SIZE - len(_TRAILER)], payload[-_DIGEST_SIZE:]
    if not has_header(unsigned) or not hmac.compare_digest(digest, _mac(secret, unsigned)):
        raise InvalidSignature(
            "payload signature does not match: it was altered, or signed with another secret"
        )
