"""A batch member's count waits for its acknowledgement and goes with it (issue 30).

The members a child finished are counted together, one call per batch, just before
the call that carries their acks; a child that dies owing counts leaves them to its
parent, which counts before it acks. On Redis Cluster too (marked ``topology``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
import workflow_tasks as flows

from rqueue import Batch, batch
from rqueue.failed import FailedTasks
from rqueue.metrics.collector import NoMetrics
from rqueue.settings.config import Config
from rqueue.store.batch_store import BatchStore
from rqueue.store.cluster import ClusterClient
from rqueue.store.header import header
from rqueue.store.queue import RedisQueue
from rqueue.tasks.current import Runner, set_runner
from rqueue.worker import participants
from rqueue.worker.child import ChildWorker
from rqueue.worker.options import WorkerOptions
from rqueue.worker.recovery import Recovery
from rqueue.worker.scoreboard import Scoreboard, State
from rqueue.worker.timeouts import TimeLimit

MEMBERS = 12


@pytest.fixture
def child(
    queue: RedisQueue, config: Config, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ChildWorker]:
    """One worker child in this process, as ``rqueue work`` runs it (no fork), with no
    integration joined: Sentry's stays joined in a process that ever set it up (its
    ``setup_once``), and a child an integration joined counts each member at once."""
    monkeypatch.setattr(participants, "_joined", ())
    options = WorkerOptions(prefetch=MEMBERS, metrics=False)
    board = Scoreboard(1, options.held_limit)
    worker = ChildWorker(options, config, board.slot(0), 1, os.getppid(), "test")
    worker.time_limit = TimeLimit()
    set_runner(Runner(worker.store, options.timeout, options.kill_grace, {}))
    yield worker
    set_runner(None)


def dispatched(queue: RedisQueue) -> Batch:
    members = [flows.member.pending(n) for n in range(MEMBERS)]
    return batch(members).then(flows.batch_callback.pending("then")).dispatch(queue)


def run_members(queue: RedisQueue, child: ChildWorker) -> None:
    """Reserve every member at once and run each, as the child runs a batch of them."""
    reservation = queue.send_reserve("default", MEMBERS, 60_000, 1_000, 1_000)()
    assert len(reservation.payloads) == MEMBERS
    expires_at = time.monotonic() + 60
    for entry, payload in enumerate(reservation.payloads):
        child.lifecycle.process(entry, "default", payload, header(payload), expires_at)


def script_calls(queue: RedisQueue) -> int:
    """EVALSHA calls so far: on a cluster, summed over its primaries."""
    client = queue.client
    nodes = client.slots.primaries() if isinstance(client, ClusterClient) else [client]
    stats = [node.info("commandstats").get("cmdstat_evalsha", {}) for node in nodes]
    return sum(int(found.get("calls", 0)) for found in stats)


@pytest.mark.topology
def test_members_are_counted_together_just_before_their_acks(
    queue: RedisQueue, child: ChildWorker
) -> None:
    handle = dispatched(queue)
    run_members(queue, child)
    status = handle.status()
    assert status is not None and status.succeeded == 0  # counts wait with the acks
    assert queue.sizes(["default"])[0].reserved == MEMBERS
    before = script_calls(queue)
    child.reservations.flush()
    # One count for the whole batch, one ack call, one push of its `then`.
    assert script_calls(queue) - before == 3
    status = handle.status()
    assert status is not None and status.succeeded == MEMBERS and status.finished
    sizes = queue.sizes(["default"])[0]
    assert (sizes.ready, sizes.reserved) == (1, 0)  # `then`, pushed once


@pytest.mark.topology
def test_a_dead_childs_finished_members_are_counted_by_its_parent(queue: RedisQueue) -> None:
    """Its acks, and so its counts, had not gone: the parent counts what it acks."""
    handle = dispatched(queue)
    reservation = queue.send_reserve("default", MEMBERS, 60_000, 1_000, 1_000)()
    board = Scoreboard(slots=1, max_held=MEMBERS)
    slot = board.slot(0)
    held = [header(payload) for payload in reservation.payloads]
    slot.hold(0, [fixed for fixed in held if fixed is not None])
    slot.set(State.HOLDING, MEMBERS)  # every one finished, none acknowledged
    view = board.read(0)
    Recovery(queue, WorkerOptions(), lambda call: call(), NoMetrics()).recover(
        view, "token", "killed by signal 9", killed_for_timeout=False, cold=False
    )
    status = handle.status()
    assert status is not None and status.succeeded == MEMBERS and status.finished
    sizes = queue.sizes(["default"])[0]
    assert (sizes.ready, sizes.reserved) == (1, 0)  # `then`, pushed once


def test_members_whose_batch_refuses_their_count_are_failed_not_acked(
    queue: RedisQueue, child: ChildWorker
) -> None:
    """The batch's state was overwritten by hand after they ran: Redis refuses the
    count for good, so their acks must not go as if they had been counted."""
    handle = dispatched(queue)
    run_members(queue, child)
    state = BatchStore(queue).keys(handle.id).state
    queue.client.delete(state)
    queue.client.set(state, "not a hash")
    child.reservations.flush()
    child._fail_refused()
    sizes = queue.sizes(["default"])[0]
    assert (sizes.reserved, sizes.failed) == (0, MEMBERS)
    failure = FailedTasks(queue).list(["default"])[0]
    assert "refused its batch's count" in failure.message
