"""Flush-to-zero for the attention paths: denormal floats set to 0, and an ``exp`` that never makes one.

The constituent prior multiplies attention by products of many link probabilities, so many entries of
``C ⊙ softmax`` fall in float32's denormal range (< 1.2e-38), where CPU arithmetic is 10-100× slower
(DESIGN.md §5). :mod:`syntaxformer.runtime` owns the CPU's flush-to-zero flag; where it is not set
(:func:`~syntaxformer.runtime.flush_to_zero_is_on`), or off CPU, the attention paths flush the values
they produce themselves with these functions (what flush-to-zero hardware does), so results agree
either way. Tested in ``tests/models/test_blockwise_attention.py`` (:func:`exp_flushed`) and
``tests/models/test_tree_transformer.py`` (both flags give the same attention).
"""

from __future__ import annotations

import math

import torch

from ..runtime import flush_to_zero_is_on


def needs_explicit_flush(x: torch.Tensor) -> bool:
    """Whether values computed from ``x`` must be flushed explicitly: unless ``x`` is on CPU and the
    calling thread's CPU already flushes (:func:`~syntaxformer.runtime.flush_to_zero_is_on`)."""
    return not (x.device.type == "cpu" and flush_to_zero_is_on())


def flush_(x: torch.Tensor) -> torch.Tensor:
    """In place: values of ``x`` (any shape, float) below the smallest normal float of its dtype in
    magnitude become 0 (explicit flush-to-zero). Returns ``x``."""
    return x.masked_fill_(x.abs() < torch.finfo(x.dtype).tiny, 0.0)


def flush_if_needed_(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """:func:`flush_` of ``x`` when :func:`needs_explicit_flush` says so for ``like`` (the tensor whose
    device and thread decide); else ``x`` unchanged. Returns ``x``."""
    return flush_(x) if needs_explicit_flush(like) else x


def exp_flushed(log_x: torch.Tensor) -> torch.Tensor:
    """``exp(log_x)`` with results below the smallest normal float set to 0 (flush-to-zero), without
    evaluating ``exp`` where it would underflow.

    PyTorch's CPU ``exp`` takes a slow path on arguments whose result is denormal or 0 (torch 2.13,
    measured: 1 ms per 2^20 floats in the normal range, 10-34 ms below about -87 in float32), and a
    long sentence's ``log C`` is mostly such arguments (products of many link probabilities). So the
    arguments are floored just above ``log(tiny)`` first and the entries that were below the floor
    are set to 0 afterwards. Differentiable (gradient 0 where the result is 0).

    Args:
        log_x: any shape, float.
    Returns:
        same shape: ``exp(log_x)``, 0 where ``log_x < log(tiny) + 0.1``.
    """
    floor = math.log(torch.finfo(log_x.dtype).tiny) + 0.1
    return torch.exp(log_x.clamp_min(floor)).masked_fill(log_x < floor, 0.0)


__all__ = ["exp_flushed", "flush_", "flush_if_needed_", "needs_explicit_flush"]
