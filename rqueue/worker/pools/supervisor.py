"""``rqueue supervise``: one process a host running every pool's worker parents.

Each parent is an ``rqueue work`` process (``plan.py``) following the child count in
its own file (``--concurrency-file``, ``worker/scaling.py``), so every guarantee of
``rqueue work`` holds as it is: warm and cold shutdown, ``rqueue restart`` (a parent
re-executes itself and reads its count again), pause, recovery of a killed child. This
process only starts the parents, writes their counts from each pool's load
(``load.py`` then ``scaling.py``, every ``balance_cooldown`` seconds), records each
decision (``status.py``), starts again a parent that exits, and passes signals on.

The parents run in their own process group, so a terminal's Ctrl-C reaches this
process alone, which passes one SIGTERM on: a parent that got the terminal's SIGINT
too would take this second signal for a cold shutdown. If this process is killed, the
kernel sends each parent SIGTERM (a warm stop): no pool runs on unsupervised.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from setproctitle import setproctitle

from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import REDIS_ERRORS
from rqueue.worker.pools import status
from rqueue.worker.pools.config import Pool
from rqueue.worker.pools.load import measure
from rqueue.worker.pools.plan import Parent, parents
from rqueue.worker.pools.scaling import decide, initial
from rqueue.worker.process import parent_death_signal
from rqueue.worker.scaling import write_target

log = logging.getLogger("rqueue.supervise")

_TICK = 0.25
_YOUNG = 10.0
"""Seconds a parent lives before its exit counts as a crash (a crash loop backs off)."""
_MOST_BACKOFF = 30.0
_FORWARDED = (signal.SIGHUP, signal.SIGUSR2, signal.SIGCONT)
"""Passed on as they come: reload, pause, resume."""


@dataclass
class Managed:
    """One worker parent: its plan, count file, target and process."""

    parent: Parent
    count_file: str
    target: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    start_at: float = 0.0
    crashes: int = 0
    """Exits in a row, each within ``_YOUNG`` seconds of its start."""


class PoolSupervisor:
    """Runs ``pools`` against the Redis of ``config`` until SIGTERM or SIGINT."""

    def __init__(self, pools: tuple[Pool, ...], config: Config) -> None:
        self.pools = pools
        self.config = config
        self.stopping = False
        self.managed: dict[str, list[Managed]] = {}
        self._due: dict[str, float] = {}
        self._redis_failing = False

    def run(self) -> int:
        self.queue = RedisQueue(self.config)
        self.queue.ping()
        directory = tempfile.mkdtemp(prefix="rqueue-supervise-")
        try:
            self._plan(Path(directory))
            self._install_signals()
            setproctitle(f"rqueue: supervise {','.join(p.name for p in self.pools)}")
            log.info("supervising pools %s, pid %d", ", ".join(self.managed), os.getpid())
            while not self.stopping or self._alive():
                self._reap()
                if not self.stopping:
                    self._start_due()
                    self._scale_due()
                time.sleep(_TICK)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
            self._leave()
        log.info("supervisor stopped")
        return 0

    def _plan(self, directory: Path) -> None:
        for pool in self.pools:
            planned = parents(pool)
            self.managed[pool.name] = [
                Managed(parent, str(directory / f"{pool.name}.{index}"), target)
                for index, (parent, target) in enumerate(
                    zip(planned, initial(pool, planned), strict=True)
                )
            ]
            for managed in self.managed[pool.name]:
                write_target(managed.count_file, managed.target)

    # -- parents ----------------------------------------------------------------------

    def _start_due(self) -> None:
        now = time.monotonic()
        for managed in self._all():
            if managed.process is None and now >= managed.start_at and not self.stopping:
                self._start(managed)

    def _start(self, managed: Managed) -> None:
        argv = managed.parent.argv(managed.target, managed.count_file)
        env = {**os.environ, "REDIS_URL": self.config.redis_url}
        if self.config.prefix:
            env["RQUEUE_PREFIX"] = self.config.prefix
        managed.process = subprocess.Popen(
            [sys.executable, "-m", "rqueue", *argv],
            env=env,
            start_new_session=True,
            preexec_fn=functools.partial(parent_death_signal, signal.SIGTERM),
        )
        managed.started = time.monotonic()
        if self.stopping:  # the stop signal came while it was being started
            managed.process.send_signal(signal.SIGTERM)
        log.info(
            "pool %s: started %s (pid %d, %d processes)",
            managed.parent.pool.name,
            ",".join(managed.parent.queues),
            managed.process.pid,
            managed.target,
        )

    def _reap(self) -> None:
        for managed in self._all():
            process = managed.process
            if process is None or process.poll() is None:
                continue
            managed.process = None
            if self.stopping:
                continue
            young = time.monotonic() - managed.started < _YOUNG
            managed.crashes = managed.crashes + 1 if young else 0
            delay = min(2.0 ** (managed.crashes - 1), _MOST_BACKOFF) if young else 0.0
            managed.start_at = time.monotonic() + delay
            log.warning(
                "pool %s: %s (pid %d) exited with code %d; starting it again in %g s",
                managed.parent.pool.name,
                ",".join(managed.parent.queues),
                process.pid,
                process.returncode,
                delay,
            )

    def _alive(self) -> bool:
        return any(m.process is not None for m in self._all())

    def _all(self) -> list[Managed]:
        return [managed for group in self.managed.values() for managed in group]

    # -- scaling ----------------------------------------------------------------------

    def _scale_due(self) -> None:
        now = time.monotonic()
        due = [pool for pool in self.pools if now >= self._due.get(pool.name, 0.0)]
        for pool in due:  # each waits its cooldown, whether it scaled or Redis failed
            self._due[pool.name] = now + max(pool.balance_cooldown, _TICK)
        for pool in due:
            try:
                self._scale(pool)
            except REDIS_ERRORS as exc:
                if not self._redis_failing:
                    log.warning("Redis unavailable (%s): pools keep their sizes", exc)
                self._redis_failing = True
                return
            self._redis_failing = False

    def _scale(self, pool: Pool) -> None:
        group = self.managed[pool.name]
        planned = tuple(m.parent for m in group)
        current = [m.target for m in group]
        decision = decide(pool, planned, current, measure(self.queue, pool.queues))
        for managed, target in zip(group, decision.targets, strict=True):
            if target != managed.target:
                log.info(
                    "pool %s: %s from %d to %d processes (%s)",
                    pool.name,
                    ",".join(managed.parent.queues),
                    managed.target,
                    target,
                    "; ".join(status.line(load) for load in decision.loads),
                )
                managed.target = target
                write_target(managed.count_file, target)
        status.write(self.queue, pool, planned, decision)

    def _leave(self) -> None:
        with contextlib.suppress(*REDIS_ERRORS):  # the entries expire on their own
            status.leave(self.queue, self.pools)

    # -- signals ----------------------------------------------------------------------

    def _install_signals(self) -> None:
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        for signum in _FORWARDED:
            signal.signal(signum, self._on_forwarded)

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        """First: a warm stop of every parent; second: a cold one (they take a second
        SIGTERM as that)."""
        name = signal.Signals(signum).name
        if self.stopping:
            log.warning("second %s: cold shutdown of every pool", name)
        else:
            log.info("%s: warm shutdown of every pool, finishing current tasks", name)
        self.stopping = True
        self._signal(signal.SIGTERM)

    def _on_forwarded(self, signum: int, frame: FrameType | None) -> None:
        self._signal(signum)

    def _signal(self, signum: int) -> None:
        for managed in self._all():
            if managed.process is not None and managed.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(managed.process.pid, signum)
