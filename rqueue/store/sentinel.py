"""Redis Sentinel: every connection goes to the master the sentinels name now.

redis-py's ``SentinelConnectionPool`` finds the master in ``connect()``, but its
connections send through ``connect_check_health()``, which dials the pool's default
address instead, and a connection kept open stays on a demoted master until an error.
Here a connection asks the sentinels when it connects, and before sending checks the
answer again at most once per :data:`CHECK_EVERY` seconds: after a failover it moves
to the new master within that time even if the old one still accepts writes (which
are then lost unless dispatches wait for a replica: see docs/deployment.md).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

from rqueue.settings.redis_url import RedisTarget
from rqueue.store.retry import REDIS_ERRORS

Address = tuple[str, int]
CHECK_EVERY = 1.0
"""Seconds a master's address is trusted before the sentinels are asked again."""


class MasterLocator:
    """Asks the sentinels where the master of one service is; caches the answer."""

    def __init__(self, target: RedisTarget, options: dict[str, Any]) -> None:
        self.service = target.service
        self._sentinels = [
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
        self._checked = -CHECK_EVERY
        self._lock = threading.Lock()

    def address(self, fresh: bool = False) -> Address:
        """The master's address: asked now if ``fresh`` or the last answer is old.

        If no sentinel answers, the last answer stands: sentinels being down does not
        make the master unreachable. Only without any answer yet is that an error.
        """
        with self._lock:
            if fresh or self._address is None or time.monotonic() - self._checked > CHECK_EVERY:
                self._checked = time.monotonic()
                try:
                    self._address = self._ask()
                except redis.ConnectionError:
                    if self._address is None:
                        raise
            return self._address

    def _ask(self) -> Address:
        errors = []
        for index, sentinel in enumerate(self._sentinels):
            try:
                reply = sentinel.execute_command("SENTINEL GET-MASTER-ADDR-BY-NAME", self.service)  # type: ignore[no-untyped-call]
            except (*REDIS_ERRORS, redis.ResponseError) as exc:
                errors.append(str(exc))
                continue
            if reply:
                # The one that answered is asked first next time, as redis-py does.
                self._sentinels.insert(0, self._sentinels.pop(index))
                host, port = reply
                return (host.decode() if isinstance(host, bytes) else host, int(port))
            errors.append(f"it does not monitor {self.service!r}")
        raise redis.ConnectionError(
            f"no sentinel ({self._names}) named the master of {self.service!r}: "
            + "; ".join(errors)
        )


def sentinel_managed(connection: type, locator: MasterLocator) -> type:
    """``connection``, sent to the master ``locator`` names (see the module's docstring)."""

    class SentinelManaged(connection):  # type: ignore[misc]
        def connect_check_health(self, *args: Any, **kwargs: Any) -> Any:
            if not self._sock:
                self.host, self.port = locator.address(fresh=True)
            return super().connect_check_health(*args, **kwargs)

        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            if self._sock and (self.host, self.port) != locator.address():
                self.disconnect()  # a failover moved the master
            super().send_packed_command(command, check_health)

    return SentinelManaged
