"""StructFormer: dependency and constituency structure induced by masked language modelling.

Shen, Tay, Zheng, Bahri, Metzler & Courville, "StructFormer: Joint Unsupervised Induction of
Dependency and Constituency Structure from Masked Language Modeling", ACL 2021 (arXiv 2012.00857);
public code: google-research/google-research, folder ``structformer/`` (read, not copied).

The file reads bottom-up, as ``modeling_bert.py``::

    StructFormerConfig
    parser network          StructFormerParser: Conv1d + LayerNorm + tanh stack on word embeddings
                            (no positions) -> syntactic distance per gap, syntactic height per word
    distance/height         calibrate_distances (appendix A.2)
    dependency distribution constituent_membership -> boundary_probabilities -> (span_probability,
                            parent_probability: O(N^3) reference forms) -> dependency_distribution;
                            calibrated_dependency_distribution: the stage as the model calls it
                            (``dependency_kernel="triton"``: kernels/triton_dependency.py, the same)
    attention               relation_weights, dependency_structure, dependency_constrained_attention
                            (``dependency_kernel="triton"``: kernels/triton_dependency_attention.py)
    layer / encoder         StructFormerLayer (pre-LayerNorm), StructFormerEncoder (+ final LayerNorm)
    model                   StructFormerModel: embeddings + parser + encoder
    MLM head                StructFormerForMaskedLM

Conventions (ARCHITECTURE.md)
-----------------------------
* ``distances`` are indexed by **gap**: ``distances[:, k]`` is the syntactic distance between words
  ``k`` and ``k + 1``, shape ``[B, N-1]``; larger = split earlier (top-down split at the largest
  distance, :func:`syntaxformer.decoding.spans.split_by_distance`). The public code returns ``[B, N]``
  with entry ``i`` = the gap after word ``i`` and a ``1e9`` sentinel after the last word; ours is that
  tensor without its last column (same sign, same scale, already calibrated).
* ``heights`` ``[B, N]``: syntactic height of each word (raw, not calibrated; the calibration moves
  the distances only, as in the public code).
* ``dependency_probs`` ``[B, N, N]``: ``p_D(j | i)`` with row ``i`` = the dependent and column ``j`` =
  the candidate parent; ``p_D(i | i) = 0``; the root mass of word ``i`` is ``1 - sum_j p_D(j | i)``,
  also returned directly (without cancellation) as ``root_probs`` ``[B, N]``.
* Padding (``attention_mask == 0``, right-padded) never becomes a parent, never enters a real word's
  constituent and never changes a real word's output: padded rows/columns of ``p_D`` are 0, padded
  gaps have distance ``+inf`` and padded words height ``-inf`` in the outputs.

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
Transformer layers. Attention weights below 1e-30 are set to 0 so that no denormal float32 numbers
reach the attention products (DESIGN.md §5).

Where this file deliberately differs from the public code
---------------------------------------------------------
* Calibration margin: per sentence, not the maximum over the whole batch (the public code subtracts
  one batch-wide scalar, so a sentence's parse depended on the other sentences of its batch).
* The O(N^2)-memory factorisation above instead of the O(N^3)/O(N^4) tensors.
* ``attention_mask`` is the padding mask (HF convention); when it is omitted, padding is found from
  ``pad_token_id`` as the public code does.
* Only the relations ``head`` (attend to the parent, ``p_D(j|i)``), ``child`` (attend to dependents,
  ``p_D(i|j)``) and ``sibling`` are offered; the parser network is shared-embedding, position-free,
  and the Transformer layers have no position embeddings (the public defaults: ``pos_emb`` and
  ``relative_bias`` off), so word order reaches the encoder only through ``p_D``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.activations import ACT2FN
from transformers.utils import ModelOutput

from ..blocks.dropout import Dropout
from ..blocks.mlm_head import masked_lm_output
from ..kernels import triton_runs_on
from ..structures import DependencyDistribution, SyntacticDistances
from .encoder import (
    HeadPruningMixin,
    check_attention_sizes,
    layer_head_masks,
    normalise_pruned_heads,
    prune_head_projections,
)

#: Finite stand-in for an infinite distance/height inside the computation (keeps gradients finite).
_BIG = 1e9
#: Height logits are clamped to +-_CLAMP around their per-sentence midpoint (float64: exp(350) ~ 1e152).
_CLAMP = 350.0
#: Attention weights and p_D entries below this become 0 (no denormal float32, DESIGN.md §5).
_TINY = 1e-30

RELATIONS = ("head", "child", "sibling")
WEIGHT_ACTIVATIONS = ("softmax", "sigmoid")
#: the ``dependency_kernel`` choices: the stage as written, with autograd, or one Triton kernel each way
DEPENDENCY_KERNELS = ("autograd", "triton")


#: config fields of the named sizes (``make_config("structformer", preset, ...)``)
PRESETS = {
    # the public configuration (Shen et al. 2021, §5; DESIGN.md §2); train with mask rate 0.3,
    # Adam lr 3e-4 (see StructFormerConfig)
    "paper": dict(
        num_hidden_layers=8,
        hidden_size=512,
        num_attention_heads=8,
        intermediate_size=2048,
        n_parser_layers=3,
        conv_size=9,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.0,
    ),
    # CPU, a <= 20-minute run on 2 cores: ~640 tokens/s per training step on one busy core
    # (batch 64 x 25 words, vocabulary 10k, logits at masked positions only)
    "small": dict(
        num_hidden_layers=4,
        hidden_size=256,
        num_attention_heads=4,
        intermediate_size=1024,
        n_parser_layers=2,
        conv_size=9,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.0,
    ),
    # the induce recipes' size (docs/recipes.md): ~7,300 tokens/s on 2 CPU cores
    "mini": dict(
        num_hidden_layers=4,
        hidden_size=128,
        num_attention_heads=4,
        intermediate_size=512,
        n_parser_layers=2,
        conv_size=9,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.0,
    ),
    # tests: seconds
    "tiny": dict(
        num_hidden_layers=2,
        hidden_size=32,
        num_attention_heads=2,
        intermediate_size=64,
        n_parser_layers=2,
        conv_size=3,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.0,
    ),
}

#: the registry name (models/__init__.py)
NAME = "structformer"


# ----------------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------------


class StructFormerConfig(PretrainedConfig):
    """Configuration of :class:`StructFormerForMaskedLM` (BERT-style names).

    Defaults are the public configuration of the paper (the ``paper`` preset): 8 layers, hidden 512,
    8 heads, FFN 2048, 3 parser conv layers with window 9, dropout 0.1, relations ("head", "child"),
    softmax mixing weights. Training recipe of the public code (the trainer's flags, recorded here):
    **mask rate 0.3** with every masked token replaced by ``<mask>`` (no 80/10/10), Adam lr 3e-4,
    eps 1e-9, weight decay 1.2e-6, gradient clipping 0.25, ~4096 tokens per batch, no attention
    dropout (``dropatt`` 0).

    Args:
        vocab_size: number of tokens.
        hidden_size: model width d (embeddings, parser network, Transformer layers).
        num_hidden_layers: Transformer layers L.
        num_attention_heads: heads H per layer (d must be divisible by H).
        intermediate_size: feed-forward width.
        hidden_act: feed-forward activation (an ``ACT2FN`` name; the public code uses leaky ReLU).
        hidden_dropout_prob: dropout on residual branches, inside the feed-forward and before the
            output layer.
        attention_probs_dropout_prob: dropout on the attention weights.
        n_parser_layers: Conv1d + LayerNorm + tanh layers of the parser network (§4.2).
        conv_size: convolution window of the parser layers.
        relations: dependency relations each head mixes (§4.4): ``"head"`` (attend to the parent,
            weight ``p_D(j|i)``), ``"child"`` (attend to the dependents, ``p_D(i|j)``), ``"sibling"``.
        weight_act: ``"softmax"`` (mixing weights of a head sum to 1, the paper) or ``"sigmoid"``.
        layer_norm_eps: epsilon of every LayerNorm.
        pad_token_id: padding token (used to find padding when no ``attention_mask`` is given).
        pruned_heads: {layer: [heads]} removed by ``prune_heads`` (restored by ``from_pretrained``).
        tie_word_embeddings: tie the MLM output layer to the word embeddings (the public code does).
            Stated here because ``transformers`` 5 no longer gives every config this field (4.x
            defaulted it to True), and v5 ties only when the config asks.
        position_embeddings: learned position embeddings added to the word embeddings before the
            Transformer layers (not the parser network): how many positions (0: none, the public
            default; the public README's ``--pos_emb``: 500, initialised U(-0.1, 0.1)).
        dependency_kernel: how the calibrated distances, ``p_D`` and the attention they constrain are
            computed: ``"autograd"`` (:func:`calibrate_distances`, :func:`dependency_distribution`,
            :func:`dependency_structure` and :func:`dependency_constrained_attention` as written) or
            ``"triton"`` (one Triton kernel each way for the parse stage,
            :mod:`syntaxformer.kernels.triton_dependency`, and one each way for each layer's attention,
            :mod:`syntaxformer.kernels.triton_dependency_attention`, where
            :func:`~syntaxformer.kernels.triton_runs_on` the device and the batch fits: float32, 2 to 64
            tokens, and for the attention no attention dropout, head mask or returned weights, the
            relations ``head`` and ``child``; elsewhere the written path). The same function either way.

    Raises:
        ValueError: a width not divisible by the heads, unknown relations or mixing activation, a
            negative ``position_embeddings``, an unknown ``dependency_kernel``.
    """

    model_type = "structformer"

    def __init__(
        self,
        vocab_size: int = 10000,
        hidden_size: int = 512,
        num_hidden_layers: int = 8,
        num_attention_heads: int = 8,
        intermediate_size: int = 2048,
        hidden_act: str = "leaky_relu",
        hidden_dropout_prob: float = 0.1,
        attention_probs_dropout_prob: float = 0.0,
        n_parser_layers: int = 3,
        conv_size: int = 9,
        relations=("head", "child"),
        weight_act: str = "softmax",
        layer_norm_eps: float = 1e-5,
        pad_token_id: int = 0,
        pruned_heads=None,
        tie_word_embeddings: bool = True,
        position_embeddings: int = 0,
        dependency_kernel: str = "autograd",
        **kwargs,
    ):
        super().__init__(pad_token_id=pad_token_id, tie_word_embeddings=tie_word_embeddings, **kwargs)
        if position_embeddings < 0:
            raise ValueError(f"position_embeddings must not be negative, got {position_embeddings}")
        check_attention_sizes(
            hidden_size,
            num_attention_heads,
            vocab_size=vocab_size,
            num_hidden_layers=num_hidden_layers,
            intermediate_size=intermediate_size,
            n_parser_layers=n_parser_layers,
            conv_size=conv_size,
        )
        unknown = [r for r in relations if r not in RELATIONS]
        if unknown or not relations:
            raise ValueError(f"relations must be a non-empty subset of {RELATIONS}, got {relations}")
        if weight_act not in WEIGHT_ACTIVATIONS:
            raise ValueError(f"weight_act must be one of {WEIGHT_ACTIVATIONS}, got {weight_act!r}")
        if dependency_kernel not in DEPENDENCY_KERNELS:
            raise ValueError(f"dependency_kernel must be one of {DEPENDENCY_KERNELS}, got {dependency_kernel!r}")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.n_parser_layers = n_parser_layers
        self.conv_size = conv_size
        self.relations = list(relations)
        self.weight_act = weight_act
        self.layer_norm_eps = layer_norm_eps
        self.pruned_heads = normalise_pruned_heads(pruned_heads)
        self.position_embeddings = position_embeddings
        self.dependency_kernel = dependency_kernel


# ----------------------------------------------------------------------------------------------
# Parser network (§4.2)
# ----------------------------------------------------------------------------------------------


class StructFormerParser(nn.Module):
    """Parser network: syntactic distances and heights from word embeddings (paper §4.2, Fig. 3).

    ``n_parser_layers`` blocks of Conv1d(window ``conv_size``, "same" padding) -> LayerNorm (no affine)
    -> tanh over the word embeddings, without position embeddings; padding is zeroed before every
    convolution, so a padded sentence sees exactly the zero padding of an unpadded one. Then

    * distance of gap k: ``tau_k = w . tanh(LN(Conv1d_2(s_k, s_{k+1})))`` (a window-2 convolution over
      the two words of the gap: N-1 values);
    * height of word i: ``delta_i = w . tanh(LN(W s_i))``.

    Also holds the two learned temperatures of §4.3 as log-parameters (initialised to 0, scale 1):
    ``distance_scale`` (constituent membership) and ``height_scale`` (parent selection).
    """

    def __init__(self, config: StructFormerConfig):
        super().__init__()
        d = config.hidden_size
        self.convs = nn.ModuleList(
            nn.Conv1d(d, d, config.conv_size, padding="same") for _ in range(config.n_parser_layers)
        )
        self.norms = nn.ModuleList(
            nn.LayerNorm(d, elementwise_affine=False, eps=config.layer_norm_eps) for _ in range(config.n_parser_layers)
        )
        self.distance_conv = nn.Conv1d(d, d, 2)
        self.distance_norm = nn.LayerNorm(d, elementwise_affine=False, eps=config.layer_norm_eps)
        self.distance_out = nn.Linear(d, 1)
        self.height_proj = nn.Linear(d, d)
        self.height_norm = nn.LayerNorm(d, elementwise_affine=False, eps=config.layer_norm_eps)
        self.height_out = nn.Linear(d, 1)
        self.log_distance_scale = nn.Parameter(torch.zeros(()))
        self.log_height_scale = nn.Parameter(torch.zeros(()))

    @property
    def distance_scale(self) -> torch.Tensor:
        """Temperature ``s_d > 0`` of the membership sigmoid (§4.3)."""
        return self.log_distance_scale.exp()

    @property
    def height_scale(self) -> torch.Tensor:
        """Temperature ``s_h > 0`` of the parent-selection softmax (§4.3)."""
        return self.log_height_scale.exp()

    def forward(self, embeddings: torch.Tensor, mask: torch.Tensor):
        """Args: embeddings ``[B, N, d]``; mask ``[B, N]`` bool (True = real word).

        Returns: ``(distances [B, N-1], heights [B, N])``, raw (not calibrated); values at padding
        are meaningless here and are masked by the callers.
        """
        h = embeddings
        for conv, norm in zip(self.convs, self.norms):
            h = h.masked_fill(~mask[:, :, None], 0.0)
            h = torch.tanh(norm(conv(h.transpose(1, 2)).transpose(1, 2)))  # (B, N, d)
        n = h.shape[1]
        # window-2 convolution: output k sees words k and k+1 (a zero column keeps N = 1 legal)
        gaps = self.distance_conv(F.pad(h.transpose(1, 2), (0, 1))).transpose(1, 2)[:, : n - 1]
        distances = self.distance_out(torch.tanh(self.distance_norm(gaps))).squeeze(-1)
        heights = self.height_out(torch.tanh(self.height_norm(self.height_proj(h)))).squeeze(-1)
        return distances, heights


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
    kernel: str = "autograd",
):
    """The parse stage after the parser network: :func:`calibrate_distances`, then
    :func:`dependency_distribution` of the calibrated distances.

    Args: as :func:`dependency_distribution` (``distances`` raw); kernel: one of :data:`DEPENDENCY_KERNELS`
    (``"triton"``: :mod:`syntaxformer.kernels.triton_dependency` where it runs and the batch fits).

    Returns: ``(calibrated distances [B, N-1], p_dep [B, N, N], p_root [B, N])``.
    """
    if kernel == "triton" and triton_runs_on(heights.device):
        # Triton, an optional dependency: imported only where it runs (triton_runs_on)
        from ..kernels import triton_dependency

        if triton_dependency.fits(distances, heights):
            return triton_dependency.triton_dependency_distribution(
                distances, heights, mask, distance_scale, height_scale
            )
    distances = calibrate_distances(distances, heights, mask)
    return (distances, *dependency_distribution(distances, heights, mask, distance_scale, height_scale))


# ----------------------------------------------------------------------------------------------
# Dependency-constrained multi-head self-attention (§4.4)
# ----------------------------------------------------------------------------------------------


def relation_weights(logits: torch.Tensor, weight_act: str) -> torch.Tensor:
    """Per-head mixing weights of the relations (§4.4): softmax over relations (paper) or sigmoid.

    Args: logits ``[H, R]``. Returns ``[H, R]`` weights in (0, 1).
    """
    if weight_act == "softmax":
        return torch.softmax(logits, dim=-1)
    return torch.sigmoid(logits)


def dependency_structure(p_dep: torch.Tensor, weights: torch.Tensor, relations) -> torch.Tensor:
    """Mixed dependency mask of one layer (§4.4): ``sum_r w[h, r] * rel_r[i, j]``.

    ``rel_head[i, j] = p_D(j | i)`` (i attends to its parent), ``rel_child[i, j] = p_D(i | j)`` (i
    attends to its dependents), ``rel_sibling = p_D p_D^T`` with zero diagonal (public-code option).

    Args: p_dep ``[B, N, N]``; weights ``[H, R]``; relations: R names. Returns ``[B, H, N, N]``.
    """
    rel = {
        "head": lambda: p_dep,
        "child": lambda: p_dep.transpose(1, 2),
        "sibling": lambda: (p_dep @ p_dep.transpose(1, 2)).diagonal_scatter(
            p_dep.new_zeros(p_dep.shape[:2]), dim1=1, dim2=2
        ),
    }
    stacked = torch.stack([rel[name]() for name in relations], dim=1)  # (B, R, N, N)
    return torch.einsum("hr,brij->bhij", weights.to(stacked.dtype), stacked)


def dependency_constrained_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    structure: torch.Tensor,
    key_mask: torch.Tensor,
    dropout: nn.Module,
):
    """``a_ij = sigmoid(q_i . k_j / sqrt(d_h)) * structure_ij``; output ``sum_j a_ij v_j`` (§4.4).

    A sigmoid instead of a softmax, and no renormalisation: the dependency structure decides how much
    each word receives. Padding keys get weight 0; weights below 1e-30 are set to 0 (no denormals).

    Args: q, k, v ``[B, H, N, d_h]``; structure ``[B, H, N, N]``; key_mask ``[B, N]`` bool.
    Returns: ``(output [B, H, N, d_h], weights [B, H, N, N])`` (weights before dropout).
    """
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (B, H, N, N)
    weights = torch.sigmoid(scores) * structure
    weights = weights.masked_fill(~key_mask[:, None, None, :] | (weights < _TINY), 0.0)
    return dropout(weights) @ v, weights


class StructFormerAttention(nn.Module):
    """Multi-head dependency-constrained self-attention with per-head relation weights (§4.4).

    Heads: ``head_mask`` multiplies each head's output; :meth:`prune_heads` removes heads (their
    rows of Q/K/V, columns of the output projection and relation logits)."""

    def __init__(self, config: StructFormerConfig):
        super().__init__()
        d = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = d // config.num_attention_heads
        self.head_ids = list(range(self.num_heads))  # original numbers of the heads present
        self.pruned_heads: set[int] = set()
        self.relations = list(config.relations)
        self.weight_act = config.weight_act
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.output = nn.Linear(d, d)
        self.relation_logits = nn.Parameter(torch.zeros(self.num_heads, len(self.relations)))
        self.dropout = Dropout(config.attention_probs_dropout_prob)
        self.dependency_kernel = config.dependency_kernel

    def prune_heads(self, heads) -> None:
        """Remove ``heads`` (original 0-based numbers) for good, relation logits included."""
        kept = prune_head_projections(self, heads, self.head_dim)
        if len(kept) != self.relation_logits.shape[0]:
            self.relation_logits = nn.Parameter(self.relation_logits.data[kept].clone())

    def forward(
        self,
        x: torch.Tensor,
        p_dep: torch.Tensor,
        mask: torch.Tensor,
        head_mask: torch.Tensor | None = None,
        need_weights: bool = True,
    ):
        """x ``[B, N, d]``, p_dep ``[B, N, N]`` (in x's dtype), mask ``[B, N]`` bool, head_mask
        ``[H_original]`` (1 keeps, 0 drops) or None; need_weights: return the attention weights.

        Returns ``(output [B, N, d], weights [B, H, N, N])``; the weights are None where they were not
        needed and the Triton kernels computed the layer (``dependency_kernel="triton"``).
        """
        b, n, d = x.shape

        def heads(t):
            return t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))  # (B, H, N, d_h)
        weights = relation_weights(self.relation_logits, self.weight_act)  # (H, R)
        if not need_weights and head_mask is None and self._triton_takes(q):
            # Triton, an optional dependency: imported only where it runs (triton_runs_on)
            from ..kernels.triton_dependency_attention import triton_dependency_attention

            out = triton_dependency_attention(q, k, v, p_dep, weights, mask, self.relations)  # (B, H, N, d_h)
            return self.output(out.transpose(1, 2).reshape(b, n, self.num_heads * self.head_dim)), None
        structure = dependency_structure(p_dep, weights, self.relations)  # (B, H, N, N)
        out, attn = dependency_constrained_attention(q, k, v, structure, mask, self.dropout)
        if head_mask is not None:
            keep = head_mask[self.head_ids].to(out.dtype)[None, :, None, None]  # (1, H, 1, 1)
            out, attn = out * keep, attn * keep
        out = out.transpose(1, 2).reshape(b, n, self.num_heads * self.head_dim)  # (B, N, H d_h)
        return self.output(out), attn

    def _triton_takes(self, q: torch.Tensor) -> bool:
        """Whether the Triton kernels compute this layer's attention (queries ``q`` (B, H, N, d_h)): the
        setting asks for them, they run on the device, no attention dropout is drawn, and they
        :func:`~syntaxformer.kernels.triton_dependency_attention.fits` the layer."""
        if self.dependency_kernel != "triton" or not triton_runs_on(q.device) or (self.training and self.dropout.p > 0):
            return False
        # Triton, an optional dependency: imported only where it runs (triton_runs_on)
        from ..kernels import triton_dependency_attention

        return triton_dependency_attention.fits(q, self.relations)


# ----------------------------------------------------------------------------------------------
# Layer, encoder
# ----------------------------------------------------------------------------------------------


class StructFormerLayer(nn.Module):
    """Pre-LayerNorm Transformer layer (public code): ``x + attn(LN(x))``, then ``x + FFN(x)`` with
    ``FFN = Linear(act(Linear(LN(x))))`` and dropout on both residual branches and inside the FFN."""

    def __init__(self, config: StructFormerConfig):
        super().__init__()
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = StructFormerAttention(config)
        self.ffn_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = ACT2FN[config.hidden_act]
        self.ffn_out = nn.Linear(config.intermediate_size, config.hidden_size)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, x, p_dep, mask, head_mask=None, need_weights=True):
        attn_out, attn = self.attention(self.attention_norm(x), p_dep, mask, head_mask, need_weights)
        x = x + self.dropout(attn_out)
        ffn = self.ffn_out(self.dropout(self.act(self.ffn_in(self.ffn_norm(x)))))
        return x + self.dropout(ffn), attn


class StructFormerEncoder(nn.Module):
    """``num_hidden_layers`` :class:`StructFormerLayer` sharing one ``p_D``, then a final LayerNorm."""

    def __init__(self, config: StructFormerConfig):
        super().__init__()
        self.layers = nn.ModuleList(StructFormerLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.num_heads = config.num_attention_heads
        for layer, heads in config.pruned_heads.items():
            self.layers[int(layer)].attention.prune_heads(heads)

    def forward(self, x, p_dep, mask, output_attentions=False, head_mask=None, output_hidden_states=False):
        """Returns ``(normed output (B, N, d), attentions or None, hidden states or None)``; the hidden
        states are the input then each layer's (B, N, d) output (before the final LayerNorm)."""
        attentions, hidden_states = [], [x]
        for layer, layer_mask in zip(self.layers, layer_head_masks(head_mask, len(self.layers), self.num_heads)):
            x, attn = layer(x, p_dep, mask, layer_mask, output_attentions)
            hidden_states.append(x)
            if output_attentions:
                attentions.append(attn)
        return (
            self.norm(x),
            (tuple(attentions) if output_attentions else None),
            tuple(hidden_states) if output_hidden_states else None,
        )


# ----------------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------------


@dataclass
class StructFormerOutput(ModelOutput):
    """Output of :class:`StructFormerModel` (see :class:`StructFormerMaskedLMOutput` for fields)."""

    last_hidden_state: torch.FloatTensor | None = None
    distances: torch.FloatTensor | None = None
    heights: torch.FloatTensor | None = None
    dependency_probs: torch.DoubleTensor | None = None
    root_probs: torch.DoubleTensor | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class StructFormerMaskedLMOutput(ModelOutput):
    """Output of :class:`StructFormerForMaskedLM`.

    Attributes:
        loss: mean cross-entropy (nats) over labelled positions, when ``labels`` are given.
        logits: ``[B, N, V]``, or ``[M, V]`` at the M labelled positions (row-major order) when
            ``masked_only``.
        distances: ``[B, N-1]`` calibrated syntactic distance of gap k (words k, k+1); ``+inf`` at
            gaps touching padding.
        heights: ``[B, N]`` syntactic heights; ``-inf`` at padding.
        dependency_probs: ``[B, N, N]`` float64 ``p_D(j | i)`` (row i dependent, column j parent), when
            ``output_dependency``.
        root_probs: ``[B, N]`` float64 root mass ``1 - sum_j p_D(j | i)``, when ``output_dependency``.
        attentions: per layer ``[B, H, N, N]`` attention weights (before dropout), when
            ``output_attentions``.
        hidden_states: the embeddings then each layer's ``[B, N, d]`` output, when
            ``output_hidden_states``.
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    distances: torch.FloatTensor | None = None
    heights: torch.FloatTensor | None = None
    dependency_probs: torch.DoubleTensor | None = None
    root_probs: torch.DoubleTensor | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


class StructFormerPreTrainedModel(HeadPruningMixin, PreTrainedModel):
    """Weight initialisation of the public code: embeddings U(-0.1, 0.1), attention projections
    Xavier-uniform with zero bias, relation logits N(0, 0.1), temperatures 1, output bias 0; every
    other layer keeps PyTorch's default initialisation."""

    config_class = StructFormerConfig
    base_model_prefix = "structformer"

    def attention_modules(self) -> list[StructFormerAttention]:
        """Each layer's attention, bottom-up (what ``prune_heads`` prunes)."""
        return [layer.attention for layer in self.base_model.encoder.layers]

    def _init_weights(self, module):
        # `nn.init` functions only: transformers 5 guards them so that they skip tensors already
        # loaded from a checkpoint (in-place `.data` writes would overwrite loaded weights)
        if isinstance(module, nn.Embedding):
            nn.init.uniform_(module.weight, -0.1, 0.1)
        elif isinstance(module, StructFormerAttention):
            for linear in (module.query, module.key, module.value, module.output):
                nn.init.xavier_uniform_(linear.weight)
                nn.init.zeros_(linear.bias)
            nn.init.normal_(module.relation_logits, 0.0, 0.1)
        elif isinstance(module, StructFormerParser):
            nn.init.zeros_(module.log_distance_scale)
            nn.init.zeros_(module.log_height_scale)
        elif isinstance(module, nn.Linear) and module is getattr(self, "lm_head", None):
            # on the head itself, not on StructFormerForMaskedLM: transformers 5 skips `_init_weights`
            # for custom-code modules with no parameters of their own
            nn.init.zeros_(module.bias)


class StructFormerModel(StructFormerPreTrainedModel):
    """Embeddings -> parser network -> calibrated distances, heights, ``p_D`` -> encoder (Fig. 3).

    The word embeddings are shared by the parser network and the Transformer layers; the parser
    network never sees positions, the Transformer layers see learned position embeddings when
    ``config.position_embeddings`` > 0 (the public ``--pos_emb``).
    """

    def __init__(self, config: StructFormerConfig):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        n_positions = getattr(config, "position_embeddings", 0)
        self.position_embeddings = nn.Embedding(n_positions, config.hidden_size) if n_positions else None
        self.parser = StructFormerParser(config)
        self.encoder = StructFormerEncoder(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings

    def set_input_embeddings(self, value):
        self.embeddings = value

    def _mask(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """``[B, N]`` bool, True = word: ``attention_mask``, or ``input_ids != pad_token_id``."""
        if attention_mask is not None:
            return attention_mask.bool()
        pad = self.config.pad_token_id
        return input_ids != pad if pad is not None else torch.ones_like(input_ids, dtype=torch.bool)

    def _parse_stage(self, input_ids: torch.Tensor, mask: torch.Tensor):
        """The parse network and the dependency distribution (§4.2-4.3), before any Transformer layer:
        ``(embeddings [B, N, d], calibrated distances [B, N-1], heights [B, N], p_dep [B, N, N], p_root
        [B, N])``. It reads no position, so it takes a sentence of any length."""
        x = self.embeddings(input_ids)  # (B, N, d)
        distances, heights = self.parser(x, mask)
        distances, p_dep, p_root = calibrated_dependency_distribution(
            distances,
            heights,
            mask,
            self.parser.distance_scale,
            self.parser.height_scale,
            getattr(self.config, "dependency_kernel", "autograd"),
        )
        return x, distances, heights, p_dep, p_root

    def parse_structure(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> StructFormerOutput:
        """The induced structure alone (the parse stage of :meth:`forward`, no Transformer layer): the
        same ``distances``, ``heights``, ``dependency_probs`` and ``root_probs`` as :meth:`forward`, for
        a sentence of any length (the learned positions are the Transformer layers' input only), at a
        fraction of the cost. ``last_hidden_state`` is None."""
        mask = self._mask(input_ids, attention_mask)
        _, distances, heights, p_dep, p_root = self._parse_stage(input_ids, mask)
        return StructFormerOutput(
            distances=distances.masked_fill(~_gap_mask(mask), torch.inf),
            heights=heights.masked_fill(~mask, -torch.inf),
            dependency_probs=p_dep,
            root_probs=p_root,
        )

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        return_dict: bool = True,
        head_mask: torch.Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> StructFormerOutput:
        """Args: input_ids ``[B, N]``; attention_mask ``[B, N]`` (1 = word, 0 = padding, right
        padding), default ``input_ids != pad_token_id``; head_mask ``[H]`` or ``[L, H]`` (1 keeps a
        head, 0 drops it; original head numbers); output_hidden_states: also return the embeddings
        and each layer's ``[B, N, d]`` output. Returns :class:`StructFormerOutput`."""
        mask = self._mask(input_ids, attention_mask)
        x, distances, heights, p_dep, p_root = self._parse_stage(input_ids, mask)
        p_attn = p_dep.masked_fill(p_dep < _TINY, 0.0).to(x.dtype)
        if self.position_embeddings is not None:  # the Transformer layers' input only
            if x.shape[1] > self.position_embeddings.num_embeddings:
                raise ValueError(f"{x.shape[1]} tokens, more than {self.position_embeddings.num_embeddings} positions")
            x = x + self.position_embeddings.weight[: x.shape[1]]  # (B, N, d)
        hidden, attentions, hidden_states = self.encoder(
            x, p_attn, mask, output_attentions, head_mask, output_hidden_states
        )
        out = StructFormerOutput(
            last_hidden_state=hidden,
            distances=distances.masked_fill(~_gap_mask(mask), torch.inf),
            heights=heights.masked_fill(~mask, -torch.inf),
            dependency_probs=p_dep,
            root_probs=p_root,
            attentions=attentions,
            hidden_states=hidden_states,
        )
        return out if return_dict else out.to_tuple()


class StructFormerForMaskedLM(StructFormerPreTrainedModel):
    """StructFormer with its masked-LM head: dropout -> Linear tied to the word embeddings (+ bias)."""

    # {tied: source}: transformers 5 needs the mapping; 4.x iterates it and so sees the key
    _tied_weights_keys = {"lm_head.weight": "structformer.embeddings.weight"}

    def __init__(self, config: StructFormerConfig):
        super().__init__(config)
        self.structformer = StructFormerModel(config)
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def get_input_embeddings(self):
        return self.structformer.embeddings

    def set_input_embeddings(self, value):
        self.structformer.embeddings = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        output_attentions: bool = False,
        output_dependency: bool = False,
        masked_only: bool = False,
        return_dict: bool = True,
        head_mask: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        masked_positions: torch.Tensor | None = None,
    ) -> StructFormerMaskedLMOutput:
        """Masked-LM forward pass.

        Args:
            input_ids: ``[B, N]`` token ids (masked tokens already replaced by the mask id).
            attention_mask: ``[B, N]``, 1 = word, 0 = padding (right padding); default
                ``input_ids != pad_token_id``.
            labels: ``[B, N]`` target ids, ``-100`` = not scored.
            output_attentions: also return each layer's attention weights.
            output_dependency: also return ``dependency_probs`` and ``root_probs``.
            masked_only: compute logits only at labelled positions (``[M, V]``); needs ``labels``.
            return_dict: ``False`` returns the output's non-None fields as a tuple.
            head_mask: ``[H]`` or ``[L, H]``: 1 keeps a head, 0 drops it (multiplies the head's
                output; original head numbers after pruning); None keeps all.
            output_hidden_states: also return the embeddings and each layer's ``[B, N, d]`` output.
            masked_positions: with ``masked_only``, ``[M]`` long flat indices into ``B·N`` of the
                labelled positions, row-major (:func:`~syntaxformer.blocks.mlm_head.labelled_positions`;
                the training batch carries them); None: computed from ``labels``.

        Raises:
            ValueError: ``masked_only`` without ``labels``.
        """
        if masked_only and labels is None:
            raise ValueError("masked_only=True needs labels (it keeps the labelled positions)")
        base = self.structformer(
            input_ids,
            attention_mask,
            output_attentions=output_attentions,
            head_mask=head_mask,
            output_hidden_states=output_hidden_states,
        )
        hidden = self.dropout(base.last_hidden_state)  # (B, N, d)
        # the full path with no labelled position gives the cross-entropy's NaN (zero_when_empty=False)
        logits, loss = masked_lm_output(
            hidden, self.lm_head, labels, masked_only, masked_positions, zero_when_empty=False
        )
        out = StructFormerMaskedLMOutput(
            loss=loss,
            logits=logits,
            distances=base.distances,
            heights=base.heights,
            dependency_probs=base.dependency_probs if output_dependency else None,
            root_probs=base.root_probs if output_dependency else None,
            attentions=base.attentions,
            hidden_states=base.hidden_states,
        )
        return out if return_dict else out.to_tuple()

    def parser_distances(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The parser network's raw syntactic distances (§4.2), differentiable: what orders the induced
        constituency tree (the calibration of appendix A.2 shifts a sentence's distances by one constant,
        so the tree of :meth:`induce` is their top-down split). A distilled student learns these
        (:mod:`syntaxformer.tasks.distill`).

        Args: input_ids ``[B, N]``; attention_mask ``[B, N]`` (1 = word, right padding).
        Returns: ``[B, N-1]`` distances; values at gaps touching padding are meaningless.
        """
        embeddings = self.structformer.embeddings(input_ids)  # (B, N, d)
        return self.structformer.parser(embeddings, attention_mask.bool())[0]  # (B, N-1)

    def induce(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[list]:
        """The structure interface (:mod:`syntaxformer.structures`): per sentence, its syntactic
        distances (gaps ``[t-1]``, heights ``[t]``) and dependency distribution (``[t, t+1]``, column
        0 = root), float64 numpy, over its t tokens. The parse stage alone
        (:meth:`StructFormerModel.parse_structure`): a sentence longer than the learned positions parses.

        Args: input_ids ``[B, N]`` unmasked; attention_mask ``[B, N]`` (1 = word, right padding).
        """
        out = self.structformer.parse_structure(input_ids, attention_mask)  # no Transformer layer: any length
        results = []
        for row, t in enumerate(attention_mask.sum(-1).tolist()):
            heights = out.heights[row, :t].double().cpu().numpy()
            dep = out.dependency_probs[row, :t, :t].double().cpu().numpy()  # (t, t) p(j | i)
            root = out.root_probs[row, :t].double().cpu().numpy()  # (t,)
            results.append(
                [
                    SyntacticDistances(out.distances[row, : t - 1].double().cpu().numpy(), heights),
                    DependencyDistribution(np.concatenate([root[:, None], dep], axis=1), heights),
                ]
            )
        return results

    induces_structure = True


__all__ = [
    "StructFormerConfig",
    "StructFormerParser",
    "StructFormerModel",
    "StructFormerForMaskedLM",
    "StructFormerOutput",
    "StructFormerMaskedLMOutput",
    "DEPENDENCY_KERNELS",
    "calibrate_distances",
    "calibrated_dependency_distribution",
    "constituent_membership",
    "boundary_probabilities",
    "span_probability",
    "parent_probability",
    "parent_normalizers",
    "dependency_distribution",
    "relation_weights",
    "dependency_structure",
    "dependency_constrained_attention",
    "range_max",
]
