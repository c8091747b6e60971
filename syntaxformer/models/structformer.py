"""StructFormer: dependency and constituency structure induced by masked language modelling.

Shen, Tay, Zheng, Bahri, Metzler & Courville, "StructFormer: Joint Unsupervised Induction of
Dependency and Constituency Structure from Masked Language Modeling", ACL 2021 (arXiv 2012.00857);
public code: google-research/google-research, folder ``structformer/`` (read, not copied).

The model reads bottom-up, as ``modeling_bert.py``, over three files::

    StructFormerConfig      structformer_config.py (PRESETS, NAME, the config's choices)
    parser network          StructFormerParser: Conv1d + LayerNorm + tanh stack on word embeddings
                            (no positions) -> syntactic distance per gap, syntactic height per word
    distance/height         structformer_parse.py: calibrate_distances (appendix A.2)
    dependency distribution structformer_parse.py: constituent_membership -> boundary_probabilities ->
                            (span_probability, parent_probability: O(N^3) reference forms) ->
                            dependency_distribution; calibrated_dependency_distribution: the stage as
                            the model calls it (PARSE_STAGE_KERNELS: ``kernel="triton"``,
                            kernels/triton_dependency.py, the same function)
    attention               relation_weights, dependency_structure, dependency_constrained_attention;
                            dependency_attention: a layer's heads (ATTENTION_KERNELS: ``kernel="triton"``,
                            kernels/triton_dependency_attention.py)
    layer / encoder         StructFormerLayer (pre-LayerNorm), StructFormerEncoder (+ final LayerNorm)
    model                   StructFormerModel: embeddings + parser + encoder
    MLM head                StructFormerForMaskedLM

The configuration and the parse-stage functions are imported here too, so
``from syntaxformer.models.structformer import StructFormerConfig, calibrate_distances`` keeps working.

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

Attention weights below 1e-30 are set to 0 so that no denormal float32 numbers reach the attention
products (DESIGN.md §5); the memory, time and numerics of ``p_D``: :mod:`syntaxformer.models.structformer_parse`.

Where this file deliberately differs from the public code
---------------------------------------------------------
* Calibration margin: per sentence, not the maximum over the whole batch (the public code subtracts
  one batch-wide scalar, so a sentence's parse depended on the other sentences of its batch).
* The O(N^2)-memory factorisation of :mod:`syntaxformer.models.structformer_parse` instead of the
  O(N^3)/O(N^4) tensors.
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
from transformers import PreTrainedModel
from transformers.activations import ACT2FN
from transformers.utils import ModelOutput

from ..blocks.dropout import Dropout
from ..blocks.mlm_head import masked_lm_output
from ..kernels import triton_runs_on
from ..structures import DependencyDistribution, SyntacticDistances
from .encoder import (
    HeadPruningMixin,
    layer_head_masks,
    prune_head_projections,
)
from .structformer_config import (
    KERNELS,
    NAME,
    PRESETS,
    RELATIONS,
    WEIGHT_ACTIVATIONS,
    StructFormerConfig,
)
from .structformer_parse import (
    PARSE_STAGE_KERNELS,
    _gap_mask,
    boundary_probabilities,
    calibrate_distances,
    calibrated_dependency_distribution,
    constituent_membership,
    dependency_distribution,
    parent_normalizers,
    parent_probability,
    range_max,
    span_probability,
    triton_calibrated_dependency_distribution,
)

#: Attention weights and p_D entries below this become 0 (no denormal float32, DESIGN.md §5).
_TINY = 1e-30


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


def dependency_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    p_dep: torch.Tensor,
    weights: torch.Tensor,
    relations,
    key_mask: torch.Tensor,
    dropout: nn.Module,
    need_weights: bool = True,
):
    """One layer's attention heads as written (``kernel="reference"``): :func:`dependency_structure`, then
    :func:`dependency_constrained_attention`.

    Args: q, k, v ``[B, H, N, d_h]``; p_dep ``[B, N, N]``; weights ``[H, R]`` (:func:`relation_weights`);
    relations: the R names; key_mask ``[B, N]`` bool; dropout: the attention dropout; need_weights: whether
    the caller needs the weights (they are always returned here).
    Returns: ``(output [B, H, N, d_h], weights [B, H, N, N])`` (weights before dropout).
    """
    structure = dependency_structure(p_dep, weights, relations)  # (B, H, N, N)
    return dependency_constrained_attention(q, k, v, structure, key_mask, dropout)


def triton_dependency_attention_where_it_runs(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    p_dep: torch.Tensor,
    weights: torch.Tensor,
    relations,
    key_mask: torch.Tensor,
    dropout: nn.Module,
    need_weights: bool = True,
):
    """:func:`dependency_attention` by the Triton kernels
    (:func:`~syntaxformer.kernels.triton_dependency_attention.triton_dependency_attention`, no
    ``(B, H, N, N)`` structure built; ``kernel="triton"``) where the weights are not needed, no attention
    dropout is drawn (``dropout`` training with ``p > 0``), :func:`~syntaxformer.kernels.triton_runs_on`
    the device and the layer :func:`~syntaxformer.kernels.triton_dependency_attention.fits` them (float32,
    at most 64 tokens, the relations ``head`` and ``child``); elsewhere :func:`dependency_attention`.
    Arguments as it; returns ``(output [B, H, N, d_h], None)`` from the kernels."""
    if need_weights or (dropout.training and dropout.p > 0) or not triton_runs_on(q.device):
        return dependency_attention(q, k, v, p_dep, weights, relations, key_mask, dropout, need_weights)
    # Triton, an optional dependency: imported only where it runs (triton_runs_on)
    from ..kernels import triton_dependency_attention as kernels

    if not kernels.fits(q, relations):
        return dependency_attention(q, k, v, p_dep, weights, relations, key_mask, dropout, need_weights)
    return kernels.triton_dependency_attention(q, k, v, p_dep, weights, key_mask, relations), None


#: the config's ``kernel`` -> the attention :class:`StructFormerAttention` calls
#: (:mod:`syntaxformer.models.kernel_choice`); each takes and returns as :func:`dependency_attention`
ATTENTION_KERNELS = {
    "reference": dependency_attention,
    "triton": triton_dependency_attention_where_it_runs,
}


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
        #: the heads' attention (:data:`ATTENTION_KERNELS`, by ``config.kernel``), what :meth:`forward` calls
        self.attend = ATTENTION_KERNELS[config.kernel]

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
        needed and the Triton kernels computed the layer (``kernel="triton"``).
        """
        b, n, d = x.shape

        def heads(t):
            return t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))  # (B, H, N, d_h)
        weights = relation_weights(self.relation_logits, self.weight_act)  # (H, R)
        # a head mask multiplies the weights too: they are needed then
        needed = need_weights or head_mask is not None
        out, attn = self.attend(q, k, v, p_dep, weights, self.relations, mask, self.dropout, needed)  # (B, H, N, d_h)
        if head_mask is not None:
            keep = head_mask[self.head_ids].to(out.dtype)[None, :, None, None]  # (1, H, 1, 1)
            out, attn = out * keep, attn * keep
        out = out.transpose(1, 2).reshape(b, n, self.num_heads * self.head_dim)  # (B, N, H d_h)
        return self.output(out), attn


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
        #: calibration and ``p_D`` (:data:`~syntaxformer.models.structformer_parse.PARSE_STAGE_KERNELS`, by
        #: ``config.kernel``), what :meth:`_parse_stage` calls
        self.dependency_stage = PARSE_STAGE_KERNELS[config.kernel]
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
        distances, p_dep, p_root = self.dependency_stage(
            distances, heights, mask, self.parser.distance_scale, self.parser.height_scale
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
    "NAME",
    "PRESETS",
    "RELATIONS",
    "WEIGHT_ACTIVATIONS",
    "StructFormerConfig",
    "StructFormerParser",
    "StructFormerModel",
    "StructFormerForMaskedLM",
    "StructFormerOutput",
    "StructFormerMaskedLMOutput",
    "KERNELS",
    "ATTENTION_KERNELS",
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
    "relation_weights",
    "dependency_structure",
    "dependency_constrained_attention",
    "dependency_attention",
    "triton_dependency_attention_where_it_runs",
    "range_max",
]
