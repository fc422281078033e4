"""``async def`` tasks in async mode: many at once per child, each timed out on its own,
a blocked loop killed and every task of its child settled, warm shutdown, and what
every task keeps (current_job(), middleware, retries). Real ``rqueue work``, real Redis.
"""

from __future__ import annotations

import signal

import async_tasks as at
import pytest
from support import Workers, cli, failures, one_of_ten_ended, settled, strings, wait_for

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

FAST = ("--kill-grace", "0.5", "--block-for", "0.5", "--log-level", "warning")


def done(queue: RedisQueue) -> list[tuple[str, int]]:
    return [(n, int(a)) for n, a in (line.split() for line in strings(queue.client, at.DONE))]


def test_500_coroutines_run_at_once_in_one_child(queue: RedisQueue, workers: Workers) -> None:
    count = 500
    # Each finishes only once all 500 are in flight in its child at once.
    at.gather.dispatch_many([(n, count) for n in range(count)])
    workers.start("-c", "1", "--slots", "500", "--prefetch", "500", *FAST)
    wait_for(lambda: len(done(queue)) == count, 30, "every run")
    starts = [line.split() for line in strings(queue.client, at.STARTS)]
    assert sorted(int(n) for n, _, _ in starts) == list(range(count))
    assert len({pid for _, pid, _ in starts}) == 1  # one child ran them all
    assert not failures(queue)
    wait_for(lambda: settled(queue), 5, "every ack")


def test_no_more_coroutines_than_slots_run_at_once_even_from_one_prefetched_batch(
    queue: RedisQueue, workers: Workers
) -> None:
    """The first batch is reserved in process mode, sized by --prefetch before any of its
    tasks is known to be ``async def``: it must still start no more than --slots."""
    at.counted.dispatch_many([(n,) for n in range(30)])
    workers.start("-c", "1", "--slots", "5", "--prefetch", "30", *FAST)
    wait_for(lambda: len(done(queue)) == 30, 20, "every run")
    most = max(int(n) for n in strings(queue.client, at.MOST_IN_FLIGHT))
    assert most <= 5
    wait_for(lambda: settled(queue), 5, "every ack")


def test_a_busy_child_reserves_its_next_tasks_before_a_slot_frees(
    queue: RedisQueue, workers: Workers
) -> None:
    """As in thread mode: every slot busy, tasks ending one at a time, the queue deep:
    the child holds a fifth of its slots more reserved, not started."""
    one_of_ten_ended(queue, workers, at.held, at.HELD, at.RELEASE, "--slots", "10", *FAST)
    queue.client.rpush(at.RELEASE, *["go"] * 39)
    wait_for(lambda: len(done(queue)) == 40, 30, "every run")
    assert sorted(int(n) for n, _ in done(queue)) == list(range(40))
    assert not failures(queue)
    wait_for(lambda: settled(queue), 5, "every ack")


def test_a_timeout_cancels_only_the_coroutine_that_overran(
    queue: RedisQueue, workers: Workers
) -> None:
    at.short_fuse.dispatch(0, 10.0)  # overruns its 1 s
    at.short_fuse.dispatch_many([(n, 0.3) for n in range(1, 6)])
    worker = workers.start("--slots", "10", *FAST)
    wait_for(lambda: failures(queue), 10, "the timeout")
    wait_for(lambda: len(done(queue)) == 5, 10, "the siblings")
    assert sorted(n for n, _ in done(queue)) == ["1", "2", "3", "4", "5"]
    assert failures(queue) == ["async_tasks:short_fuse TaskTimeout"]
    assert len(worker.children()) == 1  # cancelled, not killed: the same child
    wait_for(lambda: settled(queue), 5, "every ack")


def test_a_coroutine_blocking_the_loop_gets_its_child_killed_and_every_task_settled(
    queue: RedisQueue, workers: Workers
) -> None:
    at.patient.dispatch_many([(n,) for n in range(5)])
    at.blocker.dispatch()
    worker = workers.start("--slots", "10", *FAST)
    first = worker.wait_for_children(1)[0].pid
    wait_for(lambda: failures(queue), 15, "the blocker killed and failed")
    assert failures(queue) == ["async_tasks:blocker TaskTimeout"]
    assert first not in [c.pid for c in worker.wait_for_children(1)]
    # Its siblings were running when the loop stopped: each lost an attempt
    # (WorkerLost) and ran again in the new child, none lost and none twice to the end.
    wait_for(lambda: len(done(queue)) == 5, 15, "the siblings retried")
    assert sorted(done(queue)) == [(str(n), 2) for n in range(5)]
    wait_for(lambda: settled(queue), 5, "every ack")


def test_sigterm_lets_100_running_coroutines_finish(queue: RedisQueue, workers: Workers) -> None:
    at.nap.dispatch_many([(n, 1.0) for n in range(100)])
    worker = workers.start("--slots", "200", "--prefetch", "100", *FAST)
    wait_for(lambda: queue.client.llen(at.STARTS) == 100, 10, "100 in flight")
    assert not done(queue)  # still running when the stop comes
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    assert sorted(int(n) for n, _ in done(queue)) == list(range(100))
    assert settled(queue)
    assert not failures(queue)


def test_each_coroutine_sees_its_own_current_job(queue: RedisQueue, workers: Workers) -> None:
    dispatched = [at.whoami.dispatch(n, (n % 7) / 100) for n in range(50)]
    workers.start("--slots", "50", *FAST)
    wait_for(lambda: queue.client.llen(at.SEEN) == 100, 10, "every coroutine twice")
    expected = {f"{d.id} {n}" for n, d in enumerate(dispatched)}
    seen = strings(queue.client, at.SEEN)
    assert set(seen) == expected
    assert sorted(seen) == sorted([*expected, *expected])


def test_a_failed_async_task_is_retried(queue: RedisQueue, workers: Workers) -> None:
    at.flaky.dispatch_many([(n,) for n in range(10)])
    workers.start("--slots", "10", *FAST)
    wait_for(lambda: len(done(queue)) == 10, 10, "every retry")
    assert sorted(done(queue)) == sorted((str(n), 2) for n in range(10))
    assert not failures(queue)


def test_middleware_wrap_async_tasks(queue: RedisQueue, workers: Workers) -> None:
    at.locked.dispatch_many([(n,) for n in range(5)])
    at.rate_limited.dispatch_many([(n,) for n in range(5)])
    workers.start("--slots", "20", *FAST)
    wait_for(lambda: queue.client.llen(at.LOCKED) == 10, 15, "every locked run")
    wait_for(lambda: len(done(queue)) == 5, 15, "every rate-limited run")
    events = strings(queue.client, at.LOCKED)
    # The lock held across the awaited part: never two runs inside it at once.
    for enter, leave in zip(events[::2], events[1::2], strict=True):
        assert enter.split()[0] == "enter" and leave == f"leave {enter.split()[1]}"
    assert sorted(done(queue)) == [(str(n), 1) for n in range(5)]
    assert not failures(queue)


@pytest.mark.parametrize("value", ["0", "10001", "-1", "many"])
def test_slots_out_of_range_is_a_usage_error(config: Config, value: str) -> None:
    result = cli(config, "work", "--slots", value)
    assert result.returncode == 2
    assert "--slots" in result.stderr
