"""Scale (#16): how each cost grows with the work, one part per module.

    python benchmarks/scale/scale.py memory     # bytes per task in each state, beside the peers'
    python benchmarks/scale/scale.py depth      # throughput and latency with 10..10^6 tasks queued
    python benchmarks/scale/scale.py due        # 10^6 delayed tasks due at once
    python benchmarks/scale/scale.py queues     # one worker serving up to 10^4 queues
    python benchmarks/scale/scale.py failed     # failed/size with 10^6 records, 10^4 queues
    python benchmarks/scale/scale.py schedules  # the parent's tick with 10^5 schedules
    python benchmarks/scale/scale.py clear      # rqueue clear of 5 x 10^5 pending tasks
    python benchmarks/scale/scale.py all        # each of the above with its defaults, in turn

Arguments after the part's name go to that part (``scale.py depth --max-depth 1e7``);
each part is also a script of its own (``scale_memory.py`` and so on). Figures and the
commands that produced them: docs/benchmarks.md, "Scale (#16)".
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import scale_clear
import scale_depth
import scale_due
import scale_failed
import scale_memory
import scale_schedules


def _due(argv: Sequence[str]) -> object:
    return scale_due.main(["due", *argv])


def _queues(argv: Sequence[str]) -> object:
    return scale_due.main(["queues", *argv])


PARTS: dict[str, Callable[[list[str]], object]] = {
    "memory": scale_memory.main,
    "depth": scale_depth.main,
    "due": _due,
    "queues": _queues,
    "failed": scale_failed.main,
    "schedules": scale_schedules.main,
    "clear": scale_clear.main,
}


def main(argv: Sequence[str]) -> None:
    if not argv or argv[0] not in (*PARTS, "all"):
        sys.exit(f"usage: scale.py {{{','.join(PARTS)},all}} [ARGS...]\n\n{__doc__}")
    name, rest = argv[0], list(argv[1:])
    for part in PARTS if name == "all" else (name,):
        print(f"\n# scale.py {part}\n", flush=True)
        PARTS[part](rest if name != "all" else [])


if __name__ == "__main__":
    main(sys.argv[1:])
