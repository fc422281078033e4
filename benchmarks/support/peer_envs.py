"""The peers' virtualenvs: which packages each peer queue needs, where it lives, installing it.

compare.py runs each peer there (``python -m peers.<name>``), and scale/scale_memory.py
has each enqueue there: every peer is installed from PyPI into its own virtualenv under
``benchmarks/.venvs/`` (gitignored), so rqueue never depends on them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from common import BENCH_DIR, SUPPORT_DIR

VENVS = BENCH_DIR / ".venvs"


@dataclass(frozen=True)
class Peer:
    name: str
    packages: tuple[str, ...]
    variants: tuple[str, ...] = ("default",)


PEERS = (
    Peer("rq", ("rq", "hiredis"), ("fork", "simple")),
    # gevent: Celery's pool for I/O-bound tasks (``--workload io``).
    Peer("celery", ("celery[redis]", "hiredis", "gevent")),
    Peer("dramatiq", ("dramatiq[redis]", "hiredis")),
    Peer("arq", ("arq", "hiredis")),
    Peer("huey", ("huey", "redis", "hiredis")),
    # saq imports typing_extensions without declaring it (0.26).
    Peer("saq", ("saq[redis,hiredis]", "typing_extensions")),
)


def python_of(peer: Peer) -> Path:
    return VENVS / peer.name / "bin" / "python"


def install(peer: Peer) -> None:
    """Create the peer's virtualenv and install it from PyPI, unless already done."""
    wanted = "\n".join((*peer.packages, "psutil"))
    marker = VENVS / peer.name / "installed.txt"
    if python_of(peer).exists() and marker.exists() and marker.read_text() == wanted:
        return
    print(f"installing {peer.name} into {VENVS / peer.name} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENVS / peer.name)], check=True)
    subprocess.run(
        [
            str(python_of(peer)),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *peer.packages,
            "psutil",
        ],
        check=True,
    )
    marker.write_text(wanted)


def peer_pythonpath() -> str:
    """PYTHONPATH of a peer's runner: benchmarks/support/ first (where ``peers`` lives),
    then any PYTHONPATH given (say, another rqueue source tree)."""
    return os.pathsep.join(p for p in (str(SUPPORT_DIR), os.environ.get("PYTHONPATH")) if p)
