"""StructFormer's parse stage after the parser network: the calibrated syntactic distances
(appendix A.2) and the dependency distribution ``p_D`` (§4.3), one function per step, read top to bottom.

Shen, Tay, Zheng, Bahri, Metzler & Courville, ACL 2021 (arXiv 2012.00857); public code:
google-research/google-research, folder ``structformer/`` (read, not copied). The conventions (gap
indexing, padding) are those of :mod:`syntaxformer.models.structformer`, which calls
:func:`calibrated_dependency_distribution` once per forward pass, before any Transformer layer::

    calibrate_distances (appendix A.2)
    constituent_membership -> boundary_probabilities -> (span_probability, parent_probability: O(N^3)
    reference forms) -> parent_normalizers -> dependency_distribution
    calibrated_dependency_distribution: the stage as the model calls it (``kernel="reference"``;
    PARSE_STAGE_KERNELS: ``kernel="triton"``, kernels/triton_dependency.py, the same function)

Memory and time of the dependency distribution
----------------------------------------------
The paper (§4.3) defines, for a word ``i`` whose smallest legal constituent is ``[l, r]``::

    p_D(j | i) = sum_{l <= min(i,j)} sum_{r >= max(i,j)} p(l | i) p(r | i) p(j | [l, r]),
    p(j | [l, r]) = e_j / Z(l, r),    e_j = exp(s_h * delta_j),    Z(l, r) = sum_{k=l..r} e_k.

The public code materialises ``p([l, r] | i)`` and ``p(j | [l, r])`` as ``[B, N, N, N]`` tensors and
contracts them with an O(N^4) einsum. The double sum factorises, because ``e_j`` leaves the sum and
``1/Z(l, r)`` is an ``N x N`` matrix. For ``j < i`` (then ``min = j``, ``max = i``, and ``p(r|i) = 0``
for ``r < i`` makes the ``r`` condition automatic)::

    G[i, l]     = sum_r p(r | i) / Z(l, r)                  (one [N,N] @ [N,N] matmul)
    p_D(j | i)  = e_j * sum_{l <= j} p(l | i) G[i, l]        (a prefix sum over l)

and symmetrically for ``j > i`` with ``H[i, r] = sum_l p(l | i) / Z(l, r)`` and a suffix sum over
``r``; at ``j = i`` the same expression is the probability that ``i`` heads its own constituent, i.e.
the root mass. So every tensor is ``[B, N, N]``: **O(N^2) memory per sentence and O(N^3) time** (two
batched matmuls), against O(N^3) memory and O(N^4) time in the public code; the values are the same
(checked against the brute-force sum in ``tests/models/test_structformer.py``). Range maxima of distances
(needed by the membership probabilities and the calibration) are ``[B, N, N]`` cumulative maxima.

Numerics: the factorisation separates ``e_j`` from ``1/Z``, which can overflow where a softmax would
not; it is therefore computed in float64 with the height logits shifted by the per-sentence midpoint
of their range and clamped to +-350 (exact unless the height logits of one sentence spread over more
than 700 nats). Intermediate values stay below ``N * exp(350)``. The cost is negligible next to the
Transformer layers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..kernels import triton_runs_on

#: Finite stand-in for an infinite distance/height inside the computation (keeps gradients finite).
_BIG = 1e9
#: Height logits are clamped to +-_CLAMP around their per-sentence midpoint (float64: exp(350) ~ 1e152).
_CLAMP = 350.0


# ----------------------------------------------------------------------------------------------
# Distance and height (§3, appendix A.2)
# ----------------------------------------------------------------------------------------------


def _gap_mask(mask: torch.Tensor) -> torch.Tensor:
    """``[B, N-1]`` bool: gap k lies between two real words."""
    return mask[:, :-1] & mask[:, 1:]


def _full_distances(distances: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[B, N]``: gap distances with ``_BIG`` at every gap touching padding and after the last word.

    Index k of the result is the gap after word k, as in the public code; the ``_BIG`` sentinel makes
    the sentence end (and padding) an unbreakable constituent boundary.
    """
    big = distances.new_full(distances.shape[:1] + (1,), _BIG)
    full = torch.cat([distances, big], dim=1)
    gap_ok = F.pad(_gap_mask(mask), (0, 1), value=False)
    return full.masked_fill(~gap_ok, _BIG)


def range_max(values: torch.Tensor) -> torch.Tensor:
    """``M[b, a, c] = max(values[b, a..c])`` for ``c >= a`` (``-_BIG`` below the diagonal).

    Args: values ``[B, N]``. Returns ``[B, N, N]`` (O(N^2) memory, one cumulative max).
    """
    n = values.shape[-1]
    idx = torch.arange(n, device=values.device)
    below = idx[None, :] < idx[:, None]  # (N, N): c < a
    rows = values[:, None, :].expand(-1, n, -1).masked_fill(below, -_BIG)  # (B, N, N)
    return rows.cummax(dim=-1).values


def calibrate_distances(distances: torch.Tensor, heights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Shift distances so that only the whole sentence can lack a parent (paper appendix A.2).

    A span ``[a, b]`` (inclusive) whose two boundary distances ``tau_{a-1}``, ``tau_b`` both exceed
    every height inside it would be a constituent whose head finds no parent: a second root. With

        margin(a, b) = relu(min(tau_{a-1}, tau_b) - max_{a<=k<=b} delta_k)

    (``tau_{-1} = tau_{n-1} = +inf``, the sentence edges), the largest margin over all spans of real
    words except the whole sentence is subtracted from every distance of the sentence.

    Deviation: the public code takes this maximum over the whole batch (one scalar for all
    sentences); here it is per sentence, so a sentence's parse does not depend on its batch mates.

    Args:
        distances: ``[B, N-1]`` raw gap distances. heights: ``[B, N]``. mask: ``[B, N]`` bool.

    Returns:
        ``[B, N-1]`` calibrated distances (differentiable; the margin is not detached, as in the
        public code). Values at padded gaps are unchanged and meaningless.
    """
    n = heights.shape[1]
    full = _full_distances(distances, mask)  # (B, N)
    left = F.pad(full[:, :-1], (1, 0), value=_BIG)  # tau_{a-1}: (B, N)
    height_max = range_max(heights.masked_fill(~mask, -_BIG))  # (B, a, b)
    boundary = torch.minimum(left[:, :, None], full[:, None, :])  # (B, a, b)
    margin = torch.relu(boundary - height_max)
    idx = torch.arange(n, device=heights.device)
    lengths = mask.sum(dim=1)  # (B,)
    valid = (
        (idx[None, :, None] <= idx[None, None, :])  # a <= b
        & mask[:, :, None]
        & mask[:, None, :]  # real words
        & ~((idx[None, :, None] == 0) & (idx[None, None, :] == lengths[:, None, None] - 1))
    )
    margin = margin.masked_fill(~valid, 0.0).amax(dim=(1, 2))  # (B,)
    return distances - margin[:, None]


# ----------------------------------------------------------------------------------------------
# Dependency distribution (§4.3)
# ----------------------------------------------------------------------------------------------


def constituent_membership(
    distances: torch.Tensor, heights: torch.Tensor, mask: torch.Tensor, scale: torch.Tensor | float
):
    """Cumulative membership probabilities of the smallest legal constituent ``C(x_i)`` (§4.3).

    Word ``l < i`` belongs to ``C(x_i)`` when every gap between them is lower than ``x_i``'s height:

        p(l in C(x_i)) = sigmoid(s_d * (delta_i - max_{l <= k < i} tau_k))

    and symmetrically ``p(r in C(x_i)) = sigmoid(s_d * (delta_i - max_{i <= k < r} tau_k))`` for
    ``r > i``. Since ``C(x_i)`` is an interval, these are ``P(l_i <= j)`` and ``P(r_i >= j)`` of its
    left and right boundaries (the public code computes the same as a cumulative min of sigmoids).

    Args:
        distances: ``[B, N-1]`` (calibrated) gap distances. heights: ``[B, N]``. mask: ``[B, N]`` bool.
        scale: ``s_d > 0``.

    Returns:
        ``(left, right)``, each ``[B, N, N]`` indexed ``[i, j]``: ``left[i, j] = P(l_i <= j)`` (1 for
        ``j >= i``) and ``right[i, j] = P(r_i >= j)`` (1 for ``j <= i``). Padding and the sentence
        edges are impassable boundaries (probability exactly 0 beyond them).
    """
    n = heights.shape[1]
    full = _full_distances(distances, mask)  # (B, N)
    span_max = range_max(full)  # (B, a, c)
    idx = torch.arange(n, device=heights.device)
    delta = heights[:, :, None]  # (B, i, 1)
    # left[i, j] needs max(tau_j .. tau_{i-1}) = span_max[j, i-1]
    left_max = F.pad(span_max.transpose(1, 2)[:, :-1, :], (0, 0, 1, 0), value=_BIG)
    left = torch.where(
        idx[None, :] < idx[:, None],  # j < i
        torch.sigmoid(scale * (delta - left_max)),
        torch.ones_like(left_max),
    )
    # right[i, j] needs max(tau_i .. tau_{j-1}) = span_max[i, j-1]
    right_max = F.pad(span_max[:, :, :-1], (1, 0), value=_BIG)
    right = torch.where(
        idx[None, :] > idx[:, None],  # j > i
        torch.sigmoid(scale * (delta - right_max)),
        torch.ones_like(right_max),
    )
    return left, right


def boundary_probabilities(left: torch.Tensor, right: torch.Tensor):
    """Distributions of the boundaries of ``C(x_i)`` (§4.3): differences of the cumulative ones.

        p(l_i = j) = P(l_i <= j) - P(l_i <= j-1),    p(r_i = j) = P(r_i >= j) - P(r_i >= j+1)

    Args / returns: ``[B, N, N]`` tensors indexed ``[i, j]``; each returned row sums to 1,
    ``p(l_i = j) = 0`` for ``j > i`` and ``p(r_i = j) = 0`` for ``j < i``.
    """
    p_left = left - F.pad(left[:, :, :-1], (1, 0), value=0.0)
    p_right = right - F.pad(right[:, :, 1:], (0, 1), value=0.0)
    return p_left, p_right


def span_probability(p_left: torch.Tensor, p_right: torch.Tensor) -> torch.Tensor:
    """``p([l, r] | i) = p(l_i = l) p(r_i = r)`` (§4.3), ``[B, N(i), N(l), N(r)]``.

    O(N^3) memory: a reference form for inspection and tests; :func:`dependency_distribution` never
    builds it.
    """
    return p_left[:, :, :, None] * p_right[:, :, None, :]


def parent_probability(heights: torch.Tensor, scale: torch.Tensor | float) -> torch.Tensor:
    """``p(parent = j | [l, r]) = softmax_{j in [l, r]}(s_h * delta_j)`` (§4.3), ``[B, N(l), N(r), N(j)]``.

    O(N^3) memory reference form (0 for ``r < l`` and for ``j`` outside the span); the model uses the
    factorised :func:`parent_normalizers` instead.
    """
    n = heights.shape[1]
    idx = torch.arange(n, device=heights.device)
    inside = (idx[:, None, None] <= idx[None, None, :]) & (idx[None, None, :] <= idx[None, :, None])
    logits = (scale * heights)[:, None, None, :].expand(-1, n, n, -1).masked_fill(~inside, -torch.inf)
    probs = torch.softmax(logits, dim=-1)
    return torch.nan_to_num(probs, nan=0.0)  # empty spans (r < l) -> all 0


def parent_normalizers(heights: torch.Tensor, mask: torch.Tensor, scale: torch.Tensor | float):
    """Factorised parent selection (§4.3): ``p(parent = j | [l, r]) = e[j] * inv_z[l, r]``.

    ``e_j = exp(s_h delta_j - m)`` and ``inv_z[l, r] = 1 / sum_{k=l..r} e_k`` for ``l <= r`` (0 else),
    in float64, with ``m`` the per-sentence midpoint of the real words' logits (detached; it cancels)
    and the shifted logits clamped to ``+-_CLAMP``. Padding gets logit ``m`` (never used by real rows).

    Returns: ``(e [B, N], inv_z [B, N, N])`` float64; O(N^2) memory.
    """
    logits = scale * heights.double()
    lo = logits.masked_fill(~mask, torch.inf).amin(dim=1, keepdim=True)
    hi = logits.masked_fill(~mask, -torch.inf).amax(dim=1, keepdim=True)
    mid = torch.where(mask.any(dim=1, keepdim=True), (lo + hi) / 2, 0.0).detach()
    z = (logits - mid).masked_fill(~mask, 0.0).clamp(-_CLAMP, _CLAMP)
    e = z.exp()  # (B, N)
    n = heights.shape[1]
    idx = torch.arange(n, device=heights.device)
    empty = idx[None, :] < idx[:, None]  # (l, r): r < l
    partial = (e[:, None, :] * ~empty).cumsum(dim=-1)  # (B, l, r) = Z
    inv_z = (1.0 / partial.masked_fill(empty, 1.0)).masked_fill(empty, 0.0)
    return e, inv_z


def dependency_distribution(
    distances: torch.Tensor,
    heights: torch.Tensor,
    mask: torch.Tensor,
    distance_scale: torch.Tensor | float = 1.0,
    height_scale: torch.Tensor | float = 1.0,
):
    """The dependency distribution ``p_D(j | i)`` of §4.3 in O(N^2) memory per sentence.

        p_D(j | i) = sum_{[l, r]} p([l, r] | i) p(parent = j | [l, r]),   p_D(i | i) := 0

    computed as the factorisation of the module docstring (prefix/suffix sums of
    ``p(l|i) (p(.|i) @ inv_z^T)[i, l]`` and ``p(r|i) (p(.|i) @ inv_z)[i, r]``, times ``e_j``).

    Args:
        distances: ``[B, N-1]`` calibrated gap distances (see :func:`calibrate_distances`).
        heights: ``[B, N]`` syntactic heights. mask: ``[B, N]`` bool, True = real word.
        distance_scale: ``s_d`` of :func:`constituent_membership`. height_scale: ``s_h``.

    Returns:
        ``(p_dep, p_root)`` float64 probabilities: ``p_dep [B, N, N]`` row i = dependent, column j =
        parent, zero diagonal, zero padded rows/columns; ``p_root [B, N]`` = probability that i heads
        its own constituent (its root mass): ``p_root + p_dep.sum(-1) = 1`` on real words, 0 on
        padding.
    """
    with torch.autocast(device_type=heights.device.type, enabled=False):
        left, right = constituent_membership(distances.double(), heights.double(), mask, distance_scale)
        p_left, p_right = boundary_probabilities(left, right)  # (B, i, l), (B, i, r)
        e, inv_z = parent_normalizers(heights.double(), mask, height_scale)  # (B, N), (B, l, r)
        g = p_right @ inv_z.transpose(1, 2)  # (B, i, l)
        h = p_left @ inv_z  # (B, i, r)
        before = (p_left * g).cumsum(dim=-1) * e[:, None, :]  # j <= i
        after = (p_right * h).flip(-1).cumsum(dim=-1).flip(-1) * e[:, None, :]  # j >= i
        n = heights.shape[1]
        idx = torch.arange(n, device=heights.device)
        p = torch.where(
            idx[None, :] < idx[:, None], before, torch.where(idx[None, :] > idx[:, None], after, 0.0)
        )  # (B, i, j)
        pair = mask[:, :, None] & mask[:, None, :]
        p_dep = p.masked_fill(~pair, 0.0)
        p_root = before.diagonal(dim1=1, dim2=2).masked_fill(~mask, 0.0)
    return p_dep, p_root


def calibrated_dependency_distribution(
    distances: torch.Tensor,
    heights: torch.Tensor,
    mask: torch.Tensor,
    distance_scale: torch.Tensor | float = 1.0,
    height_scale: torch.Tensor | float = 1.0,
):
    """The parse stage after the parser network: :func:`calibrate_distances`, then
    :func:`dependency_distribution` of the calibrated distances (``kernel="reference"``).

    Args: as :func:`dependency_distribution` (``distances`` raw).

    Returns: ``(calibrated distances [B, N-1], p_dep [B, N, N], p_root [B, N])``.
    """
    distances = calibrate_distances(distances, heights, mask)
    return (distances, *dependency_distribution(distances, heights, mask, distance_scale, height_scale))


def triton_calibrated_dependency_distribution(
    distances: torch.Tensor,
    heights: torch.Tensor,
    mask: torch.Tensor,
    distance_scale: torch.Tensor | float = 1.0,
    height_scale: torch.Tensor | float = 1.0,
):
    """:func:`calibrated_dependency_distribution` by the Triton kernels
    (:func:`~syntaxformer.kernels.triton_dependency.triton_dependency_distribution`, one program per
    sentence each way; ``kernel="triton"``) where :func:`~syntaxformer.kernels.triton_runs_on` the device
    and the batch :func:`~syntaxformer.kernels.triton_dependency.fits` them (float32, 2 to 64 tokens);
    elsewhere :func:`calibrated_dependency_distribution`, bit for bit. Arguments and returns as it."""
    if triton_runs_on(heights.device):
        # Triton, an optional dependency: imported only where it runs (triton_runs_on)
        from ..kernels import triton_dependency

        if triton_dependency.fits(distances, heights):
            return triton_dependency.triton_dependency_distribution(
                distances, heights, mask, distance_scale, height_scale
            )
    return calibrated_dependency_distribution(distances, heights, mask, distance_scale, height_scale)


#: the config's ``kernel`` -> the parse stage :class:`~syntaxformer.models.structformer.StructFormerModel`
#: calls (:mod:`syntaxformer.models.kernel_choice`); each takes and returns as
#: :func:`calibrated_dependency_distribution`
PARSE_STAGE_KERNELS = {
    "reference": calibrated_dependency_distribution,
    "triton": triton_calibrated_dependency_distribution,
}


__all__ = [
    "PARSE_STAGE_KERNELS",
    "calibrate_distances",
    "calibrated_dependency_distribution",
    "triton_calibrated_dependency_distribution",
    "constituent_membership",
    "boundary_probabilities",
    "span_probability",
    "parent_probability",
    "parent_normalizers",
    "dependency_distribution",
    "range_max",
]
