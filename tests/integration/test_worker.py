"""The worker end to end: real ``rqueue work`` processes running tasks from apptasks.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import apptasks
import psutil
import pytest
from support import Workers, push_job, ready, settled, strings, title, wait_for

from rqueue import dispatch_many
from rqueue.encoding.payload import Job, decode, encode, new_id
from rqueue.failed import FailedTask, FailedTasks
from rqueue.settings.config import Config
from rqueue.store.header import with_attempts
from rqueue.store.queue import RedisQueue

# Tests marked ``topology`` run on Cluster, Sentinel and Valkey as well: those whose outcome
# goes through Redis (retries, reservations, failures, wake-ups). How a worker process
# behaves (its logs, rests, limits and recycling) is the same whatever Redis is behind it.

FAST = ("--kill-grace", "0.5", "--block-for", "0.5")


def failed(queue: RedisQueue, *names: str) -> list[FailedTask]:
    return FailedTasks(queue).list(names or ["default"])


def done(queue: RedisQueue) -> list[str]:
    return strings(queue.client, apptasks.DONE)


# -- retries, tries, attempts ------------------------------------------------------------


@pytest.mark.topology
def test_attempts_are_counted_across_retries_and_backoff_is_honoured(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.fails_with_backoff.dispatch("x")
    workers.start(*FAST)
    (record,) = wait_for(lambda: failed(queue), 15, "the task to fail for good")
    times = [float(t) for t in strings(queue.client, apptasks.ATTEMPT_TIMES)]
    assert len(times) == 3
    first_gap, second_gap = times[1] - times[0], times[2] - times[1]
    assert 0.3 <= first_gap < 3.0
    assert 0.6 <= second_gap < 3.6
    assert (record.attempts, record.exception, record.task) == (
        3,
        "ValueError",
        "apptasks:fails_with_backoff",
    )
    assert "failing on purpose: x" in record.message and "Traceback" in record.traceback
    assert decode(record.payload).attempts == 3
    assert settled(queue)


def test_the_workers_tries_apply_to_tasks_without_their_own(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.always_raises.dispatch("a")
    code, output = workers.run("--stop-when-empty", "--tries", "2", *FAST)
    assert code == 0, output
    assert done(queue) == ["attempt:a", "attempt:a"]
    (record,) = failed(queue)
    assert record.attempts == 2 and record.exception == "RuntimeError"


def test_a_tasks_own_tries_override_the_workers(queue: RedisQueue, workers: Workers) -> None:
    apptasks.fails_until.dispatch("own", succeed_on=3)  # tries=3 on the task
    code, output = workers.run("--stop-when-empty", "--tries", "1", *FAST)
    assert code == 0, output
    assert done(queue) == ["own"]
    assert queue.client.get("test:attempts:own") == b"3"
    assert failed(queue) == []


def test_using_overrides_tries_for_one_dispatch(queue: RedisQueue, workers: Workers) -> None:
    apptasks.always_fails.using(queue="default", tries=1).dispatch("once")
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    assert done(queue) == ["attempt:once"]
    assert failed(queue)[0].attempts == 1


@pytest.mark.topology
def test_a_task_with_more_attempts_than_tries_is_failed_not_run(
    queue: RedisQueue, workers: Workers
) -> None:
    job = push_job(queue, "apptasks:record", "never", attempts=3, tries=3)
    apptasks.record.dispatch("runs")
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    assert done(queue) == ["runs"]
    (record,) = failed(queue)
    assert (record.id, record.exception, record.attempts) == (job.id, "MaxAttemptsExceeded", 4)
    assert "more than its 3 tries" in record.message


@pytest.mark.topology
def test_a_crash_uses_up_an_attempt(queue: RedisQueue, workers: Workers) -> None:
    handle = apptasks.kills_own_process.dispatch()  # tries=2, SIGKILLs its own child
    worker = workers.start(*FAST)
    (record,) = wait_for(lambda: failed(queue), 15, "the crashing task to fail")
    assert (record.id, record.exception, record.attempts) == (handle.id, "WorkerLost", 2)
    assert "killed by signal 9" in record.message
    apptasks.record.dispatch("after")
    wait_for(lambda: done(queue) == ["after"], 10, "the worker to keep serving")
    assert worker.process.poll() is None
    wait_for(lambda: settled(queue), 5, "the success to be acknowledged")


# -- timeouts ------------------------------------------------------------------------------


def test_a_timeout_fails_a_sleeping_task_within_about_timeout_plus_one_second(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.sleeps.dispatch(30)  # timeout=1, tries=1; the worker's default timeout is 60
    workers.start("--block-for", "0.5")
    wait_for(lambda: queue.client.llen("test:started"), 10, "the task to start")
    started = time.monotonic()
    (record,) = wait_for(lambda: failed(queue), 10, "the task to time out")
    elapsed = time.monotonic() - started
    assert 0.8 <= elapsed <= 2.5, elapsed
    assert record.exception == "TaskTimeout" and record.timed_out
    assert "timed out after 1 s" in record.message
    assert done(queue) == [] and settled(queue)


def test_the_workers_timeout_applies_to_tasks_without_their_own(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.naps.dispatch(30)
    workers.start("--timeout", "1", *FAST)
    (record,) = wait_for(lambda: failed(queue), 10, "the task to time out")
    assert record.exception == "TaskTimeout" and record.timed_out


@pytest.mark.topology
def test_a_task_that_swallows_its_timeout_is_killed_and_failed_while_others_complete(
    queue: RedisQueue, workers: Workers
) -> None:
    worker = workers.start("-c", "2", *FAST)
    worker.wait_for_children(2)
    handle = apptasks.swallows_timeout.dispatch()  # timeout=1, tries=1
    stuck = int(wait_for(lambda: queue.client.lindex("test:started", 0), 10, "the task to start"))
    started = time.monotonic()
    apptasks.record.dispatch_many([(i,) for i in range(10)])
    wait_for(lambda: len(done(queue)) == 10, 10, "the other child to run the rest")
    (record,) = wait_for(lambda: failed(queue), 10, "the stuck task to be failed")
    elapsed = time.monotonic() - started
    assert elapsed <= 1 + 0.5 + 2.5, elapsed
    assert (record.id, record.exception, record.timed_out) == (handle.id, "TaskTimeout", True)
    assert "did not stop" in record.message
    assert not psutil.pid_exists(stuck) or psutil.Process(stuck).status() == psutil.STATUS_ZOMBIE
    children = worker.wait_for_children(2)
    assert stuck not in {c.pid for c in children}
    apptasks.record.dispatch_many([(i,) for i in range(10, 15)])
    wait_for(lambda: len(done(queue)) == 15, 10, "the worker to keep serving")
    assert sorted(map(int, done(queue))) == list(range(15))
    wait_for(lambda: settled(queue), 5, "the successes to be acknowledged")


# -- crashes and bad payloads ----------------------------------------------------------------


@pytest.mark.topology
def test_a_child_killed_mid_task_gets_its_task_back_and_nothing_is_lost(
    queue: RedisQueue, workers: Workers
) -> None:
    worker = workers.start(*FAST)
    (child,) = worker.wait_for_children(1)
    apptasks.blocks_until_released.dispatch("a")  # tries=3
    apptasks.record.dispatch_many([(i,) for i in range(5)])
    wait_for(lambda: queue.client.llen("test:started") == 1, 10, "the task to start")
    assert strings(queue.client, "test:started") == [f"{child.pid}:a"]
    child.kill()
    second = wait_for(lambda: queue.client.llen("test:started") == 2, 10, "the task to run again")
    assert second
    again = strings(queue.client, "test:started")[1]
    assert again.endswith(":a") and again != f"{child.pid}:a"
    queue.client.rpush("test:release", "go")
    wait_for(lambda: len(done(queue)) == 6, 10, "every task to complete")
    assert sorted(done(queue)) == ["0", "1", "2", "3", "4", "a"]
    assert failed(queue) == []
    wait_for(lambda: settled(queue), 5, "nothing left reserved")


@pytest.mark.topology
def test_a_child_killed_with_a_batch_reserved_ahead_gets_all_of_it_back_at_once(
    queue: RedisQueue, workers: Workers
) -> None:
    worker = workers.start(*FAST)
    (child,) = worker.wait_for_children(1)
    # Batches of 1, 4, 16: while "b" blocks in the second, the third is reserved ahead.
    apptasks.dispatch_first_then_blocking("b", 30)
    wait_for(lambda: queue.client.llen("test:started") == 1, 10, "the task to start")
    wait_for(lambda: queue.sizes(["default"])[0].reserved == 20, 10, "the batch read ahead")
    child.kill()
    # The dead child's blocking pop could take a release sent at once: wait for the rerun.
    wait_for(lambda: queue.client.llen("test:started") == 2, 10, "the task to run again")
    queue.client.rpush("test:release", "go")
    # A reservation lasts 15 s + the 60 s timeout: everything done well before that
    # means the parent gave back the batch the child had not even read.
    wait_for(lambda: len(done(queue)) == 32, 10, "every task to complete")
    assert sorted(done(queue)) == sorted(["first", "b", *map(str, range(30))])
    assert failed(queue) == []
    wait_for(lambda: settled(queue), 5, "nothing left reserved")
    claims = queue.keys("default").claims("*")
    wait_for(lambda: queue.client.keys(claims) == [], 5, "the claims keys to be gone")


@pytest.mark.topology
def test_garbage_pushed_by_hand_goes_to_failed_and_the_worker_goes_on(
    queue: RedisQueue, workers: Workers
) -> None:
    job = Job(id=new_id(), task="apptasks:record", args=("x",), kwargs={}, queue="default")
    truncated = encode(job)[:-4]  # the header is intact, the body cut short
    queue.client.rpush(queue.keys("default").ready, b"\x00\xffgarbage", truncated)
    apptasks.record.dispatch("fine")
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    assert done(queue) == ["fine"]
    records = failed(queue)
    assert [r.exception for r in records] == ["InvalidPayload", "InvalidPayload"]
    assert records[0].payload == b"\x00\xffgarbage"
    assert "not an rqueue payload" in records[0].message
    assert records[1].payload == with_attempts(truncated, 1)
    assert "msgpack" in records[1].message
    assert settled(queue)


@pytest.mark.parametrize(
    ("name", "kind", "reason"),
    [
        pytest.param(
            "apptasks:no_such_task",
            "TaskNotRegistered",
            "is not registered with @task",
            marks=pytest.mark.topology,  # refused through Redis like the others
        ),
        ("apptasks:redis", "TaskNotRegistered", "is not registered with @task"),  # a function
        ("os:system", "TaskNotRegistered", "is not registered with @task"),  # not a task
        ("explodes_on_import:run", "TaskImportFailed", "RuntimeError: boom at import"),
        ("no_such_module_anywhere:run", "TaskImportFailed", "ModuleNotFoundError"),
        ("missing-colon", "TaskNotRegistered", "malformed task name"),
    ],
)
def test_a_task_that_cannot_be_resolved_goes_to_failed_with_a_clear_reason(
    queue: RedisQueue, workers: Workers, tmp_path: Path, name: str, kind: str, reason: str
) -> None:
    (tmp_path / "explodes_on_import.py").write_text("raise RuntimeError('boom at import')\n")
    job = push_job(queue, name, "rm -rf /tmp/nothing")
    apptasks.record.dispatch("fine")
    worker = workers.start("--stop-when-empty", *FAST, env={"PYTHONPATH": str(tmp_path)})
    assert worker.wait(30) == 0, worker.output()
    assert done(queue) == ["fine"]
    (record,) = failed(queue)
    assert (record.id, record.exception, record.task) == (job.id, kind, name)
    assert reason in record.message and name in record.message
    assert settled(queue)


# -- hooks and listeners ---------------------------------------------------------------------


@pytest.mark.topology
def test_hooks_receive_the_result_or_the_final_exception(
    queue: RedisQueue, workers: Workers
) -> None:
    ok = apptasks.with_hooks.dispatch("v")
    apptasks.with_hooks.dispatch("w", fail=True)  # tries=2: after_failed once, after the 2nd
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    assert strings(queue.client, apptasks.HOOKS) == [f"succeeded:v:{ok.id}", "failed:KeyError:2"]
    assert [r.attempts for r in failed(queue)] == [2]


@pytest.mark.topology
def test_a_raising_hook_is_logged_and_the_task_neither_lost_nor_rerun(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.with_broken_hook.dispatch("x")
    apptasks.record.dispatch("after")
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    assert done(queue) == ["x", "after"]
    assert "hook is broken" in output and "raised" in output
    assert failed(queue) == [] and settled(queue)


LISTENERS = """
from rqueue import on_exception, on_failed, on_processed, on_processing
from rqueue.store.default import default_queue


def _record(event):
    error = type(event.exception).__name__ if event.exception else "-"
    default_queue().client.rpush(
        "test:events",
        f"{event.name}:{event.job.args[0]}:{event.job.attempts}:{event.will_retry}:{error}:{event.result}",
    )


def _broken(event):
    raise RuntimeError("listener is broken")


for register in (on_processing, on_processed, on_exception, on_failed):
    register(_broken)
    register(_record)
"""


@pytest.mark.topology
def test_app_wide_listeners_see_every_event(
    queue: RedisQueue, workers: Workers, tmp_path: Path
) -> None:
    (tmp_path / "listeners_app.py").write_text(LISTENERS)
    apptasks.record.dispatch("ok")
    apptasks.with_hooks.dispatch("bad", fail=True)  # tries=2
    worker = workers.start(
        "--stop-when-empty",
        "-A",
        "listeners_app",
        "-A",
        "apptasks",
        *FAST,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert worker.wait(30) == 0, worker.output()
    assert strings(queue.client, "test:events") == [
        "processing:ok:1:False:-:None",
        "processed:ok:1:False:-:ok",
        "processing:bad:1:False:-:None",
        "exception:bad:1:True:KeyError:None",
        "processing:bad:2:False:-:None",
        "exception:bad:2:False:KeyError:None",
        "failed:bad:2:False:KeyError:None",
    ]
    assert done(queue) == ["ok"]  # a raising listener changes nothing


# -- options -----------------------------------------------------------------------------------


def test_stop_when_empty_exits_zero_on_an_empty_queue(queue: RedisQueue, workers: Workers) -> None:
    started = time.monotonic()
    code, output = workers.run("--stop-when-empty", "-c", "2", *FAST)
    assert code == 0, output
    assert time.monotonic() - started < 10


def test_stop_when_empty_waits_for_running_tasks(queue: RedisQueue, workers: Workers) -> None:
    apptasks.blocks_until_released.dispatch("slow")
    worker = workers.start("--stop-when-empty", "-c", "2", *FAST)
    wait_for(lambda: queue.client.llen("test:started"), 10, "the task to start")
    time.sleep(1.0)  # several stop-when-empty checks pass while the task runs
    assert worker.process.poll() is None
    queue.client.rpush("test:release", "go")
    assert worker.wait(15) == 0
    assert done(queue) == ["slow"]


def test_once_runs_exactly_one_task(queue: RedisQueue, workers: Workers) -> None:
    apptasks.record.dispatch_many([(i,) for i in range(3)])
    code, output = workers.run("--once", "-c", "3", *FAST)
    assert code == 0, output
    assert done(queue) == ["0"]
    size = queue.sizes(["default"])[0]
    assert (size.ready, size.reserved) == (2, 0)
    assert [decode(p).attempts for p in ready(queue)] == [0, 0]


def test_max_jobs_stops_after_that_many_tasks(queue: RedisQueue, workers: Workers) -> None:
    apptasks.record.dispatch_many([(i,) for i in range(10)])
    code, output = workers.run("--max-jobs", "3", *FAST)
    assert code == 0, output
    assert done(queue) == ["0", "1", "2"]
    size = queue.sizes(["default"])[0]
    assert (size.ready, size.reserved) == (7, 0)
    assert all(decode(p).attempts == 0 for p in ready(queue))


@pytest.mark.topology
def test_max_jobs_counts_tasks_over_all_children(queue: RedisQueue, workers: Workers) -> None:
    apptasks.record.dispatch_many([(i,) for i in range(10)])
    code, output = workers.run("--max-jobs", "3", "-c", "2", *FAST)
    assert code == 0, output
    size = queue.sizes(["default"])[0]
    assert len(done(queue)) == 3
    assert (size.ready, size.reserved) == (7, 0)


def test_max_time_stops_an_idle_worker(queue: RedisQueue, workers: Workers) -> None:
    started = time.monotonic()
    code, output = workers.run("--max-time", "1", *FAST)
    assert code == 0, output
    assert 1.0 <= time.monotonic() - started < 8
    assert "max-time" in output


@pytest.mark.topology
def test_higher_priority_queues_are_emptied_first(queue: RedisQueue, workers: Workers) -> None:
    apptasks.record.dispatch_many([(f"default-{i}",) for i in range(5)])
    apptasks.record.using(queue="high").dispatch_many([(f"high-{i}",) for i in range(5)])
    code, output = workers.run("high,default", "--stop-when-empty", *FAST)
    assert code == 0, output
    assert done(queue) == [f"high-{i}" for i in range(5)] + [f"default-{i}" for i in range(5)]


def test_concurrency_forks_that_many_named_children(queue: RedisQueue, workers: Workers) -> None:
    worker = workers.start("high,default", "-c", "3", *FAST)
    children = worker.wait_for_children(3)
    wait_for(lambda: title(worker.pid) == "rqueue: master high,default", 10, "the master title")
    for child in children:
        wait_for(lambda c=child: title(c.pid).startswith("rqueue: worker "), 10, "child titles")
    titles = sorted(title(c.pid) for c in children)
    assert [t.split(":")[1].strip() for t in titles] == [
        f"worker {n}/3 high,default" for n in (1, 2, 3)
    ]
    apptasks.blocks_until_released.dispatch("t")
    # The task's name, not its id: a title is set only when it changes (titles.py).
    running = ": running apptasks:blocks_until_released"
    wait_for(lambda: any(title(c.pid).endswith(running) for c in children), 10, "a running title")
    queue.client.rpush("test:release", "go")
    wait_for(lambda: done(queue) == ["t"], 10)


@pytest.mark.topology
def test_a_dispatch_wakes_an_idle_worker_at_once(queue: RedisQueue, workers: Workers) -> None:
    worker = workers.start("--block-for", "5")
    worker.wait_for_children(1)
    time.sleep(0.5)  # let the child settle into its blocking wait
    sent = time.monotonic()
    apptasks.record.dispatch("now")
    wait_for(lambda: done(queue) == ["now"], 5)
    assert time.monotonic() - sent < 0.8


@pytest.mark.topology
def test_without_blocking_waits_the_worker_polls_every_sleep(
    queue: RedisQueue, workers: Workers
) -> None:
    worker = workers.start("--block-for", "0", "--sleep", "0.3")
    worker.wait_for_children(1)
    apptasks.record.dispatch("polled")
    wait_for(lambda: done(queue) == ["polled"], 5)


@pytest.mark.topology
def test_a_delayed_task_runs_about_when_due(queue: RedisQueue, workers: Workers) -> None:
    worker = workers.start(*FAST)
    worker.wait_for_children(1)
    sent = time.monotonic()
    apptasks.record.later(1.5, "later")
    wait_for(lambda: done(queue) == ["later"], 10)
    assert 1.4 <= time.monotonic() - sent <= 3.0


def test_an_idle_worker_does_not_spin(queue: RedisQueue, workers: Workers) -> None:
    worker = workers.start("-c", "2")
    children = worker.wait_for_children(2)
    time.sleep(0.5)
    processes = [psutil.Process(worker.pid), *children]
    before = sum(sum(p.cpu_times()[:2]) for p in processes)
    time.sleep(2.0)
    used = sum(sum(p.cpu_times()[:2]) for p in processes) - before
    assert used < 0.4, f"{used:.2f} s of CPU in 2 s idle"


def test_memory_limit_recycles_the_child_after_its_task(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.record_pid.dispatch_many([(i,) for i in range(3)])
    code, output = workers.run("--stop-when-empty", "--memory", "1", *FAST)
    assert code == 0, output
    entries = done(queue)
    assert [e.split(":")[0] for e in entries] == ["0", "1", "2"]
    assert len({e.split(":")[1] for e in entries}) == 3  # a fresh child for each task
    assert failed(queue) == []


def test_rest_pauses_after_each_task(queue: RedisQueue, workers: Workers) -> None:
    apptasks.record.dispatch_many([(i,) for i in range(3)])
    started = time.monotonic()
    code, output = workers.run("--stop-when-empty", "--rest", "0.5", *FAST)
    assert code == 0, output
    assert done(queue) == ["0", "1", "2"]
    assert time.monotonic() - started >= 1.5


def test_one_log_line_per_task(queue: RedisQueue, workers: Workers) -> None:
    handle = apptasks.record.dispatch("logged")
    code, output = workers.run("--stop-when-empty", *FAST)
    assert code == 0, output
    lines = [line for line in output.splitlines() if handle.id in line]
    assert len(lines) == 1
    assert "default apptasks:record" in lines[0] and "attempt 1: succeeded" in lines[0]
    assert " ms)" in lines[0]


def test_json_log_format(queue: RedisQueue, workers: Workers) -> None:
    handle = apptasks.record.dispatch("logged")
    code, output = workers.run("--stop-when-empty", "--log-format", "json", *FAST)
    assert code == 0, output
    entries = [json.loads(line) for line in output.splitlines() if line.strip()]
    (entry,) = [e for e in entries if e.get("task_id") == handle.id]
    assert entry["queue"] == "default" and entry["task"] == "apptasks:record"
    assert entry["attempt"] == 1 and entry["outcome"] == "succeeded"
    assert entry["duration_ms"] >= 0 and entry["level"] == "info"


def test_the_workers_working_directory_is_importable(
    queue: RedisQueue, config: Config, tmp_path: Path
) -> None:
    (tmp_path / "cwd_tasks.py").write_text(
        textwrap.dedent(
            """
            from rqueue import task
            from rqueue.store.default import default_queue

            @task
            def hello(name):
                default_queue().client.rpush("test:done", f"hello {name}")
            """
        )
    )
    push_job(queue, "cwd_tasks:hello", "cwd")
    # The console script, not ``python -m`` (which puts the cwd on sys.path by itself).
    script = shutil.which("rqueue", path=str(Path(sys.executable).parent))
    assert script is not None
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["REDIS_URL"] = config.redis_url
    result = subprocess.run(
        [script, "work", "--stop-when-empty", *FAST],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert done(queue) == ["hello cwd"]
    assert failed(queue) == []


def test_rest_longer_than_the_timeout_never_kills_a_finished_task(
    queue: RedisQueue, workers: Workers
) -> None:
    apptasks.record.dispatch_many([(i,) for i in range(2)])
    code, output = workers.run(
        "--stop-when-empty", "--rest", "1.5", "--timeout", "0.5", "--kill-grace", "0.2"
    )
    assert code == 0, output
    assert done(queue) == ["0", "1"]
    assert failed(queue) == [] and settled(queue)
    assert "overran" not in output and "killed" not in output


SLOW_IMPORT = """
import time

from rqueue import task
from rqueue.store.default import default_queue

time.sleep(2.5)  # a heavy module: the first task of it pays the import


@task(timeout=5)
def hello(name):
    default_queue().client.rpush("test:done", f"hello {name}")
"""


def test_a_finished_task_is_never_taken_for_an_overrun_while_the_next_one_loads(
    queue: RedisQueue, workers: Workers, tmp_path: Path
) -> None:
    (tmp_path / "slow_import_tasks.py").write_text(SLOW_IMPORT)
    # One push, so both land in the child's second batch (its first is one task): a
    # task that uses most of its 1 s timeout, then one whose module takes longer than
    # that to import.
    warm_up = apptasks.record.make_job(("first",), {})
    first = apptasks.sleeps.make_job((0.7,), {})
    second = Job(
        id=new_id(),
        task="slow_import_tasks:hello",
        args=("x",),
        kwargs={},
        queue="default",
        timeout=5,
    )
    queue.push("default", [encode(warm_up), encode(first), encode(second)])
    code, output = workers.run(
        "--stop-when-empty", "--kill-grace", "0.3", env={"PYTHONPATH": str(tmp_path)}
    )
    assert code == 0, output
    assert done(queue) == ["first", "slept", "hello x"]
    assert failed(queue) == [] and settled(queue)
    assert "overran" not in output


@pytest.mark.topology
def test_a_short_queue_is_spread_over_idle_children_not_hoarded(
    queue: RedisQueue, workers: Workers
) -> None:
    worker = workers.start("-c", "2", *FAST)
    worker.wait_for_children(2)
    time.sleep(0.3)  # both children idle in their blocking wait
    dispatch_many([apptasks.blocks_until_released.pending(v) for v in ("a", "b")])
    wait_for(lambda: len(strings(queue.client, "test:started")) == 2, 10, "both to run at once")
    pids = {entry.split(":")[0] for entry in strings(queue.client, "test:started")}
    assert len(pids) == 2
    queue.client.rpush("test:release", "go", "go")
    wait_for(lambda: sorted(done(queue)) == ["a", "b"], 10)


@pytest.mark.topology
@pytest.mark.parametrize(("prefetch", "held"), [("1", 1), ("3", 6), ("20", 4)])
def test_batches_grow_from_one_to_prefetch_and_a_deep_queue_is_read_ahead(
    queue: RedisQueue, workers: Workers, prefetch: str, held: int
) -> None:
    # The first reserve takes one task; the next up to four, at most --prefetch. While
    # enough tasks are left for another batch, the child reserves it before running
    # the current one (worker/reservations.py): with --prefetch 3 it holds "second" and two more,
    # plus three reserved ahead; with 20, the four it holds leave too few to read
    # ahead; with 1, it never reads ahead.
    apptasks.dispatch_first_then_blocking("second", 6)
    workers.start("--prefetch", prefetch, *FAST)
    wait_for(lambda: strings(queue.client, "test:started"), 10, "the second task to start")
    size = queue.sizes(["default"])[0]
    assert (size.reserved, size.ready) == (held, 7 - held)
    queue.client.rpush("test:release", "go")
    wait_for(lambda: len(done(queue)) == 8, 10)


MAIN_SCRIPT = """
from rqueue import task
from rqueue.store.default import default_queue


@task
def greet(name):
    default_queue().client.rpush("test:done", f"hi {name}")


if __name__ == "__main__":
    greet.dispatch("script")
"""


def test_a_task_dispatched_from_a_script_run_as_main_resolves_by_its_file_name(
    queue: RedisQueue, config: Config, workers: Workers, tmp_path: Path
) -> None:
    (tmp_path / "greetings.py").write_text(MAIN_SCRIPT)
    env = {**os.environ, "REDIS_URL": config.redis_url}
    subprocess.run([sys.executable, "greetings.py"], cwd=tmp_path, env=env, check=True, timeout=30)
    (payload,) = ready(queue)
    assert decode(payload).task == "greetings:greet"  # not "__main__:greet"
    local = Workers(config, cwd=tmp_path)
    try:
        code, output = local.run("--stop-when-empty", *FAST)
    finally:
        local.kill_all()
    assert code == 0, output
    assert done(queue) == ["hi script"] and failed(queue) == []


@pytest.mark.topology
def test_a_timed_out_attempt_is_retried_like_any_error(queue: RedisQueue, workers: Workers) -> None:
    apptasks.sleeps.using(tries=2).dispatch(30)  # timeout=1
    workers.start(*FAST)
    (record,) = wait_for(lambda: failed(queue), 15, "both attempts to time out")
    assert len(strings(queue.client, "test:started")) == 2
    assert (record.exception, record.attempts, record.timed_out) == ("TaskTimeout", 2, True)
