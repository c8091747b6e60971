"""Hard-concrete gates on attention heads (Louizos, Welling & Kingma 2018; Voita et al. 2019), DESIGN.md §3.5.

One stochastic gate ``g_h ∈ [0, 1]`` per head with a learned location ``log α_h``. The equations,
one function each (Louizos et al. 2018, §4.1, eqs. 10-13; Voita et al. 2019, §6.1)::

    u ~ U(0, 1),  s = σ((log u − log(1 − u) + log α) / β)       # binary concrete sample
    s̄ = s · (ζ − γ) + γ,  g = min(1, max(0, s̄))                 # stretched, then hard-clipped: sample_gates
    P(g = 0) = P(s̄ ≤ 0) = σ(β · log(−γ / ζ) − log α)             # closed form: probability_closed
    L_C = Σ_h (1 − P(g_h = 0))                                    # expected open heads: l0_penalty
    ĝ = min(1, max(0, σ(log α) · (ζ − γ) + γ))                    # test-time gate: deterministic_gates

with stretch limits ``γ = −0.1``, ``ζ = 1.1`` and temperature ``β``: 0.33 in the authors' code
(lena-voita/the-story-of-heads, ``lib/layers/concrete_gate.py``, the default here), 2/3 in Louizos et
al. (:data:`LOUIZOS_TEMPERATURE`). Because ``s̄`` is clipped, a sample is exactly 0 with probability
``P(g = 0)`` and exactly 1 with probability ``P(s̄ ≥ 1)``, so the L0 norm of the gates has the
differentiable expectation ``L_C``. The training loss is ``L + λ · L_C``.

:class:`HeadGates` holds the ``(L, H)`` locations of a model's heads and returns a head mask (the
models' ``head_mask``, which multiplies each head's output): a fresh sample per call in training mode,
the deterministic gate in evaluation mode. :func:`binarise` turns a gate into 0 or 1 at the end of
fine-tuning (the authors' ``hard`` rule: open when above 0.5).
"""

from __future__ import annotations

import math

import torch
from torch import nn

#: Lower stretch limit γ (Louizos et al. 2018; Voita et al. 2019).
GAMMA = -0.1
#: Upper stretch limit ζ.
ZETA = 1.1
#: Temperature β of the authors' code (lena-voita/the-story-of-heads ``ConcreteGate``): the default.
TEMPERATURE = 0.33
#: Temperature β of Louizos et al. 2018 (their experiments), documented alternative.
LOUIZOS_TEMPERATURE = 2.0 / 3.0
#: Uniform noise is drawn from ``[EPS, 1 − EPS]`` (the authors' code: 1e-6), keeping ``log u`` finite.
EPS = 1e-6
#: A gate is open after :func:`binarise` when its deterministic value exceeds this.
OPEN_THRESHOLD = 0.5
#: Initial ``log α``: the deterministic gate is 1 and ``P(g = 0) ≈ 0.02`` at β = 0.33, so fine-tuning
#: starts from the trained model with (almost) every head open. Our choice (the papers train from
#: scratch or do not say).
LOG_ALPHA_INIT = 3.0


def sample_gates(
    log_alpha: torch.Tensor,
    temperature: float = TEMPERATURE,
    gamma: float = GAMMA,
    zeta: float = ZETA,
    generator: torch.Generator | None = None,
    eps: float = EPS,
) -> torch.Tensor:
    """Hard-concrete samples ``g = min(1, max(0, σ((log u − log(1−u) + log α)/β)(ζ−γ) + γ))``.

    Louizos et al. 2018, eqs. 10-11 (the reparametrisation: differentiable in ``log α`` wherever
    ``0 < s̄ < 1``).

    Args:
        log_alpha: gate locations, any shape (e.g. ``(L, H)``).
        temperature: β > 0. gamma, zeta: stretch limits, γ < 0 < 1 < ζ.
        generator: the uniform noise's generator (None: torch's global one).
        eps: ``u`` is drawn uniformly from ``[eps, 1 − eps]``.
    Returns:
        Gates in ``[0, 1]``, shape and dtype of ``log_alpha``; exact zeros and ones occur.
    """
    u = torch.rand(log_alpha.shape, generator=generator, dtype=log_alpha.dtype, device=log_alpha.device)
    u = u * (1.0 - 2.0 * eps) + eps
    s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + log_alpha) / temperature)
    return stretch_and_clip(s, gamma, zeta)


def stretch_and_clip(s: torch.Tensor, gamma: float = GAMMA, zeta: float = ZETA) -> torch.Tensor:
    """``min(1, max(0, s · (ζ − γ) + γ))``: a value of (0, 1) stretched to (γ, ζ), then clipped."""
    return torch.clamp(s * (zeta - gamma) + gamma, 0.0, 1.0)


def probability_closed(
    log_alpha: torch.Tensor, temperature: float = TEMPERATURE, gamma: float = GAMMA, zeta: float = ZETA
) -> torch.Tensor:
    """``P(g = 0) = σ(β · log(−γ/ζ) − log α)``, the closed form (Louizos et al. 2018, eq. 12).

    Args:
        log_alpha: gate locations, any shape. temperature: β. gamma, zeta: stretch limits (γ < 0).
    Returns:
        Probabilities (0-1, not logs), shape of ``log_alpha``.
    Raises:
        ValueError: ``gamma`` not negative (then a gate is never exactly closed).
    """
    if gamma >= 0:
        raise ValueError(f"P(g = 0) needs a negative lower stretch limit, got gamma={gamma}")
    return torch.sigmoid(temperature * math.log(-gamma / zeta) - log_alpha)


def l0_penalty(
    log_alpha: torch.Tensor,
    temperature: float = TEMPERATURE,
    gamma: float = GAMMA,
    zeta: float = ZETA,
    present: torch.Tensor | None = None,
) -> torch.Tensor:
    """``L_C = Σ_h (1 − P(g_h = 0))``: the expected number of open gates (Voita et al. 2019, §6.1).

    Args:
        log_alpha: gate locations. temperature, gamma, zeta: as :func:`probability_closed`.
        present: bool mask of the gates that count (e.g. heads not pruned); None: all.
    Returns:
        A scalar (expected count of open gates, in gates).
    """
    p_open = 1.0 - probability_closed(log_alpha, temperature, gamma, zeta)
    return p_open[present].sum() if present is not None else p_open.sum()


def deterministic_gates(log_alpha: torch.Tensor, gamma: float = GAMMA, zeta: float = ZETA) -> torch.Tensor:
    """The test-time gate ``ĝ = min(1, max(0, σ(log α)(ζ − γ) + γ))`` (Louizos et al. 2018, eq. 13;
    the authors' code's evaluation gate): no noise, no temperature."""
    return stretch_and_clip(torch.sigmoid(log_alpha), gamma, zeta)


def binarise(gates: torch.Tensor, threshold: float = OPEN_THRESHOLD) -> torch.Tensor:
    """Each gate as 0 or 1: open (1.0) when above ``threshold`` (the authors' code's ``hard`` gates
    use 0.5), else closed (0.0); dtype of ``gates``."""
    return (gates > threshold).to(gates.dtype)


class HeadGates(nn.Module):
    """One hard-concrete gate per attention head: ``log_alpha`` ``(L, H)``, learned.

    ``forward()`` returns an ``(L, H)`` head mask for the models' ``head_mask`` argument (original
    head numbers): in training mode one sample of :func:`sample_gates` (the same for every sentence
    of a batch, as the authors' code), in evaluation mode :func:`deterministic_gates`. Gates of
    heads already pruned from the model (``present`` False) are 0 and count nowhere.

    Args:
        present: ``(L, H)`` bool, the heads the model has.
        temperature: β (default :data:`TEMPERATURE`). init: initial ``log α`` (default
            :data:`LOG_ALPHA_INIT`). gamma, zeta: stretch limits.
    """

    def __init__(
        self,
        present: torch.Tensor,
        temperature: float = TEMPERATURE,
        init: float = LOG_ALPHA_INIT,
        gamma: float = GAMMA,
        zeta: float = ZETA,
    ):
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.temperature, self.gamma, self.zeta = float(temperature), float(gamma), float(zeta)
        self.log_alpha = nn.Parameter(torch.full(present.shape, float(init)))
        self.register_buffer("present", present.bool().clone())

    def forward(self) -> torch.Tensor:
        """The ``(L, H)`` head mask (sampled in training mode, deterministic in evaluation mode)."""
        if self.training:
            gates = sample_gates(self.log_alpha, self.temperature, self.gamma, self.zeta)
        else:
            gates = deterministic_gates(self.log_alpha, self.gamma, self.zeta)
        return gates * self.present.to(gates.dtype)

    def penalty(self) -> torch.Tensor:
        """:func:`l0_penalty` over the heads present: the expected number of open gates."""
        return l0_penalty(self.log_alpha, self.temperature, self.gamma, self.zeta, self.present)

    def probability_closed(self) -> torch.Tensor:
        """``(L, H)`` ``P(g = 0)`` per head (:func:`probability_closed`)."""
        return probability_closed(self.log_alpha, self.temperature, self.gamma, self.zeta)

    def deterministic(self) -> torch.Tensor:
        """``(L, H)`` test-time gates (:func:`deterministic_gates`), 0 at heads not present."""
        return deterministic_gates(self.log_alpha, self.gamma, self.zeta) * self.present.to(self.log_alpha.dtype)

    def open_heads(self) -> torch.Tensor:
        """``(L, H)`` bool: heads present whose binarised test-time gate is 1 (:func:`binarise`)."""
        return binarise(self.deterministic()).bool() & self.present


__all__ = [
    "GAMMA",
    "ZETA",
    "TEMPERATURE",
    "LOUIZOS_TEMPERATURE",
    "EPS",
    "OPEN_THRESHOLD",
    "LOG_ALPHA_INIT",
    "sample_gates",
    "stretch_and_clip",
    "probability_closed",
    "l0_penalty",
    "deterministic_gates",
    "binarise",
    "HeadGates",
]
