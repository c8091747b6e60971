"""What the Triton kernels are given: masks as int8, and the precision of their matrix products."""

from __future__ import annotations

import torch


def int8_mask(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` (any shape, bool or integer; nonzero = True) as a contiguous int8 tensor of the same shape,
    the form the kernels load: a contiguous bool mask is reinterpreted in place (``Tensor.view(torch.int8)``:
    one byte each, True = 1; no copy and no kernel), any other is converted (one copy)."""
    if mask.dtype == torch.bool and mask.is_contiguous():
        return mask.view(torch.int8)
    return mask.to(torch.int8).contiguous()


def dot_precision() -> str:
    """``tl.dot``'s ``input_precision`` for float32 operands: ``"tf32"`` where PyTorch allows TF32 for
    float32 matrix products (``torch.backends.cuda.matmul.allow_tf32``), else ``"ieee"`` (exact)."""
    return "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee"


__all__ = ["dot_precision", "int8_mask"]
