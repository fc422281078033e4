"""Tasks of tests/unit/contrib/test_opentelemetry.py. Importing this module sets the
OpenTelemetry SDK up with an exporter that writes each finished span, as the SDK's
JSON, to a Redis list the tests read: the test process's spans (the sends) and a
worker child's (the attempts, and what they send) land in the same list."""

from __future__ import annotations

import json
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from rqueue import Batch, current_job, task
from rqueue.middleware import Release, Skip
from rqueue.store.default import default_queue

SPANS = "test:otel:spans"
SEEN = "test:otel:seen"
"""``name trace_id span_id``: the span current in a task while it ran."""


class RedisExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        client = default_queue().client
        for span in spans:
            client.rpush(SPANS, span.to_json(indent=None))
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(RedisExporter()))
trace.set_tracer_provider(provider)


def _seen(name: str) -> None:
    context = trace.get_current_span().get_span_context()
    default_queue().client.rpush(
        SEEN, json.dumps([name, f"0x{context.trace_id:032x}", f"0x{context.span_id:016x}"])
    )


@task(tries=1)
def traced(n: int) -> int:
    _seen(f"traced:{n}")
    return n


@task(tries=1)
async def traced_async(n: int) -> int:
    _seen(f"traced_async:{n}")
    return n


@task(tries=1)
def dispatching(n: int) -> None:
    """Dispatches a call of its own while it runs: a child of its process span."""
    _seen(f"dispatching:{n}")
    traced.dispatch(n + 1)


@task(tries=1)
def broken(n: int) -> None:
    raise ValueError(f"broken {n}")


@task(tries=1)
def finished(batch: Batch) -> None:
    _seen("finished")


@task(tries=3)
def releases_once() -> None:
    """Puts itself back on its first attempt (a ``Release`` of its own), then runs."""
    job = current_job()
    assert job is not None
    if job.attempts == 1:
        raise Release(0)


@task(tries=1, middleware=[Skip(when=False)])
async def traced_async_stacked(n: int) -> int:
    """Its middleware run in a thread, whose ``call_next`` runs it on the loop."""
    _seen(f"traced_async_stacked:{n}")
    return n
