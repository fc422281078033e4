"""The documentation's runnable examples, run as a reader would run them.

A fenced block opened with ```` ```python runnable ```` in one of the DOCUMENTS is
saved as a script (named by its first line if that is ``# name.py``), run with
``python`` against the test Redis, and then a real worker runs whatever it
dispatched: every task it made ready must succeed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import cli

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

ROOT = Path(__file__).parents[2]
DOCUMENTS = (
    "README.md",
    "docs/tasks.md",
    "docs/worker.md",
    "docs/schedules.md",
    "docs/workflows.md",
    "docs/testing.md",
    "docs/middleware.md",
)
_BLOCK = re.compile(r"^```python runnable\n(.*?)^```", re.MULTILINE | re.DOTALL)


def runnable_blocks() -> list[tuple[str, str]]:
    blocks = []
    for document in DOCUMENTS:
        text = (ROOT / document).read_text()
        for number, match in enumerate(_BLOCK.finditer(text), 1):
            blocks.append((f"{document}#{number}", match.group(1)))
    return blocks


BLOCKS = runnable_blocks()


def test_the_documents_have_runnable_examples() -> None:
    found = {name.split("#")[0] for name, _ in BLOCKS}
    assert found == set(DOCUMENTS)


@pytest.mark.parametrize(("name", "code"), BLOCKS, ids=[name for name, _ in BLOCKS])
def test_runnable_example(
    name: str, code: str, config: Config, queue: RedisQueue, tmp_path: Path
) -> None:
    first_line = code.splitlines()[0]
    filename = first_line[2:].strip() if re.fullmatch(r"# \w+\.py", first_line) else "example.py"
    (tmp_path / filename).write_text(code)

    script = subprocess.run(
        [sys.executable, filename],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "", "REDIS_URL": config.redis_url, "PYTHONPATH": str(ROOT)},
    )
    assert script.returncode == 0, f"{name} failed:\n{script.stdout}{script.stderr}"

    names = queue.known_queues()
    ready = sum(size.ready for size in queue.sizes(names))
    if not ready:
        return
    worker = cli(config, "work", ",".join(names), "--stop-when-empty", cwd=tmp_path, timeout=60)
    assert worker.returncode == 0, worker.stderr
    assert worker.stderr.count(": succeeded (") == ready, worker.stderr
    sizes = queue.sizes(names)
    assert sum(s.ready + s.reserved + s.failed for s in sizes) == 0, sizes
