"""Triton kernels for StructFormer's dependency-constrained attention (Shen et al., ACL 2021, §4.4).

The same function as :func:`syntaxformer.models.structformer.dependency_structure` followed by
:func:`~syntaxformer.models.structformer.dependency_constrained_attention` (StructFormer's ``kernel="triton"``,
with the parse stage of :mod:`syntaxformer.kernels.triton_dependency`), one forward and one backward kernel
a layer instead of about forty small operators (forward and backward):

* forward, one program per (sentence b, head h): ``S = Q Kᵀ/√d_h`` for the whole sentence, the mixed
  structure ``M_ij = w[h, head] p_D(j|i) + w[h, child] p_D(i|j)`` read from ``p_D`` by its strides (the
  child relation is the transpose: no (B, H, N, N) structure is built), ``a = sigmoid(S) ⊙ M`` with padding
  keys and weights below 1e-30 set to 0, ``out = a V`` written in the (B, N, H, d_h) layout the output
  projection reads (merging the heads copies nothing);
* backward, one program per sentence, its heads in a loop (nothing N×N is saved: ``S`` and ``a`` are
  recomputed), with ``σ = sigmoid(S)`` and ``G = dO Vᵀ`` where ``a`` is kept (0 elsewhere)::

      dV = aᵀ dO,   dM = G ⊙ σ,   dS = G ⊙ M ⊙ σ(1 - σ)/√d_h,   dQ = dS K,   dK = dSᵀ Q,
      d p_D = Σ_h w[h, head] dM_h + (Σ_h w[h, child] dM_h)ᵀ,   d w[h, r] = Σ_ij dM_h ⊙ rel_r,

  the heads' sums made inside the program (no atomics) and the sentences' ``d w`` summed after the kernel.

Differences from the PyTorch path, by design: summation orders (values agree to float32 rounding); no
attention dropout, no head mask, no attention weights returned, the relations ``head`` and ``child`` only:
a layer that needs any of those, float64 or bfloat16 inputs, or sentences of more than :data:`MAX_TOKENS`
tokens takes the PyTorch path (the caller's choice, :func:`fits`).

Where it runs: CUDA tensors, or CPU tensors under Triton's interpreter (``TRITON_INTERPRET=1``;
``tests/kernels/test_kernel_table.py`` checks values and gradients against the PyTorch path there), as
:func:`~syntaxformer.kernels.triton_runs_on` says; callers import this module only after it is true.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .triton_args import dot_precision, int8_mask

#: longest sentence the kernels take (tokens): a program holds (BLOCK, BLOCK) float32 tiles of scores,
#: weights and their gradients, as the parse stage's kernels (the same limit, so one batch takes both)
MAX_TOKENS = 64

#: the relations the kernels mix (``StructFormerConfig.relations``); ``sibling`` takes the PyTorch path
KERNEL_RELATIONS = ("head", "child")

#: weights below this become 0 (the PyTorch path's ``_TINY``: no denormal float32)
_TINY = tl.constexpr(1e-30)


@triton.jit
def _relation(P, b, spb, spi, spj, rows, cols, pair_ok, TRANSPOSED: tl.constexpr):
    """``p_D(j | i)`` (head) or, ``TRANSPOSED``, ``p_D(i | j)`` (child) for query rows ``rows`` and key
    columns ``cols`` of sentence b: (BLOCK, BLOCK) float32, 0 outside the sentence's tile."""
    if TRANSPOSED:
        offsets = cols[None, :] * spi + rows[:, None] * spj
    else:
        offsets = rows[:, None] * spi + cols[None, :] * spj
    return tl.load(P + b * spb + offsets, mask=pair_ok, other=0.0)


@triton.jit
def _weights(
    Q, K, P, W, KEY_MASK, b, h, rows, cols, dims, pair_ok, tile_mask,
    sqb, sqh, sqn, skb, skh, skn, spb, spi, spj, R, N, sqrt_d,
    HEAD_R: tl.constexpr, CHILD_R: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """Sentence b, head h: the queries and keys (BLOCK, BLOCK_D), ``σ = sigmoid(S)``, the structure ``M``,
    whether each weight is kept, and ``a = σ ⊙ M`` where kept (0 elsewhere), each (BLOCK, BLOCK); the
    rows and columns are the same positions (``tile_mask``: the (BLOCK, BLOCK_D) lanes inside the sentence)."""
    q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqn + dims[None, :], mask=tile_mask, other=0.0)
    k = tl.load(K + b * skb + h * skh + cols[:, None] * skn + dims[None, :], mask=tile_mask, other=0.0)
    sig = tl.sigmoid(tl.dot(q, tl.trans(k), input_precision=PRECISION) / sqrt_d)  # (B_N, B_N) σ(S)
    structure = tl.zeros(sig.shape, dtype=tl.float32)
    if HEAD_R >= 0:
        structure += tl.load(W + h * R + HEAD_R) * _relation(P, b, spb, spi, spj, rows, cols, pair_ok, False)
    if CHILD_R >= 0:
        structure += tl.load(W + h * R + CHILD_R) * _relation(P, b, spb, spi, spj, rows, cols, pair_ok, True)
    real_key = tl.load(KEY_MASK + b * N + cols, mask=cols < N, other=0) != 0
    a = sig * structure
    kept = real_key[None, :] & (a >= _TINY) & pair_ok
    return q, k, sig, structure, kept, tl.where(kept, a, 0.0)


@triton.jit
def _attention_forward(
    Q, K, V, P, W, KEY_MASK, OUT,
    sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son, spb, spi, spj,
    H, R, N, D, sqrt_d,
    BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
    HEAD_R: tl.constexpr, CHILD_R: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)  # one program per (sentence b, head h)
    b, h = pid // H, pid % H
    rows, dims = tl.arange(0, BLOCK), tl.arange(0, BLOCK_D)
    cols = rows
    row_ok, dim_ok = rows < N, dims < D
    pair_ok = row_ok[:, None] & row_ok[None, :]
    tile_mask = row_ok[:, None] & dim_ok[None, :]
    _, _, _, _, _, a = _weights(
        Q, K, P, W, KEY_MASK, b, h, rows, cols, dims, pair_ok, tile_mask,
        sqb, sqh, sqn, skb, skh, skn, spb, spi, spj, R, N, sqrt_d, HEAD_R, CHILD_R, PRECISION,
    )  # fmt: skip
    v = tl.load(V + b * svb + h * svh + cols[:, None] * svn + dims[None, :], mask=tile_mask, other=0.0)
    out = tl.dot(a, v, input_precision=PRECISION)  # (B_N, B_D) a V
    tl.store(OUT + b * sob + h * soh + rows[:, None] * son + dims[None, :], out, mask=tile_mask)


@triton.jit
def _attention_backward(
    Q, K, V, P, W, KEY_MASK, GRAD_OUT, GRAD_Q, GRAD_K, GRAD_V, GRAD_P, GRAD_W,
    sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sgb, sgh, sgn, sdb, sdh, sdn, spb, spi, spj,
    H, R, N, D, sqrt_d,
    BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
    HEAD_R: tl.constexpr, CHILD_R: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)  # one program per sentence: the heads' sums of d p_D made here
    rows, dims = tl.arange(0, BLOCK), tl.arange(0, BLOCK_D)
    cols = rows
    row_ok, dim_ok = rows < N, dims < D
    pair_ok = row_ok[:, None] & row_ok[None, :]
    tile_mask = row_ok[:, None] & dim_ok[None, :]
    grad_p = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)  # Σ_h w[h, head] dM_h + (w[h, child] dM_h)ᵀ
    for h in range(H):
        q, k, sig, structure, kept, a = _weights(
            Q, K, P, W, KEY_MASK, b, h, rows, cols, dims, pair_ok, tile_mask,
            sqb, sqh, sqn, skb, skh, skn, spb, spi, spj, R, N, sqrt_d, HEAD_R, CHILD_R, PRECISION,
        )  # fmt: skip
        v = tl.load(V + b * svb + h * svh + cols[:, None] * svn + dims[None, :], mask=tile_mask, other=0.0)
        g_out = tl.load(GRAD_OUT + b * sgb + h * sgh + rows[:, None] * sgn + dims[None, :], mask=tile_mask, other=0.0)
        grad_v = tl.dot(tl.trans(a), g_out, input_precision=PRECISION)  # dV = aᵀ dO
        g = tl.where(kept, tl.dot(g_out, tl.trans(v), input_precision=PRECISION), 0.0)  # d a
        grad_m = g * sig  # dM
        grad_s = g * structure * sig * (1.0 - sig) / sqrt_d  # dS/√d_h
        grad_q = tl.dot(grad_s, k, input_precision=PRECISION)
        grad_k = tl.dot(tl.trans(grad_s), q, input_precision=PRECISION)
        at = b * sdb + h * sdh + rows[:, None] * sdn + dims[None, :]
        tl.store(GRAD_Q + at, grad_q, mask=tile_mask)
        tl.store(GRAD_K + at, grad_k, mask=tile_mask)
        tl.store(GRAD_V + at, grad_v, mask=tile_mask)
        if HEAD_R >= 0:
            w_head = tl.load(W + h * R + HEAD_R)
            rel = _relation(P, b, spb, spi, spj, rows, cols, pair_ok, False)
            tl.store(GRAD_W + (b * H + h) * R + HEAD_R, tl.sum(tl.sum(grad_m * rel, 1), 0))
            grad_p += w_head * grad_m
        if CHILD_R >= 0:
            w_child = tl.load(W + h * R + CHILD_R)
            rel = _relation(P, b, spb, spi, spj, rows, cols, pair_ok, True)
            tl.store(GRAD_W + (b * H + h) * R + CHILD_R, tl.sum(tl.sum(grad_m * rel, 1), 0))
            grad_p += tl.trans(w_child * grad_m)  # the child relation read p_D transposed
    tl.store(GRAD_P + b * N * N + rows[:, None] * N + cols[None, :], grad_p, mask=pair_ok)


def _options(n: int, d: int, relations) -> dict:
    """The kernels' scalar and compile-time arguments: tiles padded to powers of two (at least 16, as
    ``tl.dot`` needs), 8 warps above 16 rows (the backward spills least with 8 at 32-row tiles:
    docs/results/speed.md), the relations' columns in ``w`` (-1: not mixed), TF32 products where
    PyTorch allows them for float32 (:func:`~syntaxformer.kernels.triton_args.dot_precision`)."""
    relations = list(relations)
    block = max(16, triton.next_power_of_2(n))
    return dict(
        sqrt_d=math.sqrt(d),
        BLOCK=block,
        BLOCK_D=max(16, triton.next_power_of_2(d)),
        HEAD_R=relations.index("head") if "head" in relations else -1,
        CHILD_R=relations.index("child") if "child" in relations else -1,
        PRECISION=dot_precision(),
        num_warps=4 if block <= 16 else 8,
    )


def fits(query: torch.Tensor, relations) -> bool:
    """Whether the kernels take this layer's attention: float32 queries (B, H, N, d_h) with N at most
    :data:`MAX_TOKENS` and d_h at most 128, and only the relations of :data:`KERNEL_RELATIONS`."""
    return (
        query.dtype == torch.float32
        and query.shape[2] <= MAX_TOKENS
        and query.shape[3] <= 128
        and all(name in KERNEL_RELATIONS for name in relations)
    )


class TritonDependencyAttention(torch.autograd.Function):
    """``out = (sigmoid(Q Kᵀ/√d_h) ⊙ M) V`` with the mixed dependency structure ``M`` of each head, by the
    Triton kernels (module docstring).

    Inputs: ``query, key, value`` (B, H, N, d_h) float32, any strides with a unit last one; ``p_dep``
    (B, N, N) float32 ``p_D(j | i)``; ``weights`` (H, R) float32 mixing weights of the relations;
    ``key_mask`` (B, N) bool (True = real word); ``relations``: the R names (``head``, ``child``).
    Output: (B, H, N, d_h), a view of a (B, N, H, d_h) tensor. The gradients of the queries, keys and
    values have the same layout. Saves only the inputs; the backward recomputes. Not twice differentiable.
    """

    @staticmethod
    def forward(ctx, query, key, value, p_dep, weights, key_mask, relations):
        batch, heads, n, d = query.shape
        query, key, value = (t if t.stride(-1) == 1 else t.contiguous() for t in (query, key, value))
        weights, key_mask = weights.contiguous(), int8_mask(key_mask)  # float32 (H, R), int8 (B, N)
        out = query.new_empty(batch, n, heads, d).transpose(1, 2)
        options = _options(n, d, relations)
        _attention_forward[(batch * heads,)](
            query, key, value, p_dep, weights, key_mask, out,
            *query.stride()[:3], *key.stride()[:3], *value.stride()[:3], *out.stride()[:3], *p_dep.stride(),
            heads, weights.shape[1], n, d, **options,
        )  # fmt: skip
        ctx.save_for_backward(query, key, value, p_dep, weights, key_mask)
        ctx.options = options  # the backward's, TF32 setting included, are the forward's
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        query, key, value, p_dep, weights, key_mask = ctx.saved_tensors
        batch, heads, n, d = query.shape
        grad_out = grad_out if grad_out.stride(-1) == 1 else grad_out.contiguous()
        grads = [query.new_empty(batch, n, heads, d).transpose(1, 2) for _ in range(3)]  # dQ, dK, dV
        grad_p = p_dep.new_empty(batch, n, n)
        grad_w = weights.new_empty(batch, heads, weights.shape[1])
        _attention_backward[(batch,)](
            query, key, value, p_dep, weights, key_mask, grad_out, *grads, grad_p, grad_w,
            *query.stride()[:3], *key.stride()[:3], *value.stride()[:3], *grad_out.stride()[:3],
            *grads[0].stride()[:3], *p_dep.stride(), heads, weights.shape[1], n, d, **ctx.options,
        )  # fmt: skip
        return (*grads, grad_p, grad_w.sum(0), None, None)


def triton_dependency_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    p_dep: torch.Tensor,
    weights: torch.Tensor,
    key_mask: torch.Tensor,
    relations,
) -> torch.Tensor:
    """``dependency_constrained_attention(q, k, v, dependency_structure(p_dep, weights, relations),
    key_mask, no dropout)``'s output by :class:`TritonDependencyAttention` (Shen et al., ACL 2021, §4.4:
    ``sigmoid(q_i·k_j/√d_h)`` times the head's mix of the relations; no softmax, no renormalisation).

    Args:
        query, key, value: (B, H, N, d_h) float32, N <= :data:`MAX_TOKENS`.
        p_dep: (B, N, N) ``p_D(j | i)`` (differentiable). weights: (H, R) the relations' mixing weights
            (differentiable). key_mask: (B, N) bool, True = real word. relations: the R names.

    Returns:
        (B, H, N, d_h).

    Raises:
        ValueError: an attention :func:`fits` refuses.
    """
    if not fits(query, relations):
        raise ValueError(
            f"the dependency attention kernels take float32 (B, H, N <= {MAX_TOKENS}, d_h <= 128) queries and "
            f"the relations {KERNEL_RELATIONS}, got {tuple(query.shape)} {query.dtype} and {list(relations)}"
        )
    return TritonDependencyAttention.apply(query, key, value, p_dep, weights, key_mask, tuple(relations))


__all__ = ["KERNEL_RELATIONS", "MAX_TOKENS", "TritonDependencyAttention", "fits", "triton_dependency_attention"]
