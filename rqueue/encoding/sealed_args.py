"""An encrypted call's arguments in its payload: sealed at encode, opened at decode.

The payload keeps its shape (rqueue/encoding/payload.py): its ``args`` element holds
``[args, kwargs]`` packed and sealed (msgpack extension 7, rqueue/encoding/sealing.py)
for the call's queue, id and task, and its ``kwargs`` element is an empty map. Every
other element (the header, the task, the queue, the options with their ``meta``) is
written as for any call, so the Lua scripts read an encrypted call as any other.
"""

from __future__ import annotations

from typing import Any

from rqueue.encoding.codec import unpack
from rqueue.encoding.sealing import Keyring, args_data, no_key_to_seal, pack_sealed
from rqueue.errors import InvalidPayload, describe
from rqueue.tasks.arguments import STRINGS

_PAIR = b"\x92"
"""A 2-array's marker: sealed arguments are ``[args, kwargs]``."""


def seal_arguments(
    keyring: Keyring | None, queue: str, stored_id: bytes, task: str, packed: bytes
) -> bytes:
    """The ``args`` element of an encrypted call whose packed args and kwargs, one after
    the other, are ``packed``; EncryptionUnavailable without a keyring."""
    if keyring is None:
        raise no_key_to_seal(task)
    return pack_sealed(keyring.seal(_PAIR + packed, args_data(queue, stored_id, task)))


def open_arguments(
    keyring: Keyring, sealed: bytes, queue: str, stored_id: bytes, task: str
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The args and kwargs sealed in ``sealed`` (of the call whose raw id is
    ``stored_id``), checked as decode checks a plain call's; NotDecrypted or
    InvalidPayload saying why not."""
    args, kwargs = open_call(keyring, sealed, args_data(queue, stored_id, task))
    return tuple(args), kwargs


def open_call(
    keyring: Keyring, sealed: bytes, associated: bytes
) -> tuple[list[Any], dict[str, Any]]:
    """The ``[args, kwargs]`` sealed in ``sealed`` for ``associated`` (a payload's, a
    workflow step's), shaped as a call's; NotDecrypted or InvalidPayload saying why not."""
    plain = keyring.open(sealed, associated, "arguments")
    try:
        args, kwargs = unpack(plain)
        if type(args) is not list or type(kwargs) is not dict:
            raise TypeError("args must be a list and kwargs a map")
        if kwargs and not STRINGS.issuperset(map(type, kwargs)):
            raise TypeError("kwargs keys must be strings")
    except InvalidPayload:
        raise  # an argument type it cannot decode (UnregisteredType): the codec says which
    except Exception as exc:
        why = describe(exc)[1]
        raise InvalidPayload(f"encrypted arguments have the wrong shape: {why}") from None
    return args, kwargs
