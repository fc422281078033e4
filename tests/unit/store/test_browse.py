"""Reading a queue's tasks a window at a time (rqueue.store.browse), against the test
Redis and real workers: the order of each list, its paging, the finished index the
scripts keep, and entries written by hand that are no tasks."""

from __future__ import annotations

import apptasks
import msgpack
from support import Workers, wait_for

from rqueue.encoding.payload import decode
from rqueue.store import browse
from rqueue.store.header import payload_id, raw_id
from rqueue.store.queue import RedisQueue

FAST = ("--block-for", "0.2", "--log-level", "warning")


def ids(window: browse.Window) -> list[str | None]:
    return [payload_id(entry.payload) for entry in window.entries]


def test_the_ready_list_is_read_from_its_head_a_window_at_a_time(queue: RedisQueue) -> None:
    dispatched = [apptasks.record.dispatch(n).id for n in range(7)]
    first = browse.ready(queue, "default", 0, 3)
    assert first.total == 7 and ids(first) == dispatched[:3]
    assert ids(browse.ready(queue, "default", 3, 3)) == dispatched[3:6]
    assert ids(browse.ready(queue, "default", 6, 3)) == dispatched[6:]
    assert browse.ready(queue, "default", 7, 3).entries == []
    assert [decode(e.payload).args for e in first.entries] == [(0,), (1,), (2,)]


def test_the_delayed_set_is_read_soonest_due_first_with_its_due_times(queue: RedisQueue) -> None:
    late = apptasks.record.later(900, "late").id
    soon = apptasks.record.later(60, "soon").id
    middle = apptasks.record.later(300, "middle").id
    window = browse.delayed(queue, "default", 0, 10)
    assert ids(window) == [soon, middle, late]
    dues = [entry.score_ms for entry in window.entries]
    assert all(due is not None for due in dues) and dues == sorted(dues)  # type: ignore[type-var]
    assert ids(browse.delayed(queue, "default", 1, 1)) == [middle]


def test_a_cancelled_task_is_marked_where_it_still_sits(queue: RedisQueue) -> None:
    kept = apptasks.record.dispatch("kept")
    gone = apptasks.record.dispatch("gone")
    assert gone.cancel()
    window = browse.ready(queue, "default", 0, 10)
    assert [(payload_id(e.payload), e.cancelled) for e in window.entries] == [
        (kept.id, False),
        (gone.id, True),
    ]


def test_running_tasks_are_read_from_the_reserved_set(queue: RedisQueue, workers: Workers) -> None:
    napping = apptasks.naps.dispatch(30)
    worker = workers.start("-c", "1", *FAST)
    window = wait_for(lambda: browse.running(queue, "default", 0, 10).entries, 20, "a reservation")
    assert [payload_id(entry.payload) for entry in window] == [napping.id]
    assert window[0].score_ms is not None  # when the reservation runs out
    assert browse.find_payload(queue, "default", napping.id) is not None
    worker.signal(9)
    worker.wait()


def test_finished_tasks_that_keep_their_result_are_indexed_newest_first(
    queue: RedisQueue, workers: Workers
) -> None:
    plain = apptasks.record.dispatch("not kept")
    first = apptasks.record.using(keep_result=60).dispatch("first")
    code, output = workers.run("-c", "1", "--stop-when-empty", *FAST)
    assert code == 0, output
    failing = apptasks.always_raises.using(keep_result=60, tries=1).dispatch("boom")
    code, output = workers.run("-c", "1", "--stop-when-empty", *FAST)
    assert code == 0, output
    window = browse.finished(queue, "default", 0, 10)
    assert window.total == 2  # the plain task keeps nothing, so it is not listed
    assert [entry.task_id for entry in window.entries] == [failing.id, first.id]
    assert all(entry.record is not None for entry in window.entries)
    assert plain.id not in [entry.task_id for entry in window.entries]
    assert [e.task_id for e in browse.finished(queue, "default", 1, 5).entries] == [first.id]


def test_the_finished_index_keeps_only_the_newest(queue: RedisQueue, workers: Workers) -> None:
    index = queue.keys("default").finished
    old = {n.to_bytes(16, "big"): n for n in range(1, browse.FINISHED_KEPT + 1)}
    queue.client.zadd(index, old)  # as if that many had finished long ago
    newest = apptasks.record.using(keep_result=60).dispatch("newest")
    code, output = workers.run("-c", "1", "--stop-when-empty", *FAST)
    assert code == 0, output
    assert queue.client.zcard(index) == browse.FINISHED_KEPT
    assert queue.client.zscore(index, (1).to_bytes(16, "big")) is None  # the oldest went
    assert browse.finished(queue, "default", 0, 1).entries[0].task_id == newest.id


def test_entries_written_by_hand_read_as_what_they_are(queue: RedisQueue) -> None:
    keys = queue.keys("default")
    queue.client.rpush(keys.ready, b"\xc1 not msgpack")
    queue.client.zadd(keys.delayed, {b"garbage": float("inf")})
    queue.client.zadd(keys.finished, {b"short": 5, raw_id("ab" * 16): 7})
    queue.client.set(keys.result("ab" * 16), msgpack.packb({"state": "nonsense"}))
    assert [e.payload for e in browse.ready(queue, "default", 0, 5).entries] == [
        b"\xc1 not msgpack"
    ]
    [delayed] = browse.delayed(queue, "default", 0, 5).entries
    assert delayed.payload == b"garbage" and delayed.score_ms is None
    finished = browse.finished(queue, "default", 0, 5).entries
    assert [(e.task_id, e.finished_at) for e in finished] == [("ab" * 16, 7.0), (None, 5.0)]
    queue.client.delete(keys.reserved)
    queue.client.set(keys.reserved, b"a string, not a sorted set")
    assert browse.running(queue, "default", 0, 5) == browse.Window(0, 0, [])
