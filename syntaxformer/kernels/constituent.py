"""Fast paths of the Tree Transformer's constituent prior (:mod:`syntaxformer.priors.constituent`).

The same functions as the prior's literal equations (Wang, Lee & Chen, EMNLP 2019, §3.1-3.2), computed
with fewer passes; only float rounding may differ:

* :func:`neighbour_score_form` and :func:`neighbour_scores_bilinear` (:class:`BilinearNeighbourScores`):
  the neighbour scores of eq. 5 as one bilinear form of the layer input, one d×d product per token
  instead of the two projections, with a hand-written backward (DESIGN.md §5). The prior uses them
  whenever B·N > d_model, whatever its ``kernel``
  (:func:`~syntaxformer.priors.constituent.layer_neighbour_scores`).
* :func:`fused_link_chain` (:class:`FusedLinkChain`): eqs. 6-8 and the cumulative log links ``P`` as one
  autograd function with a hand-written backward (``kernel="fused"``).
* :func:`log_constituent_prior_vjp`: the closed-form gradient of rows of ``log C`` with respect to
  ``P``, which the blockwise attention kernel uses instead of autograd (``kernel="fused"`` and ``"triton"``).

The two variants (``"paper"``, ``"official"``) are the prior's; ``eps`` is the official variant's
epsilon, which the prior passes (:data:`syntaxformer.priors.constituent.OFFICIAL_EPS`). Tested against
the literal path in ``tests/kernels/test_kernel_table.py``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

# ----------------------------------------------------------------------------------------------
# Eq. 5 as a bilinear form
# ----------------------------------------------------------------------------------------------


def neighbour_score_form(
    query: nn.Linear, key: nn.Linear, scale: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The neighbour scores of eq. 5 as one bilinear form of the layer input (DESIGN.md §5).

    With ``q_i = W_q h_i + b_q`` and ``k_j = W_k h_j + b_k`` (``nn.Linear``), exactly

        q_i · k_j / scale = (h_iᵀ M h_j + h_i·u + h_j·w + c) / scale,
        M = W_qᵀ W_k,  u = W_qᵀ b_k,  w = W_kᵀ b_q,  c = b_q · b_k,

    so one d×d product per token, ``h M / scale``, replaces the two projections (forward: one
    product instead of two; backward: two instead of four), at the price of forming ``M`` (d³ per
    call, independent of the batch). Same function of the parameters (the bias terms are kept);
    only float rounding differs.

    Args:
        query, key: the module's ``nn.Linear(d, d)`` projections (weights (d, d), biases (d,)).
        scale: the score divisor (d_model/2 or 256); 1 (the default): the form undivided, no
            division made (the Triton chain divides the scores itself).
    Returns:
        ``(M / scale, [u | w] / scale, c / scale)``: (d, d), (d, 2) and a scalar tensor.
    """
    w_q, w_k = query.weight, key.weight  # (d, d) each, (out, in)
    b_q = query.bias if query.bias is not None else w_q.new_zeros(w_q.shape[0])
    b_k = key.bias if key.bias is not None else w_k.new_zeros(w_k.shape[0])
    bilinear = w_q.t() @ w_k  # (d, d)
    linear = torch.stack([w_q.t() @ b_k, w_k.t() @ b_q], dim=1)  # (d, 2)
    offset = b_q @ b_k
    if scale == 1.0:
        return bilinear, linear, offset
    return bilinear / scale, linear / scale, offset / scale


class BilinearNeighbourScores(torch.autograd.Function):
    """``s_right[k] = r_k·h_{k+1} + hu_k + hw_{k+1} + c``, ``s_left[k] = r_{k+1}·h_k + hu_{k+1} + hw_k + c``.

    Inputs ``r = h M`` (B, N, d), ``h`` (B, N, d), ``uw = [u | w]`` (d, 2) and ``c`` (scalar tensor);
    ``hu = h u`` and ``hw = h w`` are computed inside. Outputs ``(s_right, s_left)``, (B, N-1) each.
    Autograd's own chain (two shifted slices of ``r`` and ``h`` per product, a zero-filled gradient per
    slice, then their sum) makes several more passes over (B, N, d); this backward writes ``d r`` and
    ``d h`` once each:

        d r_k = g^R_k h_{k+1} + g^L_{k-1} h_{k-1},
        d h_j = g^R_{j-1} r_{j-1} + g^L_j r_{j+1} + d hu_j u + d hw_j w,
        d hu_k = g^R_k + g^L_{k-1},   d hw_k = g^R_{k-1} + g^L_k,   d c = Σ g^R + Σ g^L
        (terms with a gap index outside 0..N-2 are absent).

    Not twice differentiable. Checked by finite differences in ``tests/models/test_constituent_attention.py``.
    """

    @staticmethod
    def forward(ctx, r, hidden, uw, offset):
        hu, hw = hidden @ uw[:, 0], hidden @ uw[:, 1]  # (B, N) each (two matrix-vector products: an
        # (N, d) × (d, 2) matrix product is several times slower on CPU)
        s_right = (r[:, :-1] * hidden[:, 1:]).sum(-1) + hu[:, :-1] + hw[:, 1:] + offset  # (B, N-1)
        s_left = (r[:, 1:] * hidden[:, :-1]).sum(-1) + hu[:, 1:] + hw[:, :-1] + offset  # (B, N-1)
        ctx.save_for_backward(r, hidden, uw)
        return s_right, s_left

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_right, g_left):
        r, hidden, uw = ctx.saved_tensors
        gr, gl = g_right[..., None], g_left[..., None]  # (B, N-1, 1)
        grad_hu = F.pad(g_right, (0, 1)) + F.pad(g_left, (1, 0))  # (B, N)
        grad_hw = F.pad(g_right, (1, 0)) + F.pad(g_left, (0, 1))  # (B, N)
        grad_r = torch.empty_like(r)  # (B, N, d)
        if torch.compiler.is_compiling():  # a compiled graph takes no strided out=; the same products
            grad_r[:, :-1] = hidden[:, 1:] * gr
        else:
            torch.mul(hidden[:, 1:], gr, out=grad_r[:, :-1])
        grad_r[:, -1] = 0.0
        grad_r[:, 1:].addcmul_(hidden[:, :-1], gl)
        grad_hidden = grad_hu[..., None] * uw[:, 0]  # (B, N, d)
        grad_hidden.addcmul_(grad_hw[..., None], uw[:, 1])
        grad_hidden[:, 1:].addcmul_(r[:, :-1], gr)
        grad_hidden[:, :-1].addcmul_(r[:, 1:], gl)
        flat = hidden.reshape(-1, hidden.shape[-1]).t()  # (d, B·N)
        grad_uw = torch.stack([flat @ grad_hu.reshape(-1), flat @ grad_hw.reshape(-1)], dim=1)  # (d, 2)
        return grad_r, grad_hidden, grad_uw, g_right.sum() + g_left.sum()


def neighbour_scores_bilinear(
    hidden: torch.Tensor, bilinear: torch.Tensor, linear: torch.Tensor, offset: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The prior's ``neighbour_scores(query(hidden), key(hidden), scale)`` from :func:`neighbour_score_form`.

    ``s_{i,j} = r_i · h_j + h_i·u + h_j·w + c`` (all over ``scale``) with ``r = h M``: one d×d
    product per token, then the 2(N-1) neighbour dot products (with a hand-written backward,
    :class:`BilinearNeighbourScores`).

    Args:
        hidden: (B, N, d) the (normalised) layer input ``h``.
        bilinear, linear, offset: from :func:`neighbour_score_form`.
    Returns:
        ``(s_right, s_left)``, each (B, N-1), indexed by gap k: ``s_right[:, k] = s_{k,k+1}``,
        ``s_left[:, k] = s_{k+1,k}``.
    """
    r = hidden @ bilinear  # (B, N, d): h M / scale
    return BilinearNeighbourScores.apply(r, hidden, linear, offset)


# ----------------------------------------------------------------------------------------------
# Eqs. 6-8 and P in one function
# ----------------------------------------------------------------------------------------------


def _link_chain(s_right, s_left, gap_mask, prior, variant: str, eps: float):
    """The prior's literal chain, operation for operation (so the values are the same bits):
    ``neighbour_log_probabilities`` -> ``link_probability`` -> ``hierarchical_constraint`` ->
    ``cumulative_log_links``. Returns ``(a_hat, a, P)``: (B, N-1), (B, N-1), (B, N)."""
    has_left = F.pad(gap_mask[:, :-1], (1, 0), value=False)  # (B, N-1): word k has a left gap
    has_right = F.pad(gap_mask[:, 1:], (0, 1), value=False)  # (B, N-1): word k+1 has a right gap
    u = s_right - F.pad(s_left[:, :-1], (1, 0))  # (B, N-1): s_{k,k+1} - s_{k,k-1}
    v = s_left - F.pad(s_right[:, 1:], (0, 1))  # (B, N-1): s_{k+1,k} - s_{k+1,k+2}
    log_p_right = torch.where(has_left, F.logsigmoid(u), torch.zeros_like(s_right))  # (B, N-1)
    log_p_left = torch.where(has_right, F.logsigmoid(v), torch.zeros_like(s_left))  # (B, N-1)
    if variant == "paper":
        a_hat = torch.exp(0.5 * (log_p_right + log_p_left)).masked_fill(~gap_mask, 0.0)  # (B, N-1)
    else:
        a_hat = torch.sqrt(torch.exp(log_p_right + log_p_left).masked_fill(~gap_mask, 0.0) + eps)  # (B, N-1)
    a = a_hat if prior is None else prior + (1.0 - prior) * a_hat  # (B, N-1)
    if variant == "paper":
        log_a = torch.log(a.clamp_min(torch.finfo(a.dtype).tiny))
    else:
        log_a = torch.log(a + eps)
    log_a = log_a.masked_fill(~gap_mask, 0.0)  # (B, N-1)
    return a_hat, a, F.pad(torch.cumsum(log_a, dim=-1), (1, 0))  # P: (B, N)


class FusedLinkChain(torch.autograd.Function):
    """Eqs. 6-8 and ``P`` in one function with a hand-written backward (``kernel="fused"``).

    The same function as the prior's ``neighbour_log_probabilities`` -> ``link_probability`` ->
    ``hierarchical_constraint`` -> ``cumulative_log_links`` (either variant; the forward is the same
    operations), without autograd's per-operation graph (about 40 small (B, N-1) nodes per layer,
    whose bookkeeping costs more than their arithmetic at the default recipe's sizes). The backward,
    with ``u = s_right - s_{k,k-1}``, ``v = s_left - s_{k+1,k+2}`` and ``σ`` the logistic function:

        d log a_k = Σ_{j>k} dP_j (real gaps; 0 elsewhere),   d a = dA + d log a · (1/a | 1/(a+eps))
        d a_prev = d a (1 - â),   d â = d a (1 - a_prev)
        d (log p_R + log p_L) = d â · â / 2 (paper) | d â · pp / (2 â) (official), at real gaps
        d s_right_k += d log p_R,k σ(-u_k),   d s_left_{k-1} -= d log p_R,k σ(-u_k)   (where word k has a left gap)
        d s_left_k += d log p_L,k σ(-v_k),    d s_right_{k+1} -= d log p_L,k σ(-v_k)  (where word k+1 has a right gap)

    Inputs: ``s_right, s_left`` (B, N-1) neighbour scores, ``gap_mask`` (B, N-1) bool, ``prior``
    (B, N-1) links of the layer below or None, ``variant``, ``eps``. Outputs ``(a, P)``: (B, N-1),
    (B, N). Not twice differentiable.
    """

    @staticmethod
    def forward(ctx, s_right, s_left, gap_mask, prior, variant, eps):
        a_hat, a, cum = _link_chain(s_right, s_left, gap_mask, prior, variant, eps)
        ctx.variant, ctx.eps = variant, eps
        ctx.has_prior = prior is not None
        ctx.save_for_backward(s_right, s_left, gap_mask, a_hat, a, prior)
        return a, cum

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_a, grad_cum):
        s_right, s_left, gap_mask, a_hat, a, prior = ctx.saved_tensors
        eps = ctx.eps
        has_left = F.pad(gap_mask[:, :-1], (1, 0), value=False)
        has_right = F.pad(gap_mask[:, 1:], (0, 1), value=False)
        u = s_right - F.pad(s_left[:, :-1], (1, 0))  # s_{k,k+1} - s_{k,k-1}
        v = s_left - F.pad(s_right[:, 1:], (0, 1))  # s_{k+1,k} - s_{k+1,k+2}
        grad_a = torch.zeros_like(a) if grad_a is None else grad_a
        if grad_cum is not None:  # d log a_k = Σ_{j>k} dP_j
            tail = grad_cum[:, 1:].flip(-1).cumsum(-1).flip(-1) * gap_mask
            if ctx.variant == "paper":
                tiny = torch.finfo(a.dtype).tiny
                grad_a = grad_a + torch.where(a >= tiny, tail / a.clamp_min(tiny), torch.zeros_like(a))
            else:
                grad_a = grad_a + tail / (a + eps)
        grad_prior = grad_a * (1.0 - a_hat) if ctx.has_prior else None
        grad_a_hat = grad_a * (1.0 - prior) if ctx.has_prior else grad_a
        if ctx.variant == "paper":
            grad_log_pp = grad_a_hat * a_hat * 0.5 * gap_mask
        else:
            pp = (a_hat * a_hat - eps).clamp_min(0.0)  # p_R p_L, as a_hat = sqrt(pp + eps)
            grad_log_pp = grad_a_hat * pp * gap_mask * 0.5 / a_hat
        d_u = grad_log_pp * has_left * torch.sigmoid(-u)
        d_v = grad_log_pp * has_right * torch.sigmoid(-v)
        grad_right = d_u - F.pad(d_v[:, :-1], (1, 0))
        grad_left = d_v - F.pad(d_u[:, 1:], (0, 1))
        return grad_right, grad_left, None, grad_prior, None, None


def fused_link_chain(
    s_right: torch.Tensor,
    s_left: torch.Tensor,
    gap_mask: torch.Tensor,
    prior: torch.Tensor | None,
    variant: str,
    eps: float = 1e-9,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(a, P)`` of one layer from its neighbour scores through :class:`FusedLinkChain`.

    Args:
        s_right, s_left: (B, N-1) neighbour scores (eq. 5).
        gap_mask: (B, N-1) bool, True where both words are real.
        prior: (B, N-1) link probabilities of the layer below, or None (first layer).
        variant: "paper" or "official".
        eps: the official variant's epsilon (the prior passes its ``OFFICIAL_EPS``).
    Returns:
        ``(a, P)``: (B, N-1) link probabilities (eq. 8) and (B, N) cumulative log links.
    """
    return FusedLinkChain.apply(s_right, s_left, gap_mask, prior, variant, eps)


# ----------------------------------------------------------------------------------------------
# The gradient of log C in closed form
# ----------------------------------------------------------------------------------------------


def log_constituent_prior_vjp(
    cum_log_links: torch.Tensor,
    grad_rows: torch.Tensor,
    variant: str = "paper",
    log_diagonal: float | None = None,
    rows: tuple[int, int] | None = None,
    eps: float = 1e-9,
) -> torch.Tensor:
    """The gradient of the prior's ``log_constituent_prior`` rows with respect to ``P``, in closed form.

    With ``x_ij = -|P_i - P_j|``, ``log C_ij = f(x_ij)`` (paper: ``f(x) = x``; official:
    ``f(x) = log(e^x + eps)``, ``f'(x) = σ(x - log eps)``) and ``W_ij = g_ij f'(x_ij) (-sign(P_i - P_j))``
    (0 on a replaced diagonal): ``dP_i += Σ_j W_ij`` (the block's rows) and ``dP_j -= Σ_i W_ij``.
    ``sign(0) = 0``, as autograd's ``abs`` backward.

    Args:
        cum_log_links: (B, N) ``P``.
        grad_rows: (B, b, N) gradient of the rows ``rows`` of ``log C``.
        variant, log_diagonal, rows: as the prior's ``log_constituent_prior``.
        eps: the official variant's epsilon (the prior passes its ``OFFICIAL_EPS``).
    Returns:
        (B, N) gradient of ``P``.
    """
    n = cum_log_links.shape[-1]
    start, stop = rows if rows is not None else (0, n)
    diff = cum_log_links[:, start:stop, None] - cum_log_links[:, None, :]  # (B, b, N)
    w = grad_rows * -torch.sign(diff)  # (B, b, N)
    if variant == "official":
        w = w * torch.sigmoid(-diff.abs() - math.log(eps))
        log_diagonal = 0.0 if log_diagonal is None else log_diagonal
    if log_diagonal is not None:
        positions = torch.arange(n, device=w.device)
        w = w.masked_fill(positions[start:stop, None] == positions[None, :], 0.0)
    grad = -w.sum(1)  # (B, N)
    grad[:, start:stop] += w.sum(-1)
    return grad


__all__ = [
    "BilinearNeighbourScores",
    "FusedLinkChain",
    "fused_link_chain",
    "log_constituent_prior_vjp",
    "neighbour_score_form",
    "neighbour_scores_bilinear",
]
