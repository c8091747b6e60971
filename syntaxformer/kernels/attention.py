"""Fused attention kernels: the ``"sdpa"`` fast path of :mod:`syntaxformer.priors.attention`.

Both compute, per head, what the literal reference
(:func:`syntaxformer.priors.attention.eager_attention`) computes,

    out = dropout(M ⊙ softmax(Q Kᵀ / √d_k + B + padding mask)) V      (no renormalisation)

without materialising what that one does:

* :func:`sdpa_without_prior` (``M = 1``, an additive bias ``B`` or none): PyTorch's
  ``F.scaled_dot_product_attention`` with the bias as a float mask (PyTorch picks its backend:
  flash on CPU at evaluation and on CUDA; its math backend, which materialises (B, H, N, N), on CPU
  with attention dropout or a bias that requires grad).
* :func:`blockwise_prior_attention` (a multiplicative prior ``M`` with O(N) state, ``B = 0``):
  :class:`BlockwisePriorAttention`, which builds ``M``'s rows from the prior's state block by block
  (never the whole (B, N, N) prior) and has a hand-written backward. In training (grad enabled) it
  keeps ``A`` and ``E'`` for the backward while B·H·N² <= :data:`SAVE_ATTENTION_ELEMENTS` (as
  PyTorch's math backend keeps its softmax), and above that recomputes them block by block of
  :data:`BLOCK_ELEMENTS` scores (memory linear in N, as flash attention). Without gradients
  (evaluation, parsing, perplexity) it runs blockwise and keeps nothing.
  Why not a fused library kernel (the constituent prior): ``C ⊙ softmax(S)`` is ``softmax(S + log C)``
  times a per-row ``exp(LSE(S + log C) - LSE(S))`` (DESIGN.md §5), which needs gradients through two
  log-sum-exps, and in torch 2.13 no CPU kernel differentiates an attention bias (the flash kernel
  refuses a mask that requires grad; FlexAttention has no CPU backward).

The kernels know no prior by name: they take the prior's state and row builder (the fields of a
:class:`~syntaxformer.priors.base.MultiplicativePrior`). Dropout masks come from
:mod:`syntaxformer.kernels.dropout`, denormals are flushed by :mod:`syntaxformer.kernels.denormals`,
as in the literal reference. Tested against the literal path in ``tests/models/test_blockwise_attention.py``,
``tests/models/test_tree_transformer.py`` and ``tests/kernels/test_kernel_table.py``; benchmarks/speed/README.md has the
measured step times and peak memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from .denormals import exp_flushed, flush_, needs_explicit_flush
from .dropout import drop_mask, keep_scale

#: (B, H, N, N) sizes up to this many elements keep the attention for the backward (no
#: recomputation, memory as a plain Transformer's eager/math attention); larger ones are recomputed
#: block by block in the backward (memory linear in N). 2^23 = 32 MiB per float32 tensor: on CPU,
#: measured with the small preset, keeping is faster at 4M elements and slower at 16M (large
#: buffers stream through main memory; blocks stay closer to the caches).
SAVE_ATTENTION_ELEMENTS = 1 << 23

#: elements of one (B, H, rows, N) block of scores when the attention is recomputed: the kernel's
#: working set (16 MiB in float32), and all it holds beyond its O(N) inputs and outputs (smaller
#: blocks are slower on CPU: 2^18 elements cost +25% at N = 2048, 2^20 +5%, 2^22 +2%)
BLOCK_ELEMENTS = 1 << 22


def padding_bias(key_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The additive padding mask of the scores.

    Args:
        key_mask: (B, N) bool, True = real token.
        dtype: the mask's float dtype.
    Returns:
        (B, 1, 1, N): 0 for real keys, the dtype's most negative number for padding keys.
    """
    return torch.zeros(key_mask.shape, dtype=dtype, device=key_mask.device).masked_fill(
        ~key_mask, torch.finfo(dtype).min
    )[:, None, None, :]


def query_blocks(
    batch: int, heads: int, n_query: int, n_key: int, block_elements: int = BLOCK_ELEMENTS
) -> list[tuple[int, int]]:
    """The blocks of query rows of :class:`BlockwisePriorAttention`'s recomputing mode.

    Args:
        batch, heads, n_query, n_key: the attention's (B, H, N_q, N_k) sizes.
        block_elements: most scores per block.
    Returns:
        half-open ranges ``(start, stop)`` covering ``0 .. n_query`` in order, each with
        ``batch · heads · (stop - start) · n_key <= block_elements`` (or one query row when even a
        single row is larger).
    """
    rows = max(1, block_elements // max(1, batch * heads * n_key))
    return [(start, min(start + rows, n_query)) for start in range(0, n_query, rows)]


class BlockwisePriorAttention(torch.autograd.Function):
    """``out = dropout(M ⊙ softmax(Q Kᵀ/√d_k + padding)) V`` with a hand-written backward.

    The same function as :func:`~syntaxformer.priors.attention.eager_attention` for a multiplicative
    prior ``M`` (for the Tree Transformer ``M = C``: eq. 2 of the paper with the prior of eqs. 3-4).
    ``M`` never exists whole: its rows are computed from the prior's state block by block
    (``log_rows(state, (start, stop))`` of the :class:`~syntaxformer.priors.base.MultiplicativePrior`),
    in the forward and again in the backward, so the prior keeps only its O(N) state for the backward.
    Two modes:

    ``block_elements=None`` (keep the attention)
        one block; saves ``A`` and ``E'`` (B, H, N, N) as PyTorch's eager/math attention saves its
        softmax, and no scores, ``M``, ``log M`` or dropout mask. Fastest on CPU.
    ``block_elements=k`` (recompute, as flash attention)
        blocks of query rows with at most ``k`` scores each (:func:`query_blocks`); saves nothing
        N×N: ``Q/√d_k, K, V, out`` (B, H, N, d_k), ``P`` and the padding mask. The backward
        recomputes each block's scores and softmax (one more ``Q Kᵀ`` product) and redraws its
        dropout mask from the generator state saved at the forward. Memory linear in N.

    With ``A = softmax(S)``, ``E = M ⊙ A``, ``E'`` = E after dropout (mask ``m``, scale
    ``1/(1-p)``, folded into ``M``) and ``dP = dO Vᵀ``:

        G = E' ⊙ dP = E ⊙ dE,   dS = G - A ⊙ D,   D_i = rowsum(G)_i = dO_i · out_i   (as flash attention)
        dV = E'ᵀ dO,   d(log M) = Σ_heads G   (then into the state by autograd through the block's log M)

    Dropout masks come from :func:`~syntaxformer.kernels.dropout.drop_mask`, kept values scaled by
    :func:`~syntaxformer.kernels.dropout.keep_scale` (the eager reference draws its mask the same way,
    so with one block the same seed gives the same mask). Values of ``M`` below the smallest normal
    float are 0 (:func:`~syntaxformer.kernels.denormals.exp_flushed`), and those of ``E`` (and of
    ``G`` in the backward) when ``flush`` is True, as in the eager reference. Scores, softmax and
    ``M`` are float32 for half-precision inputs (the products run in the input dtype).

    Inputs: ``query, key, value`` (B, H, N, d_k); ``state`` the prior's O(N) state (differentiable);
    ``pad`` (B, 1, 1, N) float32 additive padding mask (:func:`padding_bias`); ``dropout_p`` float;
    ``flush`` bool; ``log_rows`` the prior's row builder ``(state, (start, stop)) -> (B, b, N)``;
    ``block_elements`` int or None; ``log_rows_vjp`` None (autograd through ``log_rows`` for
    ``d state``) or the prior's closed-form ``(state, (start, stop), d rows) -> d state`` (e.g.
    :func:`~syntaxformer.kernels.constituent.log_constituent_prior_vjp` with ``kernel="fused"``).
    Output: (B, H, N, d_k). Not twice differentiable. Tested against the eager reference in
    ``tests/models/test_blockwise_attention.py`` (values, gradients, dropout masks, saved memory).
    """

    @staticmethod
    def forward(
        ctx,
        query,
        key,
        value,
        state,
        pad,
        dropout_p: float,
        flush: bool,
        log_rows=None,
        block_elements: int | None = None,
        log_rows_vjp=None,
    ):
        batch, heads, n, _ = query.shape
        scale = 1.0 / math.sqrt(query.shape[-1])
        query = query * scale  # (B, H, N, d_k); scaling Q is cheaper than scaling the N×N scores
        # the heads' views (B, N, H, d_k).transpose(1, 2) are not contiguous: every batched product
        # would copy them again (forward and backward); copy K and V once
        key, value = key.contiguous(), value.contiguous()
        cum = state.detach()
        acc = _accumulation_dtype(query.dtype)
        rng_state = _rng_state(query.device) if dropout_p > 0 and block_elements is not None else None
        blocks = [(0, n)] if block_elements is None else query_blocks(batch, heads, n, key.shape[2], block_elements)
        out = torch.empty_like(query)  # (B, H, N, d_k)
        for start, stop in blocks:
            log_c = log_rows(cum.to(acc), (start, stop))  # (B, b, N)
            attn, used = _block_attention(query[:, :, start:stop], key, log_c, pad, dropout_p, flush)  # A, E'
            out[:, :, start:stop] = torch.matmul(used.to(value.dtype), value)
        saved = (attn, used) if block_elements is None else ()
        ctx.save_for_backward(query, key, value, cum, pad, out, *saved)
        ctx.options = (scale, dropout_p, flush, log_rows, block_elements, rng_state, log_rows_vjp)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        query, key, value, cum, pad, out, *saved = ctx.saved_tensors
        scale, dropout_p, flush, log_rows, block_elements, rng_state, log_rows_vjp = ctx.options
        autograd_rows = ctx.needs_input_grad[3] and log_rows_vjp is None
        batch, heads, n, _ = query.shape
        acc = _accumulation_dtype(query.dtype)
        grad_out = grad_out.contiguous()  # (B, H, N, d_k)
        delta = (grad_out.to(acc) * out.to(acc)).sum(-1, keepdim=True)  # (B, H, N, 1): D = rowsum(G)
        grad_query = torch.empty_like(query)
        grad_key = grad_value = grad_cum = None  # sums over the blocks, in ``acc``

        def accumulate(total, part):
            return part.to(acc) if total is None else total.add_(part)

        blocks = [(0, n)] if block_elements is None else query_blocks(batch, heads, n, key.shape[2], block_elements)
        restore_rng = None
        if rng_state is not None:  # redraw the forward's masks, then leave the generator as it was
            restore_rng = _rng_state(query.device)
            _set_rng_state(query.device, rng_state)
        try:
            for start, stop in blocks:
                rows = slice(start, stop)
                if autograd_rows or not saved:  # the block's log C, once; differentiable for d P
                    block_cum = cum.to(acc).detach().requires_grad_(autograd_rows)
                    with torch.enable_grad():
                        log_c = log_rows(block_cum, (start, stop))
                if saved:
                    attn, used = saved
                else:
                    attn, used = _block_attention(query[:, :, rows], key, log_c.detach(), pad, dropout_p, flush)
                grad_value = accumulate(
                    grad_value, torch.matmul(used.transpose(-2, -1).to(grad_out.dtype), grad_out[:, :, rows])
                )
                g = torch.matmul(grad_out[:, :, rows], value.transpose(-2, -1)).to(acc).mul_(used)  # G = E' ⊙ dP
                del used
                if flush:  # no flush-to-zero on this CPU: G's denormals would slow every pass below
                    flush_(g)
                if autograd_rows:
                    grad_cum = accumulate(grad_cum, torch.autograd.grad(log_c, block_cum, g.sum(1))[0])  # Σ_heads G
                elif ctx.needs_input_grad[3]:
                    grad_cum = accumulate(grad_cum, log_rows_vjp(cum.to(acc), (start, stop), g.sum(1)))
                g.addcmul_(attn, delta[:, :, rows], value=-1.0)  # dS = G - A ⊙ D
                g = g.to(query.dtype)
                grad_query[:, :, rows] = torch.matmul(g, key).mul_(scale)
                grad_key = accumulate(grad_key, torch.matmul(g.transpose(-2, -1), query[:, :, rows]))  # Q saved scaled
        finally:
            if restore_rng is not None:
                _set_rng_state(query.device, restore_rng)
        grad_cum = grad_cum.to(cum.dtype) if grad_cum is not None else None
        return (
            grad_query,
            grad_key.to(key.dtype),
            grad_value.to(value.dtype),
            grad_cum,
            None,
            None,
            None,
            None,
            None,
            None,
        )


def _block_attention(query, key, log_c, pad, dropout_p, flush):
    """``A = softmax(Q Kᵀ + padding)`` and ``E' = dropout(C ⊙ A)`` for a block of b (scaled) queries.

    ``query`` (B, H, b, d_k), ``key`` (B, H, N, d_k), ``log_c`` the block's rows of ``log C``
    (B, b, N) in the accumulation dtype (no autograd), ``pad`` (B, 1, 1, N). Returns two
    (B, H, b, N) tensors in ``log_c``'s dtype.
    """
    scores = torch.matmul(query, key.transpose(-2, -1)).to(log_c.dtype)  # (B, H, b, N)
    attn = torch.softmax(scores.add_(pad), dim=-1)
    constituent = exp_flushed(log_c)[:, None]  # (B, 1, b, N), shared by the heads
    if dropout_p > 0:
        constituent.mul_(keep_scale(dropout_p, log_c.device))
    # E (× 1/(1-p)), no renormalisation, written over the dead scores: a fresh (B, H, b, N) buffer
    # for a broadcast product measured ~5× slower on CPU than writing into an existing one
    used = torch.mul(attn, constituent, out=scores)
    if flush:
        flush_(used)
    if dropout_p > 0:
        used.masked_fill_(drop_mask(used.shape, dropout_p, used.device), 0.0)  # E'
    return attn, used


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for half-precision inputs (scores, softmax and C in float32), else the input dtype."""
    return torch.promote_types(dtype, torch.float32)


def _rng_state(device: torch.device) -> torch.Tensor:
    """State of ``device``'s default generator (to redraw dropout masks in the backward)."""
    return torch.cuda.get_rng_state(device) if device.type == "cuda" else torch.get_rng_state()


def _set_rng_state(device: torch.device, state: torch.Tensor) -> None:
    if device.type == "cuda":
        torch.cuda.set_rng_state(state, device)
    else:
        torch.set_rng_state(state)


def sdpa_without_prior(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_mask: torch.Tensor,
    dropout_p: float = 0.0,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """``softmax(Q Kᵀ/√d_k + B + padding) V`` (with attention dropout) by ``F.scaled_dot_product_attention``.

    The bias and the padding go in as one float mask. A bias that requires grad (in training) runs on
    PyTorch's math backend, since the fused backends do not differentiate a mask. Dropout is PyTorch's
    own (its mask generator, not :mod:`syntaxformer.kernels.dropout`'s).

    Args:
        query, key, value: (B, H, N, d_k).
        key_mask: (B, N) bool, True = real token (padding keys masked).
        dropout_p: attention dropout, 0 at evaluation.
        bias: (B, 1 or H, N, N) additive score bias, or None.
    Returns:
        (B, H, N, d_k).
    """
    pad = padding_bias(key_mask, torch.float32)  # (B, 1, 1, N)
    mask = pad.to(query.dtype) if bias is None else bias.to(query.dtype) + pad.to(query.dtype)
    if bias is not None and bias.requires_grad and torch.is_grad_enabled():
        # the fused kernels do not differentiate a mask: PyTorch's math backend does
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p)


def blockwise_prior_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_mask: torch.Tensor,
    state: torch.Tensor,
    log_rows: Callable[[torch.Tensor, tuple[int, int] | None], torch.Tensor],
    log_rows_vjp: Callable | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """``dropout(M ⊙ softmax(Q Kᵀ/√d_k + padding)) V`` by :class:`BlockwisePriorAttention`.

    Keeps the attention for the backward when gradients are on and B·H·N² <=
    :data:`SAVE_ATTENTION_ELEMENTS` (read at call time), else recomputes it in blocks of
    :data:`BLOCK_ELEMENTS` scores; flushes denormals explicitly unless the CPU does
    (:func:`~syntaxformer.kernels.denormals.needs_explicit_flush`).

    Args:
        query, key, value: (B, H, N, d_k).
        key_mask: (B, N) bool, True = real token.
        state: the prior's O(N) state, e.g. (B, N) ``P`` of the constituent prior.
        log_rows: ``(state, (start, stop)) -> (B, stop - start, N)`` rows of ``log M``.
        log_rows_vjp: the closed-form gradient of the rows with respect to the state, or None (autograd).
        dropout_p: attention dropout (on ``E``, after the product with ``M``), 0 at evaluation.
    Returns:
        (B, H, N, d_k).
    """
    pad = padding_bias(key_mask, torch.float32)  # (B, 1, 1, N)
    flush = needs_explicit_flush(query)
    batch, heads, n, _ = query.shape
    keep_attention = torch.is_grad_enabled() and batch * heads * n * n <= SAVE_ATTENTION_ELEMENTS
    return BlockwisePriorAttention.apply(
        query,
        key,
        value,
        state,
        pad,
        dropout_p,
        flush,
        log_rows,
        None if keep_attention else BLOCK_ELEMENTS,
        log_rows_vjp,
    )


__all__ = [
    "BLOCK_ELEMENTS",
    "SAVE_ATTENTION_ELEMENTS",
    "BlockwisePriorAttention",
    "blockwise_prior_attention",
    "padding_bias",
    "query_blocks",
    "sdpa_without_prior",
]
