"""Redis Sentinel: every connection goes to the master the sentinels name now.

redis-py's ``SentinelConnectionPool`` finds the master in ``connect()``, but its
connections send through ``connect_check_health()``, which dials the pool's default
address instead, and a connection kept open stays on a demoted master until an error.
Here a connection asks the sentinels when it connects, and before sending checks the
answer the process holds.

That answer follows the sentinels' announcements (``sentinel_watch.py``): from the
moment a failover of the master is under way, sends wait (at most :data:`HOLD`
seconds) until the new master is named, then go there. A manual ``SENTINEL
FAILOVER`` leaves the old master taking writes for seconds after the replica was
promoted, and every write it takes then is lost; waiting loses none. The sentinels
are also asked again at most once per ``sentinel_check_interval`` seconds (1 by
default): the fallback if no announcement came. Neither costs a sent command a
round trip: the check is a look at the answer held.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from rqueue.settings.redis_url import RedisTarget
from rqueue.store.retry import REDIS_ERRORS
from rqueue.store.sentinel_watch import HOLD, FailoverWatch

Address = tuple[str, int]
ASK_TIMEOUT = 0.2
"""Seconds a chosen replica is given to answer ``ROLE``."""
LEFT_FOR = 15.0
"""Seconds after an announced switch during which a sentinel still naming the old
master (it has not heard of the switch yet) is not believed."""
_LOCATORS: dict[tuple[Any, ...], MasterLocator] = {}
"""The process's locators, one per service and connection settings, kept for the
process's life (its watcher thread with it): a client's connections are classes made
for their locator, and a process names few services."""
_LOCATORS_LOCK = threading.Lock()


def locator(
    target: RedisTarget, options: dict[str, Any], node: Callable[[Address], redis.Redis]
) -> MasterLocator:
    """The process's locator of ``target``'s master: one per service, so one watcher
    of its sentinels however many clients the process opens. ``node`` opens a client
    of a data node (the URL's credentials and TLS)."""
    key = (target, options.get("socket_timeout"), options.get("ssl_ca_certs"))
    with _LOCATORS_LOCK:  # two threads connecting at once share one watcher
        found = _LOCATORS.get(key)
        if found is None:
            found = _LOCATORS[key] = MasterLocator(target, options, node)
    return found


class MasterLocator:
    """Where the master of one service is: asked of the sentinels, told by their
    announcements, held for every connection of the process."""

    def __init__(
        self,
        target: RedisTarget,
        options: dict[str, Any],
        node: Callable[[Address], redis.Redis],
    ) -> None:
        self.service = target.service
        self._node = node
        self._asked: tuple[Address, redis.Redis] | None = None
        """The replica a failover chose, and the client that asks it its role."""
        self.check_interval = target.sentinel_check_interval
        self.sentinels = [
            redis.Redis(
                host=host,
                port=port,
                username=target.sentinel_username,
                password=target.sentinel_password,
                ssl=target.tls,
                **options,
            )
            for host, port in target.hosts
        ]
        self._names = ", ".join(f"{h}:{p}" for h, p in target.hosts)
        self._address: Address | None = None
        self._checked = -self.check_interval
        self._changed = threading.Condition(threading.Lock())
        self._holding_until = 0.0
        self._left: Address | None = None
        self._left_until = 0.0
        self._watched = False

    def address(self, fresh: bool = False) -> Address:
        """The master's address: asked now if ``fresh`` or the last answer is old; while
        a failover is under way, the new master's once named (waiting up to HOLD).

        If no sentinel answers, the last answer stands: sentinels being down does not
        make the master unreachable. Only without any answer yet is that an error.
        """
        with self._changed:
            if not self._watched:
                self._watch()
            if self._holding_until:
                self._hold()
            if (
                fresh
                or self._address is None
                or time.monotonic() - self._checked > self.check_interval
            ):
                self._checked = time.monotonic()
                try:
                    self._address = self._ask()
                except redis.ConnectionError:
                    if self._address is None:
                        raise
            return self._address

    def failover_under_way(self) -> None:
        """A sentinel announced a failover of this master: sends wait until it names
        the new one (:meth:`master_named`), HOLD seconds at most."""
        with self._changed:
            if not self._holding_until:
                self._holding_until = time.monotonic() + HOLD

    def master_named(self, address: Address) -> None:
        """A sentinel announced the new master: every send goes there from now."""
        with self._changed:
            if address != self._address:
                self._left, self._left_until = self._address, time.monotonic() + LEFT_FOR
                self._address = address
            self._checked = time.monotonic()
            self._holding_until = 0.0
            self._changed.notify_all()

    def failover_over(self) -> None:
        """The failover ended (or was given up) without naming a new master here:
        sends go on, and the sentinels are asked again first."""
        with self._changed:
            if self._holding_until:
                self._holding_until = 0.0
                self._checked = -self.check_interval
                self._changed.notify_all()

    def answers_as_master(self, address: Address) -> bool:
        """Whether the data node at ``address`` answers ``ROLE`` as a master now (the
        replica a failover under way chose: ``sentinel_watch.py``). Asked briefly: a
        node that does not answer within ASK_TIMEOUT is not one yet."""
        if self._asked is None or self._asked[0] != address:
            if self._asked is not None:
                self._asked[1].close()
            client = self._node(address)
            client.connection_pool.connection_kwargs.update(
                socket_timeout=ASK_TIMEOUT, socket_connect_timeout=ASK_TIMEOUT
            )
            self._asked = (address, client)
        try:
            role = self._asked[1].execute_command("ROLE")  # type: ignore[no-untyped-call]
        except (*REDIS_ERRORS, redis.ResponseError):
            return False
        return bool(role) and role[0] in (b"master", "master")

    def _hold(self) -> None:
        while self._holding_until and (left := self._holding_until - time.monotonic()) > 0:
            self._changed.wait(left)
        if self._holding_until:  # not named in time: ask, as without announcements
            self._holding_until = 0.0
            self._checked = -self.check_interval

    def _watch(self) -> None:
        self._watched = True
        FailoverWatch(self).start()

    def _after_fork(self) -> None:
        """In a forked child: the parent's lock may have been held by its watcher, and
        that thread is not here. A fresh lock; a watcher of its own on first use."""
        self._changed = threading.Condition(threading.Lock())
        self._watched = False
        self._asked = None  # the parent's connection: not this process's to use

    def _ask(self) -> Address:
        errors = []
        left = self._left if time.monotonic() < self._left_until else None
        for index, sentinel in enumerate(self.sentinels):
            try:
                reply = sentinel.execute_command("SENTINEL GET-MASTER-ADDR-BY-NAME", self.service)  # type: ignore[no-untyped-call]
            except (*REDIS_ERRORS, redis.ResponseError) as exc:
                errors.append(str(exc))
                continue
            if reply:
                host, port = reply
                address = (host.decode() if isinstance(host, bytes) else host, int(port))
                if address == left and self._address is not None:
                    continue  # it has not heard of the switch announced yet
                # The one that answered is asked first next time, as redis-py does.
                self.sentinels.insert(0, self.sentinels.pop(index))
                return address
            errors.append(f"it does not monitor {self.service!r}")
        if left is not None and self._address is not None:
            return self._address
        raise redis.ConnectionError(
            f"no sentinel ({self._names}) named the master of {self.service!r}: "
            + "; ".join(errors)
        )


def _forked() -> None:
    for each in _LOCATORS.values():
        each._after_fork()


os.register_at_fork(after_in_child=_forked)


@functools.cache
def sentinel_managed(connection: type, master: MasterLocator) -> type:
    """``connection``, sent to the master ``master`` locates (see the module's docstring)."""

    class SentinelManaged(connection):  # type: ignore[misc]
        def connect_check_health(self, *args: Any, **kwargs: Any) -> Any:
            if not self._sock:
                self.host, self.port = master.address(fresh=True)
            return super().connect_check_health(*args, **kwargs)

        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            if self._sock and (self.host, self.port) != master.address():
                self.disconnect()  # a failover moved the master
            super().send_packed_command(command, check_health)

    return SentinelManaged
