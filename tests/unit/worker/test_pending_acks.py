"""The successes a child holds until a call acknowledges them (worker/pending_acks.py)."""

from __future__ import annotations

from rqueue.store.queue import Kept
from rqueue.worker.pending_acks import PendingAcks


def test_held_acks_are_due_by_the_earliest_reservation_end_until_taken() -> None:
    pending = PendingAcks()
    assert not pending and not pending.due_by(1e12)
    pending.acknowledge("a", b"first", expires_at=50.0)
    pending.acknowledge("b", b"second", expires_at=20.0)
    assert pending and pending.queues() == {"a", "b"}
    assert pending.due_by(20.0) and not pending.due_by(19.9)

    assert pending.take("b") == ([b"second"], [])
    assert pending.due_by(20.0)  # "a" is still held: the deadline stays as early as it was
    assert pending.take("a") == ([b"first"], [])
    assert not pending and not pending.due_by(1e12)


def test_acks_put_back_go_first_and_are_due_at_once() -> None:
    pending = PendingAcks()
    kept = Kept(b"kept", "id", b"record", 1000)
    pending.acknowledge("a", b"later", expires_at=100.0)
    pending.put_back("a", [b"earlier"], [kept])
    assert pending.of("a") == ([b"earlier", b"later"], [kept])
    assert pending.due_by(0.0)
    assert pending.finished("a") == {b"earlier", b"later", b"kept"}


def test_a_dropped_success_leaves_the_others_held() -> None:
    pending = PendingAcks()
    pending.acknowledge("a", b"one", expires_at=100.0)
    pending.acknowledge("a", b"two", expires_at=100.0, kept=Kept(b"two", "id", b"r", 1))
    pending.acknowledge("a", b"three", expires_at=100.0)
    pending.drop("a", b"two")
    assert pending.of("a") == ([b"one", b"three"], [])
    pending.drop("a", b"one")
    pending.drop("a", b"three")
    assert not pending and pending.queues() == set()
