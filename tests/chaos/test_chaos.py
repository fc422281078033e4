"""Short runs of each chaos scenario (benchmarks/reliability/chaos.py), and the focused fault tests.

Each chaos run starts its own persistent redis-server and real ``rqueue work``
processes, injects one kind of fault and counts every task's completions exactly.
The long run is a benchmark: ``python benchmarks/reliability/chaos.py --scenario all ...``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import apptasks
import psutil
import pytest
import redis
from support import strings, wait_for

from rqueue.errors import QueueConnectionError
from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.consumer import BehindWait
from rqueue.store.header import payload_attempts
from rqueue.store.queue import RedisQueue
from rqueue.worker.options import WorkerOptions
from rqueue.worker.reservations import Reservations

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "reliability"))
import chaos


def _run(**overrides: Any) -> chaos.Result:
    params = chaos.Params(quiet=True, **overrides)
    result = chaos.run(params)
    print(result.table())
    assert result.dispatched == params.tasks
    assert result.lost == 0, result.table()
    assert result.pending == 0, result.table()
    assert result.completed + result.failed == params.tasks, result.table()
    assert result.tracebacks == 0, result.table()
    assert result.worker_exits == 0, result.table()
    return result


def test_children_killed_at_random_lose_nothing() -> None:
    # A child killed between Redis reserving its batch and recording it in the scoreboard
    # strands that batch until the reservations expire (15 s + 3 s per task of the batch):
    # small batches keep that wait short. Nothing is lost, and nothing runs twice for it.
    result = _run(scenario="kill-children", tasks=3000, work_ms=2, duration=90, prefetch=4)
    assert result.kills >= 3
    assert result.completed_twice <= result.kills
    assert result.failed == 0


@pytest.mark.parametrize("mode", ["slots", "threads"])
def test_children_killed_at_random_with_tasks_running_at_once_lose_nothing(mode: str) -> None:
    # Each kill cuts short up to 20 coroutines (async mode) or threads' tasks (thread
    # mode): each is retried (WorkerLost uses one of its 50 tries). One whose completion
    # landed before its ack runs twice; a child's slot holds at most 20 running and
    # 2 x 20 finished or read ahead (held_limit).
    overrides: dict[str, Any] = {mode: 20}
    result = _run(
        scenario="kill-children", tasks=8000, work_ms=50, duration=90, prefetch=20, **overrides
    )
    assert result.kills >= 3
    assert result.completed_twice <= result.kills * (20 + 2 * 20)
    assert result.failed == 0


def test_a_killed_parents_children_exit_and_a_new_worker_finishes_everything() -> None:
    result = _run(scenario="kill-parent", tasks=5000, work_ms=2, duration=60)
    assert result.parent_kills >= 1
    assert result.orphans_left == 0
    assert 0 < result.orphan_exit_max < 5.0
    assert result.completed_twice == 0
    assert result.failed == 0


def test_redis_restarts_lose_nothing_and_dispatch_fails_fast_during_the_outage() -> None:
    result = _run(
        scenario="restart-redis",
        tasks=5000,
        work_ms=2,
        duration=60,
        restart_every=2.0,
        redis_faults=2,
    )
    assert result.redis_restarts == 2
    assert result.outage_dispatch_errors == 2 and result.outage_dispatch_stored == 0
    assert result.outage_dispatch_max < 3.0
    # Tasks take milliseconds: a child waiting for Redis to take an outcome is not overrunning.
    assert result.deadline_kills == 0
    # A task whose own write landed just before Redis died, unanswered, runs again.
    assert result.completed_twice <= 2 * 4


def test_a_frozen_redis_makes_nothing_run_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RQUEUE_SOCKET_TIMEOUT", "1")  # shorter than the stall: timeouts fire
    result = _run(
        scenario="freeze-redis",
        tasks=3000,
        work_ms=2,
        duration=60,
        restart_every=1.5,
        freeze=3.0,
        redis_faults=1,
    )
    assert result.freezes == 1
    assert result.completed_twice == 0
    assert result.failed == 0


def test_an_ack_that_never_reaches_redis_reruns_the_task_once() -> None:
    result = _run(scenario="lost-ack", tasks=1500, work_ms=1, duration=60, ack_probes=1)
    assert result.kills == 1
    assert list(result.probe_counts.values()) == [2]
    assert result.completed_thrice == 0


def test_workers_with_a_skewed_clock_take_nothing_twice() -> None:
    result = _run(scenario="clock-skew", tasks=3000, work_ms=1, duration=60)
    assert result.skewed_clock_offset > 25
    assert result.completed_twice == 0


# -- focused fault tests ----------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_idle_children_exit_promptly_when_their_parent_is_killed(
    queue: RedisQueue, workers: Any
) -> None:
    worker = workers.start("-c", "2", "--block-for", "5")
    children = [c.pid for c in worker.wait_for_children(2)]
    wait_for(
        lambda: all("waiting" in " ".join(psutil.Process(p).cmdline()) for p in children),
        10,
        "children idle",
    )
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    started = time.monotonic()
    wait_for(lambda: not any(_alive(p) for p in children), 5, "orphaned children to exit")
    assert time.monotonic() - started < 5
    for i in range(10):
        apptasks.record.dispatch(i)
    code, output = workers.run("--stop-when-empty", "-c", "2")
    assert code == 0, output
    assert sorted(int(v) for v in strings(queue.client, apptasks.DONE)) == list(range(10))


def test_an_orphan_finishes_its_running_task_gives_back_the_rest_and_exits(
    queue: RedisQueue, workers: Any
) -> None:
    apptasks.record.dispatch("first")  # a child's first batch is one task; its second, four
    apptasks.blocks_until_released.dispatch("held")
    for i in range(4):
        apptasks.record.dispatch(i)
    worker = workers.start("--prefetch", "10")
    wait_for(lambda: queue.client.llen("test:started"), 10, "the blocking task to start")
    child = worker.children()[0].pid
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    queue.client.rpush("test:release", 1)
    wait_for(lambda: not _alive(child), 10, "the orphan to exit")
    assert strings(queue.client, apptasks.DONE) == ["first", "held"]
    sizes = queue.sizes(["default"])[0]
    assert (sizes.ready, sizes.reserved) == (4, 0)  # given back, not left to expire
    code, output = workers.run("--stop-when-empty")
    assert code == 0, output
    expected = ["first", "held", *map(str, range(4))]
    assert sorted(strings(queue.client, apptasks.DONE)) == sorted(expected)


def test_a_task_reserved_behind_a_dead_childs_wait_runs_later_as_its_first_attempt(
    queue: RedisQueue, workers: Any
) -> None:
    """An idle child sends its reserve call behind its wait (reservations.py). If it dies
    while Redis still holds that wait (its socket not torn down yet, its host cut off),
    the next push ends the wait and Redis reserves the task for no one. Unconfirmed,
    that reservation runs out after the dead child's margin (0.3 s here), the attempt
    is given back, and a live worker runs the task as its first attempt."""
    dead = RedisQueue(queue.config)
    queue.client.script_load(queue.scripts.reserve.source)  # else NOSCRIPT: nothing runs
    unread = dead.send_wait_then_reserve(
        "default", 30.0, BehindWait(60_000, 1_000, 300, 1, "dead-child")
    )
    assert unread is not None
    wait_for(lambda: queue.client.info("clients")["blocked_clients"] == 1, 5, "the wait")
    handle = apptasks.reports_current_job.dispatch(False)
    wait_for(lambda: queue.sizes(["default"])[0].reserved == 1, 5, "the reserve behind it")
    workers.start("-c", "1")
    wait_for(lambda: strings(queue.client, apptasks.DONE), 10, "the task to run")
    assert strings(queue.client, apptasks.DONE) == [f"{handle.id}:1"]
    dead.client.close()


def test_dispatch_to_a_dead_redis_raises_a_clear_error_within_the_retry_bound(
    config: Config,
) -> None:
    server = RedisServer()
    server.start()
    producer = RedisQueue(Config(redis_url=server.url, dispatch_retry=1.0))
    bound = apptasks.record.using(connection=producer)
    bound.dispatch("before")
    server.kill()
    try:
        for call in (
            lambda: bound.dispatch("x"),
            lambda: bound.later(5, "y"),
            lambda: bound.dispatch_many([("z",)]),
        ):
            started = time.monotonic()
            with pytest.raises(QueueConnectionError, match="cannot reach Redis at redis://127"):
                call()
            assert time.monotonic() - started < 3.0
        server.start()
        assert bound.dispatch("after").id  # the same producer recovers by itself
        assert producer.sizes(["default"])[0].ready == 1  # the AOF-less server restarted empty
    finally:
        producer.client.close()
        server.cleanup()


def test_dispatch_to_a_frozen_redis_times_out_instead_of_retrying_blindly() -> None:
    with RedisServer() as server:
        producer = RedisQueue(Config(redis_url=server.url, socket_timeout=0.5))
        bound = apptasks.record.using(connection=producer)
        # Two warm-ups: the first records the queue name over the client's pool, the
        # second opens the connection that dispatches keep for themselves (wire.py).
        bound.dispatch("warm up")
        bound.dispatch("warm up")
        server.freeze()
        try:
            started = time.monotonic()
            with pytest.raises(QueueConnectionError, match="may or may not have been queued"):
                bound.dispatch("stalled")
            assert time.monotonic() - started < 2.0
        finally:
            server.thaw()
        # Not re-sent: the stalled push landed once, after the thaw.
        wait_for(lambda: producer.sizes(["default"])[0].ready == 3, 5, "the stalled push")
        producer.client.close()


def test_a_reserve_whose_reply_was_lost_is_given_back_by_the_next_call() -> None:
    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url, socket_timeout=0.5))
        apptasks.record.using(connection=queue).dispatch_many([(i,) for i in range(5)])
        batches = Reservations(queue, WorkerOptions(), claims="test")
        # reserve.lua loaded, as on a server in use: a fresh one would answer NOSCRIPT
        # after the thaw, and run nothing.
        queue.client.script_load(queue.scripts.reserve.source)
        queue.wire.call("PING")  # connected before the freeze: the request leaves
        server.freeze()
        try:
            with pytest.raises(redis.TimeoutError):
                batches.take(100)
        finally:
            server.thaw()
        # Redis ran the call once it woke: one task reserved, and its reply lost.
        wait_for(lambda: queue.sizes(["default"])[0].reserved == 1, 5, "the stalled reserve")
        (stranded,) = queue.reserved_payloads("default")
        batch = batches.take(100)
        assert batch is not None
        # Given back (its attempt returned) before reserving again, so it is not left
        # reserved by nobody until its reservation expires: it is simply taken again.
        (taken,) = batch.reservation.payloads
        assert taken == stranded and payload_attempts(taken) == 1
        assert queue.sizes(["default"])[0].reserved == 1
        queue.client.close()


_SITECUSTOMIZE = """
import os, time
_skew = float(os.environ.get("RQUEUE_TEST_CLOCK_SKEW", "0") or 0)
if _skew:
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _skew
    time.time_ns = lambda: _time_ns() + int(_skew * 1e9)
"""


@pytest.mark.parametrize("skew", [30, 3600])
def test_a_worker_whose_clock_runs_ahead_does_not_steal_reservations(
    queue: RedisQueue, workers: Any, tmp_path: Path, skew: int
) -> None:
    (tmp_path / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    skewed_env = {"RQUEUE_TEST_CLOCK_SKEW": str(skew), "PYTHONPATH": str(tmp_path)}
    # The honest worker holds a task; its reservation (timeout 12 + grace 1 + margin 15
    # = 28 s) is shorter than the skew, so a worker trusting its own clock would take it.
    apptasks.blocks_until_released.using(timeout=12).dispatch("held")
    honest = workers.start("--kill-grace", "1")
    wait_for(lambda: queue.client.llen("test:started"), 10, "the held task to start")
    skewed = workers.start("-c", "2", "--kill-grace", "1", env=skewed_env)
    apptasks.report_clock.dispatch()
    wait_for(lambda: queue.client.llen("test:clock"), 15, "the skewed worker to run a task")
    seen = float(queue.client.lrange("test:clock", 0, -1)[0])
    assert seen - time.time() > skew - 5, "the skew did not take effect"
    time.sleep(2.5)  # two ticks of the skewed parent's migrate timer
    assert queue.client.llen("test:started") == 1, "the held task was taken by another worker"
    assert queue.sizes(["default"])[0].reserved == 1
    queue.client.rpush("test:release", 1)
    wait_for(lambda: strings(queue.client, apptasks.DONE) == ["held"], 10, "the held task")
    for worker in (honest, skewed):
        worker.signal(signal.SIGTERM)
    for worker in (honest, skewed):
        assert worker.wait(30) == 0, worker.output()
    assert queue.client.llen("test:started") == 1
    assert strings(queue.client, apptasks.DONE) == ["held"]
