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
    """Set ``torch.set_flush_denormal(True)`` when running on CPU (process-wide; no-op elsewhere).

    Denormal floats (< 1.2e-38 in float32) are produced by the constituent prior's products and make
    CPU arithmetic 10-100× slower (DESIGN.md §5). The flag is process-wide and stays set.
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


def sdpa_attention(query, key, value, key_mask, prior: ConstituentPrior | None = None,
                   dropout_p: float = 0.0, output_attentions: bool = False):
    """Fused path: ``softmax(S + log C) V · exp(LSE(S + log C) - LSE(S))`` with PyTorch SDPA.

    What materialises (per layer):

    * plain Transformer (``prior=None``): nothing beyond what the SDPA backend needs (the padding
      mask is a (B, 1, 1, N) broadcast; on CPU the flash kernel is used for inference and training);
    * constituent prior: the (B, 1, N, N) bias ``log C`` (one per sentence, shared by the heads), and,
      for the rescale, the row log-sum-exps ``LSE(S)`` and ``LSE(S + log C)``, which PyTorch's public
      SDPA does not return: they are computed here from the (B, H, N, N) scores ``S``, so ``S`` *is*
      materialised (but not the softmax nor the product). Gradients flow into ``P`` (the constituent
      module) through the bias and the rescale. Because the bias requires a gradient, PyTorch's CPU
      SDPA uses its math backend during training (the flash kernel cannot differentiate a mask).

    Attention dropout cannot be applied to ``E`` inside the fused kernel with the same mask as eager;
    it is applied to ``softmax(S + B)`` (same expectation). ``output_attentions=True`` falls back to
    :func:`eager_attention`, as Hugging Face models do.
    """
    if output_attentions:
        return eager_attention(query, key, value, key_mask, prior, dropout_p, output_attentions=True)
    pad = _padding_bias(key_mask, query.dtype)  # (B, 1, 1, N)
    if prior is None:
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=pad, dropout_p=dropout_p)
        return out, None
    bias = prior.log_prior()[:, None]  # (B, 1, N, N) log C
    mask = bias + pad  # (B, 1, N, N)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p)
    d_k = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k) + pad  # (B, H, N, N)
    log_rescale = torch.logsumexp(scores + bias, dim=-1) - torch.logsumexp(scores, dim=-1)  # (B, H, N)
    return out * torch.exp(log_rescale)[..., None], None


#: config string (``config._attn_implementation``) -> kernel
ATTENTION_FUNCTIONS = {
    "eager": eager_attention,
    "sdpa": sdpa_attention,
}
