"""Worker options: how ``rqueue work`` takes and runs tasks. Frozen, resolved once."""

from __future__ import annotations

from dataclasses import dataclass, field

from rqueue.store.keys import validate_queue_name


@dataclass(frozen=True)
class WorkerOptions:
    """Every knob of ``rqueue work``; the CLI flags map one to one onto these fields."""

    queues: tuple[str, ...] = ("default",)
    concurrency: int = 1
    timeout: float = 60.0
    """Seconds a task may run unless it sets its own ``timeout``."""
    tries: int = 3
    """Attempts a task gets unless it sets its own ``tries``."""
    sleep: float = 1.0
    """Seconds to wait between polls when blocking waits are off (``block_for`` 0)."""
    block_for: float = 1.0
    """Seconds an idle child blocks waiting for a push before polling again."""
    once: bool = False
    stop_when_empty: bool = False
    max_jobs: int = 0
    max_time: float = 0.0
    memory: int = 0
    """Megabytes of RSS above which a child is recycled after its current task (0: off)."""
    rest: float = 0.0
    """Seconds a child rests after each task."""
    prefetch: int = 100
    """Most tasks a child reserves in one round trip when the queue is deep."""
    kill_grace: float = 5.0
    """Seconds after a task's timeout before the parent kills a child that did not stop."""
    reservation_margin: float = 15.0
    """Extra seconds a reservation outlives the worst case, for slow networks."""
    preload: tuple[str, ...] = field(default_factory=tuple)
    schedule: bool = True
    """Run the scheduler tick in the parent (``--no-schedule`` turns it off)."""

    def __post_init__(self) -> None:
        if not self.queues:
            raise ValueError("give at least one queue name")
        for name in self.queues:
            validate_queue_name(name)
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.tries < 1:
            raise ValueError("tries must be at least 1")
        if self.timeout <= 0:
            raise ValueError("timeout must be positive")
        if not 1 <= self.prefetch <= 1000:
            raise ValueError("prefetch must be between 1 and 1000")

    @property
    def batch_limit(self) -> int:
        """Most tasks one reserve may take: one when a single task is all we may run."""
        if self.once:
            return 1
        if self.max_jobs:
            return max(1, min(self.prefetch, self.max_jobs))
        return self.prefetch

    @property
    def effective_concurrency(self) -> int:
        return 1 if self.once else self.concurrency

    @property
    def effective_max_jobs(self) -> int:
        return 1 if self.once else self.max_jobs
