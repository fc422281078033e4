"""``rqueue demo``: the README's end-to-end run (the runner is :mod:`.demo_runner`)."""

from __future__ import annotations

import sys

import click

from rqueue.settings.config import Config


@click.command()
@click.option(
    "--tasks",
    "count",
    type=click.IntRange(1, 100_000),
    default=200,
    show_default=True,
    help="How many quick tasks to dispatch besides the showcase ones.",
)
@click.option("--concurrency", type=click.IntRange(min=1), default=2, show_default=True)
def demo(count: int, concurrency: int) -> None:
    """Run the end-to-end demo (on an embedded Redis unless REDIS_URL is set)."""
    from rqueue.cli.demo_runner import run_demo  # imported here: `rqueue --help` stays fast

    try:  # the RQUEUE_* settings the demo and its worker pool will run with
        Config.resolve()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(run_demo(count, concurrency))
