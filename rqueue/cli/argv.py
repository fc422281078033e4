"""Hiding credentials in this process's command line, as the very first thing it does.

``ps`` shows every user of the machine the command line of every process, so a
``--redis-url redis://:password@host`` is readable by all from the moment the command
starts. This rewrites the command line (with setproctitle, which overwrites the
memory ``/proc/<pid>/cmdline`` reads) with every credential masked, before the
command modules are even imported. It cannot close the window between exec and this
point (the interpreter's start and ``import rqueue``): to keep a password out of the
command line altogether, use ``REDIS_URL`` or ``--redis-url-file`` (docs/security.md).
"""

from __future__ import annotations

import sys

from setproctitle import setproctitle

from rqueue.text import redact


def hide_credentials() -> None:
    """Rewrite the command line ``ps`` shows if, and only if, it holds a credential."""
    command = " ".join(sys.orig_argv)
    hidden = redact(command)
    if hidden != command:
        setproctitle(hidden)
