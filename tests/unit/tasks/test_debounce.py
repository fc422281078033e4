"""Debounced tasks (``@task(debounce=)``): the last call of a burst runs, once.

Real ``rqueue work`` processes run the tasks of debounce_tasks.py, which record each
run (``<key>=<value>``). debounce.lua replaces the call pending for a key in one step;
a burst ends when its call is due, is cancelled, or (so) once a worker took it.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter, defaultdict
from dataclasses import replace

import debounce_tasks
import pytest
from support import Workers, in_threads, strings, wait_for

from rqueue import Debounced, batch, chain, dispatch_many, task
from rqueue.encoding.payload import decode
from rqueue.errors import InvalidSchedule, InvalidTaskOption, ReplicasNotReached
from rqueue.schedules.api import Schedules
from rqueue.settings.config import Config
from rqueue.store.cancel import CancelOutcome
from rqueue.store.queue import RedisQueue
from rqueue.store.signing import verify
from rqueue.tasks.handles import Dispatched

FAST = ("--kill-grace", "0.5", "--block-for", "0.5")
MODES = {"process": (), "threads": ("--threads", "2"), "slots": ("--slots", "4")}


def runs(queue: RedisQueue) -> list[str]:
    return strings(queue.client, debounce_tasks.RUNS)


def delayed(queue: RedisQueue) -> list[tuple[bytes, float]]:
    """The queue's delayed payloads with their due times (ms), earliest first."""
    members = queue.client.zrange(queue.keys("default").delayed, 0, -1, withscores=True)
    return [(bytes(member), float(score)) for member, score in members]  # type: ignore[union-attr]


@pytest.mark.topology
@pytest.mark.parametrize("mode", MODES, ids=list(MODES))
def test_the_last_call_of_a_burst_runs_once(mode: str, queue: RedisQueue, workers: Workers) -> None:
    edit = debounce_tasks.edit_async if mode == "slots" else debounce_tasks.edit
    workers.start(*MODES[mode], *FAST)
    handles = [edit.dispatch("doc", text) for text in ("a", "b", "c")]
    assert [h.debounced for h in handles] == [
        Debounced.SCHEDULED,
        Debounced.REPLACED,
        Debounced.REPLACED,
    ]
    assert len({h.id for h in handles}) == 1  # every caller's handle is the call that runs
    assert handles[0].result(10) == "c"  # with the last call's arguments
    assert runs(queue) == ["doc=c"]
    assert handles[1].status() == "succeeded"


@pytest.mark.topology
def test_each_call_pushes_the_due_time_out(queue: RedisQueue) -> None:
    first = debounce_tasks.save.dispatch("a")
    [(payload, due)] = delayed(queue)
    assert decode(payload).args == ("a",) and first.status() == "delayed"
    time.sleep(0.2)
    second = debounce_tasks.save.dispatch("b")
    [(replaced, pushed)] = delayed(queue)  # still one call, now with the new arguments
    assert decode(replaced).args == ("b",) and decode(replaced).id == first.id == second.id
    assert pushed >= due + 150
    assert queue.client.scard(queue.keys("default").pending_ids) == 1
    assert queue.sizes(["default"])[0].delayed == 1


def test_debounce_max_caps_the_wait_of_a_burst(queue: RedisQueue, workers: Workers) -> None:
    """Calls every 0.1 s for 1.7 s, each within the 0.4 s debounce of the one before:
    without the cap none would fall due while they come. With it (1.2 s) the first
    burst's call is due 1.2 s after its first call, and the calls after that begin a
    second burst."""
    capped = debounce_tasks.capped
    handles = [capped.dispatch("0")]
    [(_, first_due)] = delayed(queue)
    started = time.monotonic()
    while time.monotonic() - started < 1.7:
        time.sleep(0.1)
        handles.append(capped.dispatch(str(len(handles))))
    ids = list(dict.fromkeys(h.id for h in handles))
    assert len(ids) == 2, [h.debounced for h in handles]
    last = [max(i for i, h in enumerate(handles) if h.id == burst) for burst in ids]
    assert Debounced.CAPPED in {h.debounced for h in handles[: last[0] + 1]}
    assert handles[last[0] + 1].debounced is Debounced.SCHEDULED
    due = {decode(payload).id: score for payload, score in delayed(queue)}
    assert due[ids[0]] == first_due - 400 + 1200  # the cap, counted from the first call
    workers.start(*FAST)
    wait_for(lambda: len(runs(queue)) == 2, 10, "one run per burst")
    assert runs(queue) == [f"capped={i}" for i in last]  # each burst's last call


@pytest.mark.topology
def test_the_key_function_separates_calls(queue: RedisQueue, workers: Workers) -> None:
    edit = debounce_tasks.edit
    outcomes = [edit.dispatch(d, t).debounced for d, t in (("d1", "x"), ("d2", "y"), ("d1", "z"))]
    assert outcomes == [Debounced.SCHEDULED, Debounced.SCHEDULED, Debounced.REPLACED]
    assert len(delayed(queue)) == 2
    with pytest.raises(InvalidTaskOption, match="debounce_by"):
        debounce_tasks.keyless.dispatch("x")
    workers.start(*FAST)
    wait_for(lambda: len(runs(queue)) == 2, 10, "one run per key")
    time.sleep(0.3)  # nothing more comes
    assert sorted(runs(queue)) == ["d1=z", "d2=y"]


@pytest.mark.topology
def test_cancelling_the_pending_call_ends_its_burst(queue: RedisQueue, workers: Workers) -> None:
    cancelled = debounce_tasks.save.dispatch("a")
    assert cancelled.cancel() is CancelOutcome.CANCELLED
    again = debounce_tasks.save.dispatch("b")
    assert again.debounced is Debounced.SCHEDULED and again.id != cancelled.id
    assert debounce_tasks.save.dispatch("c").id == again.id
    workers.start(*FAST)
    assert again.result(10) == "c"
    assert cancelled.status() == "cancelled"
    time.sleep(0.3)
    assert runs(queue) == ["save=c"]


def test_a_new_burst_begins_once_the_last_one_ran(queue: RedisQueue, workers: Workers) -> None:
    workers.start(*FAST)
    first = debounce_tasks.save.dispatch("1")
    assert first.result(10) == "1"
    second = debounce_tasks.save.dispatch("2")
    assert second.debounced is Debounced.SCHEDULED and second.id != first.id
    assert second.result(10) == "2"
    assert runs(queue) == ["save=1", "save=2"]


def test_a_burst_from_one_process_costs_one_script_call_a_dispatch(queue: RedisQueue) -> None:
    """From its second call on, a process guesses the pending call's id right."""

    def script_calls() -> int:
        stats = queue.client.info("commandstats").get("cmdstat_evalsha", {})
        return int(stats.get("calls", 0))

    debounce_tasks.save.dispatch("first")
    before = script_calls()
    handles = [debounce_tasks.save.dispatch(str(n)) for n in range(10)]
    assert script_calls() - before == 10
    assert {h.debounced for h in handles} == {Debounced.REPLACED}


def test_signed_replacements_run_under_a_secret(
    config: Config, queue: RedisQueue, workers: Workers
) -> None:
    """The pending call's id is signed with its payload: a replacement is signed anew
    with that id, and a worker holding the secret runs it."""
    secret = "debounce-secret"
    signed = RedisQueue(replace(config, secret=secret))
    save = debounce_tasks.save.using(connection=signed)
    first, last = save.dispatch("a"), save.dispatch("b")
    assert last.debounced is Debounced.REPLACED and last.id == first.id
    [(payload, _)] = delayed(queue)
    verify(payload, secret, "default")
    workers.start(*FAST, env={"RQUEUE_SECRET": secret})
    assert last.result(10) == "b"
    signed.client.close()


def test_waiting_for_replicas_that_never_confirm(config: Config, queue: RedisQueue) -> None:
    """One Redis has no replicas: the call is queued all the same, and said so."""
    quick = RedisQueue(replace(config, wait_replicas_timeout=0.1))
    save = debounce_tasks.save.using(connection=quick, wait_replicas=1)
    with pytest.raises(ReplicasNotReached, match="debounced call was queued"):
        save.dispatch("a")
    [(payload, _)] = delayed(queue)
    assert decode(payload).args == ("a",)
    quick.client.close()


def test_a_call_due_already_is_not_replaced(queue: RedisQueue) -> None:
    """Its window closed when it fell due, whether or not a worker moved it yet."""
    first = debounce_tasks.save.dispatch("a")
    queue.client.zadd(queue.keys("default").delayed, {delayed(queue)[0][0]: 0})  # due now
    second = debounce_tasks.save.dispatch("b")
    assert second.debounced is Debounced.SCHEDULED and second.id != first.id
    assert len(delayed(queue)) == 2


def test_a_garbled_entry_reads_as_no_call_pending(queue: RedisQueue) -> None:
    first = debounce_tasks.save.dispatch("a")
    entry = queue.keys("default").debounce(debounce_tasks.save.name)
    queue.client.hset(entry, "first", "nan")
    assert debounce_tasks.save.dispatch("b").id == first.id  # "first" read as now
    queue.client.delete(entry)
    queue.client.set(entry, "garbage")
    third = debounce_tasks.save.dispatch("c")
    assert third.debounced is Debounced.SCHEDULED and third.id != first.id


def race(config: Config, threads: int, keys: list[str], window: int) -> tuple[list[object], float]:
    """``threads`` dispatches of ``raced`` over ``keys``, each from its own thread and
    connection (made first), released at once: ``(key, text, handle)`` each, and the
    seconds from the first dispatch sent to the last answered."""
    numbers = itertools.count()
    connections = [RedisQueue(config) for _ in range(threads)]
    times: list[float] = []

    def dispatch() -> tuple[str, str, Dispatched]:
        number = next(numbers)  # atomic: each thread its own
        doc, text = keys[number % len(keys)], f"w{window}t{number}"
        times.append(time.monotonic())
        handle = debounce_tasks.raced.using(connection=connections[number]).dispatch(doc, text)
        times.append(time.monotonic())
        return doc, text, handle

    try:
        return in_threads(threads, dispatch), max(times) - min(times)
    finally:
        for connection in connections:
            connection.client.close()


@pytest.mark.topology
def test_racing_dispatchers_run_one_call_per_key_and_window(
    config: Config, queue: RedisQueue, workers: Workers
) -> None:
    """100 threads send one call each over four keys, twice: the second burst after
    the first ran. Each key runs once per window, with the arguments of the call that
    was pending last, which every handle of the key names."""
    threads, keys = 100, ["k0", "k1", "k2", "k3"]
    workers.start(*FAST)
    for window in range(2):
        queue.client.delete(debounce_tasks.RUNS)
        results, took = race(config, threads, keys, window)
        assert took < 3.5, f"the dispatches took {took:.1f} s, past the 4 s window"
        pending = {decode(payload).args[0]: decode(payload) for payload, _ in delayed(queue)}
        assert sorted(pending) == keys  # one call pending per key
        by_key: defaultdict[str, list[tuple[str, Dispatched]]] = defaultdict(list)
        for doc, text, handle in results:  # type: ignore[misc]
            by_key[doc].append((text, handle))
        for doc, sent in by_key.items():
            outcomes = Counter(h.debounced for _, h in sent)
            assert outcomes[Debounced.SCHEDULED] == 1, outcomes
            assert {h.id for _, h in sent} == {pending[doc].id}
            assert pending[doc].args[1] in {text for text, _ in sent}
        wait_for(lambda: len(runs(queue)) >= len(keys), 15, "one run per key")
        time.sleep(0.5)  # and no more
        assert sorted(runs(queue)) == sorted(f"{doc}={pending[doc].args[1]}" for doc in keys)


def test_later_and_workflows_are_refused(queue: RedisQueue) -> None:
    save = debounce_tasks.save
    with pytest.raises(InvalidTaskOption, match=r"debounce.*later\(\)"):
        save.later(5, "a")
    for build in (
        lambda: dispatch_many([save.pending("a")]),
        lambda: save.dispatch_many([("a",)]),
        lambda: chain(save.pending("a")),
        lambda: batch([save.pending("a")]),
        lambda: chain(debounce_tasks.plain.pending()).catch(save),
        lambda: batch([debounce_tasks.plain.pending()]).then(save.pending()),
    ):
        with pytest.raises(InvalidTaskOption, match="debounce"):
            build()
    with pytest.raises(InvalidSchedule, match="debounce"):
        Schedules(queue).add("every-save", save, every=60, args=("a",))
    assert delayed(queue) == []


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"debounce": -1}, "debounce"),
        ({"debounce": 0}, "debounce"),
        ({"debounce": float("nan")}, "debounce"),
        ({"debounce": float("inf")}, "debounce"),
        ({"debounce": "5"}, "debounce"),
        ({"debounce": 5, "debounce_max": 2}, "debounce_max"),
        ({"debounce": 5, "debounce_max": float("nan")}, "debounce_max"),
        ({"debounce": 5, "unique": True}, "unique and debounce"),
        ({"debounce_by": str}, "debounce_by needs debounce"),
        ({"debounce_max": 5}, "debounce_max needs debounce"),
        ({"debounce": 5, "debounce_by": 3}, "debounce_by"),
        ({"debounce": 5, "every": 60}, "debounce"),
    ],
)
def test_bad_options_are_refused_naming_them(options: dict[str, object], named: str) -> None:
    with pytest.raises(InvalidTaskOption, match=named):
        task(**options)(lambda value: value)  # type: ignore[call-overload]
