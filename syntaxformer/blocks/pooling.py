"""Sentence poolings: a sentence encoder's outputs ``(B, N, D)`` and its mask ``(B, N)`` -> one vector
per sentence ``(B, D)``.

**Pooling, a documented choice** (:data:`POOLINGS`; an architecture's encoder use names its default, a
task may override it): recurrent encoders give the top layer's output at the sentence's last token
(``last``), what the ON-LSTM paper's logic experiment classifies from (Shen et al. 2019, §6.4; the
public ``proplog.py`` takes ``output[lengths - 1]``): it has read the whole sentence. A self-attention
encoder has no such state, every position sees the whole sentence, so attention encoders average
their outputs over the real tokens (``mean``); ``max`` (the element-wise maximum over real tokens) is
the other option.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor


def pool_last(hidden: Tensor, mask: Tensor) -> Tensor:
    """The output at each sentence's last real token (right padding): ``h[b, len_b - 1]``.
    hidden ``(B, N, D)``, mask ``(B, N)`` 1 = token -> ``(B, D)``."""
    last = (mask.sum(-1) - 1).clamp(min=0)  # (B,)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


def pool_mean(hidden: Tensor, mask: Tensor) -> Tensor:
    """The mean of the outputs over real tokens: ``sum_t m_t h_t / sum_t m_t``. ``(B, N, D)`` -> ``(B, D)``."""
    m = mask.to(hidden.dtype).unsqueeze(-1)  # (B, N, 1)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)


def pool_max(hidden: Tensor, mask: Tensor) -> Tensor:
    """The element-wise maximum of the outputs over real tokens. ``(B, N, D)`` -> ``(B, D)``."""
    return hidden.masked_fill(~mask.bool().unsqueeze(-1), float("-inf")).amax(1)


#: pooling name -> function ``(hidden (B, N, D), mask (B, N)) -> (B, D)``
POOLINGS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {"last": pool_last, "mean": pool_mean, "max": pool_max}

__all__ = ["POOLINGS", "pool_last", "pool_mean", "pool_max"]
