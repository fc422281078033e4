"""Each pool's status in Redis, as ``rqueue workers`` and the dashboard show it."""

from __future__ import annotations

import time

import httpx
import msgpack
import pytest
from browser import served_dashboard
from support import cli

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.worker.pools.config import Pool
from rqueue.worker.pools.plan import parents
from rqueue.worker.pools.scaling import QueueLoad, decide
from rqueue.worker.pools.status import leave, list_pools, write

pytestmark = pytest.mark.topology  # the pools keys on Cluster and Sentinel as well

HOSTILE = "<script>alert('x')</script>\x1b[2J\u202e"


def test_a_decision_is_read_back_with_its_inputs_and_leaves_with_its_supervisor(
    queue: RedisQueue, config: Config
) -> None:
    pool = Pool("mail", ("emails", "sms"), 2, 6)
    planned = parents(pool)
    loads = {
        "emails": QueueLoad("emails", 120, 3, 4.25, 0.5),
        "sms": QueueLoad("sms", 0, 0, None, None),
    }
    write(queue, pool, planned, decide(pool, planned, [1, 1], loads))
    (status,) = list_pools(queue)
    assert (status.name, status.balance, status.processes) == ("mail", "auto", 3)
    assert status.parents == (("emails", 2, 5), ("sms", 1, 1))
    assert status.why() == (
        "emails: 120 ready, 3 reserved, oldest 4.2 s, runtime 500.0 ms; "
        "sms: 0 ready, 0 reserved, oldest -, runtime ?"
    )
    shown = cli(config, "workers").stdout
    assert "emails: 2 (5); sms: 1 (1)" in shown and "3 of 2-6" in shown, shown
    leave(queue, (pool,))
    assert list_pools(queue) == []


def test_hostile_or_broken_entries_are_shown_inert_or_left_out(queue: RedisQueue) -> None:
    keys = queue.global_keys
    entry = {
        "host": HOSTILE,
        "pid": 1,
        "name": HOSTILE,
        "balance": "auto",
        "min": 1,
        "max": 2,
        "parents": [[HOSTILE, 1, 2]],
        "inputs": [[HOSTILE, 5, 0, 1.5, None]],
        "decided": time.time(),
    }
    queue.client.set(keys.pool("h/ok"), msgpack.packb(entry))
    queue.client.set(
        keys.pool("h/bad"), msgpack.packb({**entry, "inputs": [["q", "5", 0, None, None]]})
    )
    queue.client.set(keys.pool("h/junk"), b"\xc1not msgpack")
    later = round(time.time() * 1000) + 60_000
    queue.client.zadd(keys.pools, {"h/ok": later, "h/bad": later, "h/junk": later})
    assert [p.host for p in list_pools(queue)] == [HOSTILE]
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as client:
        page = client.get("/workers")
    assert page.status_code == 200
    assert "<script>alert" not in page.text and "\x1b" not in page.text
    assert "&lt;script&gt;alert" in page.text
