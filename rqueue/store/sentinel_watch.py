"""Following a failover as the sentinels announce it, step by step.

Every sentinel publishes each step of a failover on a channel of its own: ``+try-failover``
and ``+failover-state-*`` while it is under way, ``+promoted-slave`` once the chosen
replica answers as master, ``+switch-master`` once the sentinel's config names it. The
sentinel leading a failover publishes the steps, the others only the switch they learn
of, and any one may be down: so one daemon thread per process and service listens to
every sentinel (one subscriber connection each), subscribing again every
:data:`RESUBSCRIBE` seconds to those it lost. What it hears it tells the process's
:class:`~rqueue.store.sentinel.MasterLocator` (a ``Follower``); asking the sentinels
once per check interval stays the fallback, should an announcement be missed.

The leader names the replica it chose (``+selected-slave``) and sends it ``SLAVEOF NO
ONE`` at once, but announces it promoted only once its own check of that replica, once
a second, sees it answer as master: about a second in which the process's writes
wait. So from the choice on, the thread asks the chosen replica's ``ROLE`` itself
every :data:`POLL` seconds (for :data:`HOLD` at most), and names it the master as
soon as it answers as one: the failover is then past its point of no return (a
sentinel gives up only a promotion that did not happen).

The thread, like its locator, lasts as long as the process.
"""

from __future__ import annotations

import logging
import select
import threading
import time
from typing import Protocol

import redis
from redis.client import PubSub

from rqueue.store.retry import REDIS_ERRORS

Address = tuple[str, int]
log = logging.getLogger("rqueue.sentinel")
RESUBSCRIBE = 0.5
"""Seconds between two attempts to subscribe again to a sentinel that was lost."""
POLL = 0.02
"""Seconds between two ``ROLE`` asked of the replica a failover chose."""
HOLD = 2.0
"""Seconds sends wait at most for a failover under way to name the new master: then
they go on as without announcements (a refusal is retried, the sentinels asked again).
A manual failover's new master answers as one about 0.2 s after it starts. The chosen
replica is asked for as long."""
UNDER_WAY = (
    "+try-failover",
    "+elected-leader",
    "+failover-state-select-slave",
    "+selected-slave",
    "+failover-state-send-slaveof-noone",
    "+failover-state-wait-promotion",
)
"""A failover of the master has started: what it takes now may be lost."""
CHOSEN = (
    "+selected-slave",
    "+failover-state-send-slaveof-noone",
    "+failover-state-wait-promotion",
)
"""Of those, the steps that name the replica chosen to be the new master."""
NAMED = ("+promoted-slave", "+switch-master")
"""The new master is known (the first as soon as it answers as one)."""
OVER = (
    "+failover-end",
    "+failover-end-for-timeout",
    "-failover-abort-not-elected",
    "-failover-abort-no-good-slave",
    "-failover-abort-slave-timeout",
)
"""The failover ended, or was given up: if no new master was named, nothing moved."""


class Follower(Protocol):
    """What the watch tells of a failover (``MasterLocator``)."""

    service: str
    sentinels: list[redis.Redis]

    def failover_under_way(self) -> None: ...

    def master_named(self, address: Address) -> None: ...

    def failover_over(self) -> None: ...

    def answers_as_master(self, address: Address) -> bool: ...


class FailoverWatch(threading.Thread):
    """The thread that listens to every sentinel of one service for its failovers."""

    def __init__(self, follower: Follower) -> None:
        super().__init__(name=f"rqueue-sentinel-watch-{follower.service}", daemon=True)
        self._follower = follower
        self._service = follower.service
        self._sentinels = list(follower.sentinels)
        self._subscribed: dict[int, PubSub] = {}
        self._chosen: Address | None = None
        """The replica a failover under way chose, asked until it answers as master."""
        self._chosen_until = 0.0

    def run(self) -> None:
        resubscribe_at = 0.0
        while True:
            if time.monotonic() >= resubscribe_at:
                self._subscribe_lost()
                resubscribe_at = time.monotonic() + RESUBSCRIBE
            sockets = [p.connection._sock for p in self._subscribed.values() if p.connection]  # type: ignore[attr-defined]
            wait = RESUBSCRIBE if self._chosen is None else POLL
            if sockets:
                select.select(sockets, [], [], wait)
            else:
                time.sleep(wait)
            try:
                self._read(self._follower)
                self._ask_chosen(self._follower)
            except Exception:  # the thread must outlive any surprise: it is the only one
                log.exception("following the sentinels of %s; going on", self._service)

    def _subscribe_lost(self) -> None:
        for index, sentinel in enumerate(self._sentinels):
            if index in self._subscribed:
                continue
            pubsub = sentinel.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(*UNDER_WAY, *NAMED, *OVER)
            except (*REDIS_ERRORS, OSError):
                pubsub.close()
                continue
            self._subscribed[index] = pubsub

    def _read(self, follower: Follower) -> None:
        """Every message waiting, from every sentinel (an SSL socket may hold some
        that ``select`` does not see); a sentinel lost is dropped, to subscribe again."""
        for index, pubsub in list(self._subscribed.items()):
            try:
                while (message := pubsub.get_message(timeout=0)) is not None:
                    if message["type"] == "message":
                        self._heard(follower, _text(message["channel"]), _text(message["data"]))
            except (*REDIS_ERRORS, OSError):
                pubsub.close()
                del self._subscribed[index]

    def _heard(self, follower: Follower, channel: str, data: str) -> None:
        words = data.split()
        # +switch-master: <name> <old ip> <old port> <new ip> <new port>; the others:
        # master <name> <ip> <port>, or <type> <name> <ip> <port> @ <master> <ip> <port>.
        # Any other shape (a sentinel of another version) is not to be guessed at.
        if channel == "+switch-master" and len(words) == 5:
            master, named = words[0], words[3:5]
        elif words[:1] == ["master"] and len(words) == 4:
            master, named = words[1], []
        elif len(words) == 8 and words[4] == "@":
            master, named = words[5], words[2:4]
        else:
            return
        if master != self._service:
            return
        address = (named[0], int(named[1])) if named and named[1].isdigit() else None
        if channel in UNDER_WAY:
            follower.failover_under_way()
            if channel in CHOSEN and words[0] == "slave" and address is not None:
                self._chosen = address
                self._chosen_until = time.monotonic() + HOLD
            return
        self._chosen = None
        if channel in NAMED:
            if address is not None:
                follower.master_named(address)
        else:
            follower.failover_over()

    def _ask_chosen(self, follower: Follower) -> None:
        """Name the chosen replica the master once it answers as one."""
        chosen = self._chosen
        if chosen is None:
            return
        if time.monotonic() > self._chosen_until:
            self._chosen = None  # the announcements, or the re-check, take it from here
        elif follower.answers_as_master(chosen):
            self._chosen = None
            follower.master_named(chosen)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
