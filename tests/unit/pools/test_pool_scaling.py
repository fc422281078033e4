"""How many processes each of a pool's parents runs: the pure decision of a step."""

from __future__ import annotations

from rqueue.worker.pools.config import Pool
from rqueue.worker.pools.plan import parents
from rqueue.worker.pools.scaling import QueueLoad, decide, initial


def _pool(**fields: object) -> Pool:
    defaults: dict[str, object] = {"name": "p", "queues": ("a",), "max_processes": 8}
    return Pool(**{**defaults, **fields})  # type: ignore[arg-type]


def _load(queue: str, ready: int = 0, reserved: int = 0, wait: float | None = None) -> QueueLoad:
    return QueueLoad(queue, ready, reserved, wait, 0.1)


def test_a_backlog_grows_the_pool_by_at_most_the_shift_a_step_up_to_max() -> None:
    pool = _pool(balance_max_shift=2, time_to_clear=1.0)
    planned = parents(pool)
    loads = {"a": _load("a", ready=1000, wait=0.5)}  # 100 s of work: wants every process
    steps, current = [], [1]
    for _ in range(5):
        decision = decide(pool, planned, current, loads)
        assert decision.wanted == (8,)
        current = list(decision.targets)
        steps.append(current[0])
    assert steps == [3, 5, 7, 8, 8]


def test_work_is_tasks_times_their_runtime_over_the_time_to_clear() -> None:
    pool = _pool(time_to_clear=2.0, balance_max_shift=8)
    # 30 tasks waiting or in hand, 0.1 s each: 3 s of work, 2 processes to clear in 2 s.
    decision = decide(pool, parents(pool), [1], {"a": _load("a", ready=10, reserved=20)})
    assert decision.targets == (2,)


def test_a_queue_falling_behind_gets_one_more_whatever_the_estimate() -> None:
    pool = _pool(time_to_clear=1.0)
    decision = decide(pool, parents(pool), [3], {"a": _load("a", ready=1, wait=5.0)})
    assert decision.targets == (4,)


def test_an_idle_pool_shrinks_by_the_shift_and_never_below_min() -> None:
    pool = _pool(min_processes=2, balance_max_shift=3)
    planned, idle = parents(pool), {"a": _load("a")}
    assert decide(pool, planned, [8], idle).targets == (5,)
    assert decide(pool, planned, [5], idle).targets == (2,)
    assert decide(pool, planned, [2], idle).targets == (2,)


def test_auto_shares_the_processes_by_each_queue_s_work_each_keeping_one() -> None:
    pool = _pool(
        queues=("hot", "cold", "warm"), max_processes=10, balance_max_shift=10, time_to_clear=5.0
    )
    planned = parents(pool)
    loads = {
        "hot": _load("hot", ready=600),  # 60 s of work: 12 processes to clear it in 5 s
        "cold": _load("cold"),
        "warm": _load("warm", ready=200),  # 20 s: 4 processes
    }
    decision = decide(pool, planned, [1, 1, 1], loads)
    assert decision.targets == (7, 1, 2)  # 10 shared 12:4, after cold's one
    assert sum(decision.targets) == pool.max_processes


def test_simple_splits_evenly_and_off_runs_one_parent() -> None:
    loads = {"x": _load("x", ready=600), "y": _load("y")}
    simple = _pool(queues=("x", "y"), balance="simple", balance_max_shift=10)
    assert decide(simple, parents(simple), [1, 1], loads).targets == (4, 3)  # 6 + y's one
    off = _pool(queues=("x", "y"), balance="off", balance_max_shift=10)
    assert decide(off, parents(off), [1], loads).targets == (6,)


def test_moving_processes_between_queues_keeps_the_pool_within_min_and_max() -> None:
    pool = _pool(queues=("x", "y"), min_processes=4, max_processes=4, balance_max_shift=1)
    planned = parents(pool)
    loads = {"x": _load("x"), "y": _load("y", ready=600)}
    current = [3, 1]
    for _ in range(3):
        current = list(decide(pool, planned, current, loads).targets)
        assert sum(current) == 4
    assert current == [1, 3]


def test_the_pool_starts_at_its_floor_split_evenly() -> None:
    pool = _pool(queues=("x", "y", "z"), min_processes=5)
    assert initial(pool, parents(pool)) == [2, 2, 1]
