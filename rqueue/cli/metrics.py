"""``rqueue metrics``: serve the Prometheus metrics over HTTP until stopped.

A small standalone exporter for hosts without the dashboard: prometheus_client's own
HTTP server, serving :func:`rqueue.metrics.prometheus.registry_for`, which reads
Redis on each scrape. Binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click

from rqueue.cli.common import connection_options, die, queue_list, say
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue


@click.command()
@click.option(
    "--port", type=click.IntRange(1, 65535), default=9100, show_default=True, help="Port."
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--queues",
    default=None,
    metavar="QUEUES",
    help="Only these queues (comma-separated); default: every known queue, read per scrape.",
)
@connection_options
def metrics(config: Config, port: int, host: str, queues: str | None) -> None:
    """Serve Prometheus metrics at http://HOST:PORT/metrics until Ctrl-C or SIGTERM."""
    try:  # the metrics extra: its absence is one line naming what to install
        from rqueue.metrics.prometheus import registry_for
    except ImportError as exc:
        die(str(exc))
    from prometheus_client import start_http_server

    names = None if queues is None else list(queue_list(queues))
    queue = RedisQueue(config)
    queue.ping()
    try:
        server, thread = start_http_server(port, host, registry_for(queue, names))
    except OSError as exc:
        die(f"cannot listen on {host}:{port}: {exc}")
    stopped = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    say(f"Serving Prometheus metrics on http://{host}:{port}/metrics (Ctrl-C to stop)")
    while not stopped.wait(1.0):
        pass
    server.shutdown()
    thread.join(5)
