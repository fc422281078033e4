"""What a worker process asks of the operating system: to die with its parent, its
memory, and the command line it re-executes on a restart.

Kept apart from the worker loop because these are platform details: Linux's
``prctl``, the unit of ``ru_maxrss`` and what ``ps`` shows are not the loop's business.
"""

from __future__ import annotations

import contextlib
import resource
import sys


def parent_death_signal(signum: int) -> None:
    """Ask Linux to send ``signum`` to this process when its parent dies.

    ``prctl(PR_SET_PDEATHSIG)``; elsewhere (or if it fails) nothing happens and the
    throttled ``getppid()`` check in the loop remains the fallback.
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signum), 0, 0, 0)  # PR_SET_PDEATHSIG


def memory_exceeded(limit_mb: int) -> bool:
    """Peak RSS of this process above ``limit_mb`` (Linux reports ru_maxrss in KiB)."""
    return bool(limit_mb) and resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > limit_mb * 1024


def without_redis_url(args: list[str]) -> list[str]:
    """``args`` without ``--redis-url``: a reload passes the URL in its environment, which
    only its own user can read, never again in a command line that ``ps`` shows to all."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--redis-url":
            skip = True
        elif not arg.startswith("--redis-url="):
            kept.append(arg)
    return kept
