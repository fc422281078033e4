"""Tasks of tests/unit/contrib/test_sentry.py, and the capturing transport: every
envelope item Sentry sends (events, transactions, check-ins) is written to a Redis
list the tests read, from the test process and from the worker's children alike."""

from __future__ import annotations

import json
import os

import redis
from sentry_sdk.envelope import Envelope
from sentry_sdk.transport import Transport

from rqueue import current_job, task

CAPTURED = "test:sentry:captured"


class RedisTransport(Transport):
    """Records each envelope item as ``{"type": ..., "payload": ...}`` JSON."""

    def capture_envelope(self, envelope: Envelope) -> None:
        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        try:
            for item in envelope.items:
                payload = item.payload.json
                if payload is not None:
                    client.rpush(CAPTURED, json.dumps({"type": item.type, "payload": payload}))
        finally:
            client.close()


@task(tries=1)
def succeeds(n: int) -> int:
    return n


@task(tries=2)
def fails(card: str, amount: int = 0) -> None:
    raise ValueError(f"declined {amount}")


@task(tries=1)
async def fails_async(card: str, amount: int = 0) -> None:
    raise ValueError(f"declined {amount}")


@task(tries=1)
def nightly() -> None:
    job = current_job()
    assert job is not None and job.meta.get("schedule") == "nightly report"
