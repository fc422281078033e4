"""The one msgpack codec of task arguments and kept results, and the types it adds.

msgpack carries None, bool, int, float, str, bytes, lists, maps and (as its own
timestamp, ext code -1) timezone-aware datetimes. Everything else a task is commonly
given travels as a msgpack *extension type*: a code and some bytes, which any msgpack
library hands back as such, so another language can still read a payload. The codes:

====  ======================  =====================================================
code  Python type             the bytes
====  ======================  =====================================================
1     ``decimal.Decimal``     its ``str()`` in ASCII: exact, NaN and infinities too
2     ``uuid.UUID``           its 16 bytes
3     ``datetime.date``       ISO 8601 text, ``YYYY-MM-DD``
4     ``datetime.time``       ISO 8601 text, ``HH:MM:SS[.ffffff][+HH:MM]``
5     ``datetime.timedelta``  three big-endian int32: days, seconds, microseconds
6     a registered type       a msgpack array ``[name, encoded value]``, packed by
                              this codec (so the value may hold any of these types)
7     ``sealing.Sealed``      an encrypted call's arguments or result, as sealed by
                              :mod:`rqueue.encoding.sealing` (opened there, not here;
                              an ``ExtType``, so packed without ``default``)
====  ======================  =====================================================

A ``time`` is naive or has a fixed UTC offset in whole minutes (a
``datetime.timezone``; a name given to it is not kept). Refused, since they could
not come back as given: a ``time`` whose tzinfo is anything else (a zoneinfo zone's
offset depends on a date the time does not have), an offset with seconds (ISO 8601
has none), ``fold=1`` (ISO text cannot carry it); and a naive ``datetime``, as before.

A *registered* type is one the application names with :func:`register_type`. The
bytes from Redis are hostile: decoding looks a name up in this process's registry
only, so a payload can never make rqueue import a module or build an object of a
type nobody registered, and nothing here is ever pickled. Anything undecodable (an
unknown code, garbage bytes, a name not registered here) raises InvalidPayload.

Cost: a payload of plain values is packed and unpacked exactly as before. msgpack
calls ``ext_hook`` only for extension values; ``default`` is passed only once a value
msgpack has no type for was met (see :func:`pack`).

The registry is module-level state, like ``@task``'s: a type is registered where it
is defined, at import, in every process that dispatches or runs tasks using it.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from collections.abc import Callable
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any, NamedTuple, TypeVar
from uuid import UUID

import msgpack

from rqueue.encoding.sealing import SEALED, read_sealed
from rqueue.errors import InvalidPayload, UnregisteredType, describe

T = TypeVar("T")

DECIMAL, UUID_CODE, DATE, TIME, TIMEDELTA, REGISTERED = 1, 2, 3, 4, 5, 6
"""The msgpack extension codes of the table above."""
MAX_DEPTH = 32
"""Deepest registered values may nest in one another. Each level is one more
``unpackb`` call on the C stack (tens of kilobytes each), so hostile bytes nesting
thousands of levels would crash the worker; both sides refuse more than this."""
_TIMEDELTA = struct.Struct(">iii")
_MINUTE = timedelta(minutes=1)
_NATIVE = (int, float, str, bytes, bytearray, list, tuple, dict)
"""msgpack packs instances of these (subclasses too) without calling ``default``."""
_BUILT_IN = (Decimal, UUID, date, time, timedelta, datetime)


class _Registered(NamedTuple):
    name: str
    cls: type[Any]
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


_by_class: dict[type[Any], _Registered] = {}
_by_name: dict[str, _Registered] = {}


def register_type(
    cls: type[T],
    encode: Callable[[T], Any] | None = None,
    decode: Callable[[Any], T] | None = None,
    name: str | None = None,
) -> type[T]:
    """Let values of ``cls`` be task arguments and results; returns ``cls``, so it
    also works as a class decorator.

    An Enum travels as its member's value and a dataclass as a map of its ``init``
    fields (each value encodable in turn: register a nested dataclass too); any other
    class needs ``encode`` (the value to something encodable) and ``decode`` (back).
    ``name`` is what the payload carries, ``module:qualname`` by default: the worker
    must register the type under the same name: in the task's own module (a worker
    that meets an unknown type imports the task's module, then decodes again) or one
    it preloads (``rqueue work -A MODULE``).
    Registering a name again replaces its entry (a module imported a second time).
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_type takes a class, got {cls!r}")
    if cls in _BUILT_IN:
        raise TypeError(f"{cls.__qualname__} is encoded by rqueue already")
    if issubclass(cls, _NATIVE):
        raise TypeError(
            f"{cls.__qualname__} subclasses a type msgpack packs itself, so its values "
            "would travel as that plain type (an IntEnum or StrEnum member as its int or "
            "str), never through a registered codec; register a plain Enum or class"
        )
    if name is None:
        name = f"{cls.__module__}:{cls.__qualname__}"
    if type(name) is not str or not name:
        raise TypeError(f"the name of a registered type must be a non-empty str, got {name!r}")
    if encode is None and decode is None:
        encode, decode = _default_codec(cls)
    elif encode is None or decode is None:
        raise TypeError(f"register_type({cls.__qualname__}): give both encode and decode")
    entry = _Registered(name, cls, encode, decode)
    previous = _by_name.get(name)
    if previous is not None:
        _by_class.pop(previous.cls, None)
    _by_class[cls] = _by_name[name] = entry
    return cls


def is_registered(cls: type[Any]) -> bool:
    """True if values of exactly ``cls`` are encoded by a registered codec."""
    return cls in _by_class


def pack(value: Any) -> bytes:
    """``value`` as msgpack; TypeError, ValueError or OverflowError if it cannot be."""
    try:
        # Without ``default`` first: passing one costs every packb call about 7%
        # (msgpack builds a Packer per call), and most payloads hold plain values only.
        packed: bytes = msgpack.packb(value, use_bin_type=True, datetime=True)
    except TypeError:  # a value msgpack has no type for: try again with ours
        packed = msgpack.packb(value, use_bin_type=True, datetime=True, default=_DEFAULT)
    return packed


def unpack(data: bytes) -> Any:
    """What :func:`pack` made of a value. An extension value it cannot decode raises
    InvalidPayload, saying why; malformed msgpack raises msgpack's own errors, for the
    caller to report with what the bytes were meant to be."""
    return msgpack.unpackb(data, raw=False, strict_map_key=False, timestamp=3, ext_hook=_EXT_HOOK)


def _default_codec(cls: type[Any]) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    if issubclass(cls, enum.Enum):
        return (lambda member: member.value), cls
    if dataclasses.is_dataclass(cls):
        names = tuple(f.name for f in dataclasses.fields(cls) if f.init)

        def fields_of(value: Any) -> dict[str, Any]:
            return {name: getattr(value, name) for name in names}

        def from_fields(fields: Any) -> Any:
            if type(fields) is not dict:
                raise TypeError(f"expected a map of fields, got {type(fields).__name__}")
            return cls(**fields)

        return fields_of, from_fields
    raise TypeError(
        f"register_type({cls.__qualname__}): an Enum or a dataclass has a default codec; "
        "for any other class give encode= and decode="
    )


class _Level:
    """``default`` and ``ext_hook`` for values nested ``depth`` registered values deep."""

    __slots__ = ("depth",)

    def __init__(self, depth: int) -> None:
        self.depth = depth

    def default(self, value: Any) -> msgpack.ExtType:
        kind = type(value)
        if kind is Decimal:
            return msgpack.ExtType(DECIMAL, str(value).encode("ascii"))
        if kind is UUID:
            return msgpack.ExtType(UUID_CODE, value.bytes)
        if kind is date:
            return msgpack.ExtType(DATE, value.isoformat().encode("ascii"))
        if kind is time:
            return msgpack.ExtType(TIME, _time_text(value))
        if kind is timedelta:
            return msgpack.ExtType(
                TIMEDELTA, _TIMEDELTA.pack(value.days, value.seconds, value.microseconds)
            )
        entry = _by_class.get(kind)
        if entry is None:
            raise TypeError(f"can not serialize {kind.__name__!r} object")
        if self.depth >= MAX_DEPTH:
            raise ValueError(f"registered values nest deeper than {MAX_DEPTH} levels")
        try:
            encoded = entry.encode(value)
        except Exception as exc:
            kind_name, message = describe(exc)
            raise TypeError(
                f"the encode function of registered type {entry.name} raised {kind_name}: {message}"
            ) from None
        inner = _LEVELS[self.depth + 1]
        data = msgpack.packb(
            [entry.name, encoded], use_bin_type=True, datetime=True, default=inner.default
        )
        return msgpack.ExtType(REGISTERED, data)

    def ext_hook(self, code: int, data: bytes) -> Any:
        if code == REGISTERED:
            return self._registered(data)
        known = _DECODERS.get(code)
        if known is None:
            raise InvalidPayload(f"unknown msgpack extension type {code}")
        label, decoder = known
        try:
            return decoder(data)
        except Exception as exc:
            kind, message = describe(exc)
            raise InvalidPayload(
                f"malformed {label} (msgpack extension type {code}): {kind}: {message}"
            ) from None

    def _registered(self, data: bytes) -> Any:
        if self.depth >= MAX_DEPTH:
            raise InvalidPayload(f"registered values nest deeper than {MAX_DEPTH} levels")
        inner = _LEVELS[self.depth + 1]
        try:
            name, encoded = msgpack.unpackb(
                data, raw=False, strict_map_key=False, timestamp=3, ext_hook=inner.ext_hook
            )
        except InvalidPayload:
            raise
        except Exception as exc:
            kind, message = describe(exc)
            raise InvalidPayload(
                f"malformed registered value (msgpack extension type {REGISTERED}): "
                f"{kind}: {message}"
            ) from None
        entry = _by_name.get(name) if type(name) is str else None
        if entry is None:
            raise UnregisteredType(
                f"type {str(name)[:200]!r} is not registered in this process: call "
                "rqueue.register_type where your tasks are defined, or in a module the "
                "worker preloads (rqueue work -A MODULE)"
            )
        try:
            return entry.decode(encoded)
        except Exception as exc:
            kind, message = describe(exc)
            raise InvalidPayload(
                f"a value of registered type {name} could not be decoded: {kind}: {message}"
            ) from None


def _time_text(value: time) -> bytes:
    if value.tzinfo is not None and type(value.tzinfo) is not timezone:
        raise ValueError(
            "a time's tzinfo must be a fixed offset (datetime.timezone), since a zone's "
            "offset depends on a date; use a datetime, or a naive time"
        )
    if value.fold:
        raise ValueError("a time with fold=1 cannot be carried; use a datetime")
    offset = value.utcoffset()
    if offset is not None and offset % _MINUTE:
        raise ValueError(
            f"a time's UTC offset must be whole minutes, as ISO 8601 writes it, got {offset}"
        )
    return value.isoformat().encode("ascii")


def _decimal(data: bytes) -> Decimal:
    return Decimal(data.decode("ascii"))


def _date(data: bytes) -> date:
    return date.fromisoformat(data.decode("ascii"))


def _time(data: bytes) -> time:
    return time.fromisoformat(data.decode("ascii"))


def _timedelta(data: bytes) -> timedelta:
    days, seconds, microseconds = _TIMEDELTA.unpack(data)
    return timedelta(days=days, seconds=seconds, microseconds=microseconds)


_DECODERS: dict[int, tuple[str, Callable[[bytes], Any]]] = {
    DECIMAL: ("Decimal", _decimal),
    UUID_CODE: ("UUID", lambda data: UUID(bytes=data)),
    DATE: ("date", _date),
    TIME: ("time", _time),
    TIMEDELTA: ("timedelta", _timedelta),
    SEALED: ("sealed value", read_sealed),
}
_LEVELS = tuple(_Level(depth) for depth in range(MAX_DEPTH + 1))
_DEFAULT, _EXT_HOOK = _LEVELS[0].default, _LEVELS[0].ext_hook
"""The top level's, bound once: ``pack`` and ``unpack`` run for every payload."""
