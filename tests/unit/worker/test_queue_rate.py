"""A queue's rate limit (``rqueue work --rate``): enforced by reserve.lua, measured over time
with real workers, shared by every worker on the queue, and never costing an attempt."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from support import Workers, cli, strings, wait_for

from rqueue.encoding.payload import Job, encode, new_id
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.worker.options import Rate, parse_rates

STARTS = "test:starts"
RATE_TASKS = f"""
import os
import time

from rqueue import current_job, task
from rqueue.store.default import default_queue


@task(queue="emails")
def stamp(number):
    job = current_job()
    default_queue().client.rpush({STARTS!r}, f"{{time.time()!r}} {{job.attempts}} {{os.getpid()}}")
"""
FAST = ("--block-for", "0.2", "--kill-grace", "1")


def push_stamps(queue: RedisQueue, count: int) -> None:
    jobs = [
        Job(id=new_id(), task="rate_tasks:stamp", args=(n,), kwargs={}, queue="emails")
        for n in range(count)
    ]
    queue.push("emails", [encode(job) for job in jobs])


def starts(queue: RedisQueue) -> list[tuple[float, int, int]]:
    """(start time, attempts, pid) of each task run so far, in start order."""
    records = (line.split() for line in strings(queue.client, STARTS))
    return sorted((float(at), int(attempts), int(pid)) for at, attempts, pid in records)


def rate(times: list[float]) -> float:
    """Tasks per second from the first start to the last."""
    return (len(times) - 1) / (times[-1] - times[0])


@pytest.fixture
def rate_workers(config: Config, queue: RedisQueue, tmp_path: Path) -> Workers:
    (tmp_path / "rate_tasks.py").write_text(RATE_TASKS)
    return Workers(config, cwd=tmp_path)


def test_a_50_per_second_limit_holds_within_5_percent(
    queue: RedisQueue, rate_workers: Workers
) -> None:
    push_stamps(queue, 300)
    try:
        rate_workers.start("emails", "--rate", "50/s", "-c", "2", *FAST)
        wait_for(lambda: len(starts(queue)) == 300, 30, "300 tasks to start")
    finally:
        rate_workers.kill_all()
    runs = starts(queue)
    times = [at for at, _, _ in runs]
    assert abs(rate(times) - 50) <= 2.5, rate(times)
    # No burst: one per 20 ms from the first, so at most 50 + 1 in its first second
    # (and a little slack for the lag between a task's reservation and its start).
    assert sum(at < times[0] + 1.0 for at in times) <= 51 + 2
    assert {attempts for _, attempts, _ in runs} == {1}  # waiting cost no attempt
    assert len({pid for _, _, pid in runs}) == 2  # both children took part


def test_the_limit_holds_across_two_worker_processes_sharing_the_queue(
    queue: RedisQueue, rate_workers: Workers
) -> None:
    push_stamps(queue, 150)
    try:
        for _ in range(2):
            rate_workers.start("emails", "--rate", "25/s", *FAST)
        wait_for(lambda: len(starts(queue)) == 150, 30, "150 tasks to start")
    finally:
        rate_workers.kill_all()
    runs = starts(queue)
    assert abs(rate([at for at, _, _ in runs]) - 25) <= 1.25
    assert {attempts for _, attempts, _ in runs} == {1}
    assert len({pid for _, _, pid in runs}) == 2  # each process ran some: one limit for both


def test_a_worker_waiting_for_its_rate_limit_stops_at_once(
    queue: RedisQueue, rate_workers: Workers
) -> None:
    push_stamps(queue, 3)
    worker = rate_workers.start("emails", "--rate", "1/h", *FAST)
    try:
        wait_for(lambda: len(starts(queue)) == 1, 15, "the first task to start")
        time.sleep(0.5)  # the only task the limit frees this hour ran; the child now waits
        assert len(starts(queue)) == 1
        asked = time.monotonic()
        worker.signal(signal.SIGTERM)
        assert worker.wait(10) == 0
        assert time.monotonic() - asked < 3
    finally:
        rate_workers.kill_all()
    assert queue.client.llen(queue.keys("emails").ready) == 2  # held back, not reserved


@pytest.mark.topology
def test_reserve_takes_no_more_than_the_limit_frees_and_says_when_the_next_frees(
    queue: RedisQueue,
) -> None:
    push_stamps(queue, 10)
    first = queue.reserve("emails", 100, 60_000, 0, 0, rate=(4, 1000))
    assert len(first.payloads) == 1 and first.still_ready == 9  # no burst: one cell
    assert 240 <= first.rate_wait_ms <= 250  # the next: 1000 ms / 4, less the time passed
    second = queue.reserve("emails", 100, 60_000, 0, 0, rate=(4, 1000))
    assert second.payloads == [] and 0 < second.rate_wait_ms <= 250
    time.sleep(second.rate_wait_ms / 1000)
    third = queue.reserve("emails", 100, 60_000, 0, 0, rate=(4, 1000))
    assert len(third.payloads) == 1
    # Without a rate the reply keeps its shape: no wait in it, the limit not consulted.
    assert len(queue.reserve("emails", 100, 60_000, 0, 0).payloads) == 8


@pytest.mark.parametrize(
    ("stored", "reserved"), [(b"nan", 1), (b"garbage", 1), (b"-inf", 1), (b"1e300", 0)]
)
def test_a_garbled_rate_state_neither_breaks_reserve_nor_blocks_the_queue_for_long(
    queue: RedisQueue, stored: bytes, reserved: int
) -> None:
    push_stamps(queue, 10)
    queue.client.set(queue.keys("emails").rate, stored)
    reservation = queue.reserve("emails", 100, 60_000, 0, 0, rate=(4, 1000))
    assert len(reservation.payloads) == reserved
    assert 0 <= reservation.rate_wait_ms <= 1000  # never longer than one period


@pytest.mark.parametrize(
    "value",
    ["0/s", "-5/s", "inf/s", "nan/s", "5/0s", "2000000/s", "5", "fast", "sms=5/s", ""],
)
def test_bad_rates_are_usage_errors_naming_the_option(config: Config, value: str) -> None:
    result = cli(config, "work", "emails", "--rate", value)
    assert result.returncode == 2, result.stderr
    assert "--rate" in result.stderr and "Traceback" not in result.stderr


def test_rates_parse_per_period_and_per_queue() -> None:
    assert Rate.parse("100/m") == Rate(100, 60)
    assert Rate.parse("10/2s") == Rate(10, 2)
    assert Rate.parse("5/h").period_ms == 3_600_000
    assert parse_rates("50/s", ("emails", "sms")) == {"emails": Rate(50), "sms": Rate(50)}
    assert parse_rates("emails=100/m, sms=5/s", ("emails", "sms", "push")) == {
        "emails": Rate(100, 60),
        "sms": Rate(5),
    }
