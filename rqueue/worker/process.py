"""What a worker child asks of the operating system: to die with its parent, and its memory.

Kept apart from the worker loop because both are platform details: Linux's
``prctl`` and the unit of ``ru_maxrss`` are not the loop's business.
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
