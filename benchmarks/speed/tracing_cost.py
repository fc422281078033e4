"""What tracing costs per task, on and off: a worker child's attempt and a dispatch.

With ``rqueue.contrib.opentelemetry`` instrumented (the real SDK, a span processor that
keeps each finished span in memory and drops it), each attempt makes a ``process`` span
from the ``traceparent`` its payload carries, and each dispatch a ``send`` span whose
context it injects. This script times both sides, off and on, interleaved in one run:

- the child: CPU per call of its per-task entry (``Lifecycle.process``) on one held
  payload, as ``per_task.py`` does (metrics off; no round trip);
- the producer: CPU per ``dispatch()`` of an empty task to a local Redis (its own
  process's CPU: on a shared machine, wall time mostly measures the neighbours).

    python benchmarks/speed/tracing_cost.py --rounds 5
    python benchmarks/speed/tracing_cost.py --rounds 5 --sentry

``--sentry`` measures ``rqueue.contrib.sentry`` instead (``--traces-sample-rate``, 1.0
by default; a transport that drops each envelope): its rounds are not interleaved, all off and then
all on, since Sentry's SDK, once set up, stays in the process.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH_DIR / "support"))


def child_cpu_us(url: str, traced: bool, tasks: int) -> float:
    """CPU microseconds per call of a child's per-task entry, one round."""
    import bench_tasks
    from in_process import in_process_child

    from rqueue.encoding.payload import encode
    from rqueue.store.header import header

    worker = in_process_child(url, 100, metrics=False)  # built after instrument(): joined
    job = bench_tasks.empty.make_job((), {}, None, task_id="0" * 32)
    if traced:
        job.headers = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    payload = encode(job, None)
    fixed = header(payload)
    worker.slot.hold(0, [fixed])
    start = time.process_time()
    for _ in range(tasks):
        worker.lifecycle.process(0, "default", payload, fixed, time.monotonic() + 100)
    spent = (time.process_time() - start) / tasks * 1e6
    worker.reservations.pending.plain.clear()
    return spent


def dispatch_us(tasks: int) -> float:
    """CPU microseconds per ``dispatch()`` in the dispatching process, one round."""
    import bench_tasks

    start = time.process_time()
    for _ in range(tasks):
        bench_tasks.empty.dispatch()
    return (time.process_time() - start) / tasks * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000, help="attempts per round")
    parser.add_argument("--dispatches", type=int, default=3_000, help="dispatches per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sentry", action="store_true", help="Sentry, not OpenTelemetry")
    parser.add_argument(
        "--traces-sample-rate", type=float, default=1.0, help="Sentry's (0: errors only)"
    )
    options = parser.parse_args()
    logging.getLogger("rqueue").setLevel(logging.WARNING)
    if options.sentry:
        turn, carried = sentry_switch(options.traces_sample_rate)
        order = [False] * options.rounds + [True] * options.rounds  # once on, on for good
    else:
        turn, carried = opentelemetry_switch()
        order = [False, True] * options.rounds
    child: dict[bool, list[float]] = {False: [], True: []}
    producer: dict[bool, list[float]] = {False: [], True: []}
    from rqueue.server import RedisServer
    from rqueue.settings.config import Config
    from rqueue.store.default import use
    from rqueue.store.queue import RedisQueue

    with RedisServer() as server:
        os.environ["REDIS_URL"] = server.url
        queue = RedisQueue(Config.resolve(redis_url=server.url))
        use(queue)
        for traced in order:
            turn(traced)
            child[traced].append(child_cpu_us(server.url, traced and carried, options.tasks))
            producer[traced].append(dispatch_us(options.dispatches))
            queue.client.flushall()
    for name, figures in (("child CPU per attempt", child), ("dispatch() CPU", producer)):
        off, on = min(figures[False]), min(figures[True])
        rounds = options.rounds
        print(f"{name}, best of {rounds}: off {off:.2f} us, on {on:.2f} us (+{on - off:.2f} us)")


Switch = Callable[[bool], None]


def opentelemetry_switch() -> tuple[Switch, bool]:
    """Turns OpenTelemetry on and off (a provider whose exporter drops each span); its
    attempts carry a ``traceparent``."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    from rqueue.contrib.opentelemetry import instrument, uninstrument

    class Dropped(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Dropped()))
    trace.set_tracer_provider(provider)
    return (lambda on: instrument() if on else uninstrument()), True


def sentry_switch(sample_rate: float) -> tuple[Switch, bool]:
    """Turns Sentry on (a transport that drops each envelope), once: its SDK stays."""
    import sentry_sdk
    from sentry_sdk.transport import Transport

    from rqueue.contrib.sentry import RqueueIntegration

    class Dropped(Transport):
        def capture_envelope(self, envelope: object) -> None:
            pass

    def turn(on: bool) -> None:
        if on and sentry_sdk.get_client().get_integration(RqueueIntegration) is None:
            sentry_sdk.init(
                dsn="https://public@sentry.example.invalid/1",
                transport=Dropped,
                traces_sample_rate=sample_rate,
                integrations=[RqueueIntegration()],
            )

    return turn, False


if __name__ == "__main__":
    main()
