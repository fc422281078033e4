"""The path from a push to an idle worker's task starting: the thread that waits for the
push is the one that starts the task, and the reserve call leaves as the push wakes it.

A child's event loop watches its wait for a push (``worker/listener.py``), and reads it
itself, also as it goes back to process mode; a push to an idle child sends the reserve
call at once (``Reservations.reserve_woken``), read by the next ``take``, unless the
call went behind the wait (``wait_then_reserve``, ``reserve_behind``). Real Redis.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import apptasks
import async_tasks as at
import pytest
from support import Workers, load_scripts, nodes, scripts_run, settled, strings, wait_for

from rqueue.encoding.payload import encode
from rqueue.settings.config import Config
from rqueue.store.consumer import BehindWait
from rqueue.store.header import payload_attempts
from rqueue.store.queue import RedisQueue
from rqueue.worker.listener import Listener
from rqueue.worker.options import WorkerOptions
from rqueue.worker.reservations import Reservations

pytestmark = pytest.mark.topology  # one queue per wait: one command on every topology


def push(queue: RedisQueue, name: str, value: str) -> None:
    queue.push(name, [encode(apptasks.record.make_job((value,), {}))])


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    made = asyncio.new_event_loop()
    yield made
    made.close()


@pytest.mark.parametrize("on_the_loop", [True, False], ids=["on the loop", "finished"])
def test_a_push_wakes_the_thread_that_reads_the_wait_with_no_thread_between(
    queue: RedisQueue, config: Config, loop: asyncio.AbstractEventLoop, on_the_loop: bool
) -> None:
    """Read on the loop (coroutines run), or by ``finish`` (the child leaves async mode,
    the loop not running): either way the thread that waits is the one woken."""
    listener = Listener(config, loop)
    threads = threading.active_count()
    woken = listener.listen(["mail"], 5.0)
    push(queue, "mail", "hello")
    if on_the_loop:
        loop.run_until_complete(asyncio.wait_for(woken, 5.0))
    else:
        listener.finish(woken)
    assert woken.result() == "mail"
    quiet = listener.listen(["mail"], 0.05)  # nothing pushed: it times out
    listener.finish(quiet)
    assert quiet.result() is None
    assert threading.active_count() == threads


def test_an_idle_child_that_ran_coroutines_waits_for_pushes_on_no_thread_of_its_own(
    queue: RedisQueue, workers: Workers
) -> None:
    """Its wait went on a thread, which handed each wake-up to the loop's thread: one more
    thread woken, and one more hop, between a push and the task's start."""
    workers.start("-c", "1", "--slots", "10", "--log-level", "warning")
    at.nap.dispatch(1, 0.3)  # while it runs, the child waits for pushes beside it
    wait_for(lambda: strings(queue.client, at.DONE), 10, "the coroutine")
    at.threads_seen.dispatch()
    (seen,) = wait_for(lambda: strings(queue.client, at.THREADS), 10, "the sync task")
    assert "rqueue-listen" not in seen, seen
    wait_for(lambda: settled(queue), 5, "every ack")


def test_the_reserve_call_sent_as_a_push_wakes_a_child_is_the_one_take_reads(
    queue: RedisQueue,
) -> None:
    taking = Reservations(queue, WorkerOptions(queues=("high", "low"), prefetch=10), "claims")
    push(queue, "low", "first")
    load_scripts(queue)
    for node in nodes(queue):
        node.config_resetstat()
    taking.reserve_woken("low")  # a push to "low" woke the child
    batch = taking.take(10)
    assert batch is not None
    assert (batch.queue_index, batch.reservation.queue) == (1, "low")
    assert len(batch.reservation.payloads) == 1
    assert scripts_run(queue) == 1  # take read the call sent at the wake-up


def test_a_wake_up_sends_nothing_ahead_of_acks_still_to_go(queue: RedisQueue) -> None:
    taking = Reservations(queue, WorkerOptions(queues=("low",), prefetch=10), "claims")
    push(queue, "low", "first")
    first = taking.take(10)
    assert first is not None
    taking.pending.acknowledge("low", first.reservation.payloads[0], float("inf"))
    push(queue, "low", "second")
    taking.reserve_woken("low")  # the acks go first, with the next take's call
    batch = taking.take(10)
    assert batch is not None and len(batch.reservation.payloads) == 1
    assert queue.sizes(["low"])[0].reserved == 1  # the first was acked by that call


def test_a_reserve_call_without_acks_is_packed_once_and_sent_again_as_it_is(
    queue: RedisQueue,
) -> None:
    def reserve(acks: list[bytes]) -> list[bytes]:
        call = queue.send_reserve("low", 1, 60_000, 1_000, 1_000, ack=acks, claims="claims")
        return call().payloads

    push(queue, "low", "first")
    (first,) = reserve([])
    push(queue, "low", "second")
    (second,) = reserve([])  # the same bytes as the first call: a task of its own
    assert first != second
    assert len(queue.wire._packed) == 1
    push(queue, "low", "third")
    assert len(reserve([first, second])) == 1  # acks differ each time: not kept
    assert len(queue.wire._packed) == 1
    assert queue.sizes(["low"])[0].reserved == 1


def test_a_child_of_one_queue_sends_its_reserve_call_behind_its_wait(queue: RedisQueue) -> None:
    """One write, no round trip after the wake-up: the push ends the wait and Redis runs
    the reserve call behind it, read by the next ``take``. Unconfirmed: the reservation
    lasts the margin alone (its score half a millisecond past it) until confirmed."""
    taking = Reservations(queue, WorkerOptions(queues=("low",)), "claims")
    push(queue, "low", "first")
    load_scripts(queue)
    for node in nodes(queue):
        node.config_resetstat()
    assert taking.wait_then_reserve("low", 5.0) is True
    batch = taking.take(10)
    assert batch is not None and batch.unconfirmed
    (payload,) = batch.reservation.payloads
    assert scripts_run(queue) == 1  # take read the call sent behind the wait
    margin_ms = WorkerOptions().reservation_margin * 1000
    score = queue.client.zscore(queue.keys("low").reserved, payload)
    assert score is not None and score % 1 == 0.5
    assert score - batch.reservation.now_ms == margin_ms + 0.5
    taking.confirm("low", payload, 60.0)
    taking.flush()  # reads the confirmation
    confirmed = queue.client.zscore(queue.keys("low").reserved, payload)
    assert confirmed is not None and confirmed % 1 == 0
    assert confirmed - batch.reservation.now_ms >= 60_000


def test_an_event_loops_wait_carries_the_reserve_call_its_child_sends_as_it_goes_idle(
    queue: RedisQueue, config: Config, loop: asyncio.AbstractEventLoop
) -> None:
    """A child that ran coroutines leaves async mode with its wait for a push on its way
    (listener.py): its reserve call goes behind that wait, on its connection, and Redis
    reserves the pushed task as the wait ends, unconfirmed. ``take`` reads it with no
    call of its own: no round trip after the wake-up."""
    listener = Listener(config, loop)
    taking = Reservations(queue, WorkerOptions(queues=("low",)), "claims")
    woken = listener.listen(["low"], 5.0)
    pushing = threading.Timer(0.1, push, (queue, "low", "later"))
    pushing.start()
    listener.finish(woken, taking.reserve_behind)
    pushing.join()
    assert woken.result() == "low"
    assert queue.sizes(["low"])[0].reserved == 1  # by the call behind the wait
    for node in nodes(queue):
        node.config_resetstat()
    batch = taking.take(10)
    assert batch is not None and batch.unconfirmed
    assert len(batch.reservation.payloads) == 1
    assert scripts_run(queue) == 0  # read with the wait


def test_a_wait_on_several_queues_carries_no_reserve_call(
    queue: RedisQueue, config: Config, loop: asyncio.AbstractEventLoop
) -> None:
    """Which queue to reserve from is known only once such a wait ends: it is read as
    it came, and the push's queue is reserved from after the wake-up."""
    listener = Listener(config, loop)
    taking = Reservations(queue, WorkerOptions(queues=("high", "low")), "claims")
    woken = listener.listen(["high", "low"], 5.0)
    push(queue, "low", "first")
    listener.finish(woken, taking.reserve_behind)
    assert woken.result() == "low"
    assert queue.sizes(["low"])[0].reserved == 0
    batch = taking.take(10, first="low")
    assert batch is not None and not batch.unconfirmed


def test_a_wait_that_ends_with_no_push_is_followed_by_no_second_reserve_call(
    queue: RedisQueue,
) -> None:
    taking = Reservations(queue, WorkerOptions(queues=("low",)), "claims")
    assert taking.wait_then_reserve("low", 0.05) is False
    for node in nodes(queue):
        node.config_resetstat()
    assert taking.take(10) is None  # Redis looked as the wait ended: not again
    assert scripts_run(queue) == 0


def test_an_unconfirmed_reservation_that_runs_out_comes_back_with_its_attempt(
    queue: RedisQueue,
) -> None:
    """What a worker that died in its wait would leave: Redis reserved the task for no
    one. It comes back after the margin, as the attempt it never started."""
    push(queue, "low", "orphan")
    read = queue.send_wait_then_reserve("low", 5.0, BehindWait(60_000, 1_000, 100, 1, "dead-child"))
    assert read is not None
    woken, reservation = read()
    (reserved,) = reservation.payloads
    assert woken and payload_attempts(reserved) == 1
    wait_for(lambda: queue.migrate("low").moved, 5, "the reservation to run out")
    (back,) = queue.client.lrange(queue.keys("low").ready, 0, -1)
    assert payload_attempts(back) == 0
    assert queue.sizes(["low"])[0].reserved == 0
