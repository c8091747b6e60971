"""One batch ahead: the next training batch prepared in a background thread while the current step runs.

A task whose batches are a pure function of ``(indices, step)``
(:meth:`~syntaxformer.training.loop.TrainingLoop.batch_at`: its masks from generators seeded by
``(seed, step, rank)``) can have its next batch gathered, padded, masked (and, bound for CUDA, pinned)
by a :class:`BatchPrefetcher` while the device runs the current step: the loop asks for the batch of
``(indices, step)`` and names the one after it. A batch is the same whether it was prepared ahead or
inline; a guess that did not come true (a resume, a stop) is dropped and the batch made inline.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from syntaxformer.training.batch import Batch


class BatchPrefetcher:
    """The batch of ``(indices, step)``, prepared one step ahead by a worker thread.

    Args:
        make: ``make(indices, step)``, the task's batch (pure: no state read or written but its arguments).
        pin: pin the batch's host tensors (page-locked) in the worker, for a non-blocking copy to CUDA.
    """

    def __init__(self, make: Callable[[list[int], int], Batch], pin: bool = False):
        self._make, self._pin = make, pin
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batch-prefetch")
        self._pending: tuple[tuple, Future] | None = None

    def _prepare(self, indices: list[int], step: int) -> Batch:
        batch = self._make(indices, step)
        return batch.pinned() if self._pin else batch

    def get(self, indices: list[int], step: int) -> Batch:
        """The batch of ``indices`` at ``step``: the prepared one when it was named by :meth:`ahead`,
        else made now (what the worker was preparing is waited for and dropped)."""
        key = (step, tuple(indices))
        pending, self._pending = self._pending, None
        if pending is not None:
            prepared = pending[1].result()  # an error in the worker is raised here
            if pending[0] == key:
                return prepared
        return self._prepare(indices, step)

    def ahead(self, indices: list[int], step: int) -> None:
        """Start preparing the batch of ``indices`` at ``step`` (the next :meth:`get`)."""
        if self._pending is not None:
            self._pending[1].result()
        self._pending = ((step, tuple(indices)), self._pool.submit(self._prepare, list(indices), step))

    def close(self) -> None:
        """Wait for the worker and stop it."""
        self._pending = None
        self._pool.shutdown(wait=True)


def pin_for(device: torch.device) -> bool:
    """Whether batches bound for ``device`` are pinned when prepared: CUDA only."""
    return device.type == "cuda"


__all__ = ["BatchPrefetcher", "pin_for"]
