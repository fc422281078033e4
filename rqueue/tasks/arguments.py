"""Task arguments: what a worker can get back, and naming the one it cannot.

msgpack encodes some values a worker could not use as they were given (a tuple dict
key comes back as a list, which cannot be a key; a NaN key never equals itself), and
refuses others with an error that does not say which argument. Both are answered
here, at dispatch, with the argument's path (``args[0]['user'] key (1, 2)``). What
"msgpack can encode" means is :mod:`rqueue.encoding.codec`'s answer: its own types, the
extension types (Decimal, UUID, date, time, timedelta) and registered ones.

Whether the task's function can be called with the arguments at all (too many, a
keyword it does not take) is answered at dispatch too, by :class:`CallShape`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from rqueue.encoding.codec import is_registered, pack
from rqueue.errors import UnserializableArgument

MAX_NESTING = 500
"""Deepest an argument may nest; msgpack decodes at most 1,024 levels, and the payload's
own map and lists take some of them."""


def check_containers(task: str, args: Any, kwargs: Any) -> None:
    """UnserializableArgument unless ``args`` is a list or tuple and ``kwargs`` a dict
    with string keys: the shape every other check of a call takes for granted."""
    if not isinstance(args, (list, tuple)):
        raise UnserializableArgument(
            f"the args of task {task} must be a list or tuple, got {type(args).__name__}"
        )
    if not isinstance(kwargs, dict) or (kwargs and not STRINGS.issuperset(map(type, kwargs))):
        raise UnserializableArgument(f"the kwargs of task {task} must be a dict with string keys")


def check_arguments(task: str, args: Any, kwargs: Any) -> None:
    """Refuse what msgpack would encode but a worker could not decode as it was given.

    The rule is that whatever encode accepts, decode gives back: so ``args`` must be a
    list or tuple and ``kwargs`` a dict with string keys, no dict key may be a list,
    tuple or dict (it comes back as a list, which cannot be a key) or NaN (it never
    equals itself), and nothing may nest deeper than MAX_NESTING. Plain scalars, the
    usual arguments, are let through without a walk.
    """
    check_containers(task, args, kwargs)
    if _SCALARS.issuperset(map(type, args)) and (
        not kwargs or _SCALARS.issuperset(map(type, kwargs.values()))
    ):
        return
    found = _find(args, kwargs, _returnable)
    if found is not None:
        raise UnserializableArgument(
            f"cannot encode argument {found[0]} of task {task}: {found[2]}"
        )


def describe_unencodable(
    task: str, args: Sequence[Any], kwargs: dict[str, Any], exc: Exception
) -> str:
    """Name the argument msgpack refused (``exc``), and what would be accepted instead."""
    found = _find(args, kwargs, _encodable)
    if found is None:
        return f"cannot encode the arguments of task {task}: {exc}"
    path, value, why = found
    kind = type(value).__name__
    if is_registered(type(value)) or type(value) is time:
        return f"cannot encode argument {path} of task {task}: {kind} value: {why}"
    hint = ""
    if isinstance(value, datetime) and value.tzinfo is None:
        hint = " (naive datetimes are refused: attach a timezone)"
    elif isinstance(value, int):
        hint = " (integers must fit in 64 bits)"
    elif isinstance(value, str):
        hint = " (it holds a lone surrogate, which UTF-8 cannot encode)"
    return (
        f"cannot encode argument {path} of task {task}: {kind} value is not supported "
        f"by msgpack{hint}; pass None, bool, int, float, str, bytes, lists, dicts, "
        "timezone-aware datetimes, Decimal, UUID, date, time, timedelta, or a type "
        "registered with rqueue.register_type"
    )


_SCALARS = frozenset(
    {str, int, float, bool, bytes, type(None), Decimal, UUID, date, time, timedelta}
)
"""Values with nothing inside to walk: arguments of these types alone skip the walk."""
STRINGS = frozenset({str})
_Link = tuple["_Link | None", str]
"""A path as a chain of (parent, step): the text is built only for the value at fault."""


def _find(
    args: Sequence[Any], kwargs: dict[str, Any], fault: Callable[[Any, bool], str | None]
) -> tuple[str, Any, str] | None:
    """``(path, value, why)`` of the first value ``fault`` objects to, walking depth first.

    Iterative, so arguments nested thousands deep get a clear answer, not a
    RecursionError. ``fault(value, is_key)`` sees every value and every dict key.
    """
    roots: list[tuple[Any, _Link]] = [(v, (None, f"args[{i}]")) for i, v in enumerate(args)]
    roots += [(v, (None, f"kwargs[{k!r}]")) for k, v in kwargs.items()]
    stack = [(value, link, 1, False) for value, link in reversed(roots)]
    while stack:
        value, link, depth, is_key = stack.pop()
        why = fault(value, is_key)
        if why is not None:
            return _path(link), value, why
        if isinstance(value, (list, tuple, dict)) and depth > MAX_NESTING:
            return _root(link), value, f"it nests deeper than {MAX_NESTING} levels"
        if isinstance(value, (list, tuple)):
            if not _SCALARS.issuperset(map(type, value)):
                children = [(v, (link, f"[{i}]"), depth + 1, False) for i, v in enumerate(value)]
                stack.extend(reversed(children))
        elif isinstance(value, dict):
            entries: list[tuple[Any, _Link, int, bool]] = []
            for key, item in value.items():
                entries.append((key, (link, f" key {key!r}"), depth + 1, True))
                entries.append((item, (link, f"[{key!r}]"), depth + 1, False))
            stack.extend(reversed(entries))
    return None


def _returnable(value: Any, is_key: bool) -> str | None:
    if not is_key:
        return None
    if isinstance(value, (list, tuple, dict)):
        return (
            f"a dict key that is a {type(value).__name__} would reach the worker as a list, "
            "which cannot be a key; use a string or a number"
        )
    if (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, Decimal) and value.is_nan()
    ):
        return "a NaN dict key never equals itself, so the worker could not look it up"
    return None


def _encodable(value: Any, is_key: bool) -> str | None:
    if isinstance(value, (list, tuple, dict, float)):
        return None
    try:
        pack(value)
    except (TypeError, ValueError, OverflowError) as exc:
        return str(exc)
    return None


def _path(link: _Link) -> str:
    steps: list[str] = []
    current: _Link | None = link
    while current is not None:
        current, step = current
        steps.append(step)
    return "".join(reversed(steps))


def _root(link: _Link) -> str:
    current = link
    while current[0] is not None:
        current = current[0]
    return current[1]


class CallShape:
    """The calls a task's function accepts, read once per task, so that a call that
    does not fit is refused at dispatch (``TypeError`` naming the task), not by the
    worker after every try, as Celery checks ``typing``.

    The function's own signature, not that of a function it wraps (as Celery reads
    it): a decorator made with ``functools.wraps`` may take other arguments than the
    function it wraps (one it supplies itself, say), and ``(*args, **kwargs)`` takes
    anything. A call is checked by counting and by names (``dispatch_many`` checks
    thousands); one that fails that is bound by ``Signature.bind``, which has the last
    word and words the refusal.
    """

    def __init__(self, signature: inspect.Signature) -> None:
        self.signature = signature
        params = signature.parameters.values()
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.positional = [p.name for p in positional]
        self.least = sum(1 for p in positional if p.default is p.empty)
        self.most = math.inf if any(p.kind == p.VAR_POSITIONAL for p in params) else len(positional)
        self.keywords = {
            p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }
        self.required = {
            p.name
            for p in params
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        }
        """Each parameter a call must give, by position or by name."""
        self.any_keyword = any(p.kind == p.VAR_KEYWORD for p in params)
        self.counted = self.required.issubset(self.positional)
        """A call without keywords is checked by counting its arguments alone."""

    @classmethod
    def of(cls, fn: Callable[..., object]) -> CallShape | None:
        """``fn``'s shape, or None if Python cannot tell it (some builtins): not checked."""
        try:
            return cls(inspect.signature(fn, follow_wrapped=False))
        except (TypeError, ValueError):
            return None

    def check(self, task: str, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """TypeError naming ``task`` unless a worker can call it with these arguments
        (UnserializableArgument if they are not a sequence and a map of names at all)."""
        check_containers(task, args, kwargs)
        if not kwargs and self.counted and self.least <= len(args) <= self.most:
            return
        if kwargs and self._fits(args, kwargs):
            return
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(
                f"task {task} cannot be called with these arguments: {exc} "
                f"(it takes {self.signature})"
            ) from None

    def _fits(self, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
        """True if a call with keywords surely binds (False: let ``bind`` decide)."""
        if len(args) > self.most:
            return False
        given = set(self.positional[: len(args)])
        if not self.keywords.intersection(given).isdisjoint(kwargs):  # given twice
            return False
        if not self.any_keyword and not self.keywords.issuperset(kwargs):
            return False
        return self.required.issubset(given.union(self.keywords.intersection(kwargs)))

    def check_partial(self, task: str, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """``check`` for a ``pending()`` call, which may lack its first argument or two:
        a chain with ``pipe=True`` gives a step the step before's result first, a
        callback gets the batch or the failure first (and with ``results=True``, the
        members' results second). Where it is dispatched as it is (alone, in
        ``dispatch_many``, as a batch member), ``check`` applies in full."""
        try:
            self.check(task, args, kwargs)
        except TypeError:
            for given in ((None,), (None, None)):
                try:
                    self.check(task, (*given, *args), kwargs)
                except TypeError:
                    continue
                return
            raise
