"""The dashboard tests' harness: the real app served by uvicorn, and a headless chromium.

:class:`Served` serves an ASGI app (:func:`served_dashboard`: the one
:func:`rqueue.web.create_app` makes) with uvicorn in a thread, on a loopback socket
bound to a free port before the server starts (so no other process can take the
port in between), and stops it at the end.

:func:`chromium` is Debian's chromium driven by Playwright. It is made sure of
here, not assumed: missing and running as root, it is installed with apt; missing
otherwise, the test fails with a message saying how to install it. Never skipped.
tox runs this file before the suite (``python tests/browser.py``), so the install (a
minute or two on a fresh machine) does not count against a test's timeout.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from playwright.sync_api import Browser, sync_playwright
from support import wait_for

from rqueue.store.queue import RedisQueue
from rqueue.web import create_app

CHROMIUM = "/usr/bin/chromium"


class Served:
    """``app`` served at :attr:`url` while the ``with`` block runs."""

    def __init__(self, app: Any) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )

    def __enter__(self) -> Served:
        self.thread.start()
        wait_for(lambda: self.server.started, 10, "the dashboard to start serving")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()
        assert not self.thread.is_alive(), "the server did not stop"


def served_dashboard(queue: RedisQueue, **options: Any) -> Served:
    """The dashboard of ``queue`` (``create_app``'s options), served while in ``with``."""
    return Served(create_app(queue, **options))


def ensure_chromium() -> str:
    """The path of Debian's chromium, installed first if missing and we may."""
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(
            f"the browser tests need Debian's chromium at {CHROMIUM}: "
            "run `sudo apt-get install -y chromium` (as root the tests install it)"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with open("/tmp/rqueue-chromium.lock", "w") as lock:  # one install at a time (xdist)
        fcntl.flock(lock, fcntl.LOCK_EX)
        for command in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
            if not os.path.exists(CHROMIUM):
                subprocess.run(command, check=True, env=env, capture_output=True, timeout=900)
    if not os.path.exists(CHROMIUM):
        raise RuntimeError(f"apt-get installed chromium, but {CHROMIUM} is not there")
    return CHROMIUM


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless chromium for one test (or module), closed at the end."""
    path = ensure_chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, headless=True)
        try:
            yield browser
        finally:
            browser.close()


if __name__ == "__main__":
    print(f"chromium: {ensure_chromium()}")
