"""``rqueue events [QUEUES...]``: follow the queues' task events as they happen.

A thin loop over :class:`rqueue.store.live_events.EventFollower` (``XREAD BLOCK`` on each
queue's live event stream, which workers started with ``--events`` write). One line
per event, each escaped by ``say`` (an entry's strings are anyone's: a task name or a
message may hold terminal escapes), or with ``--json`` one JSON object per line, whose
encoding escapes control characters. Ctrl-C (or SIGTERM) ends it with exit 0.
"""

from __future__ import annotations

import json
import signal
from types import FrameType

import click

from rqueue.cli.common import connection_options, queue_list, say
from rqueue.settings.config import Config
from rqueue.store.live_events import EventFollower, LiveEvent
from rqueue.store.queue import RedisQueue
from rqueue.timing import moment

_POLL = 1.0
"""Seconds each read blocks: Ctrl-C and new queues are noticed within it."""


@click.command()
@click.argument("queues", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per event.")
@click.option(
    "--from-start",
    is_flag=True,
    help="Print the events the streams hold already first (up to each one's cap), then follow.",
)
@connection_options
def events(config: Config, queues: tuple[str, ...], as_json: bool, from_start: bool) -> None:
    """Follow the task events of QUEUES (default: every known queue) as they happen.

    dispatched, started, progress, retried, succeeded, failed, cancelled: recorded only
    while a worker of the queue runs with --events (see docs/monitoring.md).
    """
    names = [name for given in queues for name in queue_list(given)]
    redis_queue = RedisQueue(config)
    if not names:
        names = redis_queue.known_queues() or ["default"]
    follower = EventFollower(redis_queue, names, from_start)
    signal.signal(signal.SIGTERM, _stop)
    try:
        while True:
            for event in follower.poll(_POLL):
                if as_json:
                    click.echo(json.dumps(event.as_dict()))
                else:
                    say(line(event))
    except KeyboardInterrupt:
        return


def line(event: LiveEvent) -> str:
    """``<time> <queue> <event> <id> <task> attempt <n>`` and what the event adds."""
    text = f"{moment(event.time)}  {event.queue}  {event.event:<10}  {event.id}  "
    text += f"{event.task or '-'}  attempt {event.attempt}"
    if event.fraction is not None:
        text += f"  {event.fraction:.0%}"
    if event.message:
        text += f"  {event.message}"
    if event.error:
        text += f"  {event.error}"
    return text


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
