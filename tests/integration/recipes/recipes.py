"""Helpers for the framework recipe tests: a real web server in a subprocess, and the
check that docs/integrations.md quotes the examples as they are.

A server binds port 0 (the kernel picks a free one) and the port is read from the line
it logs when it listens, so no port is fixed and none can be taken in between. It runs
in its own session and is stopped by its process group's id.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
from support import Workers, ready, wait_for

from rqueue.store.queue import RedisQueue

ROOT = Path(__file__).parents[3]
EXAMPLES = ROOT / "examples"
INTEGRATIONS = ROOT / "docs" / "integrations.md"

_LISTENING = re.compile(r"(http://127\.0\.0\.1:\d+)")
"""uvicorn logs ``Uvicorn running on http://127.0.0.1:PORT``, Flask
`` * Running on http://127.0.0.1:PORT``: each with the port it was given."""


@contextlib.contextmanager
def serving(command: list[str], cwd: Path, env: dict[str, str]) -> Iterator[str]:
    """Run a web server (``command`` binds 127.0.0.1 port 0) and yield its base URL."""
    server = subprocess.Popen(
        command,
        cwd=cwd,
        env={**os.environ, **env},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    lines: list[str] = []

    def read() -> None:
        assert server.stdout is not None
        for line in server.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        base = wait_for(
            lambda: _listening(lines) or (server.poll() is not None and "exited"),
            timeout=30,
            message="the server to listen",
        )
        assert base != "exited", "".join(lines)
        yield base
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
        reader.join(10)


def _listening(lines: list[str]) -> str | None:
    for line in list(lines):
        found = _LISTENING.search(line)
        if found:
            return found.group(1)
    return None


def quoted_excerpts(section: str) -> list[tuple[Path, str]]:
    """The code blocks of a section of docs/integrations.md, each with the example file
    its first line names (``# examples/fastapi_app/app.py``); a block may leave parts
    of the file out, a line ``...`` standing for each."""
    text = INTEGRATIONS.read_text()
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    blocks = re.findall(r"^```python\n(.*?)^```", text[start:end], re.MULTILINE | re.DOTALL)
    found = []
    for block in blocks:
        first, _, code = block.partition("\n")
        if first.startswith("# examples/"):
            found.append((ROOT / first[2:].strip(), code))
    return found


def assert_quotes_its_examples(section: str) -> None:
    """Every block of the section is its example file's code, part by part, in order."""
    excerpts = quoted_excerpts(section)
    assert excerpts, f"no code quoted from examples/ in section {section!r}"
    for path, code in excerpts:
        source = path.read_text()
        position = 0
        for part in re.split(r"^\.\.\.\n", code, flags=re.MULTILINE):
            found = source.find(part, position)
            assert found >= 0, f"docs/integrations.md quotes {path.name} wrongly:\n{part}"
            position = found + len(part)


def assert_counts_words(client: httpx.Client, queue: RedisQueue, workers: Workers) -> None:
    """The FastAPI and Flask examples' ``/words`` routes: a dispatch waits in Redis until
    a worker starts, then the result route waits for the worker's answer (up to 10 s)."""
    dispatched = client.post("/words", json={"text": "to be or not to be"})
    assert dispatched.status_code == 202, dispatched.text
    task_id = dispatched.json()["id"]
    assert len(ready(queue)) == 1  # in Redis, waiting for a worker
    workers.start("default")
    answer = client.get(f"/words/{task_id}")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"words": 6}
