"""Workflows inside workflows: a batch as a chain's link, a chain or a batch as a
batch's member (Laravel's ``Bus::chain([..., Bus::batch(...)])`` and
``Bus::batch([[A, B], ...])``; Celery's ``chain(group(...), t)``).

A chain's links are steps (steps.py), each a *task step* or a *batch step*::

    {"batch": {"members": [...], "name": "resize", "allow_failures": False,
               "callbacks": {"then": <task step>, ...}}}

and a batch's members are task steps, batch steps, or *chain members*::

    {"chain": [<link>, ...], "catch": <task step> or None, "pipe": False}

They travel inside the payload of the task before them (a chain's link) or are
pushed when their batch opens (a member), so they come back from Redis: every one is
checked here before anything is built from it, to a depth of :data:`MAX_DEPTH`.
Each link of a chain is signed on its own, as a chain's steps always were; what a
batch step holds is covered by its link's signature.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from rqueue.errors import InvalidPayload
from rqueue.workflows.steps import Step, checked_step

BATCH_STEP, CHAIN_MEMBER = "batch", "chain"
"""The key that makes a step a batch step, and a member a chain."""
MAX_DEPTH = 8
"""How deep workflows nest: a batch in a chain in a batch... counts one level per batch."""
CALLBACK_NAMES = frozenset({"then", "catch", "finally", "progress"})
MAX_MEMBERS = 2**32
"""A batch's members are counted by bit index (batch_member.lua)."""
_NAME_LENGTH = 200


def is_batch_step(step: object) -> TypeGuard[Step]:
    return type(step) is dict and BATCH_STEP in step


def is_chain_member(member: object) -> TypeGuard[Step]:
    return type(member) is dict and CHAIN_MEMBER in member


def checked_link(link: object) -> Step:
    """A chain's link: a task step or a batch step; InvalidPayload if it is neither."""
    return _link(link, 0)


def checked_member(member: object) -> Step:
    """A batch's member: a task step, a batch step or a chain member."""
    return _member(member, 1)


def _link(link: object, depth: int) -> Step:
    if is_batch_step(link):
        _batch(link[BATCH_STEP], depth + 1)
        return link
    return checked_step(link)


def _member(member: object, depth: int) -> Step:
    if is_chain_member(member):
        links = member[CHAIN_MEMBER]
        if type(links) is not list or not links:
            raise InvalidPayload("a chain member's links must be a list of at least one step")
        for link in links:
            _link(link, depth)
        if member.get("catch") is not None:
            checked_step(member["catch"])
        if type(member.get("pipe", False)) is not bool:
            raise InvalidPayload("a chain member's 'pipe' must be true or false")
        return member
    return _link(member, depth)


def _batch(spec: object, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise InvalidPayload(f"workflows nest at most {MAX_DEPTH} batches deep")
    if type(spec) is not dict:
        raise InvalidPayload("a batch step must be a map")
    members = spec.get("members")
    if type(members) is not list or len(members) >= MAX_MEMBERS:
        raise InvalidPayload("a batch step's members must be a list")
    name = spec.get("name", "")
    if type(name) is not str or len(name) > _NAME_LENGTH:
        raise InvalidPayload(f"a batch step's name must be text of at most {_NAME_LENGTH}")
    if type(spec.get("allow_failures", False)) is not bool:
        raise InvalidPayload("a batch step's 'allow_failures' must be true or false")
    callbacks = spec.get("callbacks", {})
    if type(callbacks) is not dict or not CALLBACK_NAMES.issuperset(callbacks):
        raise InvalidPayload(f"a batch step's callbacks must be a map of {sorted(CALLBACK_NAMES)}")
    for callback in callbacks.values():
        checked_step(callback)
    for member in members:
        _member(member, depth)


def batch_spec(step: Step) -> dict[str, Any]:
    """The batch a (checked) batch step describes."""
    spec: dict[str, Any] = step[BATCH_STEP]
    return spec
