"""Looking at thousands of lists at once: which hold anything, in a round trip or two.

A worker child serving 10^4 queues cannot afford a call per queue each time it looks
for work (it made 10^4 reserve calls per batch, and 10^4 a second while idle), nor,
on Redis Cluster, a blocking connection per queue while it waits (``waits.py``). These
read every list with commands sent ``CHUNK`` at a time, straight on one pooled
connection per node (redis-py's pipeline, and ``ClusterPipeline`` over it, cost about
three times the CPU for the same commands, most of it packing them).

On one server a first round asks ``EXISTS`` of ``GROUP`` lists at a time (a list that
empties is deleted), and only the groups that hold any are read one by one: an idle
look at 10^4 queues is 100 commands. On a cluster one ``EXISTS`` may not name keys of
different slots, and every queue has a slot of its own, so each list costs a command.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import redis
from redis.connection import ConnectionInterface
from redis.exceptions import MovedError

from rqueue.store.cluster import Address, ClusterClient, SlotMap
from rqueue.store.resp import pack
from rqueue.store.retry import REDIS_ERRORS

CHUNK = 1000
"""Commands sent together: 1,000 LLEN keep Redis busy well under a millisecond, so
other clients' calls never wait longer than that behind them."""
GROUP = 100
"""Lists one EXISTS names, on one server."""


def lengths(client: redis.Redis, keys: Sequence[str]) -> list[int]:
    """The length of each list of ``keys`` (0: none there). A reply that is an error
    (a key of another type, a slot that moved) reads as 1: whoever acts on it meets the
    error, or the redirect, in its own call."""
    return _sparse(client, [(key,) for key in keys], lambda group: ("LLEN", group[0]))


def holding(client: redis.Redis, groups: Sequence[Sequence[str]]) -> list[int]:
    """How many keys of each group exist (0: none), each group's keys in one slot (a
    queue's ready list and its priority levels set: an empty list or set is deleted, so
    a queue holds ready tasks when its count is not 0). As :func:`lengths`, at the same
    number of commands."""
    return _sparse(client, groups, lambda group: ("EXISTS", *group))


def _sparse(
    client: redis.Redis,
    groups: Sequence[Sequence[str]],
    command: Callable[[Sequence[str]], tuple[str, ...]],
) -> list[int]:
    """``command``'s reply for each group, 0 for a group none of whose keys exists: on
    a cluster one command per group; on one server one ``EXISTS`` per ``GROUP`` groups
    first, then ``command`` for each group of those that hold any."""
    if isinstance(client, ClusterClient):
        return _replies(client, [command(group) for group in groups])
    chunks = [groups[start : start + GROUP] for start in range(0, len(groups), GROUP)]
    found = _replies(client, [("EXISTS", *(k for g in chunk for k in g)) for chunk in chunks])
    held = [
        (i * GROUP + n, group)
        for i, count in enumerate(found)
        if count
        for n, group in enumerate(chunks[i])
    ]
    result = [0] * len(groups)
    replies = _replies(client, [command(group) for _, group in held])
    for (position, _), reply in zip(held, replies, strict=True):
        result[position] = reply
    return result


def _replies(client: redis.Redis, commands: Sequence[tuple[str, ...]]) -> list[int]:
    """The integer replies of read-only commands, in order, sent to each one's node.

    On a cluster a node that does not answer (its shard is down) answers 1 for each of
    its commands, as an error does: the reserve call on such a queue meets the outage
    itself, and the worker leaves that queue for a back-off (``outages.py``) while it
    serves the others. Only when no node answered is the outage raised."""
    slots = client.slots if isinstance(client, ClusterClient) else None
    nodes: dict[Address | None, list[int]] = {}
    for index, command in enumerate(commands):
        nodes.setdefault(None if slots is None else slots.address(command), []).append(index)
    replies = [0] * len(commands)
    outages: list[BaseException] = []
    for node, indices in nodes.items():
        try:
            _node_replies(client, slots, node, commands, indices, replies)
        except REDIS_ERRORS as exc:
            if slots is None:
                raise
            slots.lost()
            outages.append(exc)
            for index in indices:
                replies[index] = 1
    if outages and len(outages) == len(nodes):
        raise outages[0]
    return replies


def _node_replies(
    client: redis.Redis,
    slots: SlotMap | None,
    node: Address | None,
    commands: Sequence[tuple[str, ...]],
    indices: Sequence[int],
    replies: list[int],
) -> None:
    """Send one node its commands (``indices``), CHUNK at a time; their replies go to
    their places in ``replies``. A connection that fails is dropped."""
    pool = (client if slots is None or node is None else slots.client(node)).connection_pool
    connection = pool.get_connection()
    try:
        for start in range(0, len(indices), CHUNK):
            chunk = indices[start : start + CHUNK]
            packed = b"".join(pack(commands[i]) for i in chunk)
            connection.send_packed_command([packed], check_health=False)  # type: ignore[no-untyped-call]
            for index in chunk:
                replies[index] = _read(slots, connection)
    except BaseException:
        connection.disconnect()  # type: ignore[no-untyped-call]
        raise
    finally:
        pool.release(connection)


def _read(slots: SlotMap | None, connection: ConnectionInterface) -> int:
    """One reply; an error reads as 1 (see ``lengths``), a MOVED updates the slot map."""
    try:
        return int(connection.read_response())
    except redis.ResponseError as exc:
        if slots is not None and isinstance(exc, MovedError):
            slots.moved(exc)
        return 1
