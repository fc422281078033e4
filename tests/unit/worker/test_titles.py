"""A worker child's process title is set only when it changes (``worker/titles.py``):
setting one is a system call, and a child's title names the task it runs by name, so
one task's calls in a row set it once. Read back from this process's own title."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from setproctitle import getproctitle, setproctitle

from rqueue.worker.titles import ProcessTitle


@pytest.fixture(autouse=True)
def own_title_restored() -> Iterator[None]:
    before = getproctitle()
    yield
    setproctitle(before)


def test_a_state_is_shown_after_the_stem() -> None:
    title = ProcessTitle("rqueue: worker 1/2 default")
    title.show("running apptasks:record")
    assert getproctitle() == "rqueue: worker 1/2 default: running apptasks:record"
    title.show("waiting")
    assert getproctitle() == "rqueue: worker 1/2 default: waiting"


def test_the_same_state_again_sets_nothing() -> None:
    title = ProcessTitle("rqueue: worker 1/2 default")
    title.show("running apptasks:record")
    setproctitle("changed by someone else")
    title.show("running apptasks:record")
    assert getproctitle() == "changed by someone else"
    title.show("waiting")
    title.show("running apptasks:record")
    assert getproctitle() == "rqueue: worker 1/2 default: running apptasks:record"
