"""The worker parent: forks children, watches them, and keeps time for the queues.

The parent runs no tasks. It restarts children that die and gives their tasks back
at once, kills a child whose task overran its timeout and did not stop, moves due
delayed tasks and expired reservations back to the ready lists (waking at the
earliest due time), and turns signals into warm or cold shutdown, reload or pause.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import TypeVar

from setproctitle import setproctitle

from rqueue.encoding.payload import new_id
from rqueue.metrics.registry import Heartbeat, Running
from rqueue.schedules.scheduler import Scheduler
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import REDIS_ERRORS, backoff_delay, persist
from rqueue.text import shown
from rqueue.worker.cancels import CancelWatch
from rqueue.worker.child import HANDLED_SIGNALS, ChildWorker
from rqueue.worker.cpus import cpus_to_pin, pin
from rqueue.worker.due_tasks import DueTasks
from rqueue.worker.interrupts import Interrupted, InterruptibleWaits
from rqueue.worker.options import WorkerOptions
from rqueue.worker.participants import recorder
from rqueue.worker.process import without_redis_url
from rqueue.worker.recovery import Recovery, counted_by_parent
from rqueue.worker.running_now import running_now
from rqueue.worker.scaling import TargetFile, resize, respawn_delay
from rqueue.worker.scoreboard import Scoreboard, State
from rqueue.worker.stop_reasons import StopReasons

log = logging.getLogger("rqueue.worker")

T = TypeVar("T")

_TICK = 1.0
_REDIS_TIMEOUT_SLACK = 0.15
_TIMED = (State.RUNNING, State.REPORTING, State.CONCURRENT)
"""Slot states whose deadline the parent enforces (in concurrent mode: the earliest one)."""


@dataclass
class Child:
    number: int
    started: float
    claims: str
    """The child's claims token (reservations.py): unique to this child process."""
    killed_for_timeout: bool = False


class Supervisor(InterruptibleWaits):
    """``rqueue work``: one parent, ``concurrency`` forked children."""

    def __init__(self, options: WorkerOptions, config: Config) -> None:
        self.options = options
        self.config = config
        self.children: dict[int, Child] = {}
        self.stopping = False
        self.cold = False
        self.reload = False
        self._respawn_after: dict[int, float] = {}
        self.target = options.effective_concurrency
        """Children to keep: ``concurrency``, or what ``concurrency_file`` says now."""
        self.retiring: set[int] = set()
        """Pids of the children stopped to shrink the pool: not replaced as they exit."""
        self.target_file = (
            TargetFile(options.concurrency_file, options.capacity)
            if options.concurrency_file and not options.once
            else None
        )

    def run(self) -> int:
        for module in self.options.preload:
            importlib.import_module(module)
        self.queue = RedisQueue(self.config)
        self.queue.ping()
        self.scheduler = Scheduler(self.queue, self.options.queues, self.options.schedule)
        self.due = DueTasks(self.queue, self.options.queues, self.options.aging)
        self.board = Scoreboard(self.options.capacity, self.options.held_limit)
        # Registered in the registry by the first tick, which also rides out a Redis that
        # refuses writes for now (a failover): reading works on a replica too.
        self.stop_reasons = StopReasons(self.queue, self.options, self.board)
        options = self.options
        self.metrics = recorder(self.queue, options.metrics, counted_by_parent)
        self.recovery = Recovery(self.queue, options, self._persist, self.metrics)
        self.cancels = CancelWatch(
            self.queue, tuple(options.queues), self.board, options.kill_grace
        )
        self.heartbeat = (
            Heartbeat(
                self.queue,
                options.queues,
                options.effective_concurrency,
                options.slots,
                options.threads,
            )
            if options.metrics
            else None
        )
        self.cpus = cpus_to_pin(
            options.pin_cpus, options.effective_concurrency, options.concurrency_file is not None
        )
        """The CPUs children are pinned to, one each (``cpus.py``): the worker's own."""
        self._install_signals()
        setproctitle(shown(f"rqueue: master {','.join(self.options.queues)}"))
        log.info(
            "worker started: queues %s, concurrency %d, pid %d, task modules %s",
            ",".join(self.options.queues),
            self.options.effective_concurrency,
            os.getpid(),
            # registry.py: what a name read from Redis may make this worker import.
            f"-A {', '.join(self.options.preload)} only"
            if self.options.preload
            else "imported on demand from the project directory (name them with -A to "
            "allow only those)",
        )
        if self.cpus:
            log.info(
                "children pinned one to a CPU, of CPUs %s%s",
                ",".join(map(str, self.cpus)),
                ""
                if self.options.pin_cpus
                else " (a child for each: --no-pin-cpus leaves them free)",
            )
        for number in range(1, self.options.effective_concurrency + 1):
            if self.stopping:  # a stop signal arrived mid-way: start no child it missed
                break
            self._spawn(number)
        failures = 0
        while self.children or not self.stopping:
            try:
                self._tick()
                failures = 0
            except Interrupted:
                continue
            except REDIS_ERRORS as exc:
                failures += 1
                if failures == 1:
                    log.warning(
                        "Redis at %s unavailable (%s); retrying", self.config.redacted_url(), exc
                    )
                self._sleep(backoff_delay(failures))
        self.metrics.flush()
        if self.heartbeat is not None:
            self.heartbeat.leave()
        if self.reload:
            log.info("reloading: starting a fresh worker process")
            argv = [sys.executable, "-m", "rqueue", *without_redis_url(sys.argv[1:])]
            os.execve(sys.executable, argv, {**os.environ, "REDIS_URL": self.config.redis_url})
        log.info("worker stopped")
        return 0

    # -- one turn of the loop ---------------------------------------------------------

    def _tick(self) -> None:
        self._reap()
        self._enforce_deadlines()
        # While stopping, poll children briskly: a SIGCHLD that lands just before the
        # blocking wait starts would otherwise cost a whole tick.
        wait = 0.05 if self.stopping else _TICK / 4 if self.options.stops_when_idle else _TICK
        if not self.stopping:
            self._resize()  # first: no child respawned only to be stopped
            self._respawn()  # before any Redis call: an outage must not hold it up
            wait = min(wait, self.due.migrate(_TICK))  # due tasks are what we woke up for
            self._check_limits()
            wait = min(wait, self._fire_schedules())
            if self.heartbeat is not None:
                self.heartbeat.beat(self._running)
            self.metrics.flush_if_due()  # of the tasks it settled for dead children
        if self.children or not self.stopping:
            self._wait_delivering_cancels(min(wait, self._time_to_next_deadline()))

    def _fire_schedules(self) -> float:
        """Fire due schedules (``scheduler.py``); seconds until the next is due.

        On Redis Cluster a shard that is down holds up only its own queues' schedules
        (the scheduler leaves them for a back-off); when no shard answers, the tick goes
        on (due tasks move per queue, ``due_tasks.py``) and the schedules are tried next
        tick. On one server the outage is the whole tick's: raised, for the parent to
        back off.
        """
        try:
            return self.scheduler.tick()
        except REDIS_ERRORS:
            if not self.config.cluster:
                raise
            return _TICK

    def _running(self) -> list[Running]:
        """What each child runs now, for the worker registry (``running_now.py``)."""
        numbers = [child.number for child in self.children.values()]
        return running_now(self.board, numbers, self.options.queues)

    def _wait_delivering_cancels(self, seconds: float) -> None:
        """Wait ``seconds`` (a push to a timer list ends it early), delivering the cancels
        of running tasks meanwhile (``cancels.py``): while a child runs a task their
        requests are read every ``cancels.POLL`` seconds, the rest of the tick (moving
        due tasks, schedules) keeping its pace; while none runs, no Redis call."""
        deadline = time.monotonic() + seconds
        while True:
            running = [(pid, child.number - 1) for pid, child in self.children.items()]
            poll = self.cancels.tick(running)
            left = deadline - time.monotonic()
            if left <= 0 or self._wait(min(left, poll)):
                return

    def _wait(self, seconds: float) -> bool:
        """Wait ``seconds``; True if a push to a timer list ended it early."""
        if seconds <= 0:
            return False
        deadline = time.monotonic() + seconds
        self._interruptible = True
        try:
            # Redis times out a blocking pop on its next cron tick (up to 100 ms late at
            # the default hz 10), so block only until shortly before the due time and
            # sleep the rest here: delayed tasks start within milliseconds of it.
            block = seconds - _REDIS_TIMEOUT_SLACK
            if block > 0.01 and self.due.wait(block):
                return True  # a push moved the earliest due time (or asked a cancel)
            remaining = deadline - time.monotonic()
            if remaining > 0:
                time.sleep(remaining)
            return False
        finally:
            self._interruptible = False

    def _check_limits(self) -> None:
        stop = self.stop_reasons.found(c.number - 1 for c in self.children.values())
        if stop is not None:
            self.reload = self.reload or stop.reload
            log.info("stopping: %s", stop.reason)
            self._begin_stop()

    # -- children ---------------------------------------------------------------------

    def _spawn(self, number: int) -> None:
        self.board.clear(number - 1)
        parent = os.getpid()
        # Until the child has its own handlers, a signal would run the parent's copied
        # handlers in the child (and signal its siblings): hold signals across the fork.
        signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)
        if self.stopping:  # a stop landed since the caller looked: it could not reach
            signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)  # a new child
            return
        claims = new_id()
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                for restored in (signal.SIGCHLD, signal.SIGCONT):
                    signal.signal(restored, signal.SIG_DFL)
                if self.cpus:
                    pin(number, self.cpus)
                for setup in self.options.child_setup:
                    setup()
                worker = ChildWorker(
                    self.options, self.config, self.board.slot(number - 1), number, parent, claims
                )
                code = worker.run()
            except BaseException:
                log.exception("worker %d crashed", number)
            finally:
                logging.shutdown()
                os._exit(code)
        self.children[pid] = Child(number, time.monotonic(), claims)
        if self.stopping:
            # Held in this thread only: a stop sent to the process while we forked went
            # to another thread (the Sentinel watcher's, a library's), and its handler
            # ran before this child was recorded, signalling every child but this one.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL if self.cold else signal.SIGTERM)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is None:
                continue
            retired = pid in self.retiring
            self.retiring.discard(pid)
            if os.WIFSIGNALED(status):
                how = f"killed by signal {os.WTERMSIG(status)}"
            else:
                how = f"exited with code {os.WEXITSTATUS(status)}"
            if retired and status == 0:
                log.info("worker %d (pid %d) stopped: the pool shrank", child.number, pid)
            elif not self.stopping or os.WIFSIGNALED(status):
                log.log(
                    logging.INFO if status == 0 else logging.WARNING,
                    "worker %d (pid %d) %s",
                    child.number,
                    pid,
                    how,
                )
            view = self.board.read(child.number - 1)
            killed_for_cancel = self.cancels.killed_for(pid)
            self.recovery.recover(
                view, child.claims, how, child.killed_for_timeout, self.cold, killed_for_cancel
            )
            self.board.retire(child.number - 1)
            if retired:
                continue
            lived = time.monotonic() - child.started
            self._respawn_after[child.number] = time.monotonic() + respawn_delay(lived, view)

    def _respawn(self) -> None:
        now = time.monotonic()
        for number, after in list(self._respawn_after.items()):
            if now >= after:
                del self._respawn_after[number]
                self._spawn(number)

    def _resize(self) -> None:
        """Keep the children the target file asks for (``scaling.py``)."""
        target = self.target_file.target() if self.target_file is not None else None
        if target is None:
            return
        if target != self.target:
            log.info("scaling from %d to %d children", self.target, target)
            self.target = target
            if self.heartbeat is not None:
                self.heartbeat.resized(target)
        kept = {c.number: pid for pid, c in self.children.items() if pid not in self.retiring}
        taken = {c.number for c in self.children.values()}
        views = {number: self.board.read(number - 1) for number in kept}
        change = resize(target, views, self._respawn_after, taken, self.options.capacity)
        for number in change.forgo:
            del self._respawn_after[number]
        for number in change.stop:
            self.retiring.add(kept[number])
            with contextlib.suppress(ProcessLookupError):
                os.kill(kept[number], signal.SIGTERM)
        for number in change.spawn:
            self._spawn(number)

    def _enforce_deadlines(self) -> None:
        now = time.monotonic()
        for pid, child in self.children.items():
            view = self.board.read(child.number - 1)
            if view is None:  # died mid-write: reaped, not killed, on the next tick
                continue
            if view.state in _TIMED and 0 < view.deadline < now:
                log.warning(
                    "worker %d (pid %d) overran its deadline by %.1f s; killing it",
                    child.number,
                    pid,
                    now - view.deadline,
                )
                child.killed_for_timeout = view.state in (State.RUNNING, State.CONCURRENT)
                os.kill(pid, signal.SIGKILL)

    def _time_to_next_deadline(self) -> float:
        deadlines = [
            v.deadline
            for v in (self.board.read(c.number - 1) for c in self.children.values())
            if v is not None
            if v.state in _TIMED and v.deadline > 0
        ]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else _TICK

    def _persist(self, call: Callable[[], T]) -> T:
        return persist(call, self._on_redis_error)

    def _on_redis_error(self, failures: int, exc: Exception) -> None:
        if failures > 100:
            raise exc
        if failures == 1:
            log.warning("Redis at %s unavailable (%s); retrying", self.config.redacted_url(), exc)
        time.sleep(backoff_delay(failures))

    # -- signals ------------------------------------------------------------------------

    def _install_signals(self) -> None:
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_reload)
        signal.signal(signal.SIGUSR2, self._on_pause)
        signal.signal(signal.SIGCONT, self._on_resume)
        signal.signal(signal.SIGCHLD, self._on_child)

    def _begin_stop(self) -> None:
        self.stopping = True
        self._respawn_after.clear()
        self._signal_children(signal.SIGTERM)

    def _signal_children(self, signum: int) -> None:
        # A child that dies of this signal sends SIGCHLD at once, and the SIGCHLD
        # handler must not raise Interrupted half-way through the loop: the children
        # not yet signalled would never stop. The caller interrupts once it is done.
        interruptible, self._interruptible = self._interruptible, False
        try:
            for pid in list(self.children):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)
        finally:
            self._interruptible = interruptible

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        interruptible = self._entering_handler()
        if self.stopping and not self.reload:
            log.warning("second %s: cold shutdown, killing children", signal.Signals(signum).name)
            self.cold = True
            self._signal_children(signal.SIGKILL)
        else:
            log.info("%s: warm shutdown, finishing current tasks", signal.Signals(signum).name)
            self.reload = False
            self._begin_stop()
        if interruptible:
            raise Interrupted()

    def _on_reload(self, signum: int, frame: FrameType | None) -> None:
        interruptible = self._entering_handler()
        if not self.stopping:
            log.info("SIGHUP: reloading after current tasks")
            self.reload = True
            self._begin_stop()
        if interruptible:
            raise Interrupted()

    def _entering_handler(self) -> bool:
        """Whether the main loop was in an interruptible wait; no nested handler (a
        SIGCHLD) may now raise Interrupted and cut this one short before it is done."""
        interruptible, self._interruptible = self._interruptible, False
        return interruptible

    def _on_pause(self, signum: int, frame: FrameType | None) -> None:
        log.info("SIGUSR2: pausing, no new tasks will be taken")
        self.board.paused = True

    def _on_resume(self, signum: int, frame: FrameType | None) -> None:
        if self.board.paused:
            log.info("SIGCONT: resuming")
        self.board.paused = False

    def _on_child(self, signum: int, frame: FrameType | None) -> None:
        self._interrupt()
