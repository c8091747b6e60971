"""Triton kernels for the constituent prior's chain and the attention it multiplies.

The same functions as the PyTorch paths (:mod:`syntaxformer.kernels.constituent`,
:mod:`syntaxformer.kernels.attention`), each layer's prior in a handful of kernels instead of about
150 small ones (the Tree Transformer's ``kernel="triton"``; benchmarks/speed/gpu_profile.py counts them):

* :func:`triton_prior_chain` (:class:`TritonPriorChain`): the neighbour scores of eq. 5 (as the bilinear
  form of :func:`~syntaxformer.kernels.constituent.neighbour_score_form`) and eqs. 6-8 and ``P`` of Wang,
  Lee & Chen (EMNLP 2019, §3.2) -- one program per sentence, forward and backward one kernel each; the
  backward is :class:`~syntaxformer.kernels.constituent.BilinearNeighbourScores`' after
  :class:`~syntaxformer.kernels.constituent.FusedLinkChain`'s.
* :func:`laplace_prior_attention` (:class:`LaplacePriorAttention`): ``out = dropout(M ⊙ softmax(Q Kᵀ/√d_k
  + padding)) V`` for a prior of the form ``M_ij = exp(-|P_i - P_j|) + eps`` off the diagonal and
  ``M_ii = diagonal`` -- a Laplace kernel of the positions ``P``, which is the constituent prior (paper
  eqs. 3-4: ``eps = 0``, ``M_ii = 1``; the public code: ``eps = 1e-9`` and its own diagonal). One
  program per (sentence, head) holds the sentence's keys and values and walks its queries in tiles;
  forward one kernel, backward one kernel (recomputing the scores, as flash attention) plus a sum of
  the heads' gradients of ``P``. Nothing N×N is written to memory.

Differences from the PyTorch paths, by design: dropout masks come from Triton's Philox generator
(``tl.rand``, seeded by one draw of the device's default generator per call, redrawn in the backward
from the same seed), so they are not the masks of :mod:`syntaxformer.kernels.dropout`; float rounding
differs (matrix products in TF32 when ``torch.backends.cuda.matmul.allow_tf32`` is on); values of
``M ⊙ A`` below the smallest normal float are left to the hardware (CUDA flushes them). Sentences of
more than :data:`MAX_TOKENS` tokens take the PyTorch path.

Where they run: CUDA tensors, or CPU tensors under Triton's interpreter (``TRITON_INTERPRET=1``, how
the tests check them without a GPU: ``tests/kernels/test_kernel_table.py``); :func:`triton_runs_on` says.
This module imports Triton, which CUDA builds of PyTorch install; callers import it only after
:func:`triton_runs_on` (in :mod:`syntaxformer.kernels`) is true.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .dropout import check_probability
from .triton_args import dot_precision, int8_mask

#: longest sentence the attention kernel takes (tokens): one program holds a sentence's keys and values
#: (two (128, d_k) float32 tiles: 32 KiB each at d_k = 64, and in the backward their gradients too) and a
#: (BLOCK_M, N) tile of scores; longer sentences take the blockwise PyTorch kernel
MAX_TOKENS = 128

#: the additive score of a padding key (as the literal path's ``finfo(float32).min``, but safe to subtract)
_PADDING_SCORE = tl.constexpr(-1.0e30)


@triton.jit
def _sign(x):
    return tl.where(x > 0, 1.0, tl.where(x < 0, -1.0, 0.0))


@triton.jit
def _attention_tile(
    q, k, p_query, p_key, rows, cols, real_key, col_ok, seed, base,
    N, scale, eps, diagonal, drop_p, keep_scale, tiny_log,
    DROPOUT: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """One tile of query rows: ``A = softmax(S)``, ``E' = dropout(M ⊙ A)`` and ``x = -|P_i - P_j|``,
    each (BLOCK_M, BLOCK_N) float32."""
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale  # (BM, BN) S
    s = tl.where(real_key[None, :], s, _PADDING_SCORE)
    s = tl.where(col_ok[None, :], s, float("-inf"))  # lanes past the sentence: not keys at all
    e = tl.exp(s - tl.max(s, 1)[:, None])
    a = e / tl.sum(e, 1)[:, None]  # A
    x = -tl.abs(p_query[:, None] - p_key[None, :])  # log of M's Laplace part
    m = tl.where(x < tiny_log, 0.0, tl.exp(x)) + eps  # M (flushed where exp(x) is not a normal float)
    m = tl.where(rows[:, None] == cols[None, :], diagonal, m)
    used = a * m  # E
    if DROPOUT:
        offsets = (base + rows[:, None]) * N + cols[None, :]
        keep = tl.rand(seed, offsets) >= drop_p
        used = tl.where(keep, used * keep_scale, 0.0)  # E'
    return a, used, x


@triton.jit
def _sentence_keys(
    K, V, P, KEY_MASK, b, h, skb, skh, skn, svb, svh, svn, N, D, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr
):
    """Sentence b's keys and values of head h ``(BLOCK_N, BLOCK_D)``, which keys are real, their ``P``,
    and the lanes with their masks."""
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, BLOCK_D)
    col_ok, dim_ok = cols < N, dims < D
    kv_mask = col_ok[:, None] & dim_ok[None, :]
    k = tl.load(K + b * skb + h * skh + cols[:, None] * skn + dims[None, :], mask=kv_mask, other=0.0)
    v = tl.load(V + b * svb + h * svh + cols[:, None] * svn + dims[None, :], mask=kv_mask, other=0.0)
    real_key = tl.load(KEY_MASK + b * N + cols, mask=col_ok, other=0) != 0
    p_key = tl.load(P + b * N + cols, mask=col_ok, other=0.0)
    return cols, col_ok, dims, dim_ok, kv_mask, k, v, real_key, p_key


@triton.jit
def _query_tile(Q, P, b, h, sqb, sqh, sqn, start, dims, dim_ok, N, BLOCK_M: tl.constexpr):
    """The query rows ``start .. start + BLOCK_M`` of sentence b, head h: their indices and masks, the
    queries ``(BLOCK_M, BLOCK_D)`` and their ``P``."""
    rows = start + tl.arange(0, BLOCK_M)
    row_ok = rows < N
    q_mask = row_ok[:, None] & dim_ok[None, :]
    q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqn + dims[None, :], mask=q_mask, other=0.0)
    return rows, row_ok, q_mask, q, tl.load(P + b * N + rows, mask=row_ok, other=0.0)


@triton.jit
def _laplace_attention_forward(
    Q, K, V, P, KEY_MASK, SEED, OUT,
    sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
    H, N, D, scale, eps, diagonal, drop_p, keep_scale, tiny_log, tiny,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    DROPOUT: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)  # one program per (sentence b, head h)
    b, h = pid // H, pid % H
    cols, col_ok, dims, dim_ok, kv_mask, k, v, real_key, p_key = _sentence_keys(
        K, V, P, KEY_MASK, b, h, skb, skh, skn, svb, svh, svn, N, D, BLOCK_N, BLOCK_D
    )
    seed = tl.load(SEED)
    for start in range(0, N, BLOCK_M):
        rows, row_ok, q_mask, q, p_query = _query_tile(Q, P, b, h, sqb, sqh, sqn, start, dims, dim_ok, N, BLOCK_M)
        _, used, _ = _attention_tile(
            q, k, p_query, p_key, rows, cols, real_key, col_ok, seed, pid * N,
            N, scale, eps, diagonal, drop_p, keep_scale, tiny_log, DROPOUT, PRECISION,
        )  # fmt: skip
        out = tl.dot(used.to(v.dtype), v, input_precision=PRECISION)  # (BM, BD)
        tl.store(
            OUT + b * sob + h * soh + rows[:, None] * son + dims[None, :], out.to(OUT.dtype.element_ty), mask=q_mask
        )


@triton.jit
def _laplace_attention_backward(
    Q, K, V, P, KEY_MASK, SEED, GRAD_OUT, GRAD_Q, GRAD_K, GRAD_V, GRAD_P_ROWS, GRAD_P_COLS,
    sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sgb, sgh, sgn, sdb, sdh, sdn,
    H, N, D, scale, eps, diagonal, drop_p, keep_scale, tiny_log, tiny,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    DROPOUT: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    b, h = pid // H, pid % H
    cols, col_ok, dims, dim_ok, kv_mask, k, v, real_key, p_key = _sentence_keys(
        K, V, P, KEY_MASK, b, h, skb, skh, skn, svb, svh, svn, N, D, BLOCK_N, BLOCK_D
    )
    seed = tl.load(SEED)
    grad_k = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
    grad_v = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
    grad_p_cols = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_M):
        rows, row_ok, q_mask, q, p_query = _query_tile(Q, P, b, h, sqb, sqh, sqn, start, dims, dim_ok, N, BLOCK_M)
        g_out = tl.load(GRAD_OUT + b * sgb + h * sgh + rows[:, None] * sgn + dims[None, :], mask=q_mask, other=0.0)
        a, used, x = _attention_tile(
            q, k, p_query, p_key, rows, cols, real_key, col_ok, seed, pid * N,
            N, scale, eps, diagonal, drop_p, keep_scale, tiny_log, DROPOUT, PRECISION,
        )  # fmt: skip
        grad_v += tl.dot(tl.trans(used).to(g_out.dtype), g_out, input_precision=PRECISION)  # dV = E'ᵀ dO
        g = used * tl.dot(g_out, tl.trans(v), input_precision=PRECISION)  # G = E' ⊙ dO Vᵀ = d log M
        g = tl.where(row_ok[:, None], g, 0.0)
        grad_s = g - a * tl.sum(g, 1)[:, None]  # dS = G - A ⊙ rowsum(G)
        grad_q = tl.dot(grad_s.to(k.dtype), k, input_precision=PRECISION) * scale
        tl.store(GRAD_Q + b * sdb + h * sdh + rows[:, None] * sdn + dims[None, :], grad_q, mask=q_mask)
        grad_k += tl.dot(tl.trans(grad_s).to(q.dtype), q, input_precision=PRECISION) * scale
        # d x = G · exp(x) / M off the diagonal (M = exp(x) + eps), then x = -|P_i - P_j|
        exp_x = tl.where(x < tiny_log, 0.0, tl.exp(x))
        grad_x = tl.where(rows[:, None] == cols[None, :], 0.0, g * exp_x / tl.maximum(exp_x + eps, tiny))
        w = -grad_x * _sign(p_query[:, None] - p_key[None, :])  # (BM, BN): dP_i += Σ_j w_ij, dP_j -= Σ_i w_ij
        tl.store(GRAD_P_ROWS + (b * H + h) * N + rows, tl.sum(w, 1), mask=row_ok)
        grad_p_cols -= tl.sum(w, 0)
    out_kv = b * sdb + h * sdh + cols[:, None] * sdn + dims[None, :]
    tl.store(GRAD_K + out_kv, grad_k, mask=kv_mask)
    tl.store(GRAD_V + out_kv, grad_v, mask=kv_mask)
    tl.store(GRAD_P_COLS + (b * H + h) * N + cols, grad_p_cols, mask=col_ok)


def _blocks(n: int, d: int) -> dict:
    """Tile sizes: keys padded to a power of two (>= 16, as ``tl.dot`` needs), query tiles of at most
    64 rows (fewer for long sentences, so a tile of scores stays in registers)."""
    block_n = max(16, triton.next_power_of_2(n))
    return dict(
        BLOCK_M=min(block_n, 64 if block_n <= 64 else 32),
        BLOCK_N=block_n,
        BLOCK_D=max(16, triton.next_power_of_2(d)),
        num_warps=_warps(block_n),
    )


def _warps(block: int) -> int:
    """Threads per program for tiles of ``block`` rows: the fewest warps whose compiled kernels keep their
    tiles in registers (no spills) at the paper presets' sizes on sm_90, as compiled and read back by
    ``benchmarks/speed/triton_compile.py`` (records/benchmarks/triton-compile.json)."""
    return 4 if block <= 16 else 8 if block <= 64 else 16


class LaplacePriorAttention(torch.autograd.Function):
    """``out = dropout(M ⊙ softmax(Q Kᵀ/√d_k + padding)) V`` with ``M_ij = exp(-|P_i - P_j|) + eps``
    (i ≠ j), ``M_ii = diagonal`` by the Triton kernels (module docstring).

    The same function as :class:`~syntaxformer.kernels.attention.BlockwisePriorAttention` with the
    constituent prior's rows; the backward (recomputing ``S``, ``A`` and the dropout mask) is that one's,

        G = E' ⊙ (dO Vᵀ),   dS = G - A ⊙ rowsum(G),   dQ = dS K/√d_k,   dK = dSᵀ Q/√d_k,   dV = E'ᵀ dO,
        d x_ij = Σ_heads G_ij exp(x_ij)/M_ij (i ≠ j),   dP_i += Σ_j w_ij,  dP_j -= Σ_i w_ij,
        w_ij = -d x_ij sign(P_i - P_j),

    with the heads' ``dP`` summed after the kernel (deterministic; no atomics).

    Inputs: ``query, key, value`` (B, H, N, d_k) any strides with a unit last one; ``cum`` (B, N)
    float32 ``P``; ``key_mask`` (B, N) bool; ``eps``, ``diagonal`` floats; ``dropout_p`` float.
    Output: (B, H, N, d_k) (a view of a (B, N, H, d_k) tensor, so the layer's merge of the heads
    copies nothing); the gradients of the queries, keys and values likewise (their projections' gradients
    are views of them). Not twice differentiable.
    """

    @staticmethod
    def forward(ctx, query, key, value, cum, key_mask, eps: float, diagonal: float, dropout_p: float):
        batch, heads, n, d = query.shape
        query, key, value = (t if t.stride(-1) == 1 else t.contiguous() for t in (query, key, value))
        cum = cum.detach().float().contiguous()
        key_mask = int8_mask(key_mask)
        seed = torch.randint(0, 2**31 - 1, (1,), device=query.device) if dropout_p > 0 else cum.new_zeros(1).long()
        out = torch.empty(batch, n, heads, d, dtype=query.dtype, device=query.device).transpose(1, 2)
        options = _options(n, d, eps, diagonal, dropout_p)
        _laplace_attention_forward[(batch * heads,)](
            query, key, value, cum, key_mask, seed, out,
            *query.stride()[:3], *key.stride()[:3], *value.stride()[:3], *out.stride()[:3],
            heads, n, d, **options,
        )  # fmt: skip
        ctx.save_for_backward(query, key, value, cum, key_mask, seed)
        ctx.options = options  # the backward's, TF32 setting included, are the forward's
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        query, key, value, cum, key_mask, seed = ctx.saved_tensors
        batch, heads, n, d = query.shape
        grad_out = grad_out if grad_out.stride(-1) == 1 else grad_out.contiguous()
        # dQ, dK, dV in the (B, N, H, d_k) layout of the projections the heads are views of: no copy after
        grads = [torch.empty(batch, n, heads, d, dtype=torch.float32, device=query.device).transpose(1, 2)
                 for _ in range(3)]  # fmt: skip
        grad_p_rows, grad_p_cols = (torch.empty(batch, heads, n, device=query.device) for _ in range(2))
        _laplace_attention_backward[(batch * heads,)](
            query, key, value, cum, key_mask, seed, grad_out, *grads, grad_p_rows, grad_p_cols,
            *query.stride()[:3], *key.stride()[:3], *value.stride()[:3], *grad_out.stride()[:3],
            *grads[0].stride()[:3], heads, n, d, **ctx.options,
        )  # fmt: skip
        grad_query, grad_key, grad_value = (g.to(t.dtype) for g, t in zip(grads, (query, key, value), strict=True))
        grad_cum = (grad_p_rows + grad_p_cols).sum(1) if ctx.needs_input_grad[3] else None  # (B, N)
        return grad_query, grad_key, grad_value, grad_cum, None, None, None, None


def _options(n: int, d: int, eps: float, diagonal: float, dropout_p: float) -> dict:
    """The kernels' scalar and compile-time arguments."""
    return dict(
        scale=1.0 / math.sqrt(d),
        eps=float(eps),
        diagonal=float(diagonal),
        drop_p=float(dropout_p),
        keep_scale=1.0 / (1.0 - dropout_p),
        tiny_log=math.log(torch.finfo(torch.float32).tiny) + 0.1,
        tiny=torch.finfo(torch.float32).tiny,
        DROPOUT=dropout_p > 0,
        PRECISION=dot_precision(),
        **_blocks(n, d),
    )


def laplace_prior_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_mask: torch.Tensor,
    cum: torch.Tensor,
    eps: float = 0.0,
    diagonal: float = 1.0,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """``dropout(M ⊙ softmax(Q Kᵀ/√d_k + padding)) V``, ``M_ij = exp(-|P_i - P_j|) + eps``, ``M_ii =
    diagonal``, by :class:`LaplacePriorAttention` (no renormalisation; Wang et al. 2019, eq. 2 with the
    constituent prior of eqs. 3-4 as ``M``).

    Args:
        query, key, value: (B, H, N, d_k), N <= :data:`MAX_TOKENS`.
        key_mask: (B, N) bool, True = real token (padding keys masked).
        cum: (B, N) ``P`` (the constituent prior's cumulative log links; differentiable).
        eps: added to ``M`` off the diagonal (0, or the public code's 1e-9).
        diagonal: ``M_ii`` (1: the paper; the public code's tiny value).
        dropout_p: attention dropout on ``E = M ⊙ A``, 0 at evaluation.
    Returns:
        (B, H, N, d_k).
    Raises:
        ValueError: N > :data:`MAX_TOKENS`, more than 2^31 attention entries (dropout offsets), or
            ``dropout_p`` outside [0, 1).
    """
    check_probability(dropout_p)
    batch, heads, n, _ = query.shape
    if n > MAX_TOKENS:
        raise ValueError(f"the Triton prior attention takes sentences of at most {MAX_TOKENS} tokens, got {n}")
    if batch * heads * n * n >= 2**31:
        raise ValueError(f"{batch} x {heads} x {n} x {n} attention entries exceed the kernel's 2^31 offsets")
    return LaplacePriorAttention.apply(query, key, value, cum, key_mask, eps, diagonal, dropout_p)


# ----------------------------------------------------------------------------------------------
# Eqs. 6-8 and P from the neighbour scores (helpers of the kernels below)
# ----------------------------------------------------------------------------------------------


@triton.jit
def _log_sigmoid(x):
    return tl.minimum(x, 0.0) - tl.log(1.0 + tl.exp(-tl.abs(x)))


@triton.jit
def _link_chain(
    S_RIGHT, S_LEFT, GAP, PRIOR, A_HAT, A, CUM, row, G, eps, tiny,
    HAS_PRIOR: tl.constexpr, OFFICIAL: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """Eqs. 6-8 and ``P`` of sentence ``row`` from its neighbour scores in memory (gaps k = 0 .. G-1)."""
    k = tl.arange(0, BLOCK)
    ok = k < G
    base = row * G
    s_right = tl.load(S_RIGHT + base + k, mask=ok, other=0.0)
    s_left = tl.load(S_LEFT + base + k, mask=ok, other=0.0)
    gap = tl.load(GAP + base + k, mask=ok, other=0) != 0
    has_left = tl.load(GAP + base + k - 1, mask=ok & (k >= 1), other=0) != 0  # word k has a left gap
    has_right = tl.load(GAP + base + k + 1, mask=(k + 1) < G, other=0) != 0  # word k+1 has a right gap
    u = s_right - tl.load(S_LEFT + base + k - 1, mask=ok & (k >= 1), other=0.0)  # s_{k,k+1} - s_{k,k-1}
    v = s_left - tl.load(S_RIGHT + base + k + 1, mask=(k + 1) < G, other=0.0)  # s_{k+1,k} - s_{k+1,k+2}
    log_pp = tl.where(has_left, _log_sigmoid(u), 0.0) + tl.where(has_right, _log_sigmoid(v), 0.0)  # eq. 6
    if OFFICIAL:  # eq. 7
        a_hat = tl.sqrt(tl.where(gap, tl.exp(log_pp), 0.0) + eps)
    else:
        a_hat = tl.where(gap, tl.exp(0.5 * log_pp), 0.0)
    if HAS_PRIOR:  # eq. 8
        prior = tl.load(PRIOR + base + k, mask=ok, other=0.0)
        a = prior + (1.0 - prior) * a_hat
    else:
        a = a_hat
    if OFFICIAL:
        log_a = tl.log(a + eps)
    else:
        log_a = tl.log(tl.maximum(a, tiny))
    log_a = tl.where(gap, log_a, 0.0)
    tl.store(A_HAT + base + k, a_hat, mask=ok)
    tl.store(A + base + k, a, mask=ok)
    tl.store(CUM + row * (G + 1) + 1 + k, tl.cumsum(log_a, 0), mask=ok)  # P_{k+1} = Σ_{j<=k} log a_j
    tl.store(CUM + row * (G + 1) + k, 0.0, mask=k == 0)  # P_0 = 0


@triton.jit
def _link_chain_grad(
    S_RIGHT, S_LEFT, GAP, PRIOR, A_HAT, A, GRAD_A, GRAD_CUM, GRAD_RIGHT, GRAD_LEFT, GRAD_PRIOR, row, G, eps, tiny,
    HAS_PRIOR: tl.constexpr, OFFICIAL: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """The backward of :func:`_link_chain` for sentence ``row`` (:class:`~syntaxformer.kernels.constituent.FusedLinkChain`'s):
    the neighbour scores' gradients into ``GRAD_RIGHT`` and ``GRAD_LEFT``, the prior's into ``GRAD_PRIOR``."""
    k = tl.arange(0, BLOCK)
    ok = k < G
    base = row * G
    gap = tl.load(GAP + base + k, mask=ok, other=0) != 0
    has_left = tl.load(GAP + base + k - 1, mask=ok & (k >= 1), other=0) != 0
    has_right = tl.load(GAP + base + k + 1, mask=(k + 1) < G, other=0) != 0
    u = tl.load(S_RIGHT + base + k, mask=ok, other=0.0) - tl.load(S_LEFT + base + k - 1, mask=ok & (k >= 1), other=0.0)
    v = tl.load(S_LEFT + base + k, mask=ok, other=0.0) - tl.load(S_RIGHT + base + k + 1, mask=(k + 1) < G, other=0.0)
    a_hat = tl.load(A_HAT + base + k, mask=ok, other=1.0)
    a = tl.load(A + base + k, mask=ok, other=1.0)
    grad_a = tl.load(GRAD_A + base + k, mask=ok, other=0.0)
    # d log a_k = Σ_{j>k} dP_j at real gaps
    tail = tl.cumsum(tl.load(GRAD_CUM + row * (G + 1) + 1 + k, mask=ok, other=0.0), 0, reverse=True)
    tail = tl.where(gap, tail, 0.0)
    if OFFICIAL:
        grad_a += tail / (a + eps)
    else:
        grad_a += tl.where(a >= tiny, tail / tl.maximum(a, tiny), 0.0)
    if HAS_PRIOR:
        prior = tl.load(PRIOR + base + k, mask=ok, other=0.0)
        tl.store(GRAD_PRIOR + base + k, grad_a * (1.0 - a_hat), mask=ok)
        grad_a_hat = grad_a * (1.0 - prior)
    else:
        grad_a_hat = grad_a
    if OFFICIAL:  # d(log p_R + log p_L)
        pp = tl.maximum(a_hat * a_hat - eps, 0.0)
        grad_log_pp = tl.where(gap, grad_a_hat * pp * 0.5 / a_hat, 0.0)
    else:
        grad_log_pp = tl.where(gap, grad_a_hat * a_hat * 0.5, 0.0)
    d_u = tl.where(has_left, grad_log_pp * tl.sigmoid(-u), 0.0)
    d_v = tl.where(has_right, grad_log_pp * tl.sigmoid(-v), 0.0)
    # d s_right_k = d_u_k - d_v_{k-1},  d s_left_k = d_v_k - d_u_{k+1}: the neighbours' terms go through
    # memory (written, then read shifted by one gap, by this program alone)
    tl.store(GRAD_RIGHT + base + k, d_u, mask=ok)
    tl.store(GRAD_LEFT + base + k, d_v, mask=ok)
    tl.debug_barrier()
    d_v_before = tl.load(GRAD_LEFT + base + k - 1, mask=ok & (k >= 1), other=0.0)
    d_u_after = tl.load(GRAD_RIGHT + base + k + 1, mask=(k + 1) < G, other=0.0)
    tl.debug_barrier()
    tl.store(GRAD_RIGHT + base + k, d_u - d_v_before, mask=ok)
    tl.store(GRAD_LEFT + base + k, d_v - d_u_after, mask=ok)


def _chain_options(gaps: int, has_prior: bool, variant: str, eps: float) -> dict:
    return dict(
        G=gaps,
        eps=float(eps),
        tiny=torch.finfo(torch.float32).tiny,
        HAS_PRIOR=has_prior,
        OFFICIAL=variant == "official",
        BLOCK=max(16, triton.next_power_of_2(gaps)),
    )


# ----------------------------------------------------------------------------------------------
# Eq. 5 (as the bilinear form) with eqs. 6-8 and P
# ----------------------------------------------------------------------------------------------


@triton.jit
def _neighbour_scores(R, HID, UW, OFFSET, row, k, ok, N, D, BLOCK: tl.constexpr, BLOCK_D: tl.constexpr):
    """``(s_right, s_left)`` at gaps ``k`` of sentence ``row``: ``r_k·h_{k+1} + hu_k + hw_{k+1} + c`` and
    ``r_{k+1}·h_k + hu_{k+1} + hw_k + c`` (eq. 5 as the bilinear form), summed over chunks of d."""
    acc_right = tl.zeros((BLOCK,), dtype=tl.float32)
    acc_left = tl.zeros((BLOCK,), dtype=tl.float32)
    hu_k = tl.zeros((BLOCK,), dtype=tl.float32)
    hu_next = tl.zeros((BLOCK,), dtype=tl.float32)
    hw_k = tl.zeros((BLOCK,), dtype=tl.float32)
    hw_next = tl.zeros((BLOCK,), dtype=tl.float32)
    here = (row * N + k)[:, None] * D
    for start in range(0, D, BLOCK_D):
        dims = start + tl.arange(0, BLOCK_D)
        dim_ok = dims < D
        both = ok[:, None] & dim_ok[None, :]
        r_k = tl.load(R + here + dims[None, :], mask=both, other=0.0).to(tl.float32)
        r_next = tl.load(R + here + D + dims[None, :], mask=both, other=0.0).to(tl.float32)
        h_k = tl.load(HID + here + dims[None, :], mask=both, other=0.0).to(tl.float32)
        h_next = tl.load(HID + here + D + dims[None, :], mask=both, other=0.0).to(tl.float32)
        u = tl.load(UW + dims * 2, mask=dim_ok, other=0.0).to(tl.float32)[None, :]
        w = tl.load(UW + dims * 2 + 1, mask=dim_ok, other=0.0).to(tl.float32)[None, :]
        acc_right += tl.sum(r_k * h_next, 1)
        acc_left += tl.sum(r_next * h_k, 1)
        hu_k += tl.sum(h_k * u, 1)
        hu_next += tl.sum(h_next * u, 1)
        hw_k += tl.sum(h_k * w, 1)
        hw_next += tl.sum(h_next * w, 1)
    offset = tl.load(OFFSET).to(tl.float32)
    return acc_right + hu_k + hw_next + offset, acc_left + hu_next + hw_k + offset


@triton.jit
def _prior_chain_forward(
    R, HID, UW, OFFSET, GAP, PRIOR, S_RIGHT, S_LEFT, A_HAT, A, CUM,
    G, N, D, scale, eps, tiny,
    HAS_PRIOR: tl.constexpr, OFFICIAL: tl.constexpr, BLOCK: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)  # one program per sentence
    k = tl.arange(0, BLOCK)
    ok = k < G
    s_right, s_left = _neighbour_scores(R, HID, UW, OFFSET, row, k, ok, N, D, BLOCK, BLOCK_D)
    s_right, s_left = s_right / scale, s_left / scale  # eq. 5's divisor, applied here rather than to the form
    tl.store(S_RIGHT + row * G + k, s_right, mask=ok)  # kept for the backward, read shifted below
    tl.store(S_LEFT + row * G + k, s_left, mask=ok)
    tl.debug_barrier()
    _link_chain(S_RIGHT, S_LEFT, GAP, PRIOR, A_HAT, A, CUM, row, G, eps, tiny, HAS_PRIOR, OFFICIAL, BLOCK)


@triton.jit
def _prior_chain_backward(
    R, HID, UW, S_RIGHT, S_LEFT, GAP, PRIOR, A_HAT, A, GRAD_A, GRAD_CUM, GRAD_RIGHT, GRAD_LEFT, GRAD_PRIOR,
    GRAD_R, GRAD_HID, PART_UW, PART_OFFSET,
    G, N, D, scale, eps, tiny,
    HAS_PRIOR: tl.constexpr, OFFICIAL: tl.constexpr, BLOCK: tl.constexpr, BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    _link_chain_grad(
        S_RIGHT, S_LEFT, GAP, PRIOR, A_HAT, A, GRAD_A, GRAD_CUM, GRAD_RIGHT, GRAD_LEFT, GRAD_PRIOR,
        row, G, eps, tiny, HAS_PRIOR, OFFICIAL, BLOCK,
    )  # fmt: skip
    tl.debug_barrier()
    # eq. 5's backward (BilinearNeighbourScores'), token j of the sentence, with g = d/ds over the divisor:
    # d r_j = gR_j h_{j+1} + gL_{j-1} h_{j-1},  d h_j = gR_{j-1} r_{j-1} + gL_j r_{j+1} + dhu_j u + dhw_j w
    j = tl.arange(0, BLOCK_T)
    token_ok = j < N
    base = GRAD_RIGHT + row * G
    g_right = tl.load(base + j, mask=j < G, other=0.0) / scale
    g_right_before = tl.load(base + j - 1, mask=(j >= 1) & (j - 1 < G), other=0.0) / scale
    g_left = tl.load(GRAD_LEFT + row * G + j, mask=j < G, other=0.0) / scale
    g_left_before = tl.load(GRAD_LEFT + row * G + j - 1, mask=(j >= 1) & (j - 1 < G), other=0.0) / scale
    grad_hu = g_right + g_left_before
    grad_hw = g_right_before + g_left
    here = (row * N + j)[:, None] * D
    for start in range(0, D, BLOCK_D):
        dims = start + tl.arange(0, BLOCK_D)
        dim_ok = dims < D
        both = token_ok[:, None] & dim_ok[None, :]
        after = ((j + 1) < N)[:, None] & dim_ok[None, :]
        before = (j >= 1)[:, None] & both
        h = tl.load(HID + here + dims[None, :], mask=both, other=0.0).to(tl.float32)
        h_after = tl.load(HID + here + D + dims[None, :], mask=after, other=0.0).to(tl.float32)
        h_before = tl.load(HID + here - D + dims[None, :], mask=before, other=0.0).to(tl.float32)
        r_after = tl.load(R + here + D + dims[None, :], mask=after, other=0.0).to(tl.float32)
        r_before = tl.load(R + here - D + dims[None, :], mask=before, other=0.0).to(tl.float32)
        u = tl.load(UW + dims * 2, mask=dim_ok, other=0.0).to(tl.float32)[None, :]
        w = tl.load(UW + dims * 2 + 1, mask=dim_ok, other=0.0).to(tl.float32)[None, :]
        grad_r = g_right[:, None] * h_after + g_left_before[:, None] * h_before
        grad_h = g_right_before[:, None] * r_before + g_left[:, None] * r_after
        grad_h += grad_hu[:, None] * u + grad_hw[:, None] * w
        tl.store(GRAD_R + here + dims[None, :], grad_r, mask=both)
        tl.store(GRAD_HID + here + dims[None, :], grad_h, mask=both)
        tl.store(PART_UW + (row * D + dims) * 2, tl.sum(h * grad_hu[:, None], 0), mask=dim_ok)
        tl.store(PART_UW + (row * D + dims) * 2 + 1, tl.sum(h * grad_hw[:, None], 0), mask=dim_ok)
    tl.store(PART_OFFSET + row, tl.sum(g_right, 0) + tl.sum(g_left, 0))


class TritonPriorChain(torch.autograd.Function):
    """Eq. 5 (the neighbour scores as the bilinear form of
    :func:`~syntaxformer.kernels.constituent.neighbour_score_form`) with eqs. 6-8 and ``P`` of one layer
    by one Triton kernel each way: the function and backward of
    :class:`~syntaxformer.kernels.constituent.BilinearNeighbourScores` followed by
    :class:`~syntaxformer.kernels.constituent.FusedLinkChain` (float32 inside).

    Inputs: ``r = h M`` (B, N, d), ``hidden`` ``h`` (B, N, d), ``uw`` (d, 2), ``offset`` (scalar
    tensor), ``gap_mask`` (B, N-1) bool, ``prior`` (B, N-1) or None, ``variant``, ``eps``, ``scale`` (the
    scores' divisor). Outputs ``(a, P)``: (B, N-1), (B, N) float32. The backward's sums over the batch
    (``d uw``, ``d offset``) are per-sentence partial sums added after the kernel. Not twice differentiable.
    """

    @staticmethod
    def forward(ctx, r, hidden, uw, offset, gap_mask, prior, variant: str, eps: float, scale: float):
        batch, n, d = hidden.shape
        r, hidden, uw = r.contiguous(), hidden.contiguous(), uw.contiguous()
        gap = int8_mask(gap_mask)
        prior = prior.float().contiguous() if prior is not None else None
        s_right, s_left, a_hat, a = (hidden.new_empty(batch, n - 1, dtype=torch.float32) for _ in range(4))
        cum = hidden.new_empty(batch, n, dtype=torch.float32)
        options = dict(_chain_options(n - 1, prior is not None, variant, eps), N=n, D=d, BLOCK_D=_BLOCK_D)
        options["scale"] = float(scale)
        options["num_warps"] = _warps(options["BLOCK"])  # (BLOCK, BLOCK_D) tiles: more threads for long ones
        _prior_chain_forward[(batch,)](
            r, hidden, uw, offset, gap, prior if prior is not None else a, s_right, s_left, a_hat, a, cum, **options
        )
        ctx.options = options
        ctx.save_for_backward(r, hidden, uw, s_right, s_left, gap, prior, a_hat, a)
        return a, cum

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_a, grad_cum):
        r, hidden, uw, s_right, s_left, gap, prior, a_hat, a = ctx.saved_tensors
        batch, n, d = hidden.shape
        grad_a = torch.zeros_like(a) if grad_a is None else grad_a.float().contiguous()
        grad_cum = torch.zeros(batch, n, device=a.device) if grad_cum is None else grad_cum.float().contiguous()
        grad_right, grad_left = torch.empty_like(a), torch.empty_like(a)
        grad_prior = torch.empty_like(a) if prior is not None else None
        grad_r, grad_hidden = (torch.empty(batch, n, d, device=a.device) for _ in range(2))
        part_uw, part_offset = torch.empty(batch, d, 2, device=a.device), torch.empty(batch, device=a.device)
        _prior_chain_backward[(batch,)](
            r, hidden, uw, s_right, s_left, gap, prior if prior is not None else a, a_hat, a, grad_a, grad_cum,
            grad_right, grad_left, grad_prior if grad_prior is not None else a,
            grad_r, grad_hidden, part_uw, part_offset,
            BLOCK_T=max(16, triton.next_power_of_2(n)), **ctx.options,
        )  # fmt: skip
        return (
            grad_r.to(r.dtype),
            grad_hidden.to(hidden.dtype),
            part_uw.sum(0).to(uw.dtype),
            part_offset.sum().to(uw.dtype),
            None,
            grad_prior,
            None,
            None,
            None,
        )


#: the chunk of the hidden size a program reads at a time in :class:`TritonPriorChain`
_BLOCK_D = 64


def triton_prior_chain(
    r: torch.Tensor,
    hidden: torch.Tensor,
    linear: torch.Tensor,
    offset: torch.Tensor,
    gap_mask: torch.Tensor,
    prior: torch.Tensor | None,
    variant: str,
    eps: float = 1e-9,
    scale: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(a, P)`` of one layer from its normalised input by :class:`TritonPriorChain`: the same as
    :func:`~syntaxformer.kernels.constituent.neighbour_scores_bilinear` then
    :func:`~syntaxformer.kernels.constituent.fused_link_chain`, with the form's divisor applied by the
    kernels (to the scores, and to their gradients in the backward) rather than to the form: no
    division of ``M``, ``[u | w]`` and ``c`` (six small kernels a layer, forward and backward).

    Args:
        r: (B, N, d) ``h M`` (``hidden @ bilinear`` of :func:`~syntaxformer.kernels.constituent.neighbour_score_form`
            at ``scale`` 1).
        hidden: (B, N, d) the normalised layer input ``h``.
        linear, offset: ``[u | w]`` (d, 2) and ``c`` (scalar tensor) of the same form.
        gap_mask: (B, N-1) bool, True where both words are real.
        prior: (B, N-1) link probabilities of the layer below, or None.
        variant: "paper" or "official". eps: the official variant's epsilon.
        scale: eq. 5's score divisor (d_model/2 or 256); 1 where the form is already divided.
    Returns:
        ``(a, P)``: (B, N-1) link probabilities and (B, N) cumulative log links, float32.
    """
    return TritonPriorChain.apply(r, hidden, linear, offset, gap_mask, prior, variant, eps, scale)


__all__ = [
    "MAX_TOKENS",
    "LaplacePriorAttention",
    "TritonPriorChain",
    "laplace_prior_attention",
    "triton_prior_chain",
]
