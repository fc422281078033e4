"""Optional signing: an HMAC-SHA256 over every byte a worker trusts, bound to its place.

With a secret configured (``RQUEUE_SECRET``), producers append a signature element to
each payload array and workers refuse a payload whose signature is missing or wrong,
before its task name is looked up (so its module is never imported). Anyone who can
write to Redis but does not hold the secret can then no longer choose which tasks
run with which arguments. See docs/security.md for what this does and does not cover.

A payload's signature covers the whole payload except the four attempt-counter
bytes, which the Lua scripts patch in place on every reservation, release and retry,
and it covers the name of the queue it was pushed to: moved to another queue (a
signed ``default`` task pushed onto ``high``) it no longer verifies. The array's
element count in the header is bumped to include the signature before signing, so a
signed payload is still an ordinary msgpack array that any reader can decode.

Schedule definitions are signed too (:func:`sign_definition`), bound to the queue and
name they are stored under, because a worker turns them into signed payloads: without
their own signature, whoever can write a definition could have any task signed.

Workflow steps are signed too (:func:`step_mac`): a batch's callbacks, which wait in
the batch's hash, and a chain's steps and catch, which travel in a payload's ``meta``.
A worker turns each into a payload of its own when its turn comes, so each carries
the signature of the process that wrote it, bound to where it belongs (a callback to
its batch and its role), and a worker refuses one that does not verify instead of
signing it: a worker never signs what it read from Redis.

Messages a worker parent queues for its children (the failure report of
``rqueue.worker.parent_failures``) are signed with :func:`parent_secret`, a key
derived from the secret, so a payload dispatched by a producer can never pass for one.
"""

from __future__ import annotations

import functools
import hmac
from typing import Any

import msgpack

from rqueue.errors import InvalidPayload
from rqueue.store.header import ARRAY, ATTEMPTS_OFFSET, LARGEST, attempts_offset, has_header

_DIGEST_SIZE = 32
_TRAILER = b"\xc4\x20"
"""Before the digest: bin 8 of 32 bytes, the payload array's last element."""
# What a MAC is for comes first in its input, so one kind can never pass for another.
_PAYLOAD, _DEFINITION = b"rqueue payload\0", b"rqueue schedule\0"
_STEP = b"rqueue step\0"


class InvalidSignature(InvalidPayload):
    """A payload or definition that is unsigned, or whose signature does not match."""


@functools.lru_cache(maxsize=256)
def _keyed(secret: str, purpose: bytes, queue: str) -> Any:
    """An HMAC already fed the secret, the purpose and the queue: per task, only a copy."""
    return hmac.new(secret.encode("utf-8"), purpose + queue.encode("utf-8") + b"\0", "sha256")


def _mac(secret: str, queue: str, unsigned: bytes, attempts_at: int) -> bytes:
    mac = _keyed(secret, _PAYLOAD, queue).copy()
    mac.update(unsigned[:attempts_at])
    mac.update(unsigned[attempts_at + 4 :])
    return mac.digest()  # type: ignore[no-any-return]


def sign(payload: bytes, secret: str, queue: str) -> bytes:
    """Append the signature element to an encoded payload bound for ``queue``; the
    array's element count in the header is bumped to include it."""
    if attempts_offset(payload) != ATTEMPTS_OFFSET or payload[0] - ARRAY >= LARGEST:
        raise InvalidPayload("only rqueue payloads can be signed")
    unsigned = bytes((payload[0] + 1,)) + payload[1:]
    return unsigned + _TRAILER + _mac(secret, queue, unsigned, ATTEMPTS_OFFSET)


def verify(payload: bytes, secret: str, queue: str) -> None:
    """Raise InvalidSignature unless ``payload`` was signed with ``secret`` for ``queue``."""
    tail = len(_TRAILER) + _DIGEST_SIZE
    if not has_header(payload) or len(payload) <= tail or payload[-tail:-_DIGEST_SIZE] != _TRAILER:
        raise InvalidSignature(
            "payload is not signed, but this worker requires signed payloads (RQUEUE_SECRET)"
        )
    unsigned, digest = payload[:-tail], payload[-_DIGEST_SIZE:]
    expected = _mac(secret, queue, unsigned, ATTEMPTS_OFFSET)
    if not has_header(unsigned) or not hmac.compare_digest(digest, expected):
        raise InvalidSignature(
            "payload signature does not match: it was altered, signed with another secret, "
            f"or signed for another queue than {queue!r}"
        )


@functools.lru_cache(maxsize=8)
def parent_secret(secret: str) -> str:
    """The key worker parents sign their own messages with, derived from ``secret``."""
    return hmac.new(secret.encode("utf-8"), b"rqueue worker parent", "sha256").hexdigest()


# -- schedule definitions -------------------------------------------------------------


def _definition_mac(secret: str, queue: str, name: str | bytes, fields: dict[Any, Any]) -> bytes:
    """The MAC of a definition's fields but ``sig``, packed the one way msgpack packs them.

    Re-packing the decoded map (rather than hashing the stored bytes) means what is
    verified is exactly what the scheduler will read from those bytes.
    """
    body = {k: v for k, v in fields.items() if k != "sig"}
    mac = _keyed(secret, _DEFINITION, queue).copy()
    mac.update((name if isinstance(name, bytes) else name.encode("utf-8")) + b"\0")
    mac.update(msgpack.packb(body, use_bin_type=True))
    return mac.digest()  # type: ignore[no-any-return]


def _fields(definition: bytes) -> dict[Any, Any]:
    try:
        fields = msgpack.unpackb(definition, raw=False, strict_map_key=False)
    except Exception as exc:
        raise InvalidSignature(f"schedule definition is unreadable: {exc}") from None
    if not isinstance(fields, dict):
        raise InvalidSignature("schedule definition is not a map")
    return fields


def sign_definition(definition: bytes, secret: str, queue: str, name: str | bytes) -> bytes:
    """A schedule definition (a msgpack map) with a ``sig`` entry for ``queue``/``name``."""
    fields = _fields(definition)
    fields.pop("sig", None)
    fields["sig"] = _definition_mac(secret, queue, name, fields)
    return msgpack.packb(fields, use_bin_type=True)  # type: ignore[no-any-return]


def verify_definition(definition: bytes, secret: str, queue: str, name: str | bytes) -> None:
    """Raise InvalidSignature unless the definition was signed with ``secret`` for
    schedule ``name`` on ``queue``."""
    fields = _fields(definition)
    digest = fields.get("sig")
    name = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
    if not isinstance(digest, bytes):
        raise InvalidSignature(
            f"schedule {name!r} is not signed, but this process requires signed schedules "
            "(RQUEUE_SECRET): it was written without the secret"
        )
    if not hmac.compare_digest(digest, _definition_mac(secret, queue, name, fields)):
        raise InvalidSignature(
            f"schedule {name!r} signature does not match: its definition was altered in "
            "Redis, moved, or signed with another secret"
        )


# -- workflow steps -------------------------------------------------------------------


def step_mac(secret: str, place: str, body: bytes) -> bytes:
    """The MAC of a workflow step whose fields but its signature pack to ``body``, for
    ``place`` (where it belongs: ``batch <id> then``, ``chain step``, ``chain catch``)."""
    mac = _keyed(secret, _STEP, place).copy()
    mac.update(body)
    return mac.digest()  # type: ignore[no-any-return]


def verify_step_mac(secret: str, place: str, body: bytes, digest: object) -> None:
    """Raise InvalidSignature unless ``digest`` is :func:`step_mac` of ``body``."""
    if not isinstance(digest, bytes):
        raise InvalidSignature(
            f"its {place} is not signed, but this worker requires signed workflows "
            "(RQUEUE_SECRET): it was written without the secret"
        )
    if not hmac.compare_digest(digest, step_mac(secret, place, body)):
        raise InvalidSignature(
            f"its {place} signature does not match: it was altered in Redis, moved from "
            "another workflow, or signed with another secret"
        )
