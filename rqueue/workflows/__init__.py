"""Workflows: results, chains and batches, built on the queue's own scripts.

Folded into a task's payload (its ``meta``), carried out by the worker that completes
it (``effects.py``), counted in Redis by scripts that make every change idempotent.
"""

from rqueue.workflows.batch_status import BatchCounts, BatchStatus
from rqueue.workflows.batches import (
    Batch,
    batch_of,
    current_batch,
    listed_batches,
    skip_if_batch_cancelled,
)
from rqueue.workflows.chains import Chain, DispatchedChain, chain
from rqueue.workflows.lookup import result_of
from rqueue.workflows.pending_batch import PendingBatch, batch

__all__ = [
    "Batch",
    "BatchCounts",
    "BatchStatus",
    "Chain",
    "DispatchedChain",
    "PendingBatch",
    "batch",
    "batch_of",
    "chain",
    "current_batch",
    "listed_batches",
    "result_of",
    "skip_if_batch_cancelled",
]
