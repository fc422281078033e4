"""Testing helpers: record dispatches (``fake()``), run them inline (``sync()``), and
the pytest plugin's fixtures (``plugin.py``: ``rqueue_fake``, ``rqueue_redis``,
``rqueue_worker``). See docs/testing.md.

Both modes take every dispatch through ``rqueue.tasks.interception.intercept`` and run calls with
``inline.py``, which goes through the same payload, middleware and workflow code as
a worker and settles each attempt by the worker's verdicts; a batch run so is kept in
memory (``memory_batch.py``, counted by ``batch_counting.py``). May import anything
in rqueue but the command line.
"""

from rqueue.testing.fake import Fake, fake
from rqueue.testing.inline import InlineDispatched, Outcome
from rqueue.testing.memory_batch import MemoryBatch
from rqueue.testing.sync import Sync, sync, sync_from_environment

__all__ = [
    "Fake",
    "InlineDispatched",
    "MemoryBatch",
    "Outcome",
    "Sync",
    "fake",
    "sync",
    "sync_from_environment",
]
