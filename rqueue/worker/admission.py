"""What a worker child lets through: a payload's signature, its queue, internal names.

Every payload a child reserves passes :func:`admit` before its task is looked up, so
a refused one never imports a module. With a secret (``RQUEUE_SECRET``) a payload
must be signed for the very queue it was reserved from, either by a producer, for
any task but rqueue's own, or by a worker parent (with
:func:`~rqueue.store.signing.parent_secret`), for rqueue's own internal tasks only.
So nobody without the secret can forge a payload, move a signed one to another
queue, or pass a dispatched payload off as a worker parent's message (the failure
report of ``parent_failures.py``, which runs any task's ``after_failed`` hook).

Without a secret anything that decodes is admitted: whoever can write to Redis can
then run any task anyway (docs/security.md), and the report checks its own claim
against the failed list before it acts.

An encrypted call is decrypted here too, after its signature is checked (a producer
encrypts, then signs the whole payload): a worker without the key refuses it alone.
"""

from __future__ import annotations

from rqueue.encoding.payload import Job, decode
from rqueue.encoding.sealing import Keyring, no_key
from rqueue.store.signing import InvalidSignature, parent_secret, verify
from rqueue.tasks.names import is_internal


def admit(
    payload: bytes,
    queue: str,
    secret: str | None,
    fixed: tuple[str, int, int] | None = None,
    keyring: Keyring | None = None,
) -> Job:
    """The job in ``payload`` if this worker may run it from ``queue``, its arguments
    decrypted with ``keyring`` if they are encrypted.

    Raises InvalidPayload (InvalidSignature when signing refuses it, NotDecrypted when
    its arguments cannot be decrypted here), for ``:failed``. ``fixed`` is the
    payload's header if the caller read it already (see ``decode``).
    """
    if not secret:
        job = decode(payload, fixed, keyring)
        if job.encrypted and keyring is None:
            raise no_key(job.task)
        return job
    from_parent = False
    try:
        verify(payload, secret, queue)
    except InvalidSignature as refused:
        try:
            verify(payload, parent_secret(secret), queue)
        except InvalidSignature:
            raise refused from None
        from_parent = True
    job = decode(payload, fixed, keyring)
    if job.encrypted and keyring is None:
        raise no_key(job.task)
    if is_internal(job.task) and not from_parent:
        raise InvalidSignature(
            f"task {job.task!r} is internal to rqueue and only a worker parent queues it; "
            "this payload was dispatched like any other task, so it is refused"
        )
    if from_parent and not is_internal(job.task):
        raise InvalidSignature(
            f"payload is signed as a worker parent's message but names task {job.task!r}"
        )
    return job
