"""rqueue.testing: the fake (recorded dispatches, assertions, run_all), sync mode, and
the pytest plugin's fixtures, run through a real pytest in a subprocess."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import testing_tasks as t
from support import cli, ready

from rqueue import TaskFailed, UnserializableArgument, batch, chain
from rqueue.encoding.payload import Job
from rqueue.errors import RQueueError, TaskNotRegistered
from rqueue.settings.config import Config, ConfigError, env_flag
from rqueue.store.queue import RedisQueue
from rqueue.tasks.current import set_current_job
from rqueue.tasks.interception import current_interceptor, intercept_process
from rqueue.testing import Fake, MemoryBatch, fake, sync, sync_from_environment

ROOT = Path(__file__).parents[3]
TASKS = ROOT / "tests" / "tasks"


@pytest.fixture(autouse=True)
def _fresh_seen() -> Iterator[None]:
    t.seen.clear()
    yield
    t.seen.clear()


# -- fake: recording and assertions ---------------------------------------------------


def test_fake_records_dispatches_and_sends_nothing(queue: RedisQueue) -> None:
    with fake() as recorded:
        handle = t.add.dispatch(1, 2)
        t.send.later(60, "ann")
        t.add.using(queue="slow").dispatch(3, 4)
    assert handle.status() == "pending"
    assert handle.deduplicated is False
    assert (handle.task, handle.queue) == (t.add.name, "default")
    assert [c.args for c in recorded.dispatched(t.add)] == [(1, 2), (3, 4)]
    assert t.seen == []  # nothing ran
    assert sum(s.ready + s.delayed for s in queue.sizes(["default", "emails", "slow"])) == 0
    recorded.assert_dispatched(t.add, times=2)
    recorded.assert_dispatched(t.add, where=lambda call: call.args == (3, 4))
    recorded.assert_dispatched(t.send.name)  # by name too
    recorded.assert_dispatched_on("emails", t.send)
    recorded.assert_dispatched_on("slow", t.add)
    recorded.assert_not_dispatched(t.double)
    recorded.assert_not_dispatched(t.add, where=lambda call: call.args == (9, 9))


def test_fake_assertions_fail_listing_what_was_dispatched() -> None:
    with fake() as recorded:
        recorded.assert_nothing_dispatched()
        with pytest.raises(AssertionError, match="nothing was dispatched"):
            recorded.assert_dispatched(t.add)
        t.add.dispatch(1, 2)
        failures = [
            lambda: recorded.assert_dispatched(t.add, times=2),
            lambda: recorded.assert_dispatched(t.add, where=lambda call: call.args == (5, 5)),
            lambda: recorded.assert_dispatched(t.double),
            lambda: recorded.assert_not_dispatched(t.add),
            lambda: recorded.assert_dispatched_on("emails", t.add),
            recorded.assert_nothing_dispatched,
        ]
        for failing in failures:
            with pytest.raises(AssertionError, match=r"testing_tasks:add\(1, 2\) on 'default'"):
                failing()


def test_fake_refuses_an_unencodable_argument_at_dispatch() -> None:
    with fake() as recorded:
        with pytest.raises(UnserializableArgument, match="Point"):
            t.add.dispatch(t.Point(1, 2), 3)
        recorded.assert_nothing_dispatched()


def test_fake_ends_with_its_block(queue: RedisQueue) -> None:
    with fake():
        pass
    handle = t.add.dispatch(1, 2)
    assert queue.sizes(["default"])[0].ready == 1
    assert handle.status() == "unknown"  # a real handle: no record kept


def test_fake_records_chains_and_batches() -> None:
    with fake() as recorded:
        chain(t.add.pending(1, 2), t.double.pending(), pipe=True).catch(t.alert, "ops").dispatch()
        handle = batch([t.double.pending(i) for i in range(3)]).name("doubles").dispatch()
    assert isinstance(handle, MemoryBatch)
    recorded.assert_chained([t.add, t.double])
    recorded.assert_chained([t.add.pending(1, 2), t.double])
    with pytest.raises(AssertionError, match=r"chain\(testing_tasks:add\(1, 2\)"):
        recorded.assert_chained([t.add.pending(1, 3), t.double])
    with pytest.raises(AssertionError, match="chains dispatched"):
        recorded.assert_chained([t.double, t.add])
    recorded.assert_batched(lambda b: b._name == "doubles" and len(b.calls) == 3)
    with pytest.raises(AssertionError, match="batch 'doubles' of testing_tasks:double"):
        recorded.assert_batched(lambda b: len(b.calls) == 4)
    # a chain's first step and a batch's members are dispatched at once; later steps not
    recorded.assert_dispatched(t.add, times=1)
    recorded.assert_dispatched(t.double, times=3)


@pytest.mark.parametrize(
    "check",
    [
        lambda f: f.assert_not_dispatched("testing_tasks:ad"),
        lambda f: f.assert_dispatched("testing_tasks:ad", times=0),
        lambda f: f.assert_dispatched_on("default", "testing_tasks:ad"),
        lambda f: f.assert_chained(["testing_tasks:ad"]),
        lambda f: f.dispatched("testing_tasks:ad"),
    ],
    ids=["not dispatched", "dispatched", "dispatched on", "chained", "dispatched()"],
)
def test_fake_assertions_refuse_a_task_name_no_task_has(check: Callable[[Fake], object]) -> None:
    """A typo would make ``assert_not_dispatched`` pass for ever (issue #26, item 25)."""
    unknown = pytest.raises(TaskNotRegistered, match="no task is named 'testing_tasks:ad'")
    with fake() as recorded, unknown as raised:
        check(recorded)
    assert "did you mean testing_tasks:add" in str(raised.value)


# -- fake and sync: whose dispatches they take ---------------------------------------


def test_a_fake_takes_the_dispatches_of_threads_its_test_starts() -> None:
    with fake() as recorded, ThreadPoolExecutor(2) as pool:  # a pool copies no context
        pool.submit(t.add.dispatch, 1, 2).result(timeout=10)
        threading_dispatch = threading.Thread(target=t.double.dispatch, args=(3,))
        threading_dispatch.start()
        threading_dispatch.join(timeout=10)
    recorded.assert_dispatched(t.add, times=1)
    recorded.assert_dispatched(t.double, times=1)


def test_fakes_open_in_two_threads_at_once_each_take_their_own(queue: RedisQueue) -> None:
    """Tests run in threads at once: one's dispatches never land in the other's fake,
    and neither ending undoes the other (issue #26, item 3)."""
    steps = [threading.Event() for _ in range(4)]
    recorded: dict[str, Fake] = {}

    def first() -> None:
        with fake() as mine:
            recorded["first"] = mine
            steps[0].set()
            steps[1].wait(10)  # the second is open too
            t.add.dispatch(1, 1)
        steps[2].set()

    def second() -> None:
        steps[0].wait(10)
        with fake() as mine:
            recorded["second"] = mine
            steps[1].set()
            steps[2].wait(10)  # the first has ended
            t.add.dispatch(2, 2)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert [c.args for c in recorded["first"].calls] == [(1, 1)]
    assert [c.args for c in recorded["second"].calls] == [(2, 2)]
    assert current_interceptor() is None  # every block ended: dispatches reach Redis
    assert ready(queue) == []


def test_a_thread_in_no_block_while_two_are_open_elsewhere_is_refused_not_guessed(
    queue: RedisQueue,
) -> None:
    opened, done = threading.Barrier(3, timeout=10), threading.Event()

    def test_in_a_thread() -> None:
        with fake() as mine:
            opened.wait()
            done.wait(10)
        mine.assert_nothing_dispatched()

    threads = [threading.Thread(target=test_in_a_thread) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        opened.wait()
        with ThreadPoolExecutor(1) as pool:  # in no block: whose is it?
            refused = pool.submit(t.add.dispatch, 1, 2).exception(timeout=10)
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=10)
    assert isinstance(refused, RQueueError)
    assert "cannot tell which one it belongs to" in str(refused)
    assert ready(queue) == []


def test_a_task_run_beside_one_in_a_fake_is_not_faked(queue: RedisQueue) -> None:
    """A worker's runs side by side (``--threads``, ``--slots``): a fake one of them
    opened is its own; another run's dispatch reaches Redis."""
    opened, dispatched = threading.Event(), threading.Event()

    def run(job_id: str, body: Callable[[], None]) -> None:
        set_current_job(Job(id=job_id, task=t.add.name, args=(), kwargs={}, queue="default"))
        body()

    def faking() -> None:
        with fake() as mine:
            opened.set()
            dispatched.wait(10)
        mine.assert_nothing_dispatched()

    def dispatching() -> None:
        opened.wait(10)
        t.add.dispatch(5, 5)
        dispatched.set()

    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(run, "a", faking), pool.submit(run, "b", dispatching)]
        for done in runs:
            done.result(timeout=10)
    assert len(ready(queue)) == 1


# -- fake: run_all ----------------------------------------------------------------


def test_run_all_runs_what_was_recorded_and_what_that_dispatches() -> None:
    with fake() as recorded:
        first = t.add.dispatch(1, 2)
        t.fan_out.dispatch(2)
        assert first.status() == "pending"
        outcomes = recorded.run_all()
        assert [o.status for o in outcomes] == ["succeeded"] * 4
        assert first.result() == 3
        recorded.assert_dispatched(t.send, times=2)
        assert t.seen == [("add", 1, 2), ("send", "user0"), ("send", "user1")]
        assert recorded.run_all() == []  # each runs once


def test_run_all_runs_a_chain_step_by_step_piping_results() -> None:
    with fake() as recorded:
        steps = chain(t.add.pending(1, 2), t.double.pending(), t.double.pending(), pipe=True)
        handles = steps.dispatch()
        assert handles.status() == ["pending", "unknown", "unknown"]
        recorded.run_all()
    assert handles.status() == ["succeeded"] * 3
    assert handles.result() == 12
    assert t.seen == [("add", 1, 2), ("double", 3), ("double", 6)]


def test_run_all_runs_a_chains_catch_when_a_step_fails() -> None:
    with fake() as recorded:
        handles = chain(t.add.pending(1, 2), t.boom.pending("no"), t.double.pending(1))
        handles = handles.catch(t.alert, "ops").dispatch()
        recorded.run_all()
    assert handles.status() == ["succeeded", "failed", "unknown"]
    assert t.seen == [("add", 1, 2), ("alert", "RuntimeError", "no", "ops")]
    with pytest.raises(TaskFailed, match="RuntimeError: no"):
        handles.steps[1].result()


def test_run_all_runs_batch_callbacks_with_the_batch_first() -> None:
    with fake() as recorded:
        good = batch([t.double.pending(i) for i in range(3)])
        good = good.then(t.on_batch, "then").finally_(t.on_batch, "finally").dispatch()
        bad = batch([t.boom.pending("x"), t.double.pending(9)]).catch(t.on_batch, "catch")
        bad = bad.finally_(t.on_batch, "finally").then(t.on_batch, "never").dispatch()
        recorded.run_all()
    assert ("then", 3, 0, 3) in t.seen
    assert ("finally", 3, 0, 3) in t.seen
    assert ("catch", 0, 1, 2) in t.seen
    assert ("double", 9) not in t.seen  # the first failure cancelled its batch
    assert not any(entry[0] == "never" for entry in t.seen)
    status = bad.status()
    assert (status.failed, status.skipped, status.cancelled, status.finished) == (1, 1, True, True)
    assert good.status().progress == 100.0


# -- sync mode ----------------------------------------------------------------------


def test_sync_runs_each_dispatch_at_once_through_encode_and_decode() -> None:
    with sync():
        handle = t.add.dispatch(1, 2)
        assert t.seen == [("add", 1, 2)]
        assert (handle.status(), handle.result()) == ("succeeded", 3)
        assert t.send.later(3600, "ann").result() == "sent to ann"  # later() runs now too
        with pytest.raises(UnserializableArgument, match="Point"):
            t.add.dispatch(t.Point(1, 2), 3)
    assert len(t.seen) == 2


def test_sync_retries_up_to_tries_and_reports_failure_as_a_worker_would() -> None:
    with sync():
        assert t.flaky.dispatch(2).result() == 3  # third attempt of three
        failed = t.flaky.dispatch(3)
        assert failed.status() == "failed"
        with pytest.raises(TaskFailed, match="attempt 3 failed") as raised:
            failed.result()
        assert raised.value.exception == "ValueError"


def test_sync_runs_the_middleware_stack() -> None:
    with sync():
        assert t.wrapped.dispatch(1).result() == 2
        assert t.seen == [("before", t.wrapped.name), ("after", 2)]
        released = t.limited.dispatch()
    assert released.status() == "delayed"
    with pytest.raises(TimeoutError, match="released by its middleware for 30 s"):
        released.result()
    assert t.seen[-1] != ("limited ran",)


def test_sync_and_run_all_await_async_tasks() -> None:
    with sync():
        assert t.fetch.dispatch(1).result() == 10
    with fake() as recorded:
        t.fetch.dispatch(2)
        recorded.run_all()
    assert t.seen == [("fetch", 1, t.fetch.name), ("fetch", 2, t.fetch.name)]


def test_an_async_tasks_failure_under_sync_has_no_context_of_rqueues_own() -> None:
    """The inline runner looks for a running loop first; what the task raised must not
    be chained to that lookup's RuntimeError ("During handling of ... another exception")."""
    with sync():
        failed = t.fails_async.dispatch()
        with pytest.raises(TaskFailed) as raised:
            failed.result()
    assert (raised.value.exception, raised.value.message) == ("ValueError", "async boom")
    assert "no running event loop" not in raised.value.traceback
    assert "During handling" not in raised.value.traceback


def test_sync_awaits_async_tasks_dispatched_from_a_running_loop() -> None:
    async def view() -> int:  # an async web view dispatching under sync()
        return t.fetch.dispatch(3).result()

    with sync():
        assert asyncio.run(view()) == 30
    assert t.seen == [("fetch", 3, t.fetch.name)]


def test_sync_runs_chains_and_batches() -> None:
    with sync():
        assert chain(t.add.pending(1, 2), t.double.pending(), pipe=True).dispatch().result() == 6
        handle = batch([t.double.pending(i) for i in range(2)]).then(t.on_batch, "then").dispatch()
    assert ("then", 2, 0, 2) in t.seen
    assert handle.status().finished


def test_rqueue_sync_from_the_environment_runs_dispatches_inline(tmp_path: Path) -> None:
    result = run_pytest(
        tmp_path,
        """
        import testing_tasks as t

        def test_inline():
            handle = t.add.dispatch(2, 3)
            assert handle.result() == 5
            assert t.seen == [("add", 2, 3)]
        """,
        {"RQUEUE_SYNC": "1", "REDIS_URL": "redis://127.0.0.1:1/0"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_rqueue_sync_from_the_environment_runs_a_script_s_dispatches_inline(
    tmp_path: Path,
) -> None:
    (tmp_path / "app.py").write_text(
        "import testing_tasks as t\nprint(t.add.dispatch(2, 3).result())\n"
    )
    env = {
        **os.environ,
        "RQUEUE_SYNC": "1",
        "REDIS_URL": "redis://127.0.0.1:1/0",  # nothing listens: nothing may reach Redis
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TASKS)]),
    }
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (0, "5\n"), result.stderr


@pytest.mark.parametrize("value", ["false", "False", "no", "OFF", " 0", "0 ", ""])
def test_rqueue_sync_set_to_off_leaves_sync_mode_off(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RQUEUE_SYNC", value)
    assert sync_from_environment() is False
    assert current_interceptor() is None


@pytest.mark.parametrize("value", ["1", "true", "Yes", " on "])
def test_rqueue_sync_set_to_on_turns_sync_mode_on(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RQUEUE_SYNC", value)
    try:
        assert sync_from_environment() is True
        assert t.add.dispatch(1, 2).result() == 3
    finally:
        intercept_process(None)


@pytest.mark.parametrize("variable", ["RQUEUE_SYNC", "RQUEUE_CLUSTER"])
def test_a_boolean_variable_that_says_neither_is_refused_naming_it(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "enabled")
    with pytest.raises(ConfigError, match=f"{variable} must be one of 1/true/yes/on/0/false"):
        env_flag(variable)
    monkeypatch.setenv("RQUEUE_CLUSTER", " Off ")
    assert Config.resolve(redis_url="redis://127.0.0.1:1/0").cluster is False


def test_importing_rqueue_reads_rqueue_sync_with_the_same_rule(config: Config) -> None:
    script = "import rqueue, testing_tasks as t; print(type(t.add.dispatch(1, 2)).__name__)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TASKS)])}
    run = [sys.executable, "-c", script]
    off = subprocess.run(
        run, env={**env, "RQUEUE_SYNC": "false"}, capture_output=True, text=True, timeout=60
    )
    assert (off.returncode, off.stdout) == (0, "TaskHandle\n"), off.stderr  # queued
    on = subprocess.run(
        run, env={**env, "RQUEUE_SYNC": "True"}, capture_output=True, text=True, timeout=60
    )
    assert (on.returncode, on.stdout) == (0, "InlineDispatched\n"), on.stderr
    typo = subprocess.run(
        run, env={**env, "RQUEUE_SYNC": "ture"}, capture_output=True, text=True, timeout=60
    )
    assert typo.returncode == 1
    assert "RQUEUE_SYNC must be one of" in typo.stderr and "not 'ture'" in typo.stderr


def test_a_worker_refuses_to_start_in_sync_mode(config: Config) -> None:
    refused = cli(config, "work", "--stop-when-empty", env={"RQUEUE_SYNC": "yes"})
    assert refused.returncode == 2
    assert "RQUEUE_SYNC is on" in refused.stderr and "never queued" in refused.stderr
    started = cli(config, "work", "--stop-when-empty", env={"RQUEUE_SYNC": "false"})
    assert started.returncode == 0, started.stderr


# -- the pytest plugin --------------------------------------------------------------


def plugin_options() -> list[str]:
    """``-p`` the plugin unless the installed package registers it (its entry point)."""
    installed = {ep.value for ep in entry_points(group="pytest11")}
    return [] if "rqueue.testing.plugin" in installed else ["-p", "rqueue.testing.plugin"]


def test_the_plugin_is_declared_as_a_pytest_entry_point() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert '[project.entry-points.pytest11]\nrqueue = "rqueue.testing.plugin"' in text


def run_pytest(
    tmp_path: Path, source: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_user.py").write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, "-m", "pytest", *plugin_options(), "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(TASKS), str(ROOT)]),
            **(env or {}),
        },
    )


def test_the_plugins_fixtures_in_a_users_test_run(tmp_path: Path) -> None:
    result = run_pytest(
        tmp_path,
        """
        import testing_tasks as t
        from rqueue import Config, RedisQueue

        def test_fake(rqueue_fake):
            t.add.dispatch(1, 2)
            rqueue_fake.assert_dispatched(t.add, times=1)

        def test_redis_and_worker(rqueue_redis, rqueue_worker):
            assert RedisQueue(Config.resolve(redis_url=rqueue_redis.config.redis_url))
            assert rqueue_redis.client.dbsize() == 0          # flushed per test
            good, bad = t.add.dispatch(1, 2), t.boom.dispatch("no")
            run = rqueue_worker("default")
            assert run.returncode == 0, run.log
            assert run[good] == "succeeded"
            assert run[bad] == "raised RuntimeError: no; failed"
            assert run.failed == [bad.id]

        def test_flushed_again(rqueue_redis):
            assert rqueue_redis.client.dbsize() == 0
            t.add.dispatch(1, 2)
        """,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout


def test_a_task_that_releases_itself_uses_its_tries_under_sync_as_in_a_worker() -> None:
    t.seen.clear()
    with sync():
        handle = t.releases_itself.dispatch()
    assert handle.status() == "failed"
    assert t.seen == [("releases itself",)] * 2  # its two tries, then it fails
    with pytest.raises(TaskFailed, match="released by the task itself on its last try"):
        handle.result()


@pytest.mark.parametrize("how", ["rqueue", "python -m rqueue"])
def test_a_bad_rqueue_sync_is_a_usage_error_of_every_command(config: Config, how: str) -> None:
    script = str(Path(sys.executable).parent / "rqueue")  # the venv's console script
    command = [script] if how == "rqueue" else [sys.executable, "-m", "rqueue"]
    env = {**os.environ, "REDIS_URL": config.redis_url, "RQUEUE_SYNC": "ture"}
    for args in (["size"], ["failed", "list"], ["work", "--stop-when-empty"]):
        done = subprocess.run(
            [*command, *args], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith("rqueue: RQUEUE_SYNC must be one of"), done.stderr


def test_a_middlewares_retry_fails_inline_with_the_tasks_own_error_as_in_a_worker() -> None:
    t.seen.clear()
    with sync():
        handle = t.retried_by_its_middleware.dispatch()
    assert t.seen == [("retried by its middleware",)] * 2  # retried at once, not after 5 s
    with pytest.raises(TaskFailed) as raised:
        handle.result()
    assert raised.value.exception == "ValueError"  # the cause, not the RetryIn around it


def test_batch_cancelled_outside_a_batch_fails_inline_like_any_error_as_in_a_worker() -> None:
    t.seen.clear()
    with sync():
        handle = t.not_a_member_but_cancelled.dispatch()
    assert handle.status() == "failed"
    assert t.seen == [("not a member",)] * 2  # only a cancelled batch's member is skipped
