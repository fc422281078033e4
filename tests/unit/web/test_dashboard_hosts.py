"""The dashboard's Host rule (DNS rebinding): without a token it answers only loopback
Hosts and the names it was given; with a token, any Host (every request logs in).

The real app served by uvicorn on a loopback port, driven with httpx (the command's
``--allowed-host`` is in test_dashboard_cli.py): a rebinding page reaches the same
socket, with its own name in the Host header, which is all that tells it apart.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import httpx
import pytest
from browser import served_dashboard
from starlette.routing import Mount, Route

from rqueue.store.queue import RedisQueue
from rqueue.web import create_app

TOKEN = "a-token-long-enough-for-the-hosts"
REBOUND = ("evil.example", "evil.example:8080", "127.0.0.1.evil.example", "[2001:db8::1]:80")
LOOPBACK = ("127.0.0.1", "127.0.0.1:8080", "127.9.9.9:1", "localhost", "LOCALHOST:80", "[::1]:8080")
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH")


def every_request(queue: RedisQueue) -> Iterator[tuple[str, str]]:
    """(method, path) for every route of the app and every method, parameters filled
    in; the static files and ``/metrics`` among them."""
    for route in create_app(queue).routes:
        if isinstance(route, Mount):
            path = f"{route.path}/dashboard.css"
        else:
            assert isinstance(route, Route)
            path = route.path.replace("{batch_id}", "b1").replace("{task_id}", "t1")
        for method in METHODS:
            yield method, path


def test_without_a_token_a_rebound_host_is_refused_on_every_route_and_method(
    queue: RedisQueue,
) -> None:
    requests = list(every_request(queue))
    paths = {path for _, path in requests}
    assert {"/metrics", "/static/dashboard.css", "/failed/retry", "/login"} <= paths
    with served_dashboard(queue) as served, httpx.Client(base_url=served.url) as client:
        # Each request with the next rebound Host: every form of one meets every route.
        for (method, path), host in zip(requests, itertools.cycle(REBOUND)):
            refused = client.request(method, path, headers={"Host": host})
            assert refused.status_code == 400, (method, path, host)
            assert "set-cookie" not in refused.headers, (method, path)  # no session, no CSRF
        assert "--allowed-host" in client.get("/", headers={"Host": "evil.example"}).text
        assert queue.paused(["default"]) == set()
        posted = client.post("/queues/pause", data={"queue": "x"}, headers={"Host": "evil.x"})
        assert posted.status_code == 400 and queue.paused(["x"]) == set()
        for host in LOOPBACK:
            for path in ("/", "/queues", "/metrics", "/static/dashboard.css"):
                assert client.get(path, headers={"Host": host}).status_code == 200, (host, path)


def test_allowed_hosts_are_answered_and_only_them(queue: RedisQueue) -> None:
    allowed = ["dash.example", ".corp.example", "[2001:DB8::7]", "192.0.2.7"]
    with (
        served_dashboard(queue, allowed_hosts=allowed) as served,
        httpx.Client(base_url=served.url) as client,
    ):
        for host in (
            "dash.example",
            "DASH.example:8443",
            "dash.example.",
            "corp.example",
            "ops.corp.example:80",
            "[2001:db8::7]:80",
            "192.0.2.7:8080",
            "localhost",
        ):
            assert client.get("/queues", headers={"Host": host}).status_code == 200, host
        for host in ("evil.example", "dash.example.evil", "xcorp.example", "192.0.2.8"):
            assert client.get("/queues", headers={"Host": host}).status_code == 400, host


def test_with_a_token_any_host_is_answered_once_logged_in(queue: RedisQueue) -> None:
    with served_dashboard(queue, token=TOKEN) as served, httpx.Client(base_url=served.url) as c:
        bearer = {"Authorization": f"Bearer {TOKEN}", "Host": "dash.anywhere.example"}
        assert c.get("/queues", headers=bearer).status_code == 200
        assert c.get("/metrics", headers=bearer).status_code == 200
        assert c.get("/queues", headers={"Host": "dash.anywhere.example"}).status_code == 401


def test_create_app_refuses_an_allowed_host_that_is_not_a_host_name(queue: RedisQueue) -> None:
    for wrong in ("https://dash.example", "dash.example:8080", "dash.example/x", "", "a b"):
        with pytest.raises(ValueError, match="allowed_hosts"):
            create_app(queue, allowed_hosts=[wrong])
    with pytest.raises(TypeError, match="not one string"):
        create_app(queue, allowed_hosts="dash.example")
