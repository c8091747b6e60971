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
which is 10-100× slower on CPU. The eager kernel flushes values below the smallest normal float to 0
(what flush-to-zero hardware does); :func:`flush_denormals_on_cpu` sets the CPU flag for everything
else (called by the model's forward).
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

    Materialises (B, H, N, N) scores and ``E``, and (B, N, N) ``C``. See the module docstring for
    arguments and returns.
    """
    d_k = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (B, H, N, N)
    scores = scores + _padding_bias(key_mask, scores.dtype)
    attn = torch.softmax(scores, dim=-1)
    if prior is not None:
        constituent = _flush(torch.exp(prior.log_prior()))  # (B, N, N)
        attn = _flush(attn * constituent[:, None])  # (B, H, N, N), no renormalisation
    used = F.dropout(attn, p=dropout_p) if dropout_p > 0 else attn
    out = used @ value  # (B, H, N, d_k)
    return out, (attn if output_attentions else None)


def _flash_with_lse(query, key, value, mask):
    """CPU flash attention returning ``(out, row LSE of the masked scores)``, no autograd (inference)."""
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, attn_mask=mask)
    return out, lse  # (B, H, N, d_k), (B, H, N)


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
    * constituent prior with gradients (training), or not on CPU: PyTorch ships no fused kernel that
      differentiates an attention bias on CPU (the flash kernel refuses a mask that requires grad and
      SDPA then falls back to its math backend; FlexAttention has no CPU backward in torch 2.13), so
      this computes the same product as :func:`eager_attention` (the fastest exact option measured
      on CPU). The per-head (B, H, N, N) attention is then materialised.

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
    if needs_grad or query.device.type != "cpu" or dropout_p > 0:
        return eager_attention(query, key, value, key_mask, prior, dropout_p)
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
