"""``rqueue supervise``: run every worker pool of the pools file, scaled by load.

The file and its checks are :mod:`rqueue.worker.pools.config`; the process that runs the
pools is :mod:`rqueue.worker.pools.supervisor`. One per host: several hosts each run theirs
against the same Redis, with no leader (docs/deployment.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from rqueue.cli.common import (
    connection_options,
    declared_queues,
    log_options,
    preload_module,
    say,
    unknown_queues,
)
from rqueue.settings.config import Config, ConfigError, env_flag
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import REDIS_ERRORS
from rqueue.text import shown
from rqueue.worker.pools import config as pools_config
from rqueue.worker.pools.plan import describe


@click.command()
@click.option(
    "--env",
    "environment",
    envvar="RQUEUE_ENV",
    default=None,
    help="Apply this environment's overrides ([tool.rqueue.environments.ENV.pools...]) "
    "[env: RQUEUE_ENV].",
)
@click.option(
    "--config",
    "path",
    type=click.Path(dir_okay=False),
    default=None,
    help="The pools file [default: ./rqueue.toml, else ./pyproject.toml's [tool.rqueue]].",
)
@click.option("--check", is_flag=True, help="Check the file and print the plan; start nothing.")
@log_options
@connection_options
def supervise(
    config: Config,
    environment: str | None,
    path: str | None,
    check: bool,
    log_level: str,
    log_format: str,
) -> None:
    """Run every pool of the pools file, each scaled between its min and max processes
    by its queues' load; SIGTERM stops them all warmly. See docs/deployment.md."""
    if env_flag("RQUEUE_SYNC") and not check:  # each pool's `rqueue work` would refuse
        raise click.UsageError("RQUEUE_SYNC is on: workers refuse to run; unset it")
    try:
        found = pools_config.load(pools_config.find(path, Path()), environment)
    except ConfigError as exc:
        raise click.UsageError(shown(exc)) from None
    if os.getcwd() not in sys.path:  # the pools' app modules, as `rqueue work` finds them
        sys.path.insert(0, os.getcwd())
    if check:
        _check_queues(found, config)
        env = f" (environment {found.environment})" if found.environment else ""
        say(f"{found.path}{env}: {len(found.pools)} pools")
        for pool in found.pools:
            for line in describe(pool):
                say(line)
        return
    from rqueue.worker import logs
    from rqueue.worker.pools.supervisor import PoolSupervisor

    logs.configure(log_level, log_format)
    sys.exit(PoolSupervisor(found.pools, config).run())


def _check_queues(found: pools_config.PoolsFile, config: Config) -> None:
    """A warning (on standard error) naming the pool's key for each queue nothing names (a typo:
    ``emial``): no task of the pools' ``app`` modules (imported here: one that does not
    import is a usage error) is declared on it, producers and workers never named it
    and no data in Redis does. ``rqueue work``'s rule, and a warning as there: a pool
    may be set up before the first dispatch to a new queue. Not checked, with a note,
    while Redis cannot be reached."""
    for pool in found.pools:
        for module in pool.work.get("app", ()):
            preload_module(module)
    queue = RedisQueue(config)
    names = tuple(dict.fromkeys(name for pool in found.pools for name in pool.queues))
    try:
        unknown, known = unknown_queues(queue, names, declared_queues())
    except REDIS_ERRORS as exc:
        say(shown(f"queues not checked: Redis at {config.redacted_url()} unreachable ({exc})"))
        return
    finally:
        queue.client.close()
    for pool in found.pools:
        for name in pool.queues:
            if name in unknown:
                click.echo(
                    shown(
                        f"warning: {found.path}: pools.{pool.name}.queues: unknown queue "
                        f"{name!r}: no task of the pools' app modules is declared on it, "
                        "nothing was ever pushed to it and it is empty (a typo?); known "
                        f"queues: {', '.join(known) or 'none'}"
                    ),
                    err=True,
                )
