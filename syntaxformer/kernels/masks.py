"""Masks as the Triton kernels read them."""

from __future__ import annotations

import torch


def int8_mask(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` (any shape, bool or integer; nonzero = True) as a contiguous int8 tensor of the same shape,
    the form the kernels load: a contiguous bool mask is reinterpreted in place (``Tensor.view(torch.int8)``:
    one byte each, True = 1; no copy and no kernel), any other is converted (one copy)."""
    if mask.dtype == torch.bool and mask.is_contiguous():
        return mask.view(torch.int8)
    return mask.to(torch.int8).contiguous()


__all__ = ["int8_mask"]
