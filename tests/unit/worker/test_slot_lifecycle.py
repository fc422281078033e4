"""Async mode through a worker's life: cold shutdown, ``--max-jobs``, ``--memory``,
pause and resume, sync and async tasks in one child, signing. Real ``rqueue work``,
real Redis; every task is counted wherever it ends (ready, delayed, reserved,
failed, finished) so that none can be lost unseen.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from dataclasses import replace

import pytest
import slot_lifecycle_tasks as st
from support import Workers, follow_log, logged, ready, strings, title, wait_for

from rqueue import dispatch_many
from rqueue.encoding.payload import Job, decode, encode, new_id
from rqueue.failed import FailedTasks
from rqueue.settings.config import Config
from rqueue.store.header import payload_attempts
from rqueue.store.queue import RedisQueue
from rqueue.store.signing import sign

FAST = ("--kill-grace", "0.5", "--block-for", "0.5")
SECRET = "a-long-random-secret"


def runs(queue: RedisQueue, key: str) -> list[tuple[str, int, int]]:
    """``(n, pid, attempt)`` of each run recorded under ``key``."""
    return [(n, int(p), int(a)) for n, p, a in (s.split() for s in strings(queue.client, key))]


def finished(queue: RedisQueue) -> list[str]:
    return sorted(n for n, _, _ in runs(queue, st.DONE))


def sizes(queue: RedisQueue) -> tuple[int, int, int, int]:
    """Ready, delayed, reserved and failed tasks of the default queue."""
    size = queue.sizes(["default"])[0]
    return size.ready, size.delayed, size.reserved, size.failed


def numbers(count: int) -> list[str]:
    return sorted(str(n) for n in range(count))


def test_cold_shutdown_gives_back_100_running_coroutines_with_their_attempts(
    queue: RedisQueue, workers: Workers
) -> None:
    # 110 tasks, 100 slots: 100 coroutines in flight, the rest never started.
    st.held.dispatch_many([(n,) for n in range(110)])
    worker = workers.start("--slots", "100", "--prefetch", "100", *FAST)
    log = follow_log(worker)
    wait_for(lambda: queue.client.llen(st.STARTS) == 100, 15, "100 coroutines in flight")
    worker.signal(signal.SIGTERM)
    wait_for(lambda: logged(log, "warm shutdown"), 10, "the warm stop to begin")
    assert worker.process.poll() is None  # the coroutines hold the child: it cannot stop yet
    worker.signal(signal.SIGTERM)
    assert worker.wait(10) == 0, "".join(log)
    assert logged(log, "cold shutdown")
    # Recovery gives every running task back at once (not after its reservation
    # expires) with its attempt returned, as if it had never started: none is retried
    # (WorkerLost) or failed, and none finished.
    assert finished(queue) == []
    assert sizes(queue) == (110, 0, 0, 0)
    given_back = ready(queue)
    assert sorted(str(decode(p).args[0]) for p in given_back) == numbers(110)
    assert {payload_attempts(p) for p in given_back} == {0}
    # And a fresh worker runs each exactly once, as its first attempt.
    queue.client.set(st.RELEASE, 1)
    workers.start("--slots", "200", "--prefetch", "200", *FAST)
    wait_for(lambda: len(finished(queue)) == 110, 20, "every task on the next worker")
    assert finished(queue) == numbers(110)
    assert Counter(a for _, _, a in runs(queue, st.DONE)) == {1: 110}
    wait_for(lambda: sizes(queue) == (0, 0, 0, 0), 5, "every ack")


def test_max_jobs_stops_after_exactly_that_many_coroutines(
    queue: RedisQueue, workers: Workers
) -> None:
    st.nap.dispatch_many([(n,) for n in range(30)])
    worker = workers.start("-c", "2", "--slots", "50", "--max-jobs", "10", *FAST)
    assert worker.wait(20) == 0, worker.output()
    first = runs(queue, st.DONE)
    assert len(first) == 10, first
    assert len({n for n, _, _ in first}) == 10  # none twice
    assert runs(queue, st.STARTS) and len(runs(queue, st.STARTS)) == 10  # none cut short
    # The 20 it never started wait in the queue, their attempts untouched.
    assert sizes(queue) == (20, 0, 0, 0)
    assert {payload_attempts(p) for p in ready(queue)} == {0}
    code, output = workers.run("--slots", "50", "--stop-when-empty", *FAST)
    assert code == 0, output
    assert finished(queue) == numbers(30)
    assert {a for _, _, a in runs(queue, st.DONE)} == {1}
    assert sizes(queue) == (0, 0, 0, 0)


LIMIT_MB = 80
HOARD_KB = 4096


def test_a_child_over_its_memory_limit_lets_its_coroutines_finish_then_recycles(
    queue: RedisQueue, workers: Workers
) -> None:
    # 40 x 4 MB: no single child could hold them all under the limit.
    st.hoard.dispatch_many([(n, HOARD_KB, 0.3) for n in range(40)])
    workers.start("--slots", "10", "--memory", str(LIMIT_MB), *FAST)
    wait_for(lambda: len(finished(queue)) == 40, 30, "every task")
    assert finished(queue) == numbers(40)  # each once
    done, started = runs(queue, st.DONE), runs(queue, st.STARTS)
    # No coroutine was cut short: each finished in the child that started it, on its
    # first attempt (a child killed under it would have cost it one, as WorkerLost).
    assert sorted(done) == sorted(started)
    assert {a for _, _, a in done} == {1}
    per_child = Counter(pid for _, pid, _ in done)
    assert len(per_child) >= 2, f"no child recycled: {per_child}"
    assert max(per_child.values()) * HOARD_KB / 1024 < LIMIT_MB + 12
    wait_for(lambda: sizes(queue) == (0, 0, 0, 0), 5, "every ack")


def test_pause_lets_running_coroutines_finish_and_starts_none_until_resumed(
    queue: RedisQueue, workers: Workers
) -> None:
    worker = workers.start("--slots", "20", *FAST, "--log-level", "info")
    log = follow_log(worker)
    (child,) = worker.wait_for_children(1)
    st.held.dispatch_many([(n,) for n in range(5)])
    wait_for(lambda: queue.client.llen(st.STARTS) == 5, 10, "5 coroutines in flight")
    worker.signal(signal.SIGUSR2)
    wait_for(lambda: logged(log, "SIGUSR2: pausing"), 10, "the pause")
    st.nap.dispatch_many([(n,) for n in range(5, 10)])
    time.sleep(0.5)  # an absence can only be observed over a while (async mode polls at 50 ms)
    assert queue.client.llen(st.STARTS) == 5
    queue.client.set(st.RELEASE, 1)
    wait_for(lambda: finished(queue) == numbers(5), 10, "the running coroutines to finish")
    wait_for(lambda: title(child.pid).endswith(": paused"), 10, "the child to show it paused")
    time.sleep(0.5)
    assert queue.client.llen(st.STARTS) == 5
    assert sizes(queue) == (5, 0, 0, 0)
    worker.signal(signal.SIGCONT)
    wait_for(lambda: len(finished(queue)) == 10, 10, "the rest after resuming")
    assert finished(queue) == numbers(10)
    assert {pid for _, pid, _ in runs(queue, st.DONE)} == {child.pid}
    wait_for(lambda: sizes(queue) == (0, 0, 0, 0), 5, "every ack")


def test_one_child_serves_sync_and_async_tasks_from_one_queue(
    queue: RedisQueue, workers: Workers
) -> None:
    dispatch_many((st.plain if n % 3 == 0 else st.nap).pending(n) for n in range(60))
    worker = workers.start("--slots", "20", *FAST)
    wait_for(lambda: len(finished(queue)) == 60, 20, "every task")
    assert finished(queue) == numbers(60)
    assert {a for _, _, a in runs(queue, st.DONE)} == {1}
    (child,) = worker.children()
    assert {pid for _, pid, _ in runs(queue, st.DONE)} == {child.pid}
    wait_for(lambda: sizes(queue) == (0, 0, 0, 0), 5, "every ack")


@pytest.mark.parametrize("key", ["not-the-secret", None])
def test_with_a_secret_async_tasks_run_and_a_forged_one_alone_fails(
    config: Config, queue: RedisQueue, workers: Workers, key: str | None
) -> None:
    signing = RedisQueue(replace(config, secret=SECRET))
    signed = st.nap.using(connection=signing)
    signed.dispatch_many([(n, 0.1) for n in range(10)])
    job = Job(
        id=new_id(), task="slot_lifecycle_tasks:nap", args=("forged",), kwargs={}, queue="default"
    )
    forged = encode(job) if key is None else sign(encode(job), key, "default")
    queue.push("default", [forged])
    signed.dispatch_many([(n, 0.1) for n in range(10, 20)])
    workers.start("--slots", "20", *FAST, env={"RQUEUE_SECRET": SECRET})
    wait_for(lambda: len(finished(queue)) == 20, 15, "every signed task")
    wait_for(lambda: sizes(queue) == (0, 0, 0, 1), 5, "the forged one to fail")
    assert finished(queue) == numbers(20)
    [failure] = FailedTasks(queue).list(["default"])
    assert failure.exception == "InvalidSignature"
    refused = failure.job()
    assert refused is not None and (refused.id, refused.args) == (job.id, job.args)
    assert "forged" not in [n for n, _, _ in runs(queue, st.STARTS)]
    signing.client.close()
