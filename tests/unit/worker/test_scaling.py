"""A worker parent's child count changed while it runs (``--concurrency-file``)."""

from __future__ import annotations

from pathlib import Path

import apptasks
from support import Workers, follow_log, logged, strings, wait_for

from rqueue.store.queue import RedisQueue
from rqueue.worker.scaling import Resize, resize, write_target
from rqueue.worker.scoreboard import SlotView, State


def _view(state: State) -> SlotView:
    return SlotView(state, 0, (), 0, 0.0, 0)


def test_a_shrink_forgoes_respawns_first_then_stops_idle_children_highest_first() -> None:
    busy, idle = _view(State.RUNNING), _view(State.WAITING)
    kept = {1: idle, 2: busy, 3: idle, 4: busy}
    assert resize(2, kept, [], kept, 4) == Resize(stop=(3, 1))
    assert resize(1, kept, [], kept, 4) == Resize(stop=(3, 1, 4))
    assert resize(3, {1: idle, 2: busy}, [4, 3], {1, 2}, 4) == Resize(forgo=(4,))
    assert resize(1, {1: idle, 2: busy}, [3], {1, 2}, 4) == Resize(forgo=(3,), stop=(1,))


def test_a_growth_forks_into_the_slots_no_child_holds() -> None:
    idle = _view(State.WAITING)
    # Child 2 is stopping (not kept) but holds its slot until it exits.
    assert resize(3, {1: idle}, [], {1, 2}, 4) == Resize(spawn=(3, 4))
    assert resize(4, {1: idle}, [3], {1, 2}, 4) == Resize(spawn=(4,))
    assert resize(2, {1: idle, 2: idle}, [], {1, 2}, 4) == Resize()


def test_the_file_grows_the_pool_and_a_shrink_stops_idle_children_warmly(
    queue: RedisQueue, workers: Workers, tmp_path: Path
) -> None:
    count = tmp_path / "children"
    write_target(str(count), 3)
    worker = workers.start(
        "--max-concurrency", "3", "--concurrency-file", str(count), "--block-for", "0.5"
    )
    log = follow_log(worker)
    worker.wait_for_children(3)
    apptasks.blocks_until_released.dispatch("kept")
    wait_for(lambda: strings(queue.client, "test:started"), 10, "the task to start")
    busy = int(strings(queue.client, "test:started")[0].partition(":")[0])
    write_target(str(count), 1)
    wait_for(lambda: "".join(log).count("stopped: the pool shrank") == 2, 10, "two to stop")
    assert [c.pid for c in worker.wait_for_children(1)] == [busy]  # the busy one stays
    queue.client.rpush("test:release", "go")
    wait_for(lambda: strings(queue.client, apptasks.DONE) == ["kept"], 10, "the task to end")
    write_target(str(count), 2)
    worker.wait_for_children(2)
    assert logged(log, "scaling from 1 to 2 children")
    apptasks.record.dispatch_many([(n,) for n in range(20)])
    wait_for(lambda: len(strings(queue.client, apptasks.DONE)) == 21, 10, "the tasks to run")
    assert sorted(strings(queue.client, apptasks.DONE)) == sorted(
        ["kept", *(str(n) for n in range(20))]
    )


def test_a_count_out_of_range_is_kept_within_the_capacity(
    queue: RedisQueue, workers: Workers, tmp_path: Path
) -> None:
    count = tmp_path / "children"
    write_target(str(count), 9)
    worker = workers.start("--max-concurrency", "2", "--concurrency-file", str(count))
    log = follow_log(worker)
    worker.wait_for_children(2)
    wait_for(lambda: logged(log, "asks for 9 children: kept within 1..2"), 10, "the warning")
