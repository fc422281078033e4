"""Payloads written before the array layout (a msgpack map, the id as hex text) that sit
in Redis across an upgrade are still reserved, run, retried, cancelled and verified."""

from __future__ import annotations

import hmac
import struct

import apptasks
import msgpack
import pytest
from support import Workers

from rqueue import CancelOutcome
from rqueue.payload import decode, new_id
from rqueue.store.cancel import cancel
from rqueue.store.header import header, payload_attempts, with_attempts
from rqueue.store.queue import RedisQueue
from rqueue.store.signing import InvalidSignature, verify

_V1_HEADER = struct.Struct(">BHB8sBIB10sBIB2sBB32s")


def v1_payload(task_id: str, value: str, attempts: int = 0, timeout_ms: int = 0) -> bytes:
    """A payload exactly as rqueue wrote it before the array layout."""
    rest = {
        "task": "apptasks:record",
        "queue": "default",
        "tries": None,
        "backoff": [],
        "dispatched_at": 1.5,
        "args": [value],
        "kwargs": {},
    }
    fixed = _V1_HEADER.pack(
        0xDE, 3 + len(rest), 0xA8, b"attempts", 0xCE, attempts, 0xAA, b"timeout_ms",
        0xCE, timeout_ms, 0xA2, b"id", 0xD9, 32, task_id.encode(),
    )  # fmt: skip
    return fixed + msgpack.packb(rest)[1:]


def test_a_v1_payload_decodes_with_its_header() -> None:
    task_id = new_id()
    data = v1_payload(task_id, "old", attempts=2, timeout_ms=1500)
    assert header(data) == (task_id, 2, 1500)
    job = decode(data)
    assert (job.id, job.task, job.args, job.attempts, job.timeout) == (
        task_id, "apptasks:record", ("old",), 2, 1.5,
    )  # fmt: skip
    assert payload_attempts(with_attempts(data, 7)) == 7


@pytest.mark.topology
def test_v1_payloads_are_reserved_run_and_cancelled(queue: RedisQueue, workers: Workers) -> None:
    kept, dropped = new_id(), new_id()
    queue.push("default", [v1_payload(kept, "v1-ran"), v1_payload(dropped, "v1-dropped")])
    apptasks.record.dispatch("v2-ran")
    assert cancel(queue, dropped, "default") is CancelOutcome.CANCELLED
    assert cancel(queue, dropped, "default") is CancelOutcome.ALREADY_CANCELLED
    code, output = workers.run("--stop-when-empty")
    assert code == 0, output
    ran = [v.decode() for v in queue.client.lrange(apptasks.DONE, 0, -1)]
    assert sorted(ran) == ["v1-ran", "v2-ran"]
    keys = queue.keys("default")
    assert queue.client.scard(keys.pending_ids) == queue.client.scard(keys.cancelled) == 0


def test_reserve_and_release_patch_a_v1_attempt_counter(queue: RedisQueue) -> None:
    original = v1_payload(new_id(), "x", attempts=0xFF, timeout_ms=3000)
    queue.push("default", [original])
    reservation = queue.reserve("default", 1, 60_000, 0, 0)
    (reserved,) = reservation.payloads
    assert reserved == with_attempts(original, 0x100)
    score = queue.client.zscore(queue.keys("default").reserved, reserved)
    assert score == reservation.now_ms + 3000  # its own timeout, read at the v1 offset
    assert queue.release("default", [reserved], unstarted=True) == 1
    assert queue.client.lrange(queue.keys("default").ready, 0, -1) == [original]


def v1_signed(payload: bytes, secret: str, queue: str) -> bytes:
    """A v1 payload signed as rqueue signed it then: a ``sig`` entry counted in the map,
    its HMAC over everything but the attempt counter (bytes 13-16)."""
    (entries,) = struct.unpack_from(">H", payload, 1)
    unsigned = payload[:1] + struct.pack(">H", entries + 1) + payload[3:]
    mac = hmac.new(secret.encode(), b"rqueue payload\0" + queue.encode() + b"\0", "sha256")
    mac.update(unsigned[:13] + unsigned[17:])
    return unsigned + b"\xa3sig\xc4\x20" + mac.digest()


def test_a_signed_v1_payload_still_verifies_and_tampering_is_caught() -> None:
    signed = v1_signed(v1_payload(new_id(), "x"), "secret", "default")
    verify(signed, "secret", "default")
    verify(with_attempts(signed, 5), "secret", "default")
    tampered = signed.replace(b"apptasks:record", b"apptasks:recorD")
    with pytest.raises(InvalidSignature):
        verify(tampered, "secret", "default")
