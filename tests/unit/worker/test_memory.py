"""Memory: a leaking task gets its child recycled above ``--memory`` (issue 3)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import apptasks
import psutil
from support import strings

from rqueue.store.queue import RedisQueue
from rqueue.worker.scoreboard import SlotView, State
from rqueue.worker.supervisor import respawn_delay

LIMIT_MB = 64
LEAK_KB = 256
TASKS = 2_500


def test_a_leaking_task_gets_its_child_recycled_and_rss_stays_bounded(
    queue: RedisQueue, workers: Any
) -> None:
    apptasks.leaks.dispatch_many([(LEAK_KB,) for _ in range(TASKS)])
    worker = workers.start(
        "-c", "2", "--memory", str(LIMIT_MB), "--stop-when-empty", "--log-level", "WARNING"
    )
    peak: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            for child in worker.children():
                with contextlib.suppress(psutil.NoSuchProcess):
                    peak[child.pid] = max(peak.get(child.pid, 0), child.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        code = worker.wait(120)
    finally:
        done.set()
        sampler.join(5)
    assert code == 0, worker.output()
    pids = [int(p) for p in queue.client.lrange("test:leak_pids", 0, -1)]
    assert len(pids) == TASKS  # every task ran once: recycling loses nothing
    children = set(pids)
    # 2,500 x 256 KB = 625 MB leaked in all: without recycling two children could not
    # stay under 64 MB each, so many children must have come and gone.
    assert len(children) >= 10, f"only {len(children)} children ran the tasks"
    per_child = [pids.count(pid) for pid in children]
    assert max(per_child) * LEAK_KB / 1024 < LIMIT_MB + 8
    assert peak, "no child was ever sampled"
    assert max(peak.values()) < (LIMIT_MB + 16) * 1024 * 1024, (
        f"a child reached {max(peak.values()) / 2**20:.0f} MB RSS"
    )
    sizes = queue.sizes(["default"])[0]
    assert (sizes.ready, sizes.reserved, sizes.failed) == (0, 0, 0)
    assert strings(queue.client, apptasks.DONE) == []


def _ended_after(processed: int) -> SlotView:
    return SlotView(State.WAITING, 0, (), 0, 0.0, processed)


def test_a_child_recycled_young_is_replaced_at_once_and_a_crash_loop_waits() -> None:
    """A child that finished tasks and left after 0.2 s (over --memory) made progress:
    its place is filled at once. One that died as young having finished nothing is a
    crash loop, replaced only after the back-off; an old one at once either way."""
    assert respawn_delay(0.2, _ended_after(113)) == 0.0
    assert respawn_delay(0.2, _ended_after(0)) > 0.0
    assert respawn_delay(0.2, None) > 0.0  # its slot unreadable: counted as a crash
    assert respawn_delay(30.0, _ended_after(0)) == 0.0
