"""Redis Cluster: each command sent to the primary that serves its key's slot.

Every key of one queue shares a slot (``keys.py``), and the global keys share another,
so each script call and each of rqueue's pipelines has one home. What is left is a
router, kept here instead of using redis-py's ``RedisCluster`` because that client
retries commands on its own after a lost connection (which can run a push twice),
refuses ``EVALSHA`` in pipelines and has no lean per-node path for the Wire.

A redirect (``MOVED``, ``ASK``) means the command did not run, so it is always safe to
send it again where Redis points; ``MOVED`` also means the slot map is out of date
(a failover, a resharding), so the map is read again from the cluster.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import redis
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.exceptions import AskError, MovedError

from rqueue.settings.config import ConfigError
from rqueue.store.retry import REDIS_ERRORS, RedisUnavailable

Address = tuple[str, int]
REDIRECTS = 5
"""Redirects followed for one command; more means the cluster is moving slots: retry later."""
_REFRESH_INTERVAL = 0.1
"""Seconds between two reads of the slot map after connection errors, so that a dead
node does not make every caller ask the cluster at once."""
_EVERY_PRIMARY = frozenset({"FLUSHALL", "FLUSHDB", "SCRIPT", "CONFIG"})
"""Commands that change a server rather than a key: sent to every primary."""
_ANY_PRIMARY = frozenset({"CONFIG GET"})
"""Of those, the ones that only read a setting: the first primary that answers does,
so a shard that is down does not make them fail."""
_KEYLESS = frozenset(
    {"PING", "TIME", "INFO", "CLIENT", "CLUSTER", "DBSIZE", "KEYS", "SCAN", "ROLE", "WAIT"}
)
_PER_KEY = frozenset({"DEL", "UNLINK", "EXISTS", "TOUCH"})
"""Multi-key commands whose keys may be in different slots: sent key by key, summed."""
_SCRIPTS = frozenset({"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"})


def command_name(args: Sequence[Any]) -> str:
    """The command's first word (redis-py passes ``"SCRIPT LOAD"`` as one argument)."""
    first = args[0]
    text = first.decode() if isinstance(first, bytes) else str(first)
    return text.split(" ", 1)[0].upper()


def _words(args: Sequence[Any]) -> str:
    """A command's first two words (``"CONFIG GET"``), as redis-py may pass them as one."""
    text = " ".join(a.decode() if isinstance(a, bytes) else str(a) for a in args[:2])
    return " ".join(text.split(" ", 2)[:2]).upper()


def command_key(args: Sequence[Any]) -> Any:
    """The key a command is routed by, or None for a command without one."""
    name = command_name(args)
    if name in _SCRIPTS:
        return args[3] if int(args[2]) > 0 else None
    if name in _KEYLESS or name in _EVERY_PRIMARY or len(args) < 2:
        return None
    return args[1]


class SlotMap:
    """Which primary serves each of the 16384 slots, and one client per primary."""

    def __init__(self, seeds: Sequence[Address], node: Callable[[str, int], redis.Redis]) -> None:
        self._seeds = list(seeds)
        self._node = node
        self._clients: dict[Address, redis.Redis] = {}
        self._slots: list[Address | None] = [None] * REDIS_CLUSTER_HASH_SLOTS
        self._slot_of: dict[Any, int] = {}
        self._stale = True
        self._refreshed = -_REFRESH_INTERVAL
        self._lock = threading.Lock()

    def slot(self, key: Any) -> int:
        slot = self._slot_of.get(key)
        if slot is None:
            raw = key if isinstance(key, bytes) else str(key).encode()
            slot = self._slot_of[key] = key_slot(raw)
            if len(self._slot_of) > 100_000:  # keys of tests and tools, not queues: forget
                self._slot_of.clear()
        return slot

    def address(self, args: Sequence[Any]) -> Address:
        """The primary to send ``args`` to (a key-less command: any primary)."""
        if self._stale:
            self.refresh()
        key = command_key(args)
        found = self._slots[self.slot(key)] if key is not None else None
        if found is None:
            if key is not None:
                self.refresh(force=True)
                found = self._slots[self.slot(key)]
            found = found or random.choice(self.primaries_addresses())
        return found

    def seed(self) -> redis.Redis:
        """A client of the first seed node, made without talking to it."""
        return self.client(self._seeds[0])

    def client(self, address: Address) -> redis.Redis:
        client = self._clients.get(address)
        if client is None:
            client = self._clients.setdefault(address, self._node(*address))
        return client

    def primaries_addresses(self) -> list[Address]:
        if self._stale:
            self.refresh()
        found = self._known()
        if not found:
            raise redis.ConnectionError(f"no node of the cluster at {self._seeds} serves slots")
        return found

    def primaries(self) -> list[redis.Redis]:
        return [self.client(address) for address in self.primaries_addresses()]

    def moved(self, error: AskError) -> None:
        """A node said ``MOVED``: that slot is served there now, and the map is out of
        date (a failover moves many slots): read it again, at most every
        :data:`_REFRESH_INTERVAL`, so a pipeline of redirected calls costs one read."""
        self._slots[error.slot_id] = (error.host, int(error.port))
        self.refresh()

    def lost(self) -> None:
        """A node did not answer: read the map again before the next command."""
        self._stale = True

    def refresh(self, force: bool = False) -> None:
        """Read the slot map from the first node that answers (known primaries first)."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._refreshed < _REFRESH_INTERVAL:
                return
            self._refreshed = now
            candidates = list(dict.fromkeys([*self._known(), *self._seeds]))
            errors = []
            for address in candidates:
                try:
                    reply = self.client(address).execute_command("CLUSTER SLOTS")  # type: ignore[no-untyped-call]
                except REDIS_ERRORS as exc:
                    errors.append(f"{address[0]}:{address[1]}: {exc}")
                    continue
                except redis.ResponseError as exc:  # not a cluster: no waiting fixes that
                    raise ConfigError(
                        f"Redis Cluster mode (RQUEUE_CLUSTER or a redis+cluster:// URL) but "
                        f"{address[0]}:{address[1]} is not a cluster node: {exc}"
                    ) from None
                self._apply(reply, address)
                self._stale = False
                return
            self._stale = True
            raise redis.ConnectionError(f"no node of the cluster answered: {'; '.join(errors)}")

    def _known(self) -> list[Address]:
        """The primaries the map names, as last read."""
        return sorted({a for a in self._slots if a is not None})

    def _apply(self, reply: Any, asked: Address) -> None:
        slots: list[Address | None] = [None] * REDIS_CLUSTER_HASH_SLOTS
        for start, end, primary, *_ in reply:
            host = primary[0].decode() if isinstance(primary[0], bytes) else primary[0]
            # An empty host means "the address you reached me at" (cluster-announce).
            address = (host or asked[0], int(primary[1]))
            slots[int(start) : int(end) + 1] = [address] * (int(end) - int(start) + 1)
        self._slots = slots

    def close(self) -> None:
        for client in self._clients.values():
            client.close()


class ClusterClient(redis.Redis):
    """A ``redis.Redis`` whose every command goes to the primary of its key's slot.

    The command methods (``lrange``, ``evalsha``, ...) are redis-py's own; only
    :meth:`execute_command` differs. Used for everything but the hot path, which goes
    through :class:`~rqueue.store.wire.Wire` with the same :class:`SlotMap`.
    """

    def __init__(self, slots: SlotMap) -> None:
        self.slots = slots
        # A real pool (a seed's) for the parts of redis-py that read one; made without
        # a round trip, so that opening a queue stays free until it is used.
        super().__init__(connection_pool=slots.seed().connection_pool)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        name = command_name(args)
        if name in _EVERY_PRIMARY:
            if _words(args) in _ANY_PRIMARY:
                return self.any_primary(*args, **options)
            replies = [c.execute_command(*args, **options) for c in self.slots.primaries()]  # type: ignore[no-untyped-call]
            return replies[0]  # every one, not only the first: hence no next()
        if name == "KEYS":
            return [k for c in self.slots.primaries() for k in c.execute_command(*args)]  # type: ignore[no-untyped-call]
        if name in _PER_KEY and len(args) > 2:
            return sum(int(self.execute_command(name, key)) for key in args[1:])
        return self._routed(args, options)

    def any_primary(self, *args: Any, **options: Any) -> Any:
        """``args``' reply from the first primary that answers, asked in turn: for a
        command any node answers alike, which must not fail while one shard is down."""
        primaries = self.slots.primaries()
        for primary in primaries[:-1]:
            try:
                return primary.execute_command(*args, **options)  # type: ignore[no-untyped-call]
            except REDIS_ERRORS:
                self.slots.lost()
        return primaries[-1].execute_command(*args, **options)  # type: ignore[no-untyped-call]

    def _routed(self, args: Sequence[Any], options: dict[str, Any]) -> Any:
        for _ in range(REDIRECTS):
            address = self.slots.address(args)
            try:
                return self.slots.client(address).execute_command(*args, **options)  # type: ignore[no-untyped-call]
            except MovedError as exc:
                self.slots.moved(exc)
            except AskError as exc:
                return self.asking(exc, args, options)
            except REDIS_ERRORS:
                self.slots.lost()
                raise
        raise RedisUnavailable(f"TRYAGAIN {command_name(args)} redirected {REDIRECTS} times")

    def asking(self, error: AskError, args: Sequence[Any], options: dict[str, Any]) -> Any:
        """Send ``args`` once to the node a slot is migrating to, as ``ASK`` says."""
        pipe = self.slots.client((error.host, int(error.port))).pipeline(transaction=False)
        pipe.execute_command("ASKING")  # type: ignore[no-untyped-call]
        pipe.execute_command(*args, **options)  # type: ignore[no-untyped-call]
        return pipe.execute()[1]

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        if transaction:
            raise ValueError("rqueue sends no MULTI/EXEC on Redis Cluster: use Lua scripts")
        return ClusterPipeline(self)

    def scan_iter(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for client in self.slots.primaries():
            yield from client.scan_iter(*args, **kwargs)

    def close(self) -> None:
        self.slots.close()


class ClusterPipeline(redis.Redis):
    """Commands gathered, then sent as one pipeline per primary; replies in order.

    A command redirected by ``MOVED`` did not run, so it alone is sent again to the
    node that serves its slot now; a node that cannot be reached gives its commands
    its error in place, as ``execute(raise_on_error=False)`` does for a refused one.
    ``SCRIPT LOAD`` and its kind go to every primary, in order with the rest, and a
    ``WAIT`` goes with the command before it, since it waits for that one's writes.
    """

    def __init__(self, cluster: ClusterClient) -> None:
        super().__init__(connection_pool=cluster.connection_pool)
        self.router = cluster
        self.command_stack: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def execute_command(self, *args: Any, **options: Any) -> ClusterPipeline:
        self.command_stack.append((args, options))
        return self

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        stack, self.command_stack = self.command_stack, []
        slots = self.router.slots
        results: list[Any] = [None] * len(stack)
        todo = list(range(len(stack)))
        for _ in range(REDIRECTS):
            groups: dict[Address, list[int]] = {}
            previous: Address | None = None
            for i in todo:
                name = command_name(stack[i][0])
                if name in _EVERY_PRIMARY:
                    addresses = slots.primaries_addresses()
                elif name == "WAIT" and previous is not None:
                    addresses = [previous]  # waits for the writes of the command before it
                else:
                    addresses = [slots.address(stack[i][0])]
                for address in addresses:
                    groups.setdefault(address, []).append(i)
                previous = addresses[-1]
            todo = []
            for address, indices in groups.items():
                pipe = slots.client(address).pipeline(transaction=False)
                for i in indices:
                    pipe.execute_command(*stack[i][0], **stack[i][1])  # type: ignore[no-untyped-call]
                try:
                    replies = pipe.execute(raise_on_error=False)
                except REDIS_ERRORS as exc:
                    slots.lost()
                    replies = [exc] * len(indices)
                for i, reply in zip(indices, replies, strict=True):
                    if isinstance(reply, MovedError):
                        slots.moved(reply)
                        todo.append(i)
                        if i + 1 < len(stack) and command_name(stack[i + 1][0]) == "WAIT":
                            todo.append(i + 1)
                    elif isinstance(reply, AskError):
                        results[i] = self._ask(reply, stack[i])
                    else:
                        results[i] = reply
            todo = sorted(set(todo))
            if not todo:
                break
        for i in todo:
            results[i] = RedisUnavailable(f"TRYAGAIN redirected {REDIRECTS} times")
        if raise_on_error:
            for result in results:
                if isinstance(result, Exception):
                    raise result
        return results

    def _ask(self, error: AskError, command: tuple[tuple[Any, ...], dict[str, Any]]) -> Any:
        try:
            return self.router.asking(error, command[0], command[1])
        except (*REDIS_ERRORS, redis.ResponseError) as exc:
            return exc

    def __enter__(self) -> ClusterPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.command_stack = []
