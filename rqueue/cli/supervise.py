"""``rqueue supervise``: run every worker pool of the pools file, scaled by load.

The file and its checks are :mod:`rqueue.pools.config`; the process that runs the
pools is :mod:`rqueue.pools.supervisor`. One per host: several hosts each run theirs
against the same Redis, with no leader (docs/deployment.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from rqueue.cli.common import connection_options, log_options, say
from rqueue.pools import config as pools_config
from rqueue.pools.plan import describe
from rqueue.settings.config import Config, ConfigError, env_flag
from rqueue.text import shown


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
    if check:
        env = f" (environment {found.environment})" if found.environment else ""
        say(f"{found.path}{env}: {len(found.pools)} pools")
        for pool in found.pools:
            for line in describe(pool):
                say(line)
        return
    from rqueue.pools.supervisor import PoolSupervisor
    from rqueue.worker import logs

    logs.configure(log_level, log_format)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    sys.exit(PoolSupervisor(found.pools, config).run())
