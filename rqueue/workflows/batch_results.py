"""A batch callback that gets the members' results (Celery's chord).

``batch([...]).then(summarise, results=True)`` calls ``summarise(batch, results)``.
Each member of such a batch carries meta ``results``; its success packs its return
value and sends it with its count (batch_member.lua), which keeps it in the batch's
results hash by member index, once (a member counted before never overwrites its
own), with the batch's other keys, in their slot, expiring with them. The values of
one batch are bounded together (``RQUEUE_MAX_BATCH_RESULTS_BYTES``): the member
that would go over fails for good, since the callback's worker reads them all into
memory (:func:`read_results`, in pages), and decodes them as it would any bytes
from Redis: what does not decode fails the callback, never the worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rqueue.encoding.codec import unpack
from rqueue.encoding.sealing import KEYS_SETTING, Keyring, NotDecrypted, Sealed, batch_result_data
from rqueue.errors import InvalidPayload, ResultTooLarge, RQueueError
from rqueue.store.batch_store import RESULTS_PAGE, BatchStore
from rqueue.store.queue import RedisQueue
from rqueue.workflows.steps import Step

RESULTS = "results"
"""In a member's meta: its success sends its return value with its count. In a
callback's step (and its ``gets``): it is called with the members' results second."""

SETTING = "RQUEUE_MAX_BATCH_RESULTS_BYTES"


def wants_results(callbacks: Mapping[str, Step]) -> bool:
    """Whether one of a batch's callbacks gets its members' results."""
    return any(step.get(RESULTS) is True for step in callbacks.values())


def over_limit(batch_id: str, index: int, size: int, limit: int) -> ResultTooLarge:
    """The failure of a member whose value the batch cannot keep."""
    return ResultTooLarge(
        f"the return value of member {index} of batch {batch_id} could not be kept for "
        f"its callback: its {size} bytes would take the batch's results over the limit "
        f"of {limit} ({SETTING}); return a reference (an id or a URL) to the data instead"
    )


def read_results(queue: RedisQueue, batch_id: str) -> list[Any]:
    """Every member's result, in member order (None for a member that kept none:
    failed, skipped, or not finished), read in pages of ``RESULTS_PAGE``.

    RQueueError if the batch is gone (expired, pruned); InvalidPayload naming the
    batch if a value does not decode or they weigh more than ``RQUEUE_MAX_BATCH_RESULTS_BYTES``
    (written by hand: a member cannot store more).
    """
    store = BatchStore(queue)
    total = store.total(batch_id)
    if total is None:
        raise RQueueError(
            f"batch {batch_id} is gone (expired or pruned): its members' results cannot be read"
        )
    limit, held = queue.config.max_batch_results_bytes, 0
    keyring = queue.config.keyring
    results: list[Any] = []
    for first in range(0, total, RESULTS_PAGE):
        for offset, raw in enumerate(
            store.results(batch_id, first, min(RESULTS_PAGE, total - first))
        ):
            held += len(raw or b"")
            if held > limit:
                raise InvalidPayload(
                    f"the results of batch {batch_id} take more than {limit} bytes ({SETTING})"
                )
            value = None if raw is None else decoded(batch_id, first + offset, raw, keyring)
            results.append(value)
    return results


def decoded(batch_id: str, index: int, raw: bytes, keyring: Keyring | None = None) -> Any:
    """A member's packed value (an encrypted member's opened with ``keyring``);
    InvalidPayload naming the batch if it does not decode (NotDecrypted if it does not
    open)."""
    try:
        value = unpack(raw)
        if type(value) is Sealed:
            if keyring is None:
                raise NotDecrypted(f"it is encrypted and this process has no key ({KEYS_SETTING})")
            value = unpack(keyring.open(value.blob, batch_result_data(batch_id, index), "result"))
        return value
    except InvalidPayload as exc:  # a value in it this process cannot decode
        raise InvalidPayload(f"the result of member {index} of batch {batch_id}: {exc}") from None
    except Exception:
        raise InvalidPayload(
            f"the result of member {index} of batch {batch_id} is not valid msgpack"
        ) from None
