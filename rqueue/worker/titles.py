"""A worker child's process title, as ``ps`` shows it: set only when it changes.

Setting a title is a system call (``prctl``), and a child in process mode sets one as
each task starts: beside a task that waits for one Redis reply it cost about 1.5 µs of
the task's 55 (``docs/benchmarks.md``, "The process title"). So the title names the
running task by its name, which a run of one task's calls does not change, and not by
its id, which every call does; ``rqueue workers`` names each child's task and its id
(from the scoreboard, with no Redis call of the child's).
"""

from __future__ import annotations

from setproctitle import setproctitle


class ProcessTitle:
    """This process's title: a fixed stem, then what the process does now."""

    def __init__(self, stem: str) -> None:
        self.stem = stem
        """Says which process this is (``rqueue: worker 1/4 default``); escaped already."""
        self._state = ""

    def show(self, state: str) -> None:
        """Title the process ``<stem>: <state>``, unless that is its title already.
        ``state`` must be safe to show: names rqueue checked, numbers, its own words."""
        if state != self._state:
            self._state = state
            setproctitle(f"{self.stem}: {state}")
