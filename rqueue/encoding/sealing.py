"""Encryption of a call's arguments and its kept result: AES-GCM, keys from the setting.

A task dispatched with ``@task(encrypted=True)``, ``.using(encrypted=True)`` or by a
process with ``RQUEUE_ENCRYPT_ALL=1`` keeps its arguments unreadable in Redis, as
Laravel's ``ShouldBeEncrypted`` does: the payload's ``args`` element becomes a *sealed*
value (msgpack extension type 7, :data:`SEALED`) and its ``kwargs`` an empty map. What
the Lua scripts read stays as it was (the fixed header, the task name, the options'
``meta`` with its priority and group), so an encrypted call is queued, reserved,
retried and prioritised like any other; docs/security.md says what stays readable and
why. A kept result of such a call is sealed the same way.

Sealed bytes are ``key id (4) + nonce (12) + AES-256-GCM ciphertext and tag``. The key
id (a hash of the key, not the key) says which of the configured keys sealed them, so
with several keys (``RQUEUE_ENCRYPTION_KEYS=new,old``: the first seals, every one
opens) a rotation needs no trial decryption. The associated data binds the ciphertext
to its place: the queue, the task id and the task's name for arguments, the queue and
id for a result; moved to another task, it no longer opens.

``cryptography`` is an optional dependency (``pip install 'rqueue[encryption]'``),
imported only when a process first seals or opens something: a process without keys
never imports it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import struct
from collections.abc import Sequence
from typing import Any

import msgpack

from rqueue.errors import InvalidPayload, RQueueError

SEALED = 7
"""The msgpack extension code of a sealed value (rqueue/encoding/codec.py's table)."""
KEY_BYTES = 32
_NONCE_BYTES = 12
_KEY_ID_BYTES = 4
_TAG_BYTES = 16
OVERHEAD = _KEY_ID_BYTES + _NONCE_BYTES + _TAG_BYTES
"""Bytes a sealed value adds to what it seals (plus its extension header)."""
_ARGS, _RESULT, _SCHEDULE = b"rqueue args\0", b"rqueue result\0", b"rqueue schedule\0"
_STEP, _MEMBER = b"rqueue step\0", b"rqueue member result\0"
"""What sealed bytes are for comes first in their associated data, so arguments can
never pass for a result or the other way round."""
KEYS_SETTING = "RQUEUE_ENCRYPTION_KEYS"


class Sealed(msgpack.ExtType):  # type: ignore[misc]  # msgpack ships no types
    """A sealed value: shown as ``encrypted`` by whatever prints it (``rqueue failed
    show``, ``rqueue status``, the dashboard) in a process that has no key to open it.
    An ``ExtType``, so msgpack packs it natively (no ``default`` hook, no retry)."""

    __slots__ = ()

    def __new__(cls, blob: bytes) -> Sealed:
        return super().__new__(cls, SEALED, blob)  # type: ignore[no-any-return]

    @property
    def blob(self) -> bytes:
        return self.data  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return "encrypted"


def read_sealed(blob: bytes) -> Sealed:
    """A sealed value as the codec reads one (its ext hook): built as the tuple it is,
    without ExtType's argument checks, which cost a worker half a microsecond a task."""
    return tuple.__new__(Sealed, (SEALED, blob))


def pack_sealed(blob: bytes) -> bytes:
    """``Sealed(blob)`` packed, as msgpack packs it (ext 8, 16 or 32), written directly:
    a dispatch packs one per call, and building the ExtType first costs it a microsecond."""
    size = len(blob)
    if size < 1 << 8:
        return b"\xc7" + struct.pack(">BB", size, SEALED) + blob
    if size < 1 << 16:
        return b"\xc8" + struct.pack(">HB", size, SEALED) + blob
    return b"\xc9" + struct.pack(">IB", size, SEALED) + blob


class EncryptionUnavailable(RQueueError):
    """Encryption was asked for but cannot be done here: no key, or no ``cryptography``."""


class NotDecrypted(InvalidPayload):
    """Sealed bytes this process cannot open: it has no key, not the key that sealed
    them, or they were altered (AES-GCM's tag does not verify). A worker files such a
    task in ``:failed`` with this reason and goes on with the next."""


def generate_key() -> str:
    """A new key as ``RQUEUE_ENCRYPTION_KEYS`` takes it: 32 random bytes, URL-safe base64."""
    return base64.urlsafe_b64encode(os.urandom(KEY_BYTES)).decode("ascii")


def parse_keys(text: str) -> tuple[bytes, ...]:
    """The keys a comma-separated setting names, first the one that seals; ValueError
    saying which entry is wrong (never echoing a key: it is a secret)."""
    entries = [entry.strip() for entry in text.split(",")]
    keys = []
    for position, entry in enumerate(entries, 1):
        try:
            key = base64.urlsafe_b64decode(entry.encode("ascii"))
        except (binascii.Error, ValueError, UnicodeEncodeError):
            key = b""
        if len(key) != KEY_BYTES or base64.urlsafe_b64encode(key).decode() != entry:
            raise ValueError(
                f"key {position} of {len(entries)} is not {KEY_BYTES} bytes in URL-safe "
                "base64 (44 characters ending in '='); make one with `rqueue key generate`"
            )
        keys.append(key)
    return tuple(keys)


def key_id(key: bytes) -> bytes:
    """The 4 bytes that name ``key`` in what it sealed: a hash, so they reveal nothing."""
    return hashlib.sha256(b"rqueue key id\0" + key).digest()[:_KEY_ID_BYTES]


def args_data(queue: str, task_id: bytes, task: str) -> bytes:
    """The associated data of a call's sealed arguments: its queue, raw id and task."""
    return b"".join((_ARGS, queue.encode("utf-8"), b"\0", task_id, task.encode("utf-8")))


def result_data(queue: str, task_id: str) -> bytes:
    """The associated data of a call's sealed result: its queue and id."""
    return b"".join((_RESULT, queue.encode("utf-8"), b"\0", task_id.encode("ascii")))


def batch_result_data(batch_id: str, index: int) -> bytes:
    """The associated data of the sealed result a batch keeps of its member ``index``
    for a callback that gets the results (rqueue/workflows/batch_results.py)."""
    return b"".join((_MEMBER, batch_id.encode("ascii"), b"\0", str(index).encode("ascii")))


def schedule_data(queue: str, name: str) -> bytes:
    """The associated data of a schedule's sealed arguments: its queue and name."""
    return b"".join((_SCHEDULE, queue.encode("utf-8"), b"\0", name.encode("utf-8")))


def step_data(queue: str, task: str) -> bytes:
    """The associated data of a workflow step's sealed arguments (a chain's later step,
    a batch's callback): its queue and task; where the step belongs is bound by its
    signature (rqueue/store/signing.py), as for a plain one."""
    return b"".join((_STEP, queue.encode("utf-8"), b"\0", task.encode("utf-8")))


def must_seal(encrypted: bool, keyring: Keyring | None) -> bool:
    """Whether a call's arguments are sealed: its task's (or call's) ``encrypted``, or
    a keyring that encrypts every call (``RQUEUE_ENCRYPT_ALL``)."""
    return encrypted or (keyring is not None and keyring.encrypt_all)


class Keyring:
    """The keys of one process: the first seals, every one opens (for rotation).

    ``encrypt_all`` (``RQUEUE_ENCRYPT_ALL``) seals every call this process dispatches,
    not only those of encrypted tasks.
    """

    __slots__ = ("_ciphers", "_sealing_id", "encrypt_all", "keys")

    def __init__(self, keys: Sequence[bytes], encrypt_all: bool = False) -> None:
        if not keys or any(len(key) != KEY_BYTES for key in keys):
            raise ValueError(f"a keyring holds one or more keys of {KEY_BYTES} bytes")
        self.keys = tuple(keys)
        self.encrypt_all = encrypt_all
        self._sealing_id = key_id(self.keys[0])
        self._ciphers: dict[bytes, Any] = {}

    def _cipher(self, ident: bytes) -> Any:
        """The AES-GCM cipher of the key named ``ident``; None if no key here has it."""
        cipher = self._ciphers.get(ident)
        if cipher is None:
            try:
                from cryptography.hazmat.primitives.ciphers.aead import AESGCM
            except ImportError:
                raise EncryptionUnavailable(
                    "encrypted tasks need the cryptography package: "
                    "pip install 'rqueue[encryption]'"
                ) from None
            self._ciphers = {key_id(key): AESGCM(key) for key in reversed(self.keys)}
            cipher = self._ciphers.get(ident)
        return cipher

    def seal(self, plain: bytes, associated: bytes) -> bytes:
        """``plain`` encrypted with the first key, bound to ``associated``."""
        ident, nonce = self._sealing_id, os.urandom(_NONCE_BYTES)
        return ident + nonce + self._cipher(ident).encrypt(nonce, plain, associated)  # type: ignore[no-any-return]

    def open(self, blob: bytes, associated: bytes, what: str) -> bytes:
        """The plain bytes sealed in ``blob``; NotDecrypted saying why, of ``what``."""
        if len(blob) < OVERHEAD:
            raise NotDecrypted(f"the encrypted {what} are truncated")
        ident, nonce = blob[:_KEY_ID_BYTES], blob[_KEY_ID_BYTES : _KEY_ID_BYTES + _NONCE_BYTES]
        cipher = self._cipher(ident)
        if cipher is None:
            raise NotDecrypted(
                f"the {what} are encrypted with a key this process does not have (key id "
                f"{ident.hex()}): add it to {KEYS_SETTING}"
            )
        try:
            return cipher.decrypt(nonce, blob[_KEY_ID_BYTES + _NONCE_BYTES :], associated)  # type: ignore[no-any-return]
        except Exception:  # cryptography's InvalidTag: the one failure of a well-formed call
            raise NotDecrypted(
                f"the encrypted {what} do not authenticate: altered in Redis, or moved "
                "from another task or queue"
            ) from None


def no_key_to_seal(task: str) -> EncryptionUnavailable:
    """Why a process without keys cannot dispatch (or store) an encrypted call of ``task``."""
    return EncryptionUnavailable(
        f"task {task} is encrypted (encrypted=True), but this process has no key to "
        f"encrypt its arguments with: set {KEYS_SETTING} (`rqueue key generate` makes one)"
    )


def no_key(task: str) -> NotDecrypted:
    """Why a process without keys cannot run (or show) an encrypted call of ``task``."""
    return NotDecrypted(
        f"task {task} is encrypted and this process has no key to decrypt its arguments: "
        f"set {KEYS_SETTING} (the key it was dispatched with)"
    )
