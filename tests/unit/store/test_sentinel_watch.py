"""What the sentinel watcher makes of each announcement, as Redis 7.0 publishes them
(the text of a manual failover's messages, heard on a local Sentinel set): the
topology tests see only a failover that succeeds, not which message held or freed the
writes, nor an aborted one."""

from __future__ import annotations

from rqueue.store.sentinel_watch import FailoverWatch

MASTER = "master mymaster 127.0.0.1 6379"
REPLICA = "slave 127.0.0.1:6380 127.0.0.1 6380 @ mymaster 127.0.0.1 6379"


class Heard:
    """A follower that notes what it was told."""

    service = "mymaster"

    def __init__(self) -> None:
        self.sentinels: list[object] = []
        self.told: list[str] = []

    def failover_under_way(self) -> None:
        self.told.append("under way")

    def master_named(self, address: tuple[str, int]) -> None:
        self.told.append(f"named {address[0]}:{address[1]}")

    def failover_over(self) -> None:
        self.told.append("over")

    def answers_as_master(self, address: tuple[str, int]) -> bool:
        return False


def _hear(*messages: tuple[str, str]) -> tuple[Heard, FailoverWatch]:
    follower = Heard()
    watch = FailoverWatch(follower)  # type: ignore[arg-type]  # not started: fed by hand
    for channel, data in messages:
        watch._heard(follower, channel, data)  # type: ignore[arg-type]
    return follower, watch


def test_a_failover_holds_from_its_first_step_and_the_switch_names_the_new_master() -> None:
    follower, watch = _hear(
        ("+try-failover", MASTER),
        ("+selected-slave", REPLICA),
        ("+switch-master", "mymaster 127.0.0.1 6379 127.0.0.1 6380"),
    )
    assert follower.told == ["under way", "under way", "named 127.0.0.1:6380"]
    assert watch._chosen is None  # named: no longer asked


def test_the_chosen_replica_is_asked_until_a_master_is_named() -> None:
    follower, watch = _hear(("+failover-state-send-slaveof-noone", REPLICA))
    assert watch._chosen == ("127.0.0.1", 6380)
    watch._heard(follower, "+promoted-slave", REPLICA)  # type: ignore[arg-type]
    assert follower.told[-1] == "named 127.0.0.1:6380" and watch._chosen is None


def test_an_aborted_failover_frees_the_writes() -> None:
    follower, _ = _hear(("+try-failover", MASTER), ("-failover-abort-not-elected", MASTER))
    assert follower.told == ["under way", "over"]


def test_other_masters_and_unknown_shapes_are_ignored() -> None:
    follower, watch = _hear(
        ("+try-failover", "master other 127.0.0.1 7000"),
        ("+switch-master", "mymaster 127.0.0.1 6379 127.0.0.1"),
        ("+promoted-slave", "slave 127.0.0.1:x 127.0.0.1 x @ mymaster 127.0.0.1 6379"),
        ("+selected-slave", "slave 127.0.0.1:6380 @"),
    )
    assert follower.told == []
    assert watch._chosen is None
