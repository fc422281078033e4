"""Iterable tasks: a generator that yields a cursor after each item, resumed from its
last checkpoint after an interruption.

``@task(iterable=True)`` wraps the function in a *driver* (:func:`driven`), once,
when the task is defined: the worker calls the driver as it calls any task, so a
plain task's path has nothing of this. The driver

- resumes: if a checkpoint is kept for this task, it calls the function with
  ``cursor=<the last cursor>`` (else as dispatched);
- counts each value the generator yields as one item done, that value its cursor
  (``Total(n)`` instead says how many items there are: progress is then reported
  as ``done / n`` at each checkpoint, counted over all attempts);
- checkpoints at an item boundary once :data:`CHECKPOINT_EVERY` seconds have passed
  since the last (or half the task's timeout, if shorter), and on ANY exception
  leaving the generator (a timeout, a cancel, a lost child's ``CancelledError``),
  then re-raises it;
- stops at the first item boundary after a warm shutdown began: checkpointed, the
  task is put back (:class:`Suspended`) without using an attempt;
- ends the task when the generator returns: its return value is the result (an
  async generator cannot return one: None).

Where checkpoints go is the context's :class:`Keeper`: a worker child sets one that
keeps them in Redis (``worker/iteration.py``), re-arms the task's time limit at each
checkpoint and says whether the worker is stopping. With none (``sync()``, fakes,
the function called directly) the generator simply runs to its end.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import AsyncGenerator, Callable, Generator
from contextvars import ContextVar
from typing import Any, NamedTuple, Protocol

from rqueue.errors import InvalidTaskOption
from rqueue.middleware.base import Release
from rqueue.store.checkpoints import Checkpoint
from rqueue.tasks.current import Run, current_run

log = logging.getLogger("rqueue.worker")

ITERABLE = "iterable"
"""The ``meta`` entry of an iterable task's calls: the worker's roster gives them the
participant that forgets their checkpoint once they fail for good."""
CHECKPOINT_EVERY = 1.0
"""Seconds between two checkpoints at most (fewer if the task's timeout is short)."""


class Total(NamedTuple):
    """Yield ``Total(n)`` (before the items, or whenever it is known) to say an
    iterable task has ``n`` items: its progress is then reported at each checkpoint.
    Not an item, not a cursor."""

    items: int


class Suspended(Release):
    """A warm shutdown stopped an iterable task at an item boundary, checkpointed: it
    goes back to its queue at once, its attempt given back (the worker's verdict)."""

    def __init__(self) -> None:
        super().__init__(0.0)


class Keeper(Protocol):
    """Where a run's checkpoints go (a worker child's: ``worker/iteration.py``)."""

    def drives(self, run: Run, driver: Callable[..., Any]) -> bool:
        """The run is a call of ``driver`` (not another task calling an iterable
        task's function directly, whose run it would take for its own)."""

    def resume(self, run: Run) -> Checkpoint | None:
        """The run's task's checkpoint, checked (None: none: start as dispatched)."""

    def every(self, run: Run) -> float:
        """Seconds between two checkpoints of this run."""

    def save(self, run: Run, checkpoint: Checkpoint, rearm: bool) -> None:
        """Keep the checkpoint; with ``rearm`` the run's time limit starts again.
        CheckpointRefused if the worker no longer holds the task."""

    def finish(self, run: Run, checkpoint: Checkpoint) -> None:
        """The generator returned: keep its last checkpoint only as long as its
        success could still be lost (see the implementation)."""

    def stopping(self) -> bool:
        """A warm shutdown began: stop at the next item boundary."""


_keeper: ContextVar[Keeper | None] = ContextVar("rqueue_checkpoint_keeper", default=None)


def use_keeper(keeper: Keeper | None) -> None:
    """Keep this context's iterable tasks' checkpoints with ``keeper`` (a worker child
    sets one as it starts; its threads and coroutines copy its context)."""
    _keeper.set(keeper)


def driven(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The driver of an iterable task's function (see the module doc); InvalidTaskOption
    if ``fn`` is not a generator function taking ``cursor``."""
    name = getattr(fn, "__qualname__", fn)
    if not (inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)):
        raise InvalidTaskOption(
            f"@task(iterable=True): {name!r} must be a generator function (or an async "
            "one) that yields a cursor after each item"
        )
    parameters = inspect.signature(fn).parameters
    if "cursor" not in parameters and not any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    ):
        raise InvalidTaskOption(
            f"@task(iterable=True): {name!r} must take a `cursor` argument (cursor=None): "
            "a resumed run is called with its last checkpointed cursor"
        )
    driver = _async_driver(fn) if inspect.isasyncgenfunction(fn) else _driver(fn)
    return functools.update_wrapper(driver, fn)


def _driver(fn: Callable[..., Generator[Any, Any, Any]]) -> Callable[..., Any]:
    def drive(*args: Any, **kwargs: Any) -> Any:
        walk = _Walk.start(kwargs, drive)
        items = fn(*args, **kwargs)
        try:
            while True:
                try:
                    item = next(items)
                except StopIteration as returned:
                    walk.finished()
                    return returned.value
                walk.passed(item)
        except BaseException:
            walk.interrupted()
            raise
        finally:
            items.close()

    return drive


def _async_driver(fn: Callable[..., AsyncGenerator[Any, Any]]) -> Callable[..., Any]:
    async def drive(*args: Any, **kwargs: Any) -> None:
        walk = _Walk.start(kwargs, drive)
        items = fn(*args, **kwargs)
        try:
            while True:
                try:
                    item = await items.__anext__()
                except StopAsyncIteration:
                    walk.finished()
                    return
                walk.passed(item)
        except BaseException:
            walk.interrupted()
            raise
        finally:
            await items.aclose()

    return drive


class _Walk:
    """One run's way through its items: where it is, and when it next checkpoints."""

    __slots__ = ("cursor", "done", "due", "every", "keeper", "run", "saved", "total")

    def __init__(self, keeper: Keeper | None, run: Run | None, start: Checkpoint) -> None:
        self.keeper, self.run = keeper, run
        self.cursor, self.done, self.total = start
        self.saved = True
        """Nothing since the last checkpoint (or the start) to keep."""
        self.every = CHECKPOINT_EVERY
        if keeper is not None and run is not None:
            self.every = keeper.every(run)
        self.due = time.monotonic() + self.every

    @classmethod
    def start(cls, kwargs: dict[str, Any], driver: Callable[..., Any]) -> _Walk:
        """The walk of this context's run of ``driver``, resumed from its checkpoint if
        one is kept (``kwargs`` then gets its cursor)."""
        keeper, run = _keeper.get(), current_run()
        if keeper is None or run is None or not keeper.drives(run, driver):
            # Not a worker's run of this task: to the end, unkept; its progress is its
            # run's only where no worker runs it (rqueue.testing keeps it in memory).
            reported = run if keeper is None else None
            return cls(None, reported, Checkpoint(kwargs.get("cursor"), 0, None))
        resumed = keeper.resume(run)
        if resumed is None:
            return cls(keeper, run, Checkpoint(kwargs.get("cursor"), 0, None))
        kwargs["cursor"] = resumed.cursor
        return cls(keeper, run, resumed)

    def passed(self, item: object) -> None:
        """The generator yielded: an item is done (``item`` its cursor), or its total."""
        if type(item) is Total:
            self.total = _checked_total(item.items)
            return
        self.cursor = item
        self.done += 1
        self.saved = False
        keeper = self.keeper
        if keeper is None:
            return
        if keeper.stopping():
            self._save(rearm=True)  # re-armed: no timeout may cut the write short
            raise Suspended
        if time.monotonic() >= self.due:
            self._save(rearm=True)

    def finished(self) -> None:
        keeper, run = self.keeper, self.run
        if keeper is not None:
            assert run is not None
            keeper.finish(run, Checkpoint(self.cursor, self.done, self.total))
            self.saved = True
        self._report()

    def interrupted(self) -> None:
        """An exception leaves the generator: keep how far it came, unless kept already.
        A failure to keep it is logged, never raised over the exception itself."""
        if self.saved or self.keeper is None:  # unkept: nothing to keep
            return
        try:
            self._save(rearm=False)
        except Exception:
            log.warning("an interrupted iterable task's checkpoint was not kept", exc_info=True)

    def _save(self, rearm: bool) -> None:
        keeper, run = self.keeper, self.run
        assert keeper is not None and run is not None
        self.saved = True  # tried once: a refused or failed write is not tried again
        keeper.save(run, Checkpoint(self.cursor, self.done, self.total), rearm)
        self.due = time.monotonic() + self.every
        self._report()

    def _report(self) -> None:
        """Report the progress, if the task said how many items it has."""
        total, run = self.total, self.run
        if total is None or run is None:
            return
        fraction = min(1.0, self.done / total) if total else 1.0
        run.job.progress(fraction, f"{self.done} of {total} items")


def _checked_total(items: object) -> int:
    if type(items) is not int or items < 0:
        raise InvalidTaskOption(f"Total(items) needs a count of items (an int >= 0), not {items!r}")
    return items
