"""One worker serving thousands of queues (#16): the cost of a batch and of an idle
wait does not grow with the number of queues, and their priority order holds.

A child of more than ``PROBED_ABOVE`` queues probes their lengths instead of calling
reserve.lua on each in turn (``worker/queue_order.py``); on Redis Cluster a wait on
more than ``BLOCKED_MOST`` queues polls them instead of opening a blocking connection
per queue (``store/waits.py``). Run on every topology (``RQUEUE_TEST_TOPOLOGY``).
"""

from __future__ import annotations

import threading

import apptasks
import pytest
from support import Workers, load_scripts, nodes, scripts_run, strings, title, wait_for

from rqueue.encoding.payload import Job, encode, new_id
from rqueue.store.queue import RedisQueue
from rqueue.store.waits import BLOCKED_MOST
from rqueue.worker import queue_order
from rqueue.worker.options import WorkerOptions
from rqueue.worker.queue_order import PROBED_ABOVE
from rqueue.worker.reservations import Reservations

pytestmark = pytest.mark.topology

QUEUES = [f"tenant-{i}" for i in range(2000)]
WORKER_CONNECTIONS = 40
"""Most connections one worker (a parent and its one child) may hold, whatever the
number of its queues: a blocking connection per queue was 2,000 on a cluster."""


def connections(queue: RedisQueue) -> int:
    return sum(int(node.info("clients")["connected_clients"]) for node in nodes(queue))


def push(queue: RedisQueue, name: str, value: str) -> None:
    queue.push(name, [encode(apptasks.record.make_job((value,), {}))])


def batches(queue: RedisQueue) -> Reservations:
    return Reservations(queue, WorkerOptions(queues=tuple(QUEUES), prefetch=10), "child-claims")


def test_ready_lengths_finds_every_queue_with_tasks_and_an_error_as_one(
    queue: RedisQueue,
) -> None:
    names = [*QUEUES, "tenant-x"]
    counts = {QUEUES[0]: 1, QUEUES[99]: 2, QUEUES[100]: 3, QUEUES[1234]: 1, QUEUES[-1]: 4}
    for name, count in counts.items():
        for n in range(count):
            push(queue, name, f"{name}-{n}")
    leveled = Job(id=new_id(), task="t:t", args=(), kwargs={}, queue=QUEUES[7])
    queue.push(QUEUES[7], [encode(leveled)], lane=0)  # on a priority level only
    queue.client.set(queue.keys("tenant-x").ready, "not a list")
    lengths = queue.ready_lengths(names)
    held = {*counts, QUEUES[7]}
    assert lengths == [int(name in held) for name in QUEUES] + [1], "an error reads as 1"
    queue.clear(QUEUES[7])
    queue.client.delete(queue.keys("tenant-x").ready)
    for name in counts:
        queue.clear(name)
    assert queue.ready_lengths(names) == [0] * len(names)
    assert queue.ready_lengths([]) == []


def test_a_batch_on_the_last_of_2000_queues_costs_one_reserve_call(queue: RedisQueue) -> None:
    assert len(QUEUES) > max(PROBED_ABOVE, BLOCKED_MOST)
    taking = batches(queue)
    push(queue, QUEUES[-1], "last")
    load_scripts(queue)
    queue.client.config_resetstat()
    batch = taking.take(10)
    assert batch is not None and batch.queue_index == len(QUEUES) - 1
    assert len(batch.reservation.payloads) == 1
    assert scripts_run(queue) == 1, "one reserve call, not one per queue ahead of it"
    taking.pending.acknowledge(QUEUES[-1], batch.reservation.payloads[0], float("inf"))
    assert taking.take(10) is None
    # The drained queue was called once more: that call carried the ack, and deleted the
    # push signal that would otherwise end the next idle wait at once for nothing.
    assert scripts_run(queue) == 2
    assert not taking.pending
    keys = queue.keys(QUEUES[-1])
    assert queue.client.zcard(keys.reserved) == 0
    assert queue.client.exists(keys.notify) == 0


def test_an_earlier_queue_is_taken_first_when_both_have_tasks(queue: RedisQueue) -> None:
    taking = batches(queue)
    for n in range(3):
        push(queue, QUEUES[1500], f"late-{n}")
        push(queue, QUEUES[5], f"early-{n}")
    order = []
    while (batch := taking.take(10)) is not None:
        order += [QUEUES[batch.queue_index]] * len(batch.reservation.payloads)
        for payload in batch.reservation.payloads:
            taking.pending.acknowledge(QUEUES[batch.queue_index], payload, float("inf"))
    assert order == [QUEUES[5]] * 3 + [QUEUES[1500]] * 3
    assert not taking.pending


def test_a_push_after_a_probe_is_taken_before_the_child_goes_idle(
    queue: RedisQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_order, "REUSE", 10**9)  # the second take reuses the probe
    taking = batches(queue)
    push(queue, QUEUES[10], "first")
    batch = taking.take(10)
    assert batch is not None and batch.queue_index == 10
    push(queue, QUEUES[5], "after the probe")  # the probe found this queue empty
    batch = taking.take(10)
    assert batch is not None and batch.queue_index == 5
    assert taking.take(10) is None


def test_the_queue_a_push_woke_is_tried_first(queue: RedisQueue) -> None:
    taking = batches(queue)
    push(queue, QUEUES[3], "early")
    push(queue, QUEUES[1999], "woke")
    batch = taking.take(10, first=QUEUES[1999])
    assert batch is not None and batch.queue_index == 1999


def test_a_wait_on_2000_queues_wakes_for_a_push_to_the_last(queue: RedisQueue) -> None:
    woken: list[str | None] = []
    waiter = threading.Thread(target=lambda: woken.append(queue.wait_for_ready(QUEUES, 30)))
    waiter.start()
    push(RedisQueue(queue.config), QUEUES[-1], "wake")
    waiter.join(40)
    assert woken == [QUEUES[-1]]


def test_a_worker_of_2000_queues_runs_tasks_on_any_with_few_connections(
    queue: RedisQueue, workers: Workers
) -> None:
    before = connections(queue)
    worker = workers.start(",".join(QUEUES), "-c", "1", "--block-for", "0.5")
    (child,) = worker.wait_for_children(1)
    wait_for(lambda: title(child.pid).endswith(": waiting"), 20, "an idle child")
    apptasks.record.on_queue(QUEUES[-1]).dispatch("last")
    wait_for(lambda: strings(queue.client, apptasks.DONE) == ["last"], 20)
    spread = QUEUES[::97]
    for name in spread:
        apptasks.record.on_queue(name).dispatch(name)
    wait_for(lambda: len(strings(queue.client, apptasks.DONE)) == 1 + len(spread), 30)
    assert sorted(strings(queue.client, apptasks.DONE)[1:]) == sorted(spread)
    wait_for(lambda: title(child.pid).endswith(": waiting"), 20, "idle again")
    held = connections(queue) - before
    assert 0 < held <= WORKER_CONNECTIONS, f"the worker holds {held} connections"
