"""Attention kernels, plain functions chosen by a config string (``ATTENTION_FUNCTIONS[name]``).

Every kernel computes, per head,

    out = E V,   E = C ⊙ softmax(Q Kᵀ / √d_k + padding mask)      (Tree Transformer, no renormalisation)

with ``C`` the layer's constituent prior (``prior``, a :class:`ConstituentPrior`, O(N) state) or
``C = 1`` when ``prior is None`` (plain Transformer).

``"eager"``
    the literal reference: materialises the (B, H, N, N) scores, softmax and product, and can return
    the attention ``E`` that the layer uses.
``"sdpa"``
    the fused path (DESIGN.md §5): with ``B = log C`` (an additive bias) and ``S`` the scaled scores,

        (C ⊙ softmax(S)) V = softmax(S + B) V · exp(LSE(S + B) - LSE(S))         (row-wise LSE)

    ``softmax(S + B) V`` is one call of ``torch.nn.functional.scaled_dot_product_attention`` with a
    float mask. See :func:`sdpa_attention` for what is and is not materialised.

Signature of every kernel::

    fn(query, key, value, key_mask, prior=None, dropout_p=0.0, output_attentions=False)
        -> (out (B, H, N, d_k), attentions (B, H, N, N) or None)

``query, key, value``: (B, H, N, d_k); ``key_mask``: (B, N) bool, True = real token (padding keys are
masked; padding queries produce finite garbage that callers ignore); ``dropout_p``: attention dropout
(applied to ``E``, after the product, as the public code), 0 at evaluation.

Denormal numbers: products of many link probabilities put entries of ``E`` in float32's denormal range,
which is 10-100× slower on CPU. :func:`flush_denormals_on_cpu` sets the CPU's flush-to-zero flag
(called by the model's forward); where it is not set (:func:`flush_to_zero_is_on`), or off CPU, the
kernels flush values below the smallest normal float to 0 themselves (what flush-to-zero hardware does).

Training on CPU with ``"sdpa"`` runs :class:`ConstituentAttentionFunction` (the eager product with a
hand-written backward); benchmarks/README.md has the measured step times.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .constituent import ConstituentPrior


def flush_denormals_on_cpu(device: torch.device) -> None:
    """Set ``torch.set_flush_denormal(True)`` for the calling thread when running on CPU.

    Denormal floats (< 1.2e-38 in float32) are produced by the constituent prior's products and make
    CPU arithmetic 10-100× slower (DESIGN.md §5). Caveat, measured with torch 2.13: the flag is per
    thread; PyTorch's intra-op (OpenMP) worker threads inherit it only if it was set before they were
    created, i.e. before the first parallel operation of the process. The command line therefore sets
    it first thing (:func:`syntaxformer.cli.prepare_process`); a script that runs models on several
    CPU threads should call ``torch.set_flush_denormal(True)`` before any tensor work. Importing the
    package changes nothing.
    """
    if device.type == "cpu":
        torch.set_flush_denormal(True)



def flush_to_zero_is_on() -> bool:
    """Whether the calling thread's float arithmetic flushes denormals to zero on CPU.

    True after ``torch.set_flush_denormal(True)`` (the models' forward and the command line set it,
    see :func:`flush_denormals_on_cpu`). A one-element probe (``1e-30 · 1e-10`` is a float32 denormal),
    a few microseconds. When it is True the explicit flush :func:`_flush` is redundant on CPU: the
    hardware already writes 0 for every result below the smallest normal float.
    """
    return (torch.tensor([1e-30]) * torch.tensor([1e-10])).item() == 0.0


def _needs_explicit_flush(x: torch.Tensor) -> bool:
    """Explicit flush-to-zero is needed unless ``x`` is on CPU and the CPU already flushes."""
    return not (x.device.type == "cpu" and flush_to_zero_is_on())


def _flush(x: torch.Tensor) -> torch.Tensor:
    """Values below the smallest normal float of ``x``'s dtype become 0 (explicit flush-to-zero)."""
    return x.masked_fill(x.abs() < torch.finfo(x.dtype).tiny, 0.0)


def _padding_bias(key_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, 1, 1, N) additive mask: 0 for real keys, a large negative number for padding keys."""
    return torch.zeros(key_mask.shape, dtype=dtype, device=key_mask.device).masked_fill(
        ~key_mask, torch.finfo(dtype).min)[:, None, None, :]


def eager_attention(query, key, value, key_mask, prior: ConstituentPrior | None = None,
                    dropout_p: float = 0.0, output_attentions: bool = False):
    """The literal reference: ``E = C ⊙ softmax(QKᵀ/√d_k)``, ``out = dropout(E) V``.

    Materialises (B, H, N, N) scores and ``E``, and (B, N, N) ``C``. Values of ``C`` and ``E`` below
    the smallest normal float are flushed to 0, explicitly unless the CPU already does it
    (:func:`flush_to_zero_is_on`). See the module docstring for arguments and returns.
    """
    d_k = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (B, H, N, N)
    scores = scores + _padding_bias(key_mask, scores.dtype)
    attn = torch.softmax(scores, dim=-1)
    if prior is not None:
        flush = _flush if _needs_explicit_flush(query) else (lambda x: x)
        constituent = flush(torch.exp(prior.log_prior()))  # (B, N, N)
        # (B, H, N, N), no renormalisation; expand_as: the same product, but torch 2.13's CPU kernel
        # is ~4x slower on a (B, H, N, N) × (B, 1, N, N) product than on the expanded operand
        attn = flush(attn * constituent[:, None].expand_as(attn))
    used = F.dropout(attn, p=dropout_p) if dropout_p > 0 else attn
    out = used @ value  # (B, H, N, d_k)
    return out, (attn if output_attentions else None)


def _flash_with_lse(query, key, value, mask):
    """CPU flash attention returning ``(out, row LSE of the masked scores)``, no autograd (inference)."""
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, attn_mask=mask)
    return out, lse  # (B, H, N, d_k), (B, H, N)


class ConstituentAttentionFunction(torch.autograd.Function):
    """``out = dropout(C ⊙ softmax(Q Kᵀ/√d_k + padding)) V`` with a hand-written backward (training).

    The same function as :func:`eager_attention` (eq. 2 of the paper with the prior of eqs. 3-4),
    computed with fewer passes over (B, H, N, N) tensors and fewer saved tensors than autograd's
    chain of primitives. With ``A = softmax(S)``, ``E = C ⊙ A``, ``E'`` = E after dropout (mask
    ``m``, scale ``1/(1-p)``), and ``dE'`` the gradient reaching ``E'``:

        G = E ⊙ dE = E' ⊙ dE'          (m² = m: the dropout mask is not needed again)
        dS = A ⊙ (dA - rowsum(A ⊙ dA)) = G - A ⊙ rowsum(G)       (dA = C ⊙ dE, so A ⊙ dA = G)
        d(log C) = Σ_heads C ⊙ A ⊙ dE = Σ_heads G                 (C = exp(log C), shared by heads)

    Saved for backward: ``Q/√d_k, K, V`` (B, H, N, d_k), ``A`` and ``E'`` (B, H, N, N); not the
    scores, ``C`` or the dropout mask. The dropout mask is drawn as :func:`torch.nn.functional.dropout`
    draws it on CPU (``bernoulli_(1 - p)`` of an (B, H, N, N) tensor), so the same seed gives the same
    mask as the eager kernel; its ``1/(1-p)`` is folded into ``C``. Values of ``C`` and ``E`` below the
    smallest normal float become 0 when ``flush`` is True (after the ``1/(1-p)``), as the eager kernel,
    and so do those of ``G`` in the backward.

    Inputs: ``query, key, value`` (B, H, N, d_k); ``log_prior`` (B, 1, N, N) ``log C`` (differentiable);
    ``pad`` (B, 1, 1, N) additive padding mask; ``dropout_p`` float; ``flush`` bool.
    Output: (B, H, N, d_k). Not twice differentiable.
    """

    @staticmethod
    def forward(ctx, query, key, value, log_prior, pad, dropout_p: float, flush: bool):
        scale = 1.0 / math.sqrt(query.shape[-1])
        query = query * scale  # (B, H, N, d_k); scaling Q is cheaper than scaling the N×N scores
        # the heads' views (B, N, H, d_k).transpose(1, 2) are not contiguous: every batched product
        # would copy them again (forward and backward); copy K and V once
        key, value = key.contiguous(), value.contiguous()
        scores = torch.matmul(query, key.transpose(-2, -1))  # (B, H, N, N)
        scores.add_(pad)
        attn = torch.softmax(scores, dim=-1)  # A
        constituent = torch.exp(log_prior)  # (B, 1, N, N), shared by the heads
        if dropout_p > 0:
            constituent.mul_(1.0 / (1.0 - dropout_p))
        tiny = torch.finfo(attn.dtype).tiny
        if flush:
            constituent.masked_fill_(constituent < tiny, 0.0)
        # E (× 1/(1-p)), no renormalisation, written over the dead scores: a fresh (B, H, N, N) buffer
        # for a broadcast product measured ~5× slower on CPU than writing into an existing one
        used = torch.mul(attn, constituent, out=scores)  # (B, H, N, N)
        del scores, constituent
        if flush:
            used.masked_fill_(used < tiny, 0.0)
        if dropout_p > 0:
            used.mul_(torch.empty_like(used).bernoulli_(1.0 - dropout_p))  # E'
        out = torch.matmul(used, value)  # (B, H, N, d_k)
        ctx.save_for_backward(query, key, value, attn, used)
        ctx.scale, ctx.flush = scale, flush
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        query, key, value, attn, used = ctx.saved_tensors
        grad_query = grad_key = grad_value = grad_log_prior = None
        grad_out = grad_out.contiguous()  # (B, H, N, d_k), used twice
        if ctx.needs_input_grad[2]:
            grad_value = torch.matmul(used.transpose(-2, -1), grad_out)  # (B, H, N, d_k)
        g = torch.matmul(grad_out, value.transpose(-2, -1)).mul_(used)  # (B, H, N, N): G = E' ⊙ dE'
        del used
        if ctx.flush:  # no flush-to-zero on this CPU: G's denormals would slow every pass below
            g.masked_fill_(g.abs() < torch.finfo(g.dtype).tiny, 0.0)
        if ctx.needs_input_grad[3]:
            grad_log_prior = g.sum(1, keepdim=True)  # (B, 1, N, N)
        g.addcmul_(attn, g.sum(-1, keepdim=True), value=-1.0)  # dS = G - A ⊙ rowsum(G)
        if ctx.needs_input_grad[0]:
            grad_query = torch.matmul(g, key).mul_(ctx.scale)
        if ctx.needs_input_grad[1]:
            grad_key = torch.matmul(g.transpose(-2, -1), query)  # query is saved already scaled
        return grad_query, grad_key, grad_value, grad_log_prior, None, None, None


def sdpa_attention(query, key, value, key_mask, prior: ConstituentPrior | None = None,
                   dropout_p: float = 0.0, output_attentions: bool = False):
    """Fused path: ``(C ⊙ softmax(S)) V = softmax(S + log C) V · exp(LSE(S + log C) - LSE(S))``.

    What runs and what materialises, per layer (honest account; see benchmarks/README.md):

    * ``prior=None`` (plain Transformer): ``F.scaled_dot_product_attention`` with a (B, 1, 1, N)
      padding mask; on CPU PyTorch's flash kernel, forward and backward; no N×N tensor per head.
    * constituent prior, no gradient needed (evaluation, parsing, perplexity) on CPU: two calls of
      PyTorch's CPU flash kernel, which returns the row log-sum-exp: ``softmax(S + B) V`` with
      ``LSE(S + B)``, and ``LSE(S)`` from the same kernel without the bias (its output is discarded).
      Materialised: the bias ``B = log C + padding`` (B, 1, N, N), one per sentence shared by the
      heads; not the per-head scores, softmax or product.
    * constituent prior with gradients (training) on CPU: PyTorch ships no fused kernel that
      differentiates an attention bias on CPU (the flash kernel refuses a mask that requires grad and
      SDPA then falls back to its math backend; FlexAttention has no CPU backward in torch 2.13), so
      this runs :class:`ConstituentAttentionFunction`: the eager product with a hand-written
      backward (fewer passes and saved tensors). The per-head (B, H, N, N) attention is materialised.
    * not on CPU: :func:`eager_attention`.

    ``output_attentions=True`` also falls back to :func:`eager_attention`, as Hugging Face models do.
    """
    if output_attentions:
        return eager_attention(query, key, value, key_mask, prior, dropout_p, output_attentions=True)
    pad = _padding_bias(key_mask, query.dtype)  # (B, 1, 1, N)
    if prior is None:
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=pad, dropout_p=dropout_p)
        return out, None
    needs_grad = torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad
                                              or prior.cum_log_links.requires_grad)
    if query.device.type != "cpu":
        return eager_attention(query, key, value, key_mask, prior, dropout_p)
    if needs_grad or dropout_p > 0:
        log_prior = prior.log_prior()[:, None]  # (B, 1, N, N)
        out = ConstituentAttentionFunction.apply(query, key, value, log_prior, pad, dropout_p,
                                                 not flush_to_zero_is_on())
        return out, None
    bias = prior.log_prior()[:, None] + pad  # (B, 1, N, N): log C + padding
    out, lse_biased = _flash_with_lse(query, key, value, bias.to(query.dtype))
    _, lse_plain = _flash_with_lse(query, key, value, pad.expand(-1, -1, query.shape[2], -1).to(query.dtype))
    rescale = torch.exp(lse_biased - lse_plain)  # (B, H, N) = sum_j softmax(S)_ij C_ij <= 1
    return _flush(out * rescale[..., None]), None


#: config string (``config._attn_implementation``) -> kernel
ATTENTION_FUNCTIONS = {
    "eager": eager_attention,
    "sdpa": sdpa_attention,
}
