"""Integrations with web frameworks and tracing tools: what a Django, FastAPI or Flask
app, OpenTelemetry or Sentry needs beyond rqueue's public API.

- ``django``: preloaded by a worker (``rqueue work -A rqueue.contrib.django``), it
  sets Django up and imports every installed app's ``tasks`` module before the
  children fork; ``dispatch_on_commit`` and ``after_commit`` queue a call once the
  transaction commits; ``staff_only`` lets only Django staff users through to an ASGI
  app (the dashboard).
- ``opentelemetry``: ``instrument()`` traces every send and, in a worker (``rqueue
  work --otel``), every attempt, the trace carried in the payload's ``headers``.
- ``sentry``: ``RqueueIntegration`` for ``sentry_sdk.init``: a task's final failure
  as one event, spans for sends and attempts, cron check-ins for schedules.

Both hang off the two tracing surfaces below them: ``tasks/observers.py`` (every
send) and a worker participant's ``call_scope`` (``worker/participants.join``).

FastAPI and Flask need nothing of their own (``dispatch_async``/``result_async`` and
``rqueue.web.create_app`` cover them): see docs/integrations.md and ``examples/``.

This folder sits at the top, beside the CLI and the dashboard: it may import rqueue's
public API, the tracing surfaces, and the tools it integrates; nothing below it imports
it (only ``rqueue work --otel`` does, when given), so rqueue never needs a web
framework or a tracing SDK installed. Each module imports its tool at its top:
importing ``rqueue.contrib.django`` without Django installed is an ImportError, as it
should be.
"""
