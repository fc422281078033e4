"""Prometheus: ``rqueue metrics`` scraped over HTTP, the exposition parsed as Prometheus
would, after real workers ran tasks."""

from __future__ import annotations

import os
import signal
import subprocess
import urllib.request
from collections.abc import Iterator

import apptasks
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support import RQUEUE, Workers, cli, wait_for
from topologies import listen_port

from rqueue.encoding.payload import Job, new_id
from rqueue.metrics.collector import Collector
from rqueue.metrics.prometheus import registry_for
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

pytestmark = pytest.mark.topology  # the real exporter, on every topology

FAST = ("--kill-grace", "0.5", "--block-for", "0.5")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _samples(exposition: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(exposition)
        for s in family.samples
    }


@pytest.fixture
def exporter(config: Config, queue: RedisQueue) -> Iterator[str]:
    """A running ``rqueue metrics`` on a free port: its /metrics URL."""
    port = listen_port()  # the exporter takes a moment to bind it
    process = subprocess.Popen(
        [*RQUEUE, "metrics", "--port", str(port)],
        env={**os.environ, "REDIS_URL": config.redis_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_for(lambda: _answers(url) or process.poll() is not None, 15, "the exporter")
        assert process.poll() is None, process.communicate()
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0  # SIGTERM is a clean stop


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        return False


def _scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        return _samples(response.read().decode("utf-8"))


def test_a_scrape_shows_sizes_counters_histograms_and_workers(
    queue: RedisQueue, workers: Workers, exporter: str
) -> None:
    apptasks.record.dispatch_many([(i,) for i in range(3)])
    apptasks.always_fails.dispatch("x")  # emails: two retries, then failed
    code, output = workers.run("default,emails", "--stop-when-drained", *FAST)
    assert code == 0, output
    apptasks.record.dispatch_many([(9,), (10,)])  # left ready
    running = workers.start("nothing-here", *FAST)  # registered, on an empty queue

    def with_a_worker() -> Samples | None:
        scraped = _scrape(exporter)
        return scraped if scraped[("rqueue_workers", frozenset())] == 1 else None

    samples = wait_for(with_a_worker, 15, "one registered worker in a scrape")
    record = frozenset({("queue", "default"), ("task", "apptasks:record")})
    failing = frozenset({("queue", "emails"), ("task", "apptasks:always_fails")})
    assert samples[("rqueue_tasks_processed_total", record)] == 3
    assert samples[("rqueue_tasks_failed_total", failing)] == 1
    assert samples[("rqueue_tasks_retried_total", failing)] == 2
    assert samples[("rqueue_tasks_failed_total", record)] == 0
    assert samples[("rqueue_queue_ready", frozenset({("queue", "default")}))] == 2
    assert samples[("rqueue_queue_failed", frozenset({("queue", "emails")}))] == 1
    oldest = samples[("rqueue_queue_oldest_wait_seconds", frozenset({("queue", "default")}))]
    assert 0 <= oldest < 60
    assert samples[("rqueue_task_runtime_seconds_count", failing)] == 3
    assert samples[("rqueue_task_wait_seconds_count", record)] == 3
    inf_bucket = frozenset({*record, ("le", "+Inf")})
    assert samples[("rqueue_task_runtime_seconds_bucket", inf_bucket)] == 3
    assert samples[("rqueue_task_runtime_seconds_sum", record)] > 0
    running.signal(signal.SIGTERM)
    assert running.wait(20) == 0


def test_hostile_task_names_stay_one_label_each(queue: RedisQueue) -> None:
    hostile = 'evil"} 1\nrqueue_workers 99\n# x'
    collector = Collector(queue)
    job = Job(new_id(), hostile, (), {}, "default", 1)
    collector.succeeded("default", job, 0.01)
    collector.flush()
    samples = _samples(generate_latest(registry_for(queue, ["default"])).decode("utf-8"))
    labels = frozenset({("queue", "default"), ("task", hostile)})
    assert samples[("rqueue_tasks_processed_total", labels)] == 1
    assert samples[("rqueue_workers", frozenset())] == 0


def test_a_port_out_of_range_is_a_usage_error(config: Config) -> None:
    result = cli(config, "metrics", "--port", "0")
    assert result.returncode == 2 and "--port" in result.stderr
