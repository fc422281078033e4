"""Worker options: how ``rqueue work`` takes and runs tasks. Frozen, resolved once."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from rqueue.encoding.ranges import MAX_TIMEOUT_SECONDS, MAX_TRIES
from rqueue.middleware.group_limits import GroupLimits
from rqueue.settings.config import ConfigError, Limit
from rqueue.store.keys import validate_queue_name
from rqueue.worker.cpus import CAN_PIN

MAX_COUNT = 2**32 - 1
"""The largest count of tasks or megabytes an option takes: more is taken for a mistake."""
_SECONDS = Limit(0, MAX_TIMEOUT_SECONDS, unit="seconds")
"""A duration: at most what a payload can hold as a task's timeout (about 49.7 days)."""

LIMITS: Mapping[str, Limit] = {
    "concurrency": Limit(1, 1000, whole=True),
    "max_concurrency": Limit(0, 1000, whole=True),
    "timeout": Limit(0.001, MAX_TIMEOUT_SECONDS, unit="seconds"),
    "tries": Limit(1, MAX_TRIES, whole=True),
    "sleep": _SECONDS,
    "block_for": _SECONDS,
    "max_jobs": Limit(0, MAX_COUNT, whole=True),
    "max_time": _SECONDS,
    "memory": Limit(0, MAX_COUNT, whole=True, unit="MB"),
    "rest": _SECONDS,
    "prefetch": Limit(1, 1000, whole=True),
    "slots": Limit(1, 10_000, whole=True),
    "threads": Limit(0, 1000, whole=True),
    "kill_grace": _SECONDS,
    "reservation_margin": _SECONDS,
    "aging": _SECONDS,
}
"""The range of every numeric field below; ``rqueue work`` checks its options against
the same table, so the command and the Python API refuse the same values. ``timeout``
and ``tries`` have the bounds ``@task`` gives a task's own."""


MAX_RATE = 1_000_000
"""The most tasks per second a rate limit may allow: more is taken for a mistake."""
_RATE_LIMIT = Limit(1, MAX_RATE, whole=True)
_RATE_PERIOD = Limit(0.001, 86_400, unit="seconds")
_RATE_TEXT = re.compile(r"(\d+)/(\d*)([smh])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


@dataclass(frozen=True)
class Rate:
    """At most ``limit`` tasks of a queue start per ``per`` seconds (``--rate 100/m``).

    Up to ``limit`` may start at once after a quiet spell, then one every ``per /
    limit`` seconds (GCRA, enforced by reserve.lua in Redis, not by sleeping here).
    """

    limit: int
    per: float = 1.0

    def __post_init__(self) -> None:
        _RATE_LIMIT.check("a rate's limit", self.limit)
        _RATE_PERIOD.check("a rate's period", self.per)
        if self.limit / self.per > MAX_RATE:
            raise ConfigError(f"a rate may allow at most {MAX_RATE:,} tasks a second")

    @property
    def period_ms(self) -> int:
        return max(1, round(self.per * 1000))

    @classmethod
    def parse(cls, text: str) -> Rate:
        """``100/m``, ``50/s``, ``10/2s``, ``5/h``: tasks per (a whole number of) units."""
        match = _RATE_TEXT.fullmatch(text.strip())
        if match is None:
            raise ConfigError(
                f"a rate is TASKS/PERIOD such as 100/m, 50/s, 10/2s or 5/h, not {text!r}"
            )
        limit, count, unit = match.groups()
        return cls(int(limit), int(count or 1) * _UNIT_SECONDS[unit])


def parse_rates(text: str, queues: Sequence[str]) -> dict[str, Rate]:
    """``--rate``: one rate for every queue (``100/m``), or one per named queue
    (``emails=100/m,sms=5/s``, each among ``queues``)."""
    if "=" not in text:
        rate = Rate.parse(text)
        return dict.fromkeys(queues, rate)
    rates: dict[str, Rate] = {}
    for item in text.split(","):
        name, _, rate_text = item.partition("=")
        name = name.strip()
        if name not in queues:
            raise ConfigError(f"{name!r} is not one of this worker's queues ({', '.join(queues)})")
        if name in rates:
            raise ConfigError(f"queue {name!r} is given two rates")
        rates[name] = Rate.parse(rate_text)
    return rates


@dataclass(frozen=True)
class WorkerOptions:
    """Every knob of ``rqueue work``; the CLI flags map one to one onto these fields."""

    queues: tuple[str, ...] = ("default",)
    concurrency: int = 1
    max_concurrency: int = 0
    """Most children ``concurrency_file`` may ask for (0: ``concurrency``): the
    scoreboard has a slot for each from the start."""
    concurrency_file: str | None = None
    """A file holding the number of children to run, read each tick and obeyed within
    1..``capacity`` (``rqueue supervise`` writes it to scale the pool): more are forked,
    fewer stopped warmly, idle ones first (``scaling.py``)."""
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
    """Stop once no task is ready or running; delayed ones do not count (Laravel's)."""
    stop_when_drained: bool = False
    """Stop once no task is ready, delayed (a retry in backoff too) or reserved."""
    max_jobs: int = 0
    max_time: float = 0.0
    memory: int = 0
    """Megabytes of RSS above which a child is recycled after its current task (0: off)."""
    rest: float = 0.0
    """Seconds a child rests after each task."""
    prefetch: int = 100
    """Most tasks a child reserves in one round trip when the queue is deep."""
    slots: int = 100
    """Most ``async def`` tasks a child runs at once on its event loop (async mode)."""
    threads: int = 0
    """Threads per child for sync tasks (thread mode); 0: sync tasks run one at a time,
    in the child's main thread, under SIGALRM (process mode)."""
    kill_grace: float = 5.0
    """Seconds after a task's timeout before the parent kills a child that did not stop."""
    reservation_margin: float = 15.0
    """Extra seconds a reservation outlives the worst case, for slow networks."""
    aging: float = 0.0
    """Seconds a priority level's oldest task may wait, untaken, before the parent
    moves it to the front of the highest level with tasks (``--aging``; migrate.lua);
    0: levels are strict, a lower one may wait for ever."""
    preload: tuple[str, ...] = field(default_factory=tuple)
    schedule: bool = True
    """Run the scheduler tick in the parent (``--no-schedule`` turns it off)."""
    rates: Mapping[str, Rate] = field(default_factory=dict)
    """Queue name -> its rate limit (``--rate``); queues not named have none."""
    group_limits: GroupLimits | None = None
    """Limits on each fair group's calls (``--group-concurrency``, ``--group-rate``)."""
    pin_cpus: bool | None = None
    """Run each child on one CPU of the worker's own, child n on the n-th, round robin
    (``--pin-cpus``; Linux only); False never (``--no-pin-cpus``); None when the worker
    has a fixed child for every CPU (``cpus.py``: why, and what it costs)."""
    metrics: bool = True
    """Count outcomes per task in Redis and list this worker in the registry
    (``rqueue workers``, the dashboard); ``--no-metrics`` turns both off."""
    child_setup: tuple[Callable[[], object], ...] = ()
    """Called in each child right after it is forked, before it builds anything (Celery's
    ``worker_process_init``): what must not cross a fork starts there, e.g.
    ``rqueue.contrib.opentelemetry.instrument`` (``rqueue work --otel``)."""

    def __post_init__(self) -> None:
        if not self.queues:
            raise ValueError("give at least one queue name")
        for name in self.queues:
            validate_queue_name(name)
        for name, limit in LIMITS.items():
            limit.check(name, getattr(self, name))
        if self.max_concurrency and self.max_concurrency < self.concurrency:
            raise ValueError(
                f"max_concurrency {self.max_concurrency} is below concurrency {self.concurrency}"
            )
        if self.pin_cpus and not CAN_PIN:
            raise ValueError("pin_cpus (--pin-cpus): this system cannot pin a process to a CPU")
        for name, rate in self.rates.items():
            if name not in self.queues or not isinstance(rate, Rate):
                raise ValueError(f"rates: {name!r} -> {rate!r} is not a Rate for one of queues")

    @property
    def batch_limit(self) -> int:
        """Most tasks one reserve may take: one when a single task is all we may run."""
        if self.once:
            return 1
        if self.max_jobs:
            return max(1, min(self.prefetch, self.max_jobs))
        return self.prefetch

    @property
    def held_limit(self) -> int:
        """Most tasks a child's scoreboard slot records at once: a batch in process
        mode; in async mode the running coroutines, plus a batch read ahead before the
        child knew its tasks were async, plus finished ones whose acks are pending,
        plus the sync tasks running in threads."""
        return self.slots + self.threads + 2 * self.batch_limit

    @property
    def effective_concurrency(self) -> int:
        return 1 if self.once else self.concurrency

    @property
    def capacity(self) -> int:
        """Most children at once: the scoreboard's slots."""
        return max(self.effective_concurrency, 0 if self.once else self.max_concurrency)

    @property
    def effective_max_jobs(self) -> int:
        return 1 if self.once else self.max_jobs

    @property
    def stops_when_idle(self) -> bool:
        """``--stop-when-empty`` or ``--stop-when-drained``: the parent watches for idleness."""
        return self.stop_when_empty or self.stop_when_drained
