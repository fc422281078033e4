"""Chaos: real ``rqueue work`` processes on a real redis-server, with faults injected.

Every task records its completion by its own number (``HINCRBY chaos:done <n> 1``),
so at the end "lost" and "completed twice" are exact counts, not estimates::

    python benchmarks/reliability/chaos.py --scenario kill-children --tasks 20000 --seed 1
    python benchmarks/reliability/chaos.py --scenario all --tasks 100000 --duration 900

Scenarios (issue 3):

- ``kill-children``  SIGKILL a random worker child every 0.2 to 1 s (``--kill-rate``).
- ``kill-parent``    SIGKILL a worker parent; its children must exit by themselves,
                     a fresh ``rqueue work`` takes over.
- ``restart-redis``  SIGKILL redis-server and start it again from its AOF
                     (``appendfsync always``); a dispatch during the outage must raise
                     QueueConnectionError within a bounded time.
- ``freeze-redis``   SIGSTOP redis-server for 5 s, then SIGCONT.
- ``lost-ack``       SIGKILL a whole worker (parent and children at once) so acks of
                     finished tasks never reach Redis; they re-run once their
                     reservation expires (the at-least-once edge).
- ``clock-skew``     half the workers run with their wall clock 30 s ahead; no
                     reservation may be taken from another worker early.
- ``all``            children, parents and Redis restarts together (the long run).
- ``soak``           no faults: tasks dispatched at a steady pace over ``--duration``
                     while the parents' RSS is sampled (it should stay flat).
- ``batch``          the tasks are the members of one batch (issue 12), with then,
                     catch and finally callbacks; children are killed at random, a
                     whole worker every 6 s, and Redis is restarted from its AOF
                     (``--redis-faults``, default 1). The batch must finish with exact
                     counts, and each of then and finally be queued exactly once.

With ``--slots N`` the tasks are ``async def`` (issue 14): each child runs up to N at
once in async mode, so a fault lands on many tasks in flight at once (the scenarios
that dispatch plain tasks: not ``soak`` or ``batch``)::

    python benchmarks/reliability/chaos.py --scenario kill-children --slots 20 --work-ms 50

With ``--threads N`` the plain tasks run in thread mode instead, up to N at once in
each child's threads::

    python benchmarks/reliability/chaos.py --scenario kill-children --threads 20 --work-ms 50

After a loss the run prints the lost task numbers and every key that still mentions
one, and keeps Redis's data folder and the worker logs; with ``--keep-history`` the
AOF is never rewritten, so it holds every write of the run for a post-mortem.

The worker processes import this file as the module ``chaos`` (their working
directory is this folder), so the task below is all they load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from rqueue import Batch, current_job, task
from rqueue.store.default import default_queue

HERE = Path(__file__).resolve().parent
QUEUE = "chaos"
DONE = "chaos:done"
CALLBACKS = "chaos:callbacks"
"""batch: one ``name:attempt:succeeded/failed/total`` entry per callback run."""
SCENARIOS = (
    "kill-children",
    "kill-parent",
    "restart-redis",
    "freeze-redis",
    "lost-ack",
    "clock-skew",
    "all",
    "soak",
    "batch",
)
SKEW_ENV = "RQUEUE_CHAOS_CLOCK_SKEW"

_SITECUSTOMIZE = f'''
"""Chaos clock skew: move this process's wall clock (time.time) ahead."""
import os, time
_skew = float(os.environ.get("{SKEW_ENV}", "0") or 0)
if _skew:
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _skew
    time.time_ns = lambda: _time_ns() + int(_skew * 1e9)
'''


_clients: dict[int, Any] = {}


def _results() -> Any:
    """The tasks' own connection, as an application's would be: patient (30 s socket
    timeout), so a stalled Redis delays a task's write instead of failing it after it
    may have landed; that would be a double run caused by the task, not by rqueue."""
    client = _clients.get(os.getpid())
    if client is None:
        from rqueue.settings.config import Config
        from rqueue.store.connect import connect

        client = connect(Config.resolve(socket_timeout=30.0))
        _clients.clear()
        _clients[os.getpid()] = client
    return client


@task(queue=QUEUE)
def chaos_task(number: int, work_ms: float = 0.0) -> None:
    """Record one completion of task ``number``; optionally busy itself a little first."""
    if work_ms:
        time.sleep(work_ms / 1000)
    _results().hincrby(DONE, str(number), 1)


@task(queue=QUEUE)
async def chaos_async_task(number: int, work_ms: float = 0.0) -> None:
    """``chaos_task``'s ``async def`` twin (``--slots``): many run at once per child, so
    a kill cuts short every coroutine its child had in flight."""
    if work_ms:
        await asyncio.sleep(work_ms / 1000)
    _results().hincrby(DONE, str(number), 1)


@task(queue=QUEUE)
def chaos_ack_probe(number: int) -> None:
    """Record completion, then kill this whole worker (parent and children) at once.

    From Redis's side this is an ack that never arrives for a task whose effect
    landed: the task must run again once its reservation expires, exactly once.
    """
    if _results().hincrby(DONE, str(number), 1) == 1:
        os.killpg(os.getpgrp(), signal.SIGKILL)


@task(queue=QUEUE)
def chaos_batch_callback(found: Batch, name: str) -> None:
    """Record one run of a batch's callback, its attempt, and the counts it saw.

    A callback killed mid-run runs again (attempt 2, ...); a second copy of it would
    show as a second run at attempt 1.
    """
    job = current_job()
    status = found.status()
    seen = "gone" if status is None else f"{status.succeeded}/{status.failed}/{status.total}"
    attempt = job.attempts if job is not None else 0
    _results().rpush(CALLBACKS, f"{name}:{attempt}:{seen}")


@task(queue=QUEUE)
def chaos_clock() -> None:
    """Record this worker's idea of the time (shows that a skew took effect)."""
    default_queue().client.rpush("chaos:clock", repr(time.time()))


# -- the harness (runs in the driving process only) ----------------------------------


@dataclass
class Params:
    scenario: str = "kill-children"
    tasks: int = 20_000
    duration: float = 300.0
    kill_rate: float = 1 / 0.6
    """Mean faults per second for kills (intervals uniform in [0.33, 1.67] / rate)."""
    seed: int = 1
    workers: int = 2
    concurrency: int = 2
    work_ms: float = 0.0
    restart_every: float = 4.0
    """Seconds between Redis restarts or freezes (restart-redis, freeze-redis, all)."""
    redis_faults: int = 0
    """Most Redis restarts or freezes (0: no limit)."""
    outage: float = 1.0
    freeze: float = 5.0
    timeout: float = 2.0
    tries: int = 50
    ack_probes: int = 2
    """lost-ack: tasks that kill their whole worker right after their effect lands."""
    prefetch: int = 20
    slots: int = 0
    """Above 0: the workers get ``--slots`` this, and the tasks ``_dispatch_all`` sends
    are ``chaos_async_task`` (async mode); ``soak`` and ``batch`` are left as they are."""
    threads: int = 0
    """Above 0: the workers get ``--threads`` this (thread mode: the plain tasks run in
    each child's threads)."""
    quiet: bool = False
    keep_history: bool = False
    """Never rewrite the AOF, so after a loss it holds every write since the start."""


@dataclass
class Result:
    params: Params
    dispatched: int = 0
    completed: int = 0
    failed: int = 0
    lost: int = 0
    pending: int = 0
    completed_twice: int = 0
    completed_thrice: int = 0
    extra_runs: int = 0
    kills: int = 0
    parent_kills: int = 0
    worker_kills: int = 0
    """Whole workers (parent and children) killed by the harness (batch)."""
    redis_restarts: int = 0
    freezes: int = 0
    wall_time: float = 0.0
    orphan_exit_max: float = 0.0
    orphans_left: int = 0
    outage_dispatch_errors: int = 0
    outage_dispatch_max: float = 0.0
    outage_dispatch_stored: int = 0
    tracebacks: int = 0
    first_traceback: str = ""
    """The first traceback a worker logged, to show with the figures."""
    deadline_kills: int = 0
    worker_exits: int = 0
    parent_rss: tuple[float, float, float, int] | None = None
    """soak: average parent RSS in MB, first sample, last, max, and how many samples."""
    skewed_clock_offset: float = 0.0
    batch_dispatch_time: float = 0.0
    batch_counts: tuple[int, int, int, int, int] | None = None
    """batch: total, succeeded, failed, skipped and pending, as the batch counted them."""
    batch_finished: bool = False
    callback_runs: dict[str, list[int]] = field(default_factory=dict)
    """batch: each callback's runs, by attempt number."""
    failed_reasons: dict[str, int] = field(default_factory=dict)
    probe_counts: dict[int, int] = field(default_factory=dict)

    def rows(self) -> list[tuple[str, Any]]:
        rows: list[tuple[str, Any]] = [
            ("scenario", self.params.scenario),
            ("dispatched", self.dispatched),
            ("completed", self.completed),
            ("failed", self.failed),
            ("lost", self.lost),
            ("still pending", self.pending),
            ("completed twice", self.completed_twice),
            ("completed 3+ times", self.completed_thrice),
            ("kills (children + whole workers)", self.kills),
            ("parent kills", self.parent_kills),
            ("Redis restarts", self.redis_restarts),
            ("Redis freezes", self.freezes),
            ("wall time", f"{self.wall_time:.1f} s"),
        ]
        if self.worker_kills:
            rows.append(("whole workers killed (of the kills)", self.worker_kills))
        if self.parent_kills:
            rows.append(("orphaned children: slowest exit", f"{self.orphan_exit_max:.2f} s"))
            rows.append(("orphaned children still running", self.orphans_left))
        if self.redis_restarts:
            rows.append(("dispatches refused in outage", self.outage_dispatch_errors))
            rows.append(("slowest refusal", f"{self.outage_dispatch_max:.2f} s"))
        if self.skewed_clock_offset:
            rows.append(("skewed workers' clock offset", f"{self.skewed_clock_offset:+.1f} s"))
        if self.probe_counts:
            rows.append(("lost-ack probes: runs each", sorted(self.probe_counts.values())))
        if self.batch_counts is not None:
            rows.append(("batch dispatch", f"{self.batch_dispatch_time:.2f} s"))
            rows.append(
                (
                    "batch: total/succeeded/failed/skipped/pending",
                    "/".join(map(str, self.batch_counts)),
                )
            )
            rows.append(("batch finished", self.batch_finished))
            for name in ("then", "catch", "finally"):
                runs = self.callback_runs.get(name, [])
                rows.append((f"callback {name}: runs (attempts)", f"{len(runs)} {runs}"))
            rows.append(("batch counted exactly, callbacks queued once", self.batch_exact()))
        if self.parent_rss:
            first, last, peak, count = self.parent_rss
            rows.append(
                (
                    "parent RSS first/last/max",
                    f"{first:.1f} / {last:.1f} / {peak:.1f} MB ({count} samples)",
                )
            )
        rows.append(("children killed for overrunning", self.deadline_kills))
        rows.append(("workers that exited by themselves (restarted)", self.worker_exits))
        rows.append(("tracebacks in worker logs", self.tracebacks))
        if self.first_traceback:
            rows.append(("the first of them", self.first_traceback))
        for reason, count in sorted(self.failed_reasons.items()):
            rows.append((f"failed: {reason}", count))
        return rows

    def batch_exact(self) -> bool:
        """batch: every member counted once as succeeded, then and finally queued once
        (one run at attempt 1; a later attempt is that copy re-run after a kill)."""
        if self.batch_counts is None:
            return False
        first_runs = {n: runs.count(1) for n, runs in self.callback_runs.items()}
        return (
            self.batch_finished
            and self.batch_counts == (self.dispatched, self.dispatched, 0, 0, 0)
            and first_runs.get("then") == 1
            and first_runs.get("finally") == 1
            and not self.callback_runs.get("catch")
        )

    def ok(self) -> bool:
        """Nothing lost or left behind (and, for a batch, counted exactly)."""
        clean = self.lost == 0 and self.pending == 0
        return clean and (self.params.scenario != "batch" or self.batch_exact())

    def table(self) -> str:
        width = max(len(k) for k, _ in self.rows())
        return "\n".join(f"{k.ljust(width)}  {v}" for k, v in self.rows())


class Worker:
    """One ``rqueue work`` parent, logging to a file."""

    def __init__(
        self,
        redis_url: str,
        params: Params,
        log_dir: Path,
        index: int,
        env: dict[str, str] | None = None,
    ) -> None:
        self.replaced = False
        self.log_path = log_dir / f"worker-{index}.log"
        self.log = self.log_path.open("w")
        # A task whose reservation a fault strands waits out timeout + grace + 15 s per
        # task of its batch: single-task batches keep those scenarios short.
        short_batches = params.scenario in ("lost-ack", "freeze-redis")
        args = [
            sys.executable,
            "-m",
            "rqueue",
            "work",
            QUEUE,
            "--concurrency",
            str(params.concurrency),
            "--timeout",
            str(
                params.timeout
                if params.scenario != "freeze-redis"
                else max(params.timeout, params.freeze * 2)
            ),
            "--kill-grace",
            "1",
            "--tries",
            str(params.tries),
            "--prefetch",
            str(1 if short_batches else params.prefetch),
            "--log-level",
            "WARNING",
            *(("--slots", str(params.slots)) if params.slots else ()),
            *(("--threads", str(params.threads)) if params.threads else ()),
        ]
        self.process = subprocess.Popen(
            args,
            cwd=HERE,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            env={**os.environ, "REDIS_URL": redis_url, **(env or {})},
            start_new_session=True,
        )

    def children(self) -> list[int]:
        import psutil

        try:
            return [c.pid for c in psutil.Process(self.process.pid).children()]
        except psutil.NoSuchProcess:
            return []

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


def _exited(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class Chaos:
    def __init__(self, params: Params) -> None:
        from rqueue.server import RedisServer

        self.params = params
        self.random = random.Random(params.seed)
        self.result = Result(params)
        no_rewrite = ("--auto-aof-rewrite-percentage", "0") if params.keep_history else ()
        self.server = RedisServer(persistent=True, extra_args=no_rewrite)
        self.tmp = Path(tempfile.mkdtemp(prefix="rqueue-chaos-"))
        self.workers: list[Worker] = []
        self._worker_count = 0
        self._orphans: list[tuple[int, float]] = []
        self.batch_id: str | None = None
        self.probes: set[int] = set()
        if params.scenario == "lost-ack":
            self.probes = {
                params.tasks * k // (params.ack_probes + 1) for k in range(1, params.ack_probes + 1)
            }

    # -- set-up -----------------------------------------------------------------------

    def _config(self) -> Any:
        from rqueue.settings.config import Config

        return Config(redis_url=self.server.url, socket_timeout=2.0, dispatch_retry=1.0)

    def _start_worker(self, skewed: bool = False) -> Worker:
        env: dict[str, str] = {}
        if skewed:
            (self.tmp / "sitecustomize.py").write_text(_SITECUSTOMIZE)
            env = {
                SKEW_ENV: "30",
                "PYTHONPATH": os.pathsep.join([str(self.tmp), os.environ.get("PYTHONPATH", "")]),
            }
        self._worker_count += 1
        worker = Worker(self.server.url, self.params, self.tmp, self._worker_count, env)
        self.workers.append(worker)
        return worker

    def _dispatch_all(self) -> None:
        from rqueue.store.queue import RedisQueue

        if self.params.scenario == "batch":
            self._dispatch_batch()
            return
        producer = RedisQueue(self._config())
        kind = chaos_async_task if self.params.slots else chaos_task
        bound = kind.using(connection=producer)
        work_ms = self.params.work_ms
        chunk = 2000
        probe = chaos_ack_probe.using(connection=producer)
        for start in range(0, self.params.tasks, chunk):
            numbers = range(start, min(start + chunk, self.params.tasks))
            bound.dispatch_many(
                [
                    probe.pending(n) if n in self.probes else bound.pending(n, work_ms)
                    for n in numbers
                ]
            )
            self.result.dispatched += len(numbers)
        producer.client.close()

    def _dispatch_batch(self) -> None:
        """All the tasks as the members of one batch, in one dispatch."""
        from rqueue import batch
        from rqueue.store.queue import RedisQueue

        producer = RedisQueue(self._config())
        member = chaos_task.using(connection=producer)
        started = time.monotonic()
        found = (
            batch([member.pending(n, self.params.work_ms) for n in range(self.params.tasks)])
            .then(chaos_batch_callback.pending("then"))
            .catch(chaos_batch_callback.pending("catch"))
            .finally_(chaos_batch_callback.pending("finally"))
            .name("chaos")
            .dispatch(producer)
        )
        self.result.batch_dispatch_time = time.monotonic() - started
        self.result.dispatched = self.params.tasks
        self.batch_id = found.id
        producer.client.close()

    # -- faults -----------------------------------------------------------------------

    def _kill_interval(self) -> float:
        mean = 1 / self.params.kill_rate
        return self.random.uniform(mean / 3, mean * 5 / 3)

    def _kill_child(self) -> None:
        pids = [pid for w in self.workers if w.alive() for pid in w.children()]
        if pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.random.choice(pids), signal.SIGKILL)
                self.result.kills += 1

    def _kill_parent(self) -> None:
        alive = [w for w in self.workers if w.alive()]
        if not alive:
            return
        victim = self.random.choice(alive)
        children = victim.children()
        os.kill(victim.process.pid, signal.SIGKILL)
        victim.process.wait()
        victim.replaced = True
        killed_at = time.monotonic()
        self._orphans += [(pid, killed_at) for pid in children]
        self.result.parent_kills += 1
        self._start_worker()

    def _kill_worker(self) -> None:
        """SIGKILL a whole worker, parent and children at once: the acks it had not sent
        yet are lost, and what it held comes back when its reservations expire."""
        alive = [w for w in self.workers if w.alive()]
        if not alive:
            return
        victim = self.random.choice(alive)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(victim.process.pid, signal.SIGKILL)
        victim.process.wait()
        victim.replaced = True
        self.result.kills += 1
        self.result.worker_kills += 1
        self._start_worker()

    def _replace_dead_workers(self) -> None:
        """Restart workers that died without being killed here, as systemd would.

        In ``lost-ack`` a probe task killed its worker (a kill); otherwise a worker
        that exited by itself is counted (``rqueue work`` exits with one clear line
        when Redis is unreachable at start-up, e.g. during a Redis restart).
        """
        for worker in list(self.workers):
            if not worker.alive() and not worker.replaced:
                worker.replaced = True
                if self.params.scenario == "lost-ack":
                    self.result.kills += 1
                else:
                    self.result.worker_exits += 1
                self._start_worker()

    def _restart_redis(self) -> None:
        from rqueue.errors import QueueConnectionError
        from rqueue.store.queue import RedisQueue

        self.server.kill()
        outage_end = time.monotonic() + self.params.outage
        producer = RedisQueue(self._config())
        started = time.monotonic()
        try:
            chaos_task.using(connection=producer).dispatch(-1)
            self.result.outage_dispatch_stored += 1  # should not happen: Redis is down
        except QueueConnectionError:
            self.result.outage_dispatch_errors += 1
        self.result.outage_dispatch_max = max(
            self.result.outage_dispatch_max, time.monotonic() - started
        )
        producer.client.close()
        time.sleep(max(0.0, outage_end - time.monotonic()))
        self.server.start()
        self.result.redis_restarts += 1

    def _freeze_redis(self) -> None:
        self.server.freeze()
        time.sleep(self.params.freeze)
        self.server.thaw()
        self.result.freezes += 1

    def _check_orphans(self) -> None:
        still: list[tuple[int, float]] = []
        for pid, since in self._orphans:
            if _exited(pid):
                self.result.orphan_exit_max = max(
                    self.result.orphan_exit_max, time.monotonic() - since
                )
            else:
                still.append((pid, since))
        self._orphans = still

    # -- the run ----------------------------------------------------------------------

    def run(self) -> Result:
        params = self.params
        self.server.start()
        started = time.monotonic()
        try:
            if params.scenario == "soak":
                self._soak(started)
                return self.result
            self._dispatch_all()
            skew = params.scenario == "clock-skew"
            for index in range(params.workers):
                self._start_worker(skewed=skew and index % 2 == 1)
            if skew:
                self._measure_skew()
            self._inject_until_done(started)
        finally:
            self.result.wall_time = time.monotonic() - started
            self._finish()
        return self.result

    def _soak(self, started: float) -> None:
        """No faults: dispatch at a steady pace over ``duration``, sampling parents' RSS."""
        import psutil

        from rqueue.store.queue import RedisQueue

        for _ in range(self.params.workers):
            self._start_worker()
        parents = [psutil.Process(w.process.pid) for w in self.workers]
        producer = RedisQueue(self._config())
        bound = chaos_task.using(connection=producer)
        chunk = 500
        pace = self.params.duration / max(1, self.params.tasks / chunk)
        next_sample = time.monotonic() + 5.0  # after the parents' start-up
        samples: list[float] = []
        for start in range(0, self.params.tasks, chunk):
            numbers = range(start, min(start + chunk, self.params.tasks))
            bound.dispatch_many([(n, self.params.work_ms) for n in numbers])
            self.result.dispatched += len(numbers)
            if time.monotonic() >= next_sample:
                samples.append(sum(p.memory_info().rss for p in parents) / len(parents) / 2**20)
                next_sample = time.monotonic() + 5.0
            time.sleep(max(0.0, started + pace * (start // chunk + 1) - time.monotonic()))
        producer.client.close()
        self.params.duration += 300  # time to drain the last dispatches
        self._inject_until_done(started)
        samples.append(sum(p.memory_info().rss for p in parents) / len(parents) / 2**20)
        self.result.parent_rss = (samples[0], samples[-1], max(samples), len(samples))

    def _inject_until_done(self, started: float) -> None:
        params = self.params
        scenario = params.scenario
        deadline = started + params.duration
        next_kill = time.monotonic() + self._kill_interval()
        next_parent_kill = time.monotonic() + 3.0
        next_worker_kill = time.monotonic() + 3.0
        next_redis = time.monotonic() + params.restart_every
        last_check = 0.0
        while time.monotonic() < deadline:
            now = time.monotonic()
            if now - last_check > 0.5:
                last_check = now
                self._check_orphans()
                if self._all_done():
                    return
            if scenario in ("kill-children", "all", "batch") and now >= next_kill:
                self._kill_child()
                next_kill = now + self._kill_interval()
            if scenario in ("kill-parent", "all") and now >= next_parent_kill:
                self._kill_parent()
                next_parent_kill = now + (3.0 if scenario == "kill-parent" else 8.0)
            if scenario == "batch" and now >= next_worker_kill:
                self._kill_worker()
                next_worker_kill = now + 6.0
            self._replace_dead_workers()
            redis_faults = self.result.redis_restarts + self.result.freezes
            if params.redis_faults and redis_faults >= params.redis_faults:
                next_redis = float("inf")
            if scenario in ("restart-redis", "all", "batch") and now >= next_redis:
                self._restart_redis()
                next_redis = time.monotonic() + params.restart_every * (
                    5 if scenario == "all" else 1
                )
            if scenario == "freeze-redis" and now >= next_redis:
                self._freeze_redis()
                next_redis = time.monotonic() + params.restart_every
            time.sleep(0.02)

    def _measure_skew(self) -> None:
        """Dispatch clock probes until a skewed worker has run one (bounded)."""
        from rqueue.store.queue import RedisQueue

        producer = RedisQueue(self._config())
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            chaos_clock.using(connection=producer).dispatch()
            times = [float(t) for t in producer.client.lrange("chaos:clock", 0, -1)]
            offset = max((t - time.time() for t in times), default=0.0)
            if offset > 20:
                self.result.skewed_clock_offset = offset
                break
            time.sleep(0.2)
        producer.client.close()

    def _client(self) -> Any:
        from rqueue.store.connect import connect

        return connect(self._config())

    def _all_done(self) -> bool:
        try:
            client = self._client()
            try:
                done = client.hlen(DONE)
                failed = client.llen(f"queues:{QUEUE}:failed")
                busy = (
                    client.llen(f"queues:{QUEUE}")
                    + client.zcard(f"queues:{QUEUE}:delayed")
                    + client.zcard(f"queues:{QUEUE}:reserved")
                )
            finally:
                client.close()
        except Exception:
            return False  # Redis is down or frozen right now
        return bool(done + failed >= self.result.dispatched and busy == 0)

    def _finish(self) -> None:
        from rqueue.encoding.payload import decode
        from rqueue.failed import FailedTasks
        from rqueue.store.queue import RedisQueue

        if self.server.process is None:
            self.server.start()
        with contextlib.suppress(Exception):
            self.server.thaw()
        for worker in self.workers:
            worker.stop()
        deadline = time.monotonic() + 10
        while self._orphans and time.monotonic() < deadline:
            self._check_orphans()
            time.sleep(0.05)
        self.result.orphans_left = len(self._orphans)
        for pid, _ in self._orphans:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        queue = RedisQueue(self._config())
        counts = {int(k): int(v) for k, v in queue.client.hgetall(DONE).items()}
        failed_numbers: set[int] = set()
        for failed in FailedTasks(queue).list([QUEUE]):
            job = failed.job()
            if job is not None and job.args and job.args[0] >= 0:
                failed_numbers.add(int(job.args[0]))
                self.result.failed_reasons[failed.exception] = (
                    self.result.failed_reasons.get(failed.exception, 0) + 1
                )
        pending: set[int] = set()
        keys = queue.keys(QUEUE)
        waiting = [
            *queue.client.lrange(keys.ready, 0, -1),
            *queue.client.zrange(keys.delayed, 0, -1),
            *queue.client.zrange(keys.reserved, 0, -1),
        ]
        for payload in waiting:
            with contextlib.suppress(Exception):
                pending.add(int(decode(payload).args[0]))
        numbers = range(self.result.dispatched)
        result = self.result
        result.completed = sum(1 for n in numbers if counts.get(n, 0) >= 1)
        result.failed = sum(1 for n in failed_numbers if counts.get(n, 0) == 0)
        result.pending = sum(
            1 for n in pending if counts.get(n, 0) == 0 and n not in failed_numbers
        )
        result.lost = result.dispatched - result.completed - result.failed - result.pending
        result.completed_twice = sum(1 for c in counts.values() if c >= 2)
        result.completed_thrice = sum(1 for c in counts.values() if c >= 3)
        result.extra_runs = sum(c - 1 for c in counts.values() if c >= 2)
        result.probe_counts = {n: counts.get(n, 0) for n in sorted(self.probes)}
        if self.batch_id is not None:
            self._read_batch(queue)
        if result.lost:
            lost = [n for n in numbers if not counts.get(n) and n not in pending | failed_numbers]
            self._keep_evidence(queue, lost)
        queue.client.close()
        for worker in self.workers:
            text = worker.log_path.read_text(errors="replace")
            result.tracebacks += text.count("Traceback (most recent call last)")
            if "Traceback" in text and not result.first_traceback:
                at = text.index("Traceback")
                result.first_traceback = text[at : at + 2000]
            result.deadline_kills += text.count("overran its deadline")
        self.server.cleanup()
        if not self.params.quiet:
            for worker in self.workers:
                if "Traceback" in worker.log_path.read_text(errors="replace"):
                    print(f"(worker log with a traceback: {worker.log_path})", file=sys.stderr)

    def _read_batch(self, queue: Any) -> None:
        """The batch's own counts, and each callback's runs by attempt."""
        from rqueue import batch_of

        assert self.batch_id is not None
        status = batch_of(self.batch_id, queue).status()
        if status is not None:
            self.result.batch_counts = (
                status.total,
                status.succeeded,
                status.failed,
                status.skipped,
                status.pending,
            )
            self.result.batch_finished = status.finished
        runs: dict[str, list[int]] = {}
        for entry in queue.client.lrange(CALLBACKS, 0, -1):
            name, attempt, _ = entry.decode().split(":", 2)
            runs.setdefault(name, []).append(int(attempt))
        self.result.callback_runs = runs

    def _keep_evidence(self, queue: Any, lost: list[int]) -> None:
        """After a loss: say which keys still mention the lost tasks (a claims key, say),
        and keep Redis's data folder (its AOF) and the worker logs for a post-mortem."""
        from rqueue.encoding.payload import decode

        def numbers_in(value: bytes) -> set[int]:
            items = [value]
            with contextlib.suppress(Exception):
                items += [v for v in msgpack.unpackb(value, raw=True) if isinstance(v, bytes)]
            found = set()
            for item in items:
                with contextlib.suppress(Exception):
                    found.add(int(decode(item).args[0]))
            return found

        wanted = set(lost)
        print(f"lost tasks (first 50): {lost[:50]}", file=sys.stderr)
        for key in queue.client.scan_iter(count=1000):
            kind = queue.client.type(key)
            values = (
                [queue.client.get(key)]
                if kind == b"string"
                else queue.client.lrange(key, 0, -1)
                if kind == b"list"
                else queue.client.zrange(key, 0, -1)
                if kind == b"zset"
                else []
            )
            held = sorted(wanted & set().union(*(numbers_in(v) for v in values if v)))
            if held:
                print(f"  {key!r} holds lost tasks {held[:20]}", file=sys.stderr)
        kept = Path(tempfile.mkdtemp(prefix="rqueue-chaos-lost-"))
        shutil.copytree(self.server.data_dir, kept / "redis")
        shutil.copytree(self.tmp, kept / "workers")
        print(f"kept Redis's data (AOF) and the worker logs in {kept}", file=sys.stderr)


def run(params: Params) -> Result:
    return Chaos(params).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=SCENARIOS, default="kill-children")
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument(
        "--duration",
        type=float,
        default=300.0,
        help="give up after this many seconds (default 300)",
    )
    parser.add_argument(
        "--kill-rate",
        type=float,
        default=1 / 0.6,
        help="mean child kills per second (default 1.67: every 0.2 to 1 s)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="rqueue work parents")
    parser.add_argument("--concurrency", type=int, default=2, help="children per parent")
    parser.add_argument("--work-ms", type=float, default=0.0, help="each task sleeps this long")
    parser.add_argument(
        "--slots",
        type=int,
        default=0,
        help="run async def tasks in async mode, this many at once per child (default 0: off)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="run the sync tasks in thread mode, this many at once per child (default 0: off)",
    )
    parser.add_argument(
        "--restart-every", type=float, default=4.0, help="seconds between Redis restarts/freezes"
    )
    parser.add_argument(
        "--redis-faults",
        type=int,
        default=None,
        help="most Redis restarts/freezes (default: 2 freezes, 1 restart for batch, "
        "else no restart limit)",
    )
    parser.add_argument(
        "--keep-history",
        action="store_true",
        help="never rewrite Redis's AOF, so a loss can be traced through every write",
    )
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.duration <= 0 or args.kill_rate <= 0:
        parser.error("--tasks, --duration and --kill-rate must be positive")
    if args.slots < 0 or args.threads < 0:
        parser.error("--slots and --threads must not be negative")
    params = Params(
        scenario=args.scenario,
        tasks=args.tasks,
        duration=args.duration,
        kill_rate=args.kill_rate,
        seed=args.seed,
        workers=args.workers,
        concurrency=args.concurrency,
        work_ms=args.work_ms,
        slots=args.slots,
        threads=args.threads,
        restart_every=args.restart_every,
        keep_history=args.keep_history,
        redis_faults=args.redis_faults
        if args.redis_faults is not None
        else {"freeze-redis": 2, "batch": 1}.get(args.scenario, 0),
    )
    result = run(params)
    print(result.table())
    return 0 if result.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
