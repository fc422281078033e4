"""The Lua scripts, loaded once and called by SHA.

redis-py's ``register_script`` checks ``SCRIPT EXISTS`` before every pipeline, which
costs a round trip on the hot path; here a script is sent by SHA, and sent whole
(``EVAL``, which also caches it) only when Redis answers NOSCRIPT (after a restart or
``SCRIPT FLUSH``). ``EVAL`` goes where the call went, to the node that lost the script:
a ``SCRIPT LOAD`` on Redis Cluster goes to every primary and fails while one is down,
which would stop the healthy shards' queues with the one that is down.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

from redis.client import Pipeline
from redis.exceptions import AskError, NoScriptError

from rqueue.store.cluster import command_name
from rqueue.store.wire import KeyOrArg, Reply, Wire, script_call


class ScriptRunner(Protocol):
    """A ``redis.Redis`` client, or a :class:`rqueue.wire.Wire` for the hot paths."""

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: KeyOrArg) -> Any: ...

    def eval(self, script: str, numkeys: int, *keys_and_args: KeyOrArg) -> Any: ...


_INCLUDE = re.compile(r"^-- @(\w+)$", re.MULTILINE)
"""A line that is only ``-- @<name>``: ``lua/<name>.lua`` goes there (what scripts share)."""


def _lua(name: str) -> str:
    return (resources.files("rqueue.store") / "lua" / f"{name}.lua").read_text("utf-8")


def _expanded(source: str) -> str:
    """``source`` with each ``-- @<name>`` line replaced by that file, itself expanded
    (levels.lua puts groups.lua in)."""
    return _INCLUDE.sub(lambda line: _expanded(_lua(line[1]).rstrip("\n")), source)


@dataclass(frozen=True)
class LuaScript:
    """One ``.lua`` file of the package."""

    name: str
    source: str
    sha: str

    @classmethod
    def load(cls, name: str) -> LuaScript:
        """The script ``lua/<name>.lua``, with ``lua/header.lua`` where it says ``-- @header``
        (and so for any ``-- @<name>`` line): the payload layout, or the failed list's
        invariant, is written down once, not in every script that relies on it."""
        source = _expanded(_lua(name))
        return cls(name, source, hashlib.sha1(source.encode("utf-8")).hexdigest())

    def __call__(self, client: ScriptRunner, keys: Sequence[str], args: Sequence[KeyOrArg]) -> Any:
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return client.eval(self.source, len(keys), *keys, *args)

    def send(
        self, wire: Wire, keys: Sequence[str], args: Sequence[KeyOrArg], reuse: bool = False
    ) -> Callable[[], Any]:
        """Run the script now and return the call that reads its reply (``reuse``: see
        ``Wire.send``)."""
        finish = wire.send(*script_call(self.sha, len(keys)), *keys, *args, reuse=reuse)
        if finish is None:  # the connection is busy in another thread: run it in full now
            done = self(wire.client, keys, args)
            return lambda: done

        def read() -> Any:
            try:
                return finish()
            except NoScriptError:  # it did not run: load it and run it now
                return self(wire, keys, args)

        return read

    def send_after(
        self,
        wire: Wire,
        first: tuple[KeyOrArg, ...] | Reply,
        keys: Sequence[str],
        args: Sequence[KeyOrArg],
        reuse: bool = False,
    ) -> Callable[[], tuple[Any, Any]] | None:
        """Send ``first``, then this script, in one write (``Wire.send_two``: the script's
        keys share ``first``'s slot); or, ``first`` being a command sent already whose
        reply is unread, the script behind it on its connection (``Reply.then``). The
        returned call reads ``first``'s reply as it came (an error reply as its
        exception) and the script's as :meth:`send`'s reader does: a script Redis lost,
        or a slot that moved, runs again now. None: the wire is busy, nothing was sent."""
        script = (*script_call(self.sha, len(keys)), *keys, *args)
        if isinstance(first, Reply):
            finish: Callable[[], tuple[Any, Any]] | None = first.then(*script, reuse=reuse)
        else:
            finish = wire.send_two(first, script, reuse=reuse)
        if finish is None:
            return None

        def read() -> tuple[Any, Any]:
            first_reply, reply = finish()
            if isinstance(reply, (NoScriptError, AskError)):  # it did not run
                reply = self(wire, keys, args)
            elif isinstance(reply, Exception):
                raise reply
            return first_reply, reply

        return read

    def queue(self, pipe: Pipeline, keys: Sequence[str], args: Sequence[KeyOrArg]) -> None:
        """Add a call to a pipeline; run it with :func:`execute`."""
        pipe.evalsha(self.sha, len(keys), *keys, *args)


class Scripts:
    """Every script rqueue runs, each attribute loaded from the ``lua/<name>.lua`` it is
    named for; see each file's header for KEYS, ARGV and invariants."""

    push: LuaScript
    reserve: LuaScript
    ack: LuaScript
    renew: LuaScript
    release: LuaScript
    fail: LuaScript
    migrate: LuaScript
    retry_failed: LuaScript
    read_failed: LuaScript
    clear: LuaScript
    pause: LuaScript
    cancel: LuaScript
    settle_cancelled: LuaScript
    prune_cancelling: LuaScript
    fire_schedules: LuaScript
    save_schedules: LuaScript
    claim_names: LuaScript
    earliest_schedules: LuaScript
    remove_schedule: LuaScript
    clock: LuaScript
    push_once: LuaScript
    count_exception: LuaScript
    batch_open: LuaScript
    batch_pushed: LuaScript
    batch_nested: LuaScript
    batch_member: LuaScript
    batch_add: LuaScript
    batch_cancel: LuaScript
    batch_retry: LuaScript
    release_unique: LuaScript
    rate_limit: LuaScript
    lock: LuaScript
    unlock: LuaScript
    slot_take: LuaScript
    slot_free: LuaScript
    breaker: LuaScript
    progress: LuaScript
    debounce: LuaScript
    checkpoint: LuaScript
    depend: LuaScript
    wait: LuaScript
    resolve: LuaScript

    def __init__(self) -> None:
        for name in Scripts.__annotations__:
            setattr(self, name, LuaScript.load(name))

    def all(self) -> list[LuaScript]:
        return [v for v in vars(self).values() if isinstance(v, LuaScript)]


def execute(pipe: Pipeline, scripts: Scripts, raise_on_error: bool = True) -> list[Any]:
    """Run a pipeline of script calls, loading the scripts if Redis lost them.

    Only the calls that failed with NOSCRIPT are sent again, so nothing that took
    effect the first time runs twice, and each whole (``EVAL``) to the node it went to.
    With ``raise_on_error`` false the other errors
    are returned in place, for a caller that retries only the calls that failed.
    """
    commands = list(pipe.command_stack)
    results = pipe.execute(raise_on_error=False)
    missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
    # A WAIT after a call waits for that call's writes: it goes again with the call.
    missing += [i + 1 for i in missing if i + 1 < len(commands) and _is_wait(commands[i + 1])]
    missing.sort()
    if missing:
        sources = {script.sha: script.source for script in scripts.all()}
        for i in missing:
            args, options = commands[i]
            if command_name(args) == "EVALSHA":
                args = ("EVAL", sources[args[1]], *args[2:])
            pipe.execute_command(*args, **options)  # type: ignore[no-untyped-call]
        retried = pipe.execute(raise_on_error=False)
        for i, result in zip(missing, retried, strict=True):
            results[i] = result
    for result in results:
        if raise_on_error and isinstance(result, Exception):
            raise result
    return results


def _is_wait(command: tuple[tuple[Any, ...], dict[str, Any]]) -> bool:
    return command_name(command[0]) == "WAIT"
