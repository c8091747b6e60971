"""Dropout masks that are cheap to draw on a CPU (the mask generator of every dropout in the package).

PyTorch's CPU dropout draws its mask with ``bernoulli_``, one generator call per element: on the
default ``induce`` recipe's training step that is about a fifth of the step (13 masks a step,
``benchmarks/speed/train_step.py``). Here a CPU mask comes from 64-bit random integers (``random_``), each
cut into four 16-bit lanes of which the low 15 bits are compared with a threshold: four keep/drop
decisions per generator call, about three times faster for the same distribution. On other devices
(CUDA's fused kernels are fast) the mask is ``torch.rand(...) >= p``.

The drop probability is then ``t / 2**15`` with ``t = round(p * 2**15)``: within ``1.6e-5`` of ``p``
(``p = 0.1`` drops with probability 0.100006); kept values are scaled by ``1 / (1 - t / 2**15)``, so
the expectation is exactly the input's. Under ``torch.compile`` (which does not trace ``random_``) a
CPU mask's lanes are ``floor(2**15 · rand)`` instead, uniform on the same values (float32's ``rand``
has 24 random bits): the same distribution, other draws. The masks come from the default generator of
the tensor's device, so ``torch.manual_seed`` makes them reproducible, and a generator state saved
before a draw redraws the same mask (the blockwise attention kernel's backward does, :mod:`syntaxformer.kernels.attention`).

Users: inverted dropout of hidden states (:mod:`syntaxformer.blocks.dropout`), the literal attention
(:func:`syntaxformer.priors.attention.eager_attention`) and the blockwise attention kernel. Tested in
``tests/models/test_dropout.py`` (the drop rate, the scale, the complement) and against the literal attention
in ``tests/models/test_blockwise_attention.py``.
"""

from __future__ import annotations

import math

import torch

#: Bits of each lane compared with the threshold (the top bit of a 64-bit draw is always 0 in
#: ``random_``, so only the low 15 bits of each 16-bit lane are used).
LANE_BITS = 15


def check_probability(p: float) -> None:
    """Check a dropout probability.

    Raises:
        ValueError: ``p`` outside [0, 1).
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")


def drop_probability(p: float) -> float:
    """The drop probability a CPU mask of :func:`keep_mask` realises for ``p`` (``round(p·2^15)/2^15``)."""
    return round(p * 2**LANE_BITS) / 2**LANE_BITS


def keep_scale(p: float, device: torch.device | str = "cpu") -> float:
    """The inverted-dropout factor of kept values, ``1 / (1 - p')`` (``p'`` = :func:`drop_probability`
    on a CPU, ``p`` elsewhere), so that a masked tensor keeps its expectation exactly.

    Raises:
        ValueError: ``p`` outside [0, 1).
    """
    check_probability(p)
    return 1.0 / (1.0 - (drop_probability(p) if torch.device(device).type == "cpu" else p))


def _lanes(n: int) -> torch.Tensor:
    """(n,) int16 values uniform on [0, 2^15): four lanes of each 64-bit ``random_`` draw (CPU generator)."""
    draws = torch.empty((n + 3) // 4, dtype=torch.int64).random_()  # 63 random bits each
    return draws.view(torch.int16)[:n] & (2**LANE_BITS - 1)


def keep_mask(shape: torch.Size | tuple[int, ...], p: float, device: torch.device | str = "cpu") -> torch.Tensor:
    """A dropout keep mask: bool, True (keep) with probability ``1 - drop_probability(p)`` on a CPU
    (``1 - p`` elsewhere), independently per element.

    Args:
        shape: the mask's shape (any).
        p: the drop probability, in [0, 1).
        device: where to draw it (the device's default generator).
    Returns:
        bool tensor of ``shape`` on ``device``.
    Raises:
        ValueError: ``p`` outside [0, 1).
    """
    return _mask(shape, p, device, keep=True)


def drop_mask(shape: torch.Size | tuple[int, ...], p: float, device: torch.device | str = "cpu") -> torch.Tensor:
    """The complement of :func:`keep_mask` from the same draws (True = drop), in one pass: what
    ``masked_fill_`` takes. The same generator state gives ``drop_mask == ~keep_mask``.

    Args, returns and errors as :func:`keep_mask`.
    """
    return _mask(shape, p, device, keep=False)


def _mask(shape, p: float, device, keep: bool) -> torch.Tensor:
    """Draws compared with the drop threshold: ``>=`` (keep) or ``<`` (drop)."""
    check_probability(p)
    device = torch.device(device)
    if device.type == "cpu" and torch.compiler.is_compiling():  # random_ is not traced: the same lanes from rand
        draws, threshold = (torch.rand(shape) * 2**LANE_BITS).to(torch.int16), round(p * 2**LANE_BITS)
    elif device.type == "cpu":
        draws, threshold = _lanes(math.prod(shape)), round(p * 2**LANE_BITS)
    else:
        draws, threshold = torch.rand(shape, device=device), p
    return (draws >= threshold if keep else draws < threshold).view(shape)


__all__ = ["LANE_BITS", "check_probability", "drop_mask", "drop_probability", "keep_mask", "keep_scale"]
