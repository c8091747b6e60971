"""The attention a prior feeds, chosen by a config string (``ATTENTION_FUNCTIONS[name]``).

Every choice computes, per head,

    out = E V,   E = M ⊙ softmax(Q Kᵀ / √d_k + B + padding mask)      (no renormalisation)

with ``M`` a multiplicative prior (``prior``, a :class:`~syntaxformer.priors.base.MultiplicativePrior`
with O(N) state, e.g. the Tree Transformer's constituent prior ``C``, paper eq. 2) or ``M = 1`` when
``prior is None``, and ``B`` an additive score bias (``bias``, (B, 1 or H, N, N), or None). They know no
prior by name: the layer unpacks a :class:`~syntaxformer.priors.base.PriorOutput` into these two arguments.

``"eager"``
    :func:`eager_attention`, the literal reference: materialises the (B, H, N, N) scores, softmax and
    product, and can return the attention ``E`` that the layer uses.
``"sdpa"``
    :func:`sdpa_attention`, the fast path: the fused kernels of :mod:`syntaxformer.kernels.attention`
    (PyTorch's ``scaled_dot_product_attention`` without a multiplicative prior; with one, the blockwise
    kernel, which never builds the whole (B, N, N) prior). Tested against the eager reference.

Signature of both::

    fn(query, key, value, key_mask, prior=None, dropout_p=0.0, output_attentions=False, bias=None)
        -> (out (B, H, N, d_k), attentions (B, H, N, N) or None)

``query, key, value``: (B, H, N, d_k); ``key_mask``: (B, N) bool, True = real token (padding keys are
masked; padding queries produce finite garbage that callers ignore); ``dropout_p``: attention dropout
(applied to ``E``, after the product, as the public code; masks from :mod:`syntaxformer.kernels.dropout`),
0 at evaluation. Denormal values of ``M`` and ``E`` are flushed to 0 (:mod:`syntaxformer.kernels.denormals`,
DESIGN.md §5).
"""

from __future__ import annotations

import math

import torch

from ..kernels import triton_runs_on
from ..kernels.attention import blockwise_prior_attention, padding_bias, sdpa_without_prior
from ..kernels.denormals import exp_flushed, flush_if_needed_
from ..kernels.dropout import drop_mask, keep_scale
from .base import MultiplicativePrior


def eager_attention(
    query,
    key,
    value,
    key_mask,
    prior: MultiplicativePrior | None = None,
    dropout_p: float = 0.0,
    output_attentions: bool = False,
    bias: torch.Tensor | None = None,
):
    """The literal reference: ``E = M ⊙ softmax(QKᵀ/√d_k + B)``, ``out = dropout(E) V`` (Wang et al.
    2019, eq. 2, with ``M = C``; Vaswani et al. 2017 with ``M = 1``).

    Materialises (B, H, N, N) scores and ``E``, and (B, N, N) ``M``. Values of ``M`` below the
    smallest normal float are 0 (:func:`~syntaxformer.kernels.denormals.exp_flushed`), and so are those
    of ``E``, explicitly unless the CPU already flushes. See the module docstring for arguments and
    returns; no errors of its own.
    """
    d_k = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (B, H, N, N)
    if bias is not None:
        scores = scores + bias  # (B, H, N, N)
    scores = scores + padding_bias(key_mask, scores.dtype)  # (B, H, N, N); padding keys -> dtype's min
    attn = torch.softmax(scores, dim=-1)  # (B, H, N, N)
    if prior is not None:
        constituent = exp_flushed(prior.log_prior())  # (B, N, N) M
        # (B, H, N, N), no renormalisation; expand_as: the same product, but torch 2.13's CPU kernel
        # is ~4x slower on a (B, H, N, N) × (B, 1, N, N) product than on the expanded operand
        attn = flush_if_needed_(attn * constituent[:, None].expand_as(attn), like=query)  # in place on the product
    if dropout_p > 0:  # E' = dropout(E), (B, H, N, N)
        used = attn.masked_fill(drop_mask(attn.shape, dropout_p, attn.device), 0.0) * keep_scale(dropout_p, attn.device)
    else:
        used = attn
    out = used @ value  # (B, H, N, d_k)
    return out, (attn if output_attentions else None)


def sdpa_attention(
    query,
    key,
    value,
    key_mask,
    prior: MultiplicativePrior | None = None,
    dropout_p: float = 0.0,
    output_attentions: bool = False,
    bias: torch.Tensor | None = None,
):
    """The fast path: the same function as :func:`eager_attention` by the fused kernels.

    * ``prior=None`` (plain Transformer, or an additive ``bias`` only):
      :func:`~syntaxformer.kernels.attention.sdpa_without_prior` (``F.scaled_dot_product_attention``).
    * a multiplicative prior: its own ``attention`` kernel when it has one (the constituent prior with
      ``kernel="triton"``: :func:`triton_laplace_attention`), else :func:`blockwise_attention`.
    * ``output_attentions=True``, and a multiplicative prior together with a bias: :func:`eager_attention`,
      as Hugging Face models do for attentions.

    Arguments and returns as the module docstring (attentions always None here). Tested against the
    eager reference in ``tests/models/test_blockwise_attention.py`` and ``tests/models/test_tree_transformer.py``.
    """
    if output_attentions or (prior is not None and bias is not None):
        return eager_attention(query, key, value, key_mask, prior, dropout_p, output_attentions, bias)
    if prior is None:
        return sdpa_without_prior(query, key, value, key_mask, dropout_p, bias), None
    attention = prior.attention or blockwise_attention  # the prior's own kernel, chosen with the prior
    return attention(query, key, value, key_mask, prior, dropout_p), None


def blockwise_attention(query, key, value, key_mask, prior: MultiplicativePrior, dropout_p: float = 0.0):
    """``sdpa``'s attention with a multiplicative prior: :func:`~syntaxformer.kernels.attention.blockwise_prior_attention`
    on every device (``M``'s rows built from the prior's state block by block; the prior's closed-form
    ``log_rows_vjp`` when it has one, e.g. the constituent prior with ``kernel="fused"``).

    Under ``torch.compile``: :func:`eager_attention`, whose operators the compiler fuses (the blockwise
    kernel's hand-written backward calls autograd inside itself, which PyTorch 2.11's compiler does not
    trace: "Unsupported Tensor.requires_grad_()").

    Args: as the module docstring (``prior`` not None). Returns: out (B, H, N, d_k).
    """
    if torch.compiler.is_compiling():
        return eager_attention(query, key, value, key_mask, prior, dropout_p)[0]
    log_rows_vjp = getattr(prior, "log_rows_vjp", None)
    return blockwise_prior_attention(query, key, value, key_mask, prior.state, prior.log_rows, log_rows_vjp, dropout_p)


def triton_laplace_attention(query, key, value, key_mask, prior: MultiplicativePrior, dropout_p: float = 0.0):
    """A prior with a ``laplace_form`` ``(eps, diagonal)`` (``M_ij = exp(-|P_i - P_j|) + eps``, ``M_ii =
    diagonal``: the constituent prior with ``kernel="triton"``) by the Triton kernel
    :func:`~syntaxformer.kernels.triton_prior.laplace_prior_attention` (its own dropout masks), where
    :func:`~syntaxformer.kernels.triton_runs_on` the device and sentences have at most
    :data:`~syntaxformer.kernels.triton_prior.MAX_TOKENS` tokens; elsewhere :func:`blockwise_attention`.

    Args: as the module docstring (``prior`` not None, with ``laplace_form``). Returns: out (B, H, N, d_k).
    """
    if triton_runs_on(query.device):
        # Triton, an optional dependency: imported only where it runs (triton_runs_on)
        from ..kernels.triton_prior import MAX_TOKENS, laplace_prior_attention

        if query.shape[2] <= MAX_TOKENS:
            return laplace_prior_attention(query, key, value, key_mask, prior.state, *prior.laplace_form, dropout_p)
    return blockwise_attention(query, key, value, key_mask, prior, dropout_p)


#: config string (``config._attn_implementation``) -> attention function
ATTENTION_FUNCTIONS = {
    "eager": eager_attention,
    "sdpa": sdpa_attention,
}

__all__ = [
    "ATTENTION_FUNCTIONS",
    "eager_attention",
    "sdpa_attention",
    "blockwise_attention",
    "triton_laplace_attention",
]
