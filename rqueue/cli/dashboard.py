"""``rqueue dashboard``: serve the web dashboard (:mod:`rqueue.web`) with uvicorn.

It binds to 127.0.0.1 unless told otherwise, and refuses any other address unless
``RQUEUE_DASHBOARD_TOKEN`` is set: a dashboard that can retry, forget and pause,
open to a network without a login, is one nobody should start by accident. The
token is read from the environment only, never an option: a command line is
visible to every user in ``ps``. Without a token it answers only loopback Host
headers and the names given with ``--allowed-host`` (:mod:`rqueue.web.hosts`: DNS
rebinding).
"""

from __future__ import annotations

import os

import click

from rqueue.cli.common import connection_options, die, say
from rqueue.metrics.wait_limits import WaitLimits
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

TOKEN_ENV = "RQUEUE_DASHBOARD_TOKEN"
SHORTEST_TOKEN = 16
"""Characters a token needs at least: guessing it must be out of reach."""


def _token() -> str | None:
    """The token from the environment; one too short is a usage error that names it."""
    value = os.environ.get(TOKEN_ENV, "").strip()
    if value and len(value) < SHORTEST_TOKEN:
        raise click.UsageError(
            f"{TOKEN_ENV} is too short: use at least {SHORTEST_TOKEN} characters"
        )
    return value or None


@click.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help=f"Address to bind; other than loopback only with {TOKEN_ENV} set.",
)
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
@click.option("--read-only", is_flag=True, help="Show everything, change nothing.")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Without a token, a Host name to answer besides loopback (repeatable; "
    ".example.com: it and its subdomains), e.g. the name of a proxy in front.",
)
@click.option(
    "--wait",
    "waits",
    multiple=True,
    metavar="[QUEUE=]SECONDS",
    help="Flag QUEUE when its oldest ready task has waited longer than this (repeatable); "
    "without QUEUE=, for every queue not named.",
)
@connection_options
def dashboard(
    config: Config,
    host: str,
    port: int,
    read_only: bool,
    allowed_hosts: tuple[str, ...],
    waits: tuple[str, ...],
) -> None:
    """Serve the web dashboard (queues, workers, failed tasks, schedules, batches).

    With RQUEUE_DASHBOARD_TOKEN set, every request needs the token: typed into the
    login form, or sent as "Authorization: Bearer TOKEN" (e.g. by a Prometheus
    scraper of /metrics). Without it, only requests for a loopback Host
    (127.0.0.1, ::1, localhost) or an --allowed-host are answered.
    """
    token = _token()
    try:
        limits = WaitLimits.parse(waits)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--wait") from None
    try:  # the web extra; only this command needs it
        import uvicorn

        from rqueue.web import create_app
        from rqueue.web.hosts import allowed_host, is_loopback
    except ImportError as exc:
        die(f"the dashboard needs the web extra ({exc}): pip install 'rqueue[web]'")
    if token is None and not is_loopback(host):
        raise click.BadParameter(
            f"{host} is not a loopback address: set {TOKEN_ENV} to require a login "
            "before serving the dashboard to a network",
            param_hint="--host",
        )
    try:
        allowed = [allowed_host(name) for name in allowed_hosts]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--allowed-host") from None

    queue = RedisQueue(config)
    queue.ping()  # an unreachable Redis is one clear line now, not an error per page
    app = create_app(queue, token=token, read_only=read_only, allowed_hosts=allowed, waits=limits)
    shown_host = f"[{host}]" if ":" in host else host
    mode = " (read-only)" if read_only else ""
    say(f"Dashboard{mode} at http://{shown_host}:{port}/ for {config.redacted_url()}")
    uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False)
