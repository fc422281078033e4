"""``rqueue server``: an embedded redis-server for development, over :mod:`rqueue.server`."""

from __future__ import annotations

import signal
import sys

import click

from rqueue.cli.common import say


@click.command()
@click.option("--port", type=click.IntRange(1, 65535), default=6379, show_default=True)
@click.option(
    "--dir",
    "data_dir",
    type=click.Path(file_okay=False),
    default=".rqueue/redis",
    show_default=True,
    help="Where Redis keeps its append-only file.",
)
def server(port: int, data_dir: str) -> None:
    """Run an embedded redis-server for development (Ctrl-C stops it)."""
    from rqueue.server import RedisServer, RedisServerError  # only this command needs it

    instance = RedisServer(port, data_dir, persistent=True)

    def stop_on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # `kill` must not orphan the redis-server (it runs in a session of its own):
    # SIGTERM stops it like Ctrl-C does, from before it starts, so that a SIGTERM sent
    # as soon as "ready" is printed cannot find the default action still in place.
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        try:
            instance.start()
        except RedisServerError as exc:  # with redis-server's own lines, kept as lines
            say(f"rqueue: {exc}", multiline=True, err=True)
            sys.exit(1)
        say(f"Redis ready at {instance.url} (data in {data_dir}); Ctrl-C to stop.")
        assert instance.process is not None
        instance.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        instance.stop()
