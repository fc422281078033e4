"""Preloaded by a worker (``-A sentry_app``) in tests/unit/contrib/test_sentry.py, as an
app's worker module would be: Sentry is set up in the parent, before it forks. The
options come from the environment the test gives the worker."""

import os

import sentry_sdk
from sentry_tasks import RedisTransport

from rqueue.contrib.sentry import RqueueIntegration

sentry_sdk.init(
    dsn="https://public@sentry.example.com/1",
    transport=RedisTransport,
    traces_sample_rate=1.0,
    send_default_pii=os.environ.get("TEST_SENTRY_PII") == "1",
    integrations=[
        RqueueIntegration(
            capture_retries=os.environ.get("TEST_SENTRY_RETRIES") == "1",
            monitor_schedules=True,
        )
    ],
)
