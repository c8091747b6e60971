"""The Gaussian distance prior (Guo, Zhang & Liu, "Gaussian Transformer", AAAI 2019; DESIGN.md §3.1).

Per head h, the attention score of query i and key j becomes

    s_ij = q_i · k_j / √d_k − | w_h · d_ij² + b_h |,      d_ij = |i − j|,

with learned scalars ``w_h > 0`` and ``b_h <= 0`` (π folded into ``w``). It is a normalised Gaussian
multiplied into the attention, i.e. an *additive* bias before the softmax (unlike the constituent
prior, which multiplies after it). ``b < 0`` lowers a word's weight on itself. The constraints always
hold by construction: ``w = softplus(ρ_w)`` and ``b = −softplus(ρ_b)``.

As a prior of the registry (``config.prior = "gaussian"``) it returns ``PriorOutput.score_bias``
(1, H, N, N): the ``sdpa`` kernel passes it to PyTorch's fused attention as a float mask (in training
through a backend that differentiates it), the ``eager`` kernel adds it to the scores. It keeps no
state between layers and records nothing (it induces no trees).

Config fields read: ``num_attention_heads``, ``gaussian_w_init`` (default :data:`W_INIT`),
``gaussian_b_init`` (default :data:`B_INIT`, must be <= 0).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .base import PriorOutput, StructuralPrior

#: default initial ``w`` (per head): a penalty of 1 nat at distance 10, 9 at distance 30
W_INIT = 0.01
#: default initial ``b`` (per head): no self-penalty (represented as −1e-12: ``b = −softplus(ρ)`` < 0)
B_INIT = 0.0
#: smallest |value| an initial value is represented with (softplus never reaches 0)
_FLOOR = 1e-12


def inverse_softplus(value: float) -> float:
    """ρ with softplus(ρ) = value (value > 0), stable for small and large values."""
    return value + math.log(-math.expm1(-value))


def gaussian_bias(w: torch.Tensor, b: torch.Tensor, n: int) -> torch.Tensor:
    """The additive score bias ``−|w_h d_ij² + b_h|``.

    Args:
        w: (H,) positive widths; b: (H,) non-positive offsets.
        n: sequence length N.
    Returns:
        (1, H, N, N) bias (nats, <= 0 where ``w d² >= −b``).
    """
    positions = torch.arange(n, device=w.device, dtype=w.dtype)
    distance_sq = (positions[:, None] - positions[None, :]) ** 2  # (N, N)
    return -(w[:, None, None] * distance_sq + b[:, None, None]).abs()[None]  # (1, H, N, N)


class GaussianPrior(StructuralPrior):
    """The registry's ``"gaussian"`` prior: one (w, b) pair per head (module docstring).

    Args:
        num_heads: H.
        w_init: initial w (> 0).
        b_init: initial b (<= 0).
    Raises:
        ValueError: ``w_init <= 0`` or ``b_init > 0``.
    """

    def __init__(self, num_heads: int, w_init: float = W_INIT, b_init: float = B_INIT):
        super().__init__()
        if w_init <= 0 or b_init > 0:
            raise ValueError(f"the Gaussian prior needs w > 0 and b <= 0, got w={w_init}, b={b_init}")
        self.w_raw = nn.Parameter(torch.full((num_heads,), inverse_softplus(max(w_init, _FLOOR))))
        self.b_raw = nn.Parameter(torch.full((num_heads,), inverse_softplus(max(-b_init, _FLOOR))))

    @classmethod
    def from_config(cls, config, layer_index: int) -> GaussianPrior:
        """The prior of any layer (``num_attention_heads``, ``gaussian_w_init``, ``gaussian_b_init``)."""
        return cls(
            config.num_attention_heads,
            getattr(config, "gaussian_w_init", W_INIT),
            getattr(config, "gaussian_b_init", B_INIT),
        )

    @property
    def w(self) -> torch.Tensor:
        """(H,) widths, > 0."""
        return F.softplus(self.w_raw)

    @property
    def b(self) -> torch.Tensor:
        """(H,) offsets, < 0."""
        return -F.softplus(self.b_raw)

    def forward(self, hidden: torch.Tensor, key_mask: torch.Tensor, state=None, inputs=None) -> PriorOutput:
        """hidden (B, N, d) (only its length and dtype are used) -> ``score_bias`` (1, H, N, N);
        ``inputs`` (structure inputs) is ignored."""
        bias = gaussian_bias(self.w, self.b, hidden.shape[1]).to(hidden.dtype)
        return PriorOutput(score_bias=bias)

    def extra_repr(self) -> str:
        return f"heads={self.w_raw.shape[0]}"
