"""Inverted dropout of hidden states (Srivastava et al., JMLR 2014) with the package's cheap CPU mask.

``dropout(x) = x ⊙ m / (1 - p')``: on a CPU, ``m`` a keep mask and ``p'`` its drop probability, both
from the mask generator :mod:`syntaxformer.kernels.dropout` (four keep/drop decisions per 64-bit draw;
``p' = round(p·2^15)/2^15``, within 1.6e-5 of ``p``), so the expectation is exactly the input's. On
other devices PyTorch's own ``F.dropout`` (on CUDA one fused kernel forward, mask and product, and one
backward, where a mask drawn apart costs six: draw, compare, cast, scale, product and the backward's
product). :class:`Dropout` is ``nn.Dropout`` with that mask. Tested in ``tests/models/test_dropout.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels.dropout import check_probability, keep_mask, keep_scale


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Inverted dropout of ``x``: on a CPU with a :func:`~syntaxformer.kernels.dropout.keep_mask`, elsewhere
    ``F.dropout`` (identity when not training or ``p == 0``).

    Args:
        x: any shape and floating dtype.
        p: drop probability in [0, 1).
        training: apply it (False: return ``x``).
    Returns:
        ``x ⊙ m / (1 - p')``, same shape and dtype (``p'`` =
        :func:`~syntaxformer.kernels.dropout.drop_probability` on a CPU, else ``p``).
    Raises:
        ValueError: ``p`` outside [0, 1) (when applied).
    """
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":  # PyTorch's fused dropout (its own mask generator, the device's default)
        check_probability(p)
        return F.dropout(x, p, training=True)
    scale = keep_scale(p, x.device)
    keep = keep_mask(x.shape, p, x.device)
    if x.dtype in (torch.float32, torch.float64):  # one product forward and backward: x * (m · scale)
        return x * keep.to(x.dtype).mul_(scale)
    return x * keep * scale  # a half-precision mask would round the scale (1/0.9 -> 1.109 in bfloat16)


class Dropout(nn.Module):
    """``nn.Dropout`` with :func:`dropout`'s cheaper CPU mask: the same module interface (``p``,
    ``train()``/``eval()``), the same distribution of kept elements and scaling; input and output of
    any shape, the same.

    Raises:
        ValueError: ``p`` outside [0, 1).
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        check_probability(p)
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


__all__ = ["Dropout", "dropout"]
