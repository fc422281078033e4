"""The lean call path for the hot commands: one connection per node, without redis-py's
client layer.

On a loopback Redis, ``Redis.execute_command`` costs about as much CPU as the round
trip itself: every call checks a connection out of the pool (with a ``poll()`` for
stale data), and goes through retry, argument-filtering and metrics wrappers. Measured
here, a loop of ``LPUSH`` calls ran 1.4 to 2 times faster on a connection of its own.
Dispatch, the worker's reserve and ack calls, and its blocking waits come through here.

It is still redis-py underneath: the same ``Connection`` class (AUTH, ACL users, TLS,
``socket_timeout``), parser, and exception types, with each command packed in one step
(``resp.py``: the bytes redis-py would pack, in under half its time); a connection
error disconnects it and the next call reconnects. The connection is reopened after a
``fork()``, and a thread that finds it busy is served by the client's pool instead, so
sharing a queue between threads stays safe. On Redis Cluster there is one connection
per primary, chosen by the command's slot, and a redirect is followed (the command did
not run).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import redis
from redis.connection import ConnectionInterface
from redis.exceptions import AskError, MovedError

from rqueue.store.cluster import Address, ClusterClient
from rqueue.store.resp import KeyOrArg as KeyOrArg  # re-exported: the store's callers name it
from rqueue.store.resp import pack, packs_as_redis_py
from rqueue.store.retry import REDIS_ERRORS

_REUSED_MOST = 16
"""Packed commands a wire keeps for ``send(reuse=True)``: a few per queue (see there)."""
_EVALSHA = b"EVALSHA"
"""A script call's name, and below each script's sha, as bytes: redis-py packs bytes as
they are, and splits a str first argument on spaces into a copy of the whole argument
tuple (the push, reserve and ack calls have 12 to 20 arguments)."""
_SHAS: dict[str, bytes] = {}


class Wire:
    """One Redis connection of its own per node, for the calls on a task's path."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._slots = client.slots if isinstance(client, ClusterClient) else None
        """On Redis Cluster, where each command's slot is served (one connection each)."""
        self._lock = threading.Lock()
        self._connections: dict[Address | None, ConnectionInterface] = {}
        self._pid = os.getpid()
        self._packed: dict[tuple[tuple[KeyOrArg, ...], ...], Any] = {}
        """Commands packed once and sent again as they are (``send(reuse=True)``)."""
        self._resp = packs_as_redis_py(client)
        """Whether commands are packed in one step (``resp.py``), not by redis-py."""

    def call(self, *args: KeyOrArg) -> Any:
        """Send one command and return Redis's raw reply (an error reply raises)."""
        finish = self.send(*args)
        if finish is None:
            return self.client.execute_command(*args)  # type: ignore[no-untyped-call]
        return finish()

    def send(self, *args: KeyOrArg, reuse: bool = False) -> Reply | None:
        """Send one command now; the returned call reads its reply (None: busy, not sent).

        Between the two the connection stays this caller's: a worker child sends its
        next reserve call, runs its current tasks, then reads the reply. It must read
        it, even to throw it away, before anything else can use the connection; an
        exception before the reply is read, or the reader dropped unread, closes the
        connection instead (``Reply``).

        ``reuse``: keep the packed bytes and send them as they are the next time, for a
        command made again and again with the same arguments: an idle worker's first
        reserve call after each wake-up. Packing its 17 arguments, even in one step
        (``resp.py``: about 7 µs), is most of the Python work between the wake-up and
        that call leaving (two to four times that on a processor that was idle).
        """
        connection = self._write((args,), reuse)
        return None if connection is None else Reply(self, connection, args)

    def send_two(
        self, first: tuple[KeyOrArg, ...], then: tuple[KeyOrArg, ...], reuse: bool = False
    ) -> Callable[[], tuple[Any, Any]] | None:
        """Send two commands in one write, on the connection ``first`` goes to (``then``'s
        keys must share its slot): Redis runs ``then`` as soon as ``first`` ends, with no
        round trip between, even when ``first`` blocks. The returned call reads both
        replies, an error reply as its exception, returned: the caller tells which one
        failed. As :meth:`send` otherwise (None: busy, not sent)."""
        connection = self._write((first, then), reuse)
        return None if connection is None else Replies(self, connection, first)

    def _write(
        self, commands: tuple[tuple[KeyOrArg, ...], ...], reuse: bool
    ) -> ConnectionInterface | None:
        """Take the wire and send ``commands`` on the connection the first goes to; the
        wire stays taken until their replies are read (None: it was busy)."""
        if not self._lock.acquire(blocking=False):
            return None
        connection = None
        try:
            connection = self._connection(commands[0])
            self._send_on(connection, commands, reuse)
        except BaseException:
            self._drop(connection)
            self._lost()
            raise
        return connection

    def _send_on(
        self,
        connection: ConnectionInterface,
        commands: tuple[tuple[KeyOrArg, ...], ...],
        reuse: bool,
    ) -> None:
        """Pack ``commands`` (or take them as packed before, with ``reuse``) and write them."""
        packed = self._packed.get(commands) if reuse else None
        if packed is None:
            if self._resp:
                packed = [pack(args) for args in commands]
            else:
                packed = connection.pack_commands(commands)  # type: ignore[no-untyped-call]
            if reuse and len(self._packed) < _REUSED_MOST:
                self._packed[commands] = packed
        connection.send_packed_command(packed, check_health=False)  # type: ignore[no-untyped-call]

    def socket(self, *args: KeyOrArg) -> int:
        """The file descriptor of the connection ``args`` go to (after a :meth:`send` of
        them): an event loop can watch it for the reply, then call the ``send``'s reader."""
        fileno: int = self._connection(args)._sock.fileno()  # type: ignore[attr-defined]
        return fileno

    def _connection(self, args: tuple[KeyOrArg, ...]) -> ConnectionInterface:
        if self._pid != os.getpid():  # forked: the parent's sockets are not ours
            self._connections.clear()
            self._pid = os.getpid()
        address = self._slots.address(args) if self._slots is not None else None
        connection = self._connections.get(address)
        if connection is None:
            node = self.client if address is None else self._slots.client(address)  # type: ignore[union-attr]
            connection = self._connections[address] = node.connection_pool.make_connection()
        return connection

    def _redirected(self, redirect: AskError, args: tuple[KeyOrArg, ...]) -> Any:
        """A command Redis Cluster redirected (so it did not run), sent where it points."""
        if not isinstance(self.client, ClusterClient):
            raise redirect
        if isinstance(redirect, MovedError):
            self.client.slots.moved(redirect)
            return self.call(*args)
        return self.client.asking(redirect, args, {})

    def _lost(self) -> None:
        if self._slots is not None:
            self._slots.lost()

    def _drop(self, connection: ConnectionInterface | None) -> None:
        """Give the wire back after a send whose reply will not be read: its connection
        closed (the next call reconnects), so that reply is never read as another's."""
        try:
            if connection is not None:
                connection.disconnect()  # type: ignore[no-untyped-call]
        finally:
            self._lock.release()

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: KeyOrArg) -> Any:
        return self.call(*script_call(sha, numkeys), *keys_and_args)

    def eval(self, script: str, numkeys: int, *keys_and_args: KeyOrArg) -> Any:
        return self.call("EVAL", script, numkeys, *keys_and_args)


class _Unread:
    """What the readers of sent commands share: the connection, which holds the wire
    until the replies are read.

    Whatever stops a reader first (a signal handler raising ``Interrupted`` in a worker
    parent's wait, which Python runs between any two steps: before the read, inside
    redis-py's read before its own guard, or once the reader is dropped unread) closes
    the connection. Left open, its reply would be the next caller's: a worker parent
    once read a BLPOP's nil as a release.lua count.
    """

    __slots__ = ("_args", "_connection", "_wire")

    def __init__(
        self, wire: Wire, connection: ConnectionInterface, args: tuple[KeyOrArg, ...]
    ) -> None:
        self._wire = wire
        self._connection: ConnectionInterface | None = connection
        self._args = args

    def _taken(self) -> ConnectionInterface:
        connection, self._connection = self._connection, None
        if connection is None:
            raise RuntimeError("a reply is read once")
        return connection

    def _cut(self, connection: ConnectionInterface, exc: BaseException) -> None:
        """A read stopped short: its reply may be still to come, and never another's."""
        self._wire._drop(connection)
        if isinstance(exc, REDIS_ERRORS):
            self._wire._lost()

    def __del__(self) -> None:
        # getattr: a signal may have cut __init__ short (the wire then stays busy, and
        # its calls go through the client's pool).
        connection = getattr(self, "_connection", None)
        if connection is not None:  # sent, never read
            self._wire._drop(connection)


class Reply(_Unread):
    """The reader of one sent command's reply."""

    __slots__ = ()

    def __call__(self) -> Any:
        connection = self._taken()
        try:
            reply = connection.read_response()
        except AskError as redirect:  # a ResponseError: the reply was read
            self._wire._lock.release()
            return self._wire._redirected(redirect, self._args)
        except redis.ResponseError as exc:  # an error reply, read in full
            self._wire._lock.release()
            if isinstance(exc, REDIS_ERRORS):  # a transient one (CLUSTERDOWN, TRYAGAIN...)
                self._wire._lost()
            raise
        except BaseException as exc:
            self._cut(connection, exc)
            raise
        self._wire._lock.release()
        return reply

    def then(self, *args: KeyOrArg, reuse: bool = False) -> Replies:
        """Send another command behind this one, whose reply is still to come, on its
        connection: Redis runs it as soon as this one ends, even one that blocks, as
        ``Wire.send_two`` has it with both in one write (``args``' keys must share this
        one's slot). This reader is spent: the one returned reads both replies."""
        connection = self._taken()
        try:
            self._wire._send_on(connection, (args,), reuse)
        except BaseException as exc:
            self._cut(connection, exc)
            raise
        return Replies(self._wire, connection, self._args)


class Replies(_Unread):
    """The reader of two commands sent in one write (``Wire.send_two``, ``Reply.then``):
    both replies, an error reply as its exception. Not a ``Reply``: nothing more may
    be sent behind it, whose reply it would leave unread."""

    __slots__ = ()

    def __call__(self) -> tuple[Any, Any]:
        connection = self._taken()
        try:
            replies = (_read_in_full(connection), _read_in_full(connection))
        except BaseException as exc:
            self._cut(connection, exc)
            raise
        self._wire._lock.release()
        return replies


def _read_in_full(connection: ConnectionInterface) -> Any:
    """One reply; an error reply (read in full) as its exception, not raised."""
    try:
        return connection.read_response()
    except redis.ResponseError as exc:
        if isinstance(exc, REDIS_ERRORS):
            raise  # CLUSTERDOWN, TRYAGAIN...: a transient one, as for any other call
        return exc


def script_call(sha: str, numkeys: int) -> tuple[bytes, bytes, int]:
    """The start of an ``EVALSHA`` command, packed as cheaply as redis-py can."""
    packed = _SHAS.get(sha)
    if packed is None:
        packed = _SHAS[sha] = sha.encode()
    return _EVALSHA, packed, numkeys
