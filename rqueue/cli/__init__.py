"""The `rqueue` command (see group.py); placeholder while the CLI is split."""

from rqueue.cli.group import main

__all__ = ["main"]
