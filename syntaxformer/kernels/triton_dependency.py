"""Triton kernels for StructFormer's parse stage: calibrated distances and the dependency distribution.

The same function as :func:`syntaxformer.models.structformer_parse.calibrate_distances` followed by
:func:`syntaxformer.models.structformer_parse.dependency_distribution` (Shen et al., ACL 2021, §4.3 and appendix
A.2; the factorised O(N^2)-memory form of that module's docstring), as one forward and one backward kernel,
one program per sentence, instead of about 250 small operators a step (StructFormer's ``kernel="triton"``):

* forward: the calibration margin (float32, as the PyTorch path: bit for bit), then in float64 the
  membership probabilities ``p(l_i = j)``, ``p(r_i = j)`` from range maxima of the distances (scans along
  a tile's rows), the parent normalisers ``e_j`` and ``1/Z(l, r)`` (a cumulative sum), the two products
  ``p_right @ inv_zᵀ`` and ``p_left @ inv_z`` (float64 outer products over the tiles' rows and columns,
  read back from a per-sentence scratch buffer: Triton 3.6's and 3.7's float64 ``tl.dot`` fails to compile
  at these sizes, "fp64 don't support largeK MMA") and the prefix and suffix sums that
  give ``p_D(j | i)`` and the root mass;
* backward: the forward recomputed (nothing N×N is saved), then the reverse of each step by hand: the
  sums' and products' adjoints, the reciprocal's and the cumulative sum's, the sigmoids', and each range
  maximum's gradient routed to the distance that attains it (a loop over the gaps, ``O(N^3)`` like the
  products); the margin's gradient to the boundary distance and the height that set it (found again by
  the recomputed calibration). The two temperatures' gradients are summed over sentences after the kernel.

Differences from the PyTorch path, by design: float64 rounding (scans and products in another order:
values agree to about 1e-13); where two distances of one range maximum are exactly equal, the gradient
goes to both (PyTorch's ``cummax`` picks one); the clamp of the shifted parent logits passes gradients at
exactly ``+-350`` (measure zero). Sentences of more than :data:`MAX_TOKENS` tokens, fewer than 2, and
inputs that are not float32 take the PyTorch path (the caller's choice, :func:`fits`).

Where it runs: CUDA tensors, or CPU tensors under Triton's interpreter (``TRITON_INTERPRET=1``;
``tests/kernels/test_kernel_table.py`` checks values and gradients against the PyTorch path there), as
:func:`~syntaxformer.kernels.triton_runs_on` says; callers import this module only after it is true.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .triton_args import int8_mask

#: longest sentence the kernels take (tokens): a program holds about twenty (BLOCK, BLOCK) float64 tiles
MAX_TOKENS = 64

#: finite stand-in for an infinite distance (the PyTorch path's ``_BIG``)
_BIG = tl.constexpr(1.0e9)
#: the shifted parent logits are clamped to +-_CLAMP (the PyTorch path's)
_CLAMP = tl.constexpr(350.0)


@triton.jit
def _maximum(a, b):
    return tl.maximum(a, b)


@triton.jit
def _sigmoid(x):
    z = tl.exp(-tl.abs(x))  # never overflows (a distance of _BIG gives exp(-1e9) = 0)
    return tl.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))


@triton.jit
def _real(MASK, b, N, k):
    """Whether positions ``k`` (any shape of indices) are real words of sentence b (False outside 0..N-1)."""
    return tl.load(MASK + b * N + k, mask=(k >= 0) & (k < N), other=0) != 0


@triton.jit
def _gap(MASK, b, N, k):
    """Whether gaps ``k`` (any shape of indices) of sentence b lie between two real words (False at padding,
    after the sentence's end and for ``k`` outside 0..N-2)."""
    return (k >= 0) & (k < N - 1) & _real(MASK, b, N, k) & _real(MASK, b, N, k + 1)


@triton.jit
def _full(D, MASK, b, N, k, margin):
    """``full[k]`` (float32): gap k's distance minus ``margin``, or ``_BIG`` where it is not a gap
    (:func:`_gap`)."""
    tau = tl.load(D + b * (N - 1) + k, mask=(k >= 0) & (k < N - 1), other=0.0)
    return tl.where(_gap(MASK, b, N, k), tau - margin, _BIG)


@triton.jit
def _calibration(D, H, MASK, b, N, BLOCK: tl.constexpr):
    """Appendix A.2's margin of sentence b, float32: ``max relu(min(tau_{a-1}, tau_c) - max delta[a..c])``
    over the spans ``[a, c]`` of real words but the whole sentence; and the indices that set it (the left
    boundary's gap ``a-1``, the right one's ``c``, the tallest word ``k``) with the weights of the two boundaries in
    its gradient (``min``'s: 1, 0 or 1/2 each; 0 without a margin)."""
    idx = tl.arange(0, BLOCK)
    a, c = idx[:, None], idx[None, :]  # span [a, c]
    real = _real(MASK, b, N, idx)
    heights = tl.where(real, tl.load(H + b * N + idx, mask=idx < N, other=0.0), -_BIG)
    height_max = tl.associative_scan(tl.where(c >= a, heights[None, :], -_BIG), 1, _maximum)  # (a, c)
    left = _full(D, MASK, b, N, idx - 1, 0.0)  # tau_{a-1}
    right = _full(D, MASK, b, N, idx, 0.0)  # tau_c
    boundary = tl.minimum(left[:, None], right[None, :])
    length = tl.sum(real.to(tl.int32), 0)
    valid = (c >= a) & real[:, None] & real[None, :] & ~((a == 0) & (c == length - 1))
    margins = tl.where(valid, tl.maximum(boundary - height_max, 0.0), 0.0)
    margin = tl.max(tl.max(margins, 1), 0)
    flat = a * BLOCK + c
    star = tl.min(tl.min(tl.where(valid & (margins == margin), flat, BLOCK * BLOCK), 1), 0)
    a_star, c_star = star // BLOCK, star % BLOCK
    tallest = tl.sum(tl.sum(tl.where(flat == star, height_max, 0.0), 1), 0)
    inside = (idx >= a_star) & (idx <= c_star) & (heights == tallest)
    k_star = tl.min(tl.where(inside, idx, BLOCK), 0)
    left_star = tl.sum(tl.where(idx == a_star, left, 0.0), 0)
    right_star = tl.sum(tl.where(idx == c_star, right, 0.0), 0)
    on = margin > 0
    tie = tl.where(left_star == right_star, 0.5, 0.0)
    w_left = tl.where(on & (left_star < _BIG), tl.where(left_star < right_star, 1.0, tie), 0.0)
    w_right = tl.where(on & (right_star < _BIG), tl.where(right_star < left_star, 1.0, tie), 0.0)
    return margin, a_star - 1, c_star, k_star, w_left, w_right, tl.where(on, 1.0, 0.0)


@triton.jit
def _membership(D, H, MASK, b, N, margin, s_d, BLOCK: tl.constexpr):
    """§4.3's boundary distributions of sentence b, float64 (BLOCK, BLOCK) tiles indexed ``[i, j]``:
    ``p_left = P(l_i <= j) - P(l_i <= j-1)``, ``p_right = P(r_i >= j) - P(r_i >= j+1)``, and the range maxima
    they come from (``lm = max tau[j..i-1]``, ``lp = max tau[j-1..i-1]``, ``rm = max tau[i..j-1]``,
    ``rn = max tau[i..j]``) with each one's sigmoid ``sigmoid(s_d (delta_i - max))`` (the backward's
    derivatives)."""
    idx = tl.arange(0, BLOCK)
    i, j = idx[:, None], idx[None, :]
    full = _full(D, MASK, b, N, idx, margin).to(tl.float64)  # (j,) tau_j
    before = _full(D, MASK, b, N, idx - 1, margin).to(tl.float64)  # (j,) tau_{j-1}
    delta = tl.load(H + b * N + idx, mask=idx < N, other=0.0).to(tl.float64)[:, None]  # (i, 1)
    lm = tl.associative_scan(tl.where(j < i, full[None, :], -_BIG), 1, _maximum, reverse=True)
    lp = tl.maximum(before[None, :], lm)
    rm = tl.associative_scan(tl.where(j > i, before[None, :], -_BIG), 1, _maximum)
    rn = tl.maximum(rm, full[None, :])
    s_lm, s_lp = _sigmoid(s_d * (delta - lm)), _sigmoid(s_d * (delta - lp))
    s_rm, s_rn = _sigmoid(s_d * (delta - rm)), _sigmoid(s_d * (delta - rn))
    left = tl.where(j < i, s_lm, 1.0)
    left_before = tl.where(j == 0, 0.0, tl.where(j <= i, s_lp, 1.0))
    right = tl.where(j > i, s_rm, 1.0)
    right_after = tl.where(j + 1 >= N, 0.0, tl.where(j >= i, s_rn, 1.0))
    return left - left_before, right - right_after, lm, lp, rm, rn, s_lm, s_lp, s_rm, s_rn


@triton.jit
def _parents(H, MASK, b, N, s_h, BLOCK: tl.constexpr):
    """§4.3's parent selection, factorised: ``e_j = exp(clamp(s_h delta_j - m))`` (m the midpoint of the
    real words' logits; 1 at padding) and ``inv_z[l, r] = 1 / sum_{k=l..r} e_k`` (0 for r < l), float64;
    also the shifted logits (for the clamp's gradient) and the heights."""
    idx = tl.arange(0, BLOCK)
    real = _real(MASK, b, N, idx)
    delta = tl.load(H + b * N + idx, mask=idx < N, other=0.0).to(tl.float64)
    logits = s_h * delta
    any_real = tl.sum(real.to(tl.int32), 0) > 0  # a row of padding only (a fixed-shape batch's filler): m = 0
    lo = tl.where(any_real, tl.min(tl.where(real, logits, float("inf")), 0), 0.0)
    hi = tl.where(any_real, tl.max(tl.where(real, logits, -float("inf")), 0), 0.0)
    mid = (lo + hi) / 2
    shifted = tl.where(real, logits - mid, 0.0)
    e = tl.exp(tl.minimum(tl.maximum(shifted, -_CLAMP), _CLAMP))  # (j,)
    l, r = idx[:, None], idx[None, :]
    z = tl.cumsum(tl.where(r >= l, e[None, :], 0.0), 1)  # (l, r)
    inv_z = tl.where(r >= l, 1.0 / tl.where(r >= l, z, 1.0), 0.0)
    return e, inv_z, shifted, delta


@triton.jit
def _keep(SCRATCH, slot, tile, BLOCK: tl.constexpr):
    """Write ``tile`` (BLOCK, BLOCK) to this program's scratch ``slot`` (row-major), where the products read
    its rows and columns."""
    idx = tl.arange(0, BLOCK)
    tl.store(SCRATCH + (slot * BLOCK + idx[:, None]) * BLOCK + idx[None, :], tile)


@triton.jit
def _product(SCRATCH, a, a_rows, a_inner, b, b_inner, b_cols, K, BLOCK: tl.constexpr):
    """``sum_k A[m, k] B[k, n]`` (BLOCK, BLOCK) float64 for two tiles in the scratch slots ``a`` and ``b``,
    each read with its own strides (``a_rows, a_inner``: 1 and BLOCK for a transposed slot, BLOCK and 1
    for a plain one), over ``k < K``: one outer product per ``k`` (``O(BLOCK^2 K)``), float64 without
    ``tl.dot`` (Triton's float64 matrix products refuse these sizes on some versions)."""
    idx = tl.arange(0, BLOCK)
    base_a, base_b = SCRATCH + a * BLOCK * BLOCK, SCRATCH + b * BLOCK * BLOCK
    out = tl.zeros([BLOCK, BLOCK], dtype=tl.float64)
    for k in range(0, K):
        column = tl.load(base_a + idx * a_rows + k * a_inner)  # A[:, k]
        row = tl.load(base_b + k * b_inner + idx * b_cols)  # B[k, :]
        out += column[:, None] * row[None, :]
    return out


@triton.jit
def _dependency_forward(D, H, MASK, SCALES, OUT_D, P, ROOT, SCRATCH, N, BLOCK: tl.constexpr):
    b = tl.program_id(0)  # one program per sentence
    idx = tl.arange(0, BLOCK)
    i, j = idx[:, None], idx[None, :]
    margin, _, _, _, _, _, _ = _calibration(D, H, MASK, b, N, BLOCK)
    tau = tl.load(D + b * (N - 1) + idx, mask=idx < N - 1, other=0.0)
    tl.store(OUT_D + b * (N - 1) + idx, tau - margin, mask=idx < N - 1)
    s_d, s_h = tl.load(SCALES).to(tl.float64), tl.load(SCALES + 1).to(tl.float64)
    p_left, p_right, _, _, _, _, _, _, _, _ = _membership(D, H, MASK, b, N, margin, s_d, BLOCK)
    e, inv_z, _, _ = _parents(H, MASK, b, N, s_h, BLOCK)
    scratch = SCRATCH + b * 3 * BLOCK * BLOCK  # this program's three slots: p_left, p_right, inv_z
    _keep(scratch, 0, p_left, BLOCK)
    _keep(scratch, 1, p_right, BLOCK)
    _keep(scratch, 2, inv_z, BLOCK)
    tl.debug_barrier()
    g = _product(scratch, 1, BLOCK, 1, 2, 1, BLOCK, N, BLOCK)  # (i, l) sum_r p(r|i) / Z(l, r): p_right inv_zᵀ
    h = _product(scratch, 0, BLOCK, 1, 2, BLOCK, 1, N, BLOCK)  # (i, r) sum_l p(l|i) / Z(l, r): p_left inv_z
    before = tl.cumsum(p_left * g, 1) * e[None, :]  # j <= i
    after = tl.cumsum(p_right * h, 1, reverse=True) * e[None, :]  # j >= i
    real = _real(MASK, b, N, idx)
    pair = real[:, None] & real[None, :]
    p = tl.where(pair, tl.where(j < i, before, tl.where(j > i, after, 0.0)), 0.0)
    tl.store(P + (b * N + i) * N + j, p, mask=(i < N) & (j < N))
    root = tl.where(real, tl.sum(tl.where(j == i, before, 0.0), 1), 0.0)
    tl.store(ROOT + b * N + idx, root, mask=idx < N)


@triton.jit
def _max_gradients(D, MASK, b, N, margin, lm, lp, rm, rn, g_lm, g_lp, g_rm, g_rn, BLOCK: tl.constexpr):
    """The gradients of the range maxima ``lm, lp, rm, rn`` (``[i, j]`` tiles) routed to the gap distances
    that attain them: ``(BLOCK,)`` float64, one reduction of the tiles per gap (``O(N^3)``)."""
    idx = tl.arange(0, BLOCK)
    i, j = idx[:, None], idx[None, :]
    grad = tl.zeros([BLOCK], dtype=tl.float64)
    for k in range(0, N - 1):
        tau = _full(D, MASK, b, N, k, margin).to(tl.float64)
        hit = tl.where((lm == tau) & (j <= k) & (k < i), g_lm, 0.0)  # lm = max tau[j .. i-1]
        hit += tl.where((lp == tau) & (j - 1 <= k) & (k < i), g_lp, 0.0)  # lp = max tau[j-1 .. i-1]
        hit += tl.where((rm == tau) & (i <= k) & (k < j), g_rm, 0.0)  # rm = max tau[i .. j-1]
        hit += tl.where((rn == tau) & (i <= k) & (k <= j), g_rn, 0.0)  # rn = max tau[i .. j]
        grad = tl.where(idx == k, tl.sum(tl.sum(hit, 1), 0), grad)
    return tl.where(_gap(MASK, b, N, idx), grad, 0.0)


@triton.jit
def _dependency_backward(
    D, H, MASK, SCALES, GRAD_P, GRAD_ROOT, GRAD_OUT_D, GRAD_D, GRAD_H, GRAD_SCALES, SCRATCH, N, BLOCK: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)  # one program per sentence; the forward recomputed first
    idx = tl.arange(0, BLOCK)
    i, j = idx[:, None], idx[None, :]
    margin, k_left, k_right, k_tall, w_left, w_right, w_tall = _calibration(D, H, MASK, b, N, BLOCK)
    s_d, s_h = tl.load(SCALES).to(tl.float64), tl.load(SCALES + 1).to(tl.float64)
    p_left, p_right, lm, lp, rm, rn, s_lm, s_lp, s_rm, s_rn = _membership(D, H, MASK, b, N, margin, s_d, BLOCK)
    e, inv_z, shifted, delta = _parents(H, MASK, b, N, s_h, BLOCK)
    scratch = SCRATCH + b * 5 * BLOCK * BLOCK  # slots: p_left, p_right, inv_z, grad_g, grad_h
    _keep(scratch, 0, p_left, BLOCK)
    _keep(scratch, 1, p_right, BLOCK)
    _keep(scratch, 2, inv_z, BLOCK)
    tl.debug_barrier()
    g = _product(scratch, 1, BLOCK, 1, 2, 1, BLOCK, N, BLOCK)  # p_right inv_zᵀ
    h = _product(scratch, 0, BLOCK, 1, 2, BLOCK, 1, N, BLOCK)  # p_left inv_z
    c_before = tl.cumsum(p_left * g, 1)
    c_after = tl.cumsum(p_right * h, 1, reverse=True)
    real = _real(MASK, b, N, idx)
    # the outputs' gradients: p_D below the diagonal and the root mass (before), above it (after)
    grad_p = tl.load(GRAD_P + (b * N + i) * N + j, mask=(i < N) & (j < N), other=0.0)
    grad_p = tl.where(real[:, None] & real[None, :], grad_p, 0.0)
    grad_root = tl.where(real, tl.load(GRAD_ROOT + b * N + idx, mask=idx < N, other=0.0), 0.0)
    g_before = tl.where(j < i, grad_p, tl.where(j == i, grad_root[:, None], 0.0))
    g_after = tl.where(j > i, grad_p, 0.0)
    # before = cumsum_j(p_left g) e_j, after = revcumsum_j(p_right h) e_j
    grad_e = tl.sum(g_before * c_before + g_after * c_after, 0)  # (j,)
    u = tl.cumsum(g_before * e[None, :], 1, reverse=True)
    v = tl.cumsum(g_after * e[None, :], 1)
    _keep(scratch, 3, u * p_left, BLOCK)  # grad_g
    _keep(scratch, 4, v * p_right, BLOCK)  # grad_h
    tl.debug_barrier()
    grad_p_left = u * g + _product(scratch, 4, BLOCK, 1, 2, 1, BLOCK, N, BLOCK)  # + grad_h inv_zᵀ
    grad_p_right = v * h + _product(scratch, 3, BLOCK, 1, 2, BLOCK, 1, N, BLOCK)  # + grad_g inv_z
    grad_inv_z = _product(scratch, 3, 1, BLOCK, 1, BLOCK, 1, N, BLOCK)  # grad_gᵀ p_right: (l, r)
    grad_inv_z += _product(scratch, 0, 1, BLOCK, 4, BLOCK, 1, N, BLOCK)  # + p_leftᵀ grad_h
    # inv_z = 1 / Z, Z[l, r] = sum_{k=l..r} e_k: e_k collects dZ[l, r] over l <= k <= r
    grad_z = -grad_inv_z * inv_z * inv_z
    grad_e += tl.sum(tl.where(i <= j, tl.cumsum(grad_z, 1, reverse=True), 0.0), 0)
    grad_logit = tl.where(real & (shifted >= -_CLAMP) & (shifted <= _CLAMP), grad_e * e, 0.0)  # (j,)
    grad_s_h = tl.sum(grad_logit * delta, 0)
    # the membership sigmoids: left = s_lm, left_before = s_lp, right = s_rm, right_after = s_rn
    w_lm = tl.where(j < i, grad_p_left * s_lm * (1.0 - s_lm), 0.0)
    w_lp = tl.where((j >= 1) & (j <= i), -grad_p_left * s_lp * (1.0 - s_lp), 0.0)
    w_rm = tl.where(j > i, grad_p_right * s_rm * (1.0 - s_rm), 0.0)
    w_rn = tl.where((j >= i) & (j + 1 < N), -grad_p_right * s_rn * (1.0 - s_rn), 0.0)
    rows = delta[:, None]  # delta_i
    grad_s_d = tl.sum(tl.sum(w_lm * (rows - lm) + w_lp * (rows - lp) + w_rm * (rows - rm) + w_rn * (rows - rn), 1), 0)
    grad_delta = s_d * tl.sum(w_lm + w_lp + w_rm + w_rn, 1) + s_h * grad_logit
    grad_tau = _max_gradients(
        D, MASK, b, N, margin, lm, lp, rm, rn, -s_d * w_lm, -s_d * w_lp, -s_d * w_rm, -s_d * w_rn, BLOCK
    )
    grad_tau += tl.load(GRAD_OUT_D + b * (N - 1) + idx, mask=idx < N - 1, other=0.0).to(tl.float64)
    # calibration: tau' = tau - margin, margin = relu(min(tau_{a-1}, tau_c) - delta_k) at its argmax
    grad_margin = -tl.sum(tl.where(idx < N - 1, grad_tau, 0.0), 0)
    grad_tau += grad_margin * (tl.where(idx == k_left, w_left, 0.0) + tl.where(idx == k_right, w_right, 0.0))
    grad_delta -= grad_margin * tl.where(idx == k_tall, w_tall, 0.0)
    tl.store(GRAD_D + b * (N - 1) + idx, grad_tau, mask=idx < N - 1)
    tl.store(GRAD_H + b * N + idx, grad_delta, mask=idx < N)
    tl.store(GRAD_SCALES + b * 2, grad_s_d)
    tl.store(GRAD_SCALES + b * 2 + 1, grad_s_h)


def _options(n: int) -> dict:
    """Tile size (a power of two, at least 16) and threads per program: the warps that spill fewest
    registers in the compiled kernels (benchmarks/speed/triton_compile.py; at most 8 bytes at 32-row tiles)."""
    block = max(16, triton.next_power_of_2(n))
    return dict(N=n, BLOCK=block, num_warps=4 if block <= 16 else 8 if block <= 32 else 16)


def fits(distances: torch.Tensor, heights: torch.Tensor) -> bool:
    """Whether the kernels take this batch: float32 inputs and 2 to :data:`MAX_TOKENS` tokens per row."""
    return 2 <= heights.shape[1] <= MAX_TOKENS and distances.dtype == heights.dtype == torch.float32


class TritonDependencyDistribution(torch.autograd.Function):
    """Calibrated distances and the dependency distribution of a batch by the Triton kernels (module
    docstring): :func:`~syntaxformer.models.structformer.calibrate_distances` then
    :func:`~syntaxformer.models.structformer.dependency_distribution`.

    Inputs: ``distances`` (B, N-1) float32 raw gap distances, ``heights`` (B, N) float32, ``mask`` (B, N)
    bool (True = real word), ``scales`` (2,) float32: ``s_d`` and ``s_h``. Outputs: ``(calibrated
    (B, N-1) float32, p_dep (B, N, N) float64, p_root (B, N) float64)``. Saves only the inputs; the
    backward recomputes. Each kernel uses a float64 scratch buffer of 3 (forward) or 5 (backward) tiles
    per sentence for its products. Not twice differentiable.
    """

    @staticmethod
    def forward(ctx, distances, heights, mask, scales):
        batch, n = heights.shape
        distances, heights = distances.contiguous(), heights.contiguous()
        real, scales = int8_mask(mask), scales.float().contiguous()
        calibrated = torch.empty_like(distances)
        p_dep = heights.new_empty(batch, n, n, dtype=torch.float64)
        p_root = heights.new_empty(batch, n, dtype=torch.float64)
        options = _options(n)
        scratch = heights.new_empty(batch, 3, options["BLOCK"], options["BLOCK"], dtype=torch.float64)
        _dependency_forward[(batch,)](
            distances, heights, real, scales, calibrated, p_dep, p_root, scratch, **options
        )  # fmt: skip
        ctx.save_for_backward(distances, heights, real, scales)
        return calibrated, p_dep, p_root

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_calibrated, grad_p_dep, grad_p_root):
        distances, heights, real, scales = ctx.saved_tensors
        batch, n = heights.shape
        grad_calibrated = torch.zeros_like(distances) if grad_calibrated is None else grad_calibrated.contiguous()
        if grad_p_dep is None:
            grad_p_dep = heights.new_zeros(batch, n, n, dtype=torch.float64)
        if grad_p_root is None:
            grad_p_root = heights.new_zeros(batch, n, dtype=torch.float64)
        grad_distances, grad_heights = torch.empty_like(distances), torch.empty_like(heights)
        grad_scales = heights.new_empty(batch, 2, dtype=torch.float64)
        options = _options(n)
        scratch = heights.new_empty(batch, 5, options["BLOCK"], options["BLOCK"], dtype=torch.float64)
        _dependency_backward[(batch,)](
            distances, heights, real, scales, grad_p_dep.double().contiguous(), grad_p_root.double().contiguous(),
            grad_calibrated.float(), grad_distances, grad_heights, grad_scales, scratch, **options,
        )  # fmt: skip
        return grad_distances, grad_heights, None, grad_scales.sum(0).float()


def triton_dependency_distribution(
    distances: torch.Tensor,
    heights: torch.Tensor,
    mask: torch.Tensor,
    distance_scale: torch.Tensor | float = 1.0,
    height_scale: torch.Tensor | float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``calibrate_distances`` and ``dependency_distribution`` of
    :mod:`syntaxformer.models.structformer` in one call (:class:`TritonDependencyDistribution`).

    Args:
        distances: ``[B, N-1]`` float32 raw gap distances. heights: ``[B, N]`` float32. mask: ``[B, N]``
            bool, True = real word. distance_scale, height_scale: ``s_d``, ``s_h`` (0-dim tensors or floats).

    Returns:
        ``(calibrated [B, N-1] float32, p_dep [B, N, N] float64, p_root [B, N] float64)``, as the PyTorch
        path's.

    Raises:
        ValueError: a batch :func:`fits` refuses.
    """
    if not fits(distances, heights):
        raise ValueError(f"the dependency kernels take float32 rows of 2 to {MAX_TOKENS} tokens, got "
                         f"{tuple(heights.shape)} {heights.dtype}")  # fmt: skip
    scales = torch.stack(
        [torch.as_tensor(s, dtype=torch.float32, device=heights.device) for s in (distance_scale, height_scale)]
    )
    return TritonDependencyDistribution.apply(distances, heights, mask, scales)


__all__ = ["MAX_TOKENS", "TritonDependencyDistribution", "fits", "triton_dependency_distribution"]
