"""What a debounced dispatch did (``@task(debounce=)``), read from debounce.lua's reply.

The script decides, atomically, whether a call starts a new burst or replaces the
call pending for its key; this module only names the outcomes and checks the reply,
which comes from Redis and is read as hostile: an outcome it does not know, an id
that is not 16 bytes, a due time that is not a number are a DispatchRefused.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from rqueue.errors import DispatchRefused
from rqueue.store.header import RAW_ID_LENGTH


class Debounced(enum.Enum):
    """What a debounced dispatch did; its handle's id is the call that will run."""

    SCHEDULED = "scheduled"
    """No call was pending for its key: it began a burst, due a debounce from now."""
    REPLACED = "replaced"
    """It replaced the call pending for its key: that call (its id) now has these
    arguments, and is due a debounce from now."""
    CAPPED = "capped"
    """It replaced the pending call, but ``debounce_max`` held the due time: the call
    runs that long after its burst began, however many more come."""


class DebounceReply(NamedTuple):
    """debounce.lua's reply: done (``outcome`` set) or to be sent again (None)."""

    outcome: Debounced | None
    id: str
    """The call that will run (32 hex digits); with no outcome, the pending call's id
    to send again with, or '' to send again with a new id."""
    due_ms: int
    """When the call is due (Redis's clock, ms); 0 with no outcome."""


_OUTCOMES = {outcome.value.encode(): outcome for outcome in Debounced}


def read_reply(reply: object) -> DebounceReply:
    """debounce.lua's reply, checked (see the script's header)."""
    if isinstance(reply, list) and reply and isinstance(reply[-1], (bytes, int)):
        word, raw = reply[0], reply[1] if len(reply) > 1 else None
        ids = (RAW_ID_LENGTH,) if len(reply) == 3 else (0, RAW_ID_LENGTH)
        if isinstance(raw, bytes) and len(raw) in ids:
            if len(reply) == 2 and word == b"retry":
                return DebounceReply(None, raw.hex(), 0)
            outcome = _OUTCOMES.get(word) if isinstance(word, bytes) else None
            due = reply[-1]
            if len(reply) == 3 and outcome is not None and isinstance(due, int):
                return DebounceReply(outcome, raw.hex(), due)
    raise DispatchRefused(f"debounce.lua answered {reply!r}, not what it says it returns")
