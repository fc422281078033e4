"""Thread mode (``rqueue work --threads N``): sync tasks run at once in a child's
threads; a thread that overruns its timeout is reported as ``TaskTimeout``, its child
takes no new task until it ends and is replaced after ``--kill-grace`` if it does not.
Real ``rqueue work``, real Redis.
"""

from __future__ import annotations

import signal

import pytest
import thread_tasks as tt
from support import Workers, cli, failures, one_of_ten_ended, settled, strings, wait_for

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

FAST = ("--block-for", "0.5", "--log-level", "warning")


def done(queue: RedisQueue) -> list[list[str]]:
    """``[n, attempt, pid, thread]`` of each finished run."""
    return [line.split() for line in strings(queue.client, tt.DONE)]


def test_sync_tasks_run_at_once_in_one_childs_threads(queue: RedisQueue, workers: Workers) -> None:
    count = 40
    tt.gather.dispatch_many([(n, count) for n in range(count)])
    workers.start("-c", "1", "--threads", str(count), *FAST)
    wait_for(lambda: len(done(queue)) == count, 30, "every run")
    runs = done(queue)
    assert sorted(int(n) for n, *_ in runs) == list(range(count))
    assert len({pid for _, _, pid, _ in runs}) == 1  # one child
    assert len({thread for *_, thread in runs}) == count  # each in its own thread
    assert not failures(queue)
    wait_for(lambda: settled(queue), 5, "every ack")


def test_without_threads_sync_tasks_run_one_at_a_time(queue: RedisQueue, workers: Workers) -> None:
    """The test above fails without thread mode: the first gather waits for the others."""
    tt.gather.using(timeout=1).dispatch_many([(n, 2) for n in range(2)])
    workers.start("-c", "1", *FAST)
    wait_for(lambda: failures(queue), 30, "the first run to time out")
    assert failures(queue)[0] == "thread_tasks:gather TaskTimeout"


def test_an_overrunning_thread_is_a_timeout_and_its_child_resumes_once_it_ends(
    queue: RedisQueue, workers: Workers
) -> None:
    tt.overrun.dispatch(3.0)  # 1 s timeout, ends after 3 s: within the kill grace
    worker = workers.start("-c", "1", "--threads", "4", "--kill-grace", "10", *FAST)
    child = worker.wait_for_children(1)[0].pid
    wait_for(lambda: failures(queue), 10, "the timeout")
    assert failures(queue) == ["thread_tasks:overrun TaskTimeout"]
    assert not done(queue)  # reported while its thread still runs
    tt.slow.dispatch(1, 0.0)
    wait_for(lambda: len(done(queue)) == 2, 15, "the thread's end, then the next task")
    # The overrun's thread ran to its end before the child took the next task.
    assert [run[0] for run in done(queue)] == ["overrun", "1"]
    assert [c.pid for c in worker.children()] == [child]  # not killed: the same child
    wait_for(lambda: settled(queue), 5, "every ack")


def test_a_thread_that_never_ends_gets_its_child_replaced_and_every_task_settled(
    queue: RedisQueue, workers: Workers
) -> None:
    tt.slow.dispatch_many([(n, 4.0) for n in range(3)])
    tt.overrun.dispatch(120.0)
    worker = workers.start("-c", "1", "--threads", "4", "--kill-grace", "1", *FAST)
    first = worker.wait_for_children(1)[0].pid
    wait_for(lambda: failures(queue), 15, "the overrun reported")
    assert failures(queue) == ["thread_tasks:overrun TaskTimeout"]  # once: not again at the kill
    wait_for(lambda: first not in [c.pid for c in worker.children()], 15, "the child replaced")
    wait_for(lambda: len(done(queue)) == 3, 30, "the siblings, run again")
    # Its siblings were running when the child was killed: each lost an attempt
    # (WorkerLost) and ran again in the new child, none lost and none twice.
    assert sorted((n, attempt) for n, attempt, *_ in done(queue)) == [
        (str(n), "2") for n in range(3)
    ]
    assert failures(queue) == ["thread_tasks:overrun TaskTimeout"]
    wait_for(lambda: settled(queue), 5, "every ack")


def test_sigterm_lets_running_threads_finish(queue: RedisQueue, workers: Workers) -> None:
    tt.slow.dispatch_many([(n, 3.0) for n in range(8)])
    worker = workers.start("-c", "1", "--threads", "8", *FAST)
    # Reserved is not yet running: a reserved task not started when the stop comes
    # is given back, not run. Wait for all eight to have started.
    wait_for(lambda: int(queue.client.get(tt.STARTED) or 0) == 8, 10, "8 running")
    assert not done(queue)  # still running when the stop comes
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    assert sorted(int(n) for n, *_ in done(queue)) == list(range(8))
    assert settled(queue)
    assert not failures(queue)


def test_a_busy_child_reserves_its_next_tasks_before_a_thread_frees(
    queue: RedisQueue, workers: Workers
) -> None:
    """Every thread busy, tasks ending one at a time, the queue deep: the child holds a
    fifth of its threads more reserved, not started, so a thread that frees waits for
    no round trip."""
    one_of_ten_ended(queue, workers, tt.held, tt.STARTED, tt.RELEASE, "--threads", "10", *FAST)
    queue.client.rpush(tt.RELEASE, *["go"] * 39)
    wait_for(lambda: len(done(queue)) == 40, 30, "every run")
    assert sorted(int(n) for n, *_ in done(queue)) == list(range(40))
    assert not failures(queue)
    wait_for(lambda: settled(queue), 5, "every ack")


def test_sigterm_gives_back_the_tasks_read_ahead_before_the_running_ones_end(
    queue: RedisQueue, workers: Workers
) -> None:
    worker = one_of_ten_ended(
        queue, workers, tt.held, tt.STARTED, tt.RELEASE, "--threads", "10", *FAST
    )
    worker.signal(signal.SIGTERM)
    wait_for(lambda: queue.sizes(["default"])[0].ready == 29, 10, "the two given back")
    assert len(done(queue)) == 1  # the ten running ones still run
    queue.client.rpush(tt.RELEASE, *["go"] * 10)
    assert worker.wait(20) == 0
    assert len(done(queue)) == 11
    size = queue.sizes(["default"])[0]
    assert (size.ready, size.reserved) == (29, 0)
    assert not failures(queue)


def test_sync_tasks_in_threads_take_no_asyncio_task(queue: RedisQueue, workers: Workers) -> None:
    """Thread mode settles a call as its thread's end reaches the loop: before, each
    sync task was awaited by an asyncio task of its own (one per running task here)."""
    tt.awaited.dispatch_many([()] * 3)
    workers.start("-c", "1", "--threads", "3", *FAST)
    wait_for(lambda: queue.client.llen(tt.AWAITED) == 3, 15, "every count")
    assert strings(queue.client, tt.AWAITED) == ["0", "0", "0"]
    wait_for(lambda: settled(queue), 5, "every ack")


def test_each_thread_sees_its_own_current_job(queue: RedisQueue, workers: Workers) -> None:
    dispatched = [tt.whoami.dispatch(n, (n % 7) / 100) for n in range(30)]
    workers.start("--threads", "10", *FAST)
    wait_for(lambda: queue.client.llen(tt.SEEN) == 60, 10, "every task twice")
    expected = {f"{d.id} {n}" for n, d in enumerate(dispatched)}
    seen = strings(queue.client, tt.SEEN)
    assert sorted(seen) == sorted([*expected, *expected])


def test_middleware_wrap_tasks_in_threads(queue: RedisQueue, workers: Workers) -> None:
    tt.locked.dispatch_many([(n,) for n in range(5)])
    workers.start("--threads", "5", *FAST)
    wait_for(lambda: queue.client.llen(tt.LOCKED) == 10, 15, "every locked run")
    events = strings(queue.client, tt.LOCKED)
    # The lock held across the run: never two runs inside it at once, threads or not.
    for enter, leave in zip(events[::2], events[1::2], strict=True):
        assert enter.split()[0] == "enter" and leave == f"leave {enter.split()[1]}"
    assert not failures(queue)


@pytest.mark.parametrize("value", ["-1", "1001", "2.5", "many"])
def test_threads_out_of_range_is_a_usage_error(config: Config, value: str) -> None:
    result = cli(config, "work", "--threads", value)
    assert result.returncode == 2
    assert "--threads" in result.stderr
