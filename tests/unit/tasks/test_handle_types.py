"""A task's handle is typed from the task: ``result()`` of a ``Task[P, R]``'s dispatch
is ``R`` (an ``async def`` task's, what its coroutine returns), checked by running
mypy --strict on a user's module (issue #26, item 14)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

USER_MODULE = """
from typing_extensions import assert_type

from rqueue import task
from rqueue.tasks.handles import TaskHandle


@task
def add(a: int, b: int) -> int:
    return a + b


@task(queue="emails", keep_result=60)
async def fetch(url: str) -> bytes:
    return b""


async def main() -> None:
    assert_type(add.dispatch(1, 2), TaskHandle[int])
    assert_type(add.dispatch(1, 2).result(timeout=1), int)
    assert_type(add.later(5, 1, 2).result(), int)
    assert_type(add.using(queue="slow").dispatch(1, 2).result(), int)
    assert_type(fetch.dispatch("u").result(), bytes)
    assert_type(await fetch.dispatch_async("u"), TaskHandle[bytes])
    assert_type(await add.later_async(1, 1, 2), TaskHandle[int])
    assert_type(await fetch.dispatch("u").result_async(), bytes)
    assert_type(await fetch("u"), bytes)
    add.dispatch("1", 2)  # the one error expected
"""


def test_a_handles_result_has_its_tasks_return_type(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    module = tmp_path / "user_tasks.py"
    module.write_text(textwrap.dedent(USER_MODULE))
    out, err, _ = api.run(
        ["--strict", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"), str(module)]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1, out + err
    assert 'Argument 1 to "dispatch" of "Task" has incompatible type "str"' in errors[0]
