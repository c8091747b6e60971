"""Running text for a recurrent language model: one token stream, cut into columns and into windows of
variable length (the AWD-LSTM procedure of Merity, Keskar & Socher, ICLR 2018, §4.1, which the public
ON-LSTM code trains with: yikangshen/Ordered-Neurons ``data.py``, ``utils.py`` ``batchify`` /
``get_batch`` and the training loop of ``main.py``; read, not copied).

* :func:`token_stream`: the sentences' token ids one after the other, each followed by the
  end-of-sentence token (the public ``Corpus`` appends ``<eos>`` to every line; here ``[CLS]``, the
  boundary of :mod:`syntaxformer.data.tokenization`, plays it).
* :func:`batchify`: the stream cut into ``B`` equal contiguous rows ``(B, T)``, the tokens that do not
  fill a last column dropped (the public ``batchify``, batch first: row b is the public column b).
* :class:`BpttWindows`: the windows of one epoch over ``(B, T)``. The public loop draws, before each
  step, a mean length ``bptt`` (probability 0.95) or ``bptt / 2`` (0.05), then
  ``seq_len = max(5, int(normal(mean, 5)))``, and takes the window ``[i, i + seq_len)`` (cut at the
  stream's end) with targets one token later, until ``i >= T - 2``. The draws here come from a generator
  seeded by ``(seed, epoch)`` (the public code draws from numpy's global generator), so an epoch's
  windows are the same after a resume.
* :func:`evaluation_windows`: fixed windows of ``bptt`` tokens for validation (the public ``evaluate``).

This module runs no model; the trainer is :mod:`syntaxformer.tasks.running_text`.
"""

from __future__ import annotations

import numpy as np
import torch

from syntaxformer.data.tokenization import BOUNDARY_ID

#: the public loop's rules: a half-length window with probability 0.05, standard deviation 5 tokens,
#: at least 5 tokens
HALF_WINDOW_PROBABILITY = 0.05
WINDOW_STD = 5.0
MIN_WINDOW = 5


def token_stream(sentences: list[list[int]], eos_id: int = BOUNDARY_ID) -> list[int]:
    """The running text: every sentence's ids followed by ``eos_id`` (``w_1 .. w_n <eos> w_1 ...``).

    Args:
        sentences: token ids per sentence, in text order.
        eos_id: the end-of-sentence token (default the ``[CLS]`` boundary).
    Returns:
        ``sum(len(s) + 1)`` token ids.
    """
    stream: list[int] = []
    for ids in sentences:
        stream.extend(ids)
        stream.append(eos_id)
    return stream


def batchify(stream: list[int], batch_size: int) -> torch.Tensor:
    """``(B, T)`` long: the stream cut into ``batch_size`` contiguous rows of ``T = len // B`` tokens;
    the last ``len % B`` tokens are dropped (the public ``batchify``).

    Raises:
        ValueError: a batch size below 1, or a stream shorter than two tokens per row.
    """
    if batch_size < 1:
        raise ValueError(f"batch size must be at least 1, got {batch_size}")
    length = len(stream) // batch_size
    if length < 2:
        raise ValueError(f"a stream of {len(stream)} tokens cannot fill {batch_size} rows of two tokens")
    return torch.tensor(stream[: length * batch_size], dtype=torch.long).view(batch_size, length)


def window(data: torch.Tensor, start: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The inputs ``data[:, start : start + n]`` and the targets one token later, ``(B, n)`` each, with
    ``n = min(length, T - 1 - start)`` (the public ``get_batch``).

    Raises:
        ValueError: a start with no target after it.
    """
    n = min(length, data.shape[1] - 1 - start)
    if n < 1:
        raise ValueError(f"window at {start} of a stream of {data.shape[1]} tokens has no target")
    return data[:, start : start + n], data[:, start + 1 : start + 1 + n]


class BpttWindows:
    """The training windows ``(start, length)`` of each epoch over a ``(B, T)`` stream (module docstring).

    Args:
        length: T, tokens per row.
        bptt: the mean window length (the public 70).
        seed: with the epoch, seeds the draws.

    The windows of an epoch are computed once and kept (the training loop asks for them at every step).
    """

    def __init__(self, length: int, bptt: int, seed: int = 0):
        if bptt < 1:
            raise ValueError(f"bptt must be at least 1, got {bptt}")
        self.length, self.bptt, self.seed = length, bptt, seed
        self._cache: dict[int, list[tuple[int, int]]] = {}

    def draw_length(self, rng: np.random.Generator) -> int:
        """One window length: mean ``bptt`` (or ``bptt / 2`` with probability 0.05), normal with
        standard deviation 5, truncated toward zero, at least 5 (the public loop)."""
        mean = self.bptt if rng.random() < 1.0 - HALF_WINDOW_PROBABILITY else self.bptt / 2.0
        return max(MIN_WINDOW, int(rng.normal(mean, WINDOW_STD)))

    def batches(self, epoch: int) -> list[tuple[int, int]]:
        """The epoch's windows ``(start, length)`` in order; ``start`` runs from 0 while ``start < T - 2``
        (a window's length may reach past the stream's end: :func:`window` cuts it)."""
        if epoch not in self._cache:
            rng = np.random.default_rng([self.seed, epoch])
            windows, start = [], 0
            while start < self.length - 2:
                n = self.draw_length(rng)
                windows.append((start, n))
                start += n
            self._cache = {epoch: windows}
        return self._cache[epoch]


def evaluation_windows(length: int, bptt: int) -> list[tuple[int, int]]:
    """The validation windows ``(start, bptt)`` over a stream of ``length`` tokens per row: starts
    ``0, bptt, 2 bptt, ...`` below ``length - 1`` (the public ``evaluate``)."""
    return [(start, bptt) for start in range(0, length - 1, bptt)]


__all__ = ["token_stream", "batchify", "window", "BpttWindows", "evaluation_windows"]
