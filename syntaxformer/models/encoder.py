"""The pre-LayerNorm Transformer encoder with a pluggable structural prior (one per model family).

Bottom-up, as ``modeling_bert.py``: sinusoidal embeddings -> multi-head self-attention (the prior's
:class:`~syntaxformer.priors.base.PriorOutput` unpacked into the kernel chosen by
``config._attn_implementation``; ``head_mask``; ``prune_heads``) -> feed-forward -> one pre-LN layer
-> the stack of layers (:class:`PreLNEncoder`). Used by the Tree Transformer (``prior="constituent"``)
and the plain Transformer (``prior="none"``), and by every encoder-with-a-prior to come: the prior is
resolved through the registry :data:`syntaxformer.priors.PRIORS` (``config.prior``).

Each layer (the Tree Transformer's public code, DESIGN.md §1.2)::

    prior^l = Prior(x, mask, state^{l-1})                       # on the block input (the prior's own LN)
    x = x + Dropout(SelfAttention(LN(x), prior^l))              # E = M ⊙ softmax(QKᵀ/√d_k + B)
    x = x + Dropout(FFN(LN(x)))                                 # Linear -> GELU -> Dropout -> Linear

The config fields read: ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``,
``intermediate_size``, ``hidden_dropout_prob``, ``attention_probs_dropout_prob``,
``max_position_embeddings``, ``layer_norm_eps``, ``prior``, ``pruned_heads`` and whatever the prior reads.

Heads (Michel et al. 2019's masking; Hugging Face's conventions): ``head_mask`` multiplies each head's
output (so both kernels and their backward are untouched), indexed by the head's original number even
after pruning; :meth:`MultiHeadSelfAttention.prune_heads` removes a head's rows of Q/K/V and its
columns of the output projection.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from transformers.pytorch_utils import prune_linear_layer

from ..blocks.dropout import Dropout
from ..errors import InputError
from ..priors import build_position_fusion, build_prior, prior_attribute
from ..priors.attention import ATTENTION_FUNCTIONS
from ..priors.base import KeyMemory, PriorOutput


def sinusoidal_positions(length: int, d_model: int) -> torch.Tensor:
    """(length, d_model) sinusoidal position encodings (Vaswani et al. 2017, §3.5)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div[: d_model // 2])
    return pe


class SinusoidalEmbeddings(nn.Module):
    """Word embeddings × √d_model + sinusoidal positions, then dropout (the Tree Transformer's code).

    When ``config.prior``'s class offers a position fusion (``priors.build_position_fusion``, e.g. the
    structural-position prior's depth fusion, DESIGN.md §3.2) it is kept as ``position_fusion`` and
    turns the sinusoidal positions and the ``structure_inputs`` into per-sentence positions.
    """

    def __init__(self, config):
        super().__init__()
        fusion = build_position_fusion(config) if getattr(config, "prior", None) is not None else None
        if fusion is not None:
            self.position_fusion = fusion
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.scale = math.sqrt(config.hidden_size)
        self.register_buffer(
            "positions", sinusoidal_positions(config.max_position_embeddings, config.hidden_size), persistent=False
        )
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, structure_inputs: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """(B, N) ids (and the structure inputs, read by a position fusion only) -> (B, N, d)."""
        n = input_ids.shape[1]
        positions = self.positions
        if n > positions.shape[0]:  # sinusoids work at any length
            positions = sinusoidal_positions(n, positions.shape[1]).to(positions.device)
        words = self.word_embeddings(input_ids) * self.scale  # (B, N, d)
        positions = positions[:n].to(words.dtype)  # (N, d)
        if hasattr(self, "position_fusion"):
            positions = self.position_fusion(positions, words, structure_inputs)  # (B, N, d)
        return self.dropout(words + positions)


def normalise_pruned_heads(pruned_heads) -> dict[int, list[int]]:
    """A config's ``pruned_heads`` as ``{layer: heads}`` with int keys (JSON makes them strings) and
    sorted unique heads."""
    return {int(k): sorted(set(int(h) for h in v)) for k, v in (pruned_heads or {}).items() if v}


def head_index(kept_positions: Iterable[int], head_dim: int) -> torch.Tensor:
    """Rows (of Q/K/V) or columns (of the output projection) of the heads at ``kept_positions``:
    (len(kept) · head_dim,) long tensor, in order."""
    return torch.cat([torch.arange(p * head_dim, (p + 1) * head_dim) for p in kept_positions])


def prune_head_projections(
    module: nn.Module,
    heads: Iterable[int],
    head_dim: int,
    names: tuple[str, ...] = ("query", "key", "value"),
    output: str = "output",
) -> list[int]:
    """Remove heads (original numbers) from an attention module in place; returns the kept positions.

    The module keeps ``head_ids`` (original numbers of the heads it has, in order) and ``num_heads``;
    the rows of its ``names`` projections and the columns of ``output`` that belong to the heads go
    (``transformers.pytorch_utils.prune_linear_layer``). Heads already pruned are ignored.

    Raises:
        ValueError: pruning would leave no head, or a head number the layer never had.
    """
    heads = set(int(h) for h in heads)
    unknown = heads - set(module.head_ids) - set(module.pruned_heads)
    if unknown:
        raise ValueError(f"no head {sorted(unknown)} in a layer of {module.num_heads + len(module.pruned_heads)} heads")
    heads &= set(module.head_ids)
    if not heads:
        return list(range(module.num_heads))
    kept = [p for p, h in enumerate(module.head_ids) if h not in heads]
    if not kept:
        raise ValueError("pruning every head of a layer is not supported (keep at least one)")
    index = head_index(kept, head_dim)
    for name in names:
        setattr(module, name, prune_linear_layer(getattr(module, name), index, dim=0))
    setattr(module, output, prune_linear_layer(getattr(module, output), index, dim=1))
    module.head_ids = [module.head_ids[p] for p in kept]
    module.pruned_heads = set(module.pruned_heads) | heads
    module.num_heads = len(kept)
    return kept


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention with a structural prior; the kernel is
    ``ATTENTION_FUNCTIONS[config._attn_implementation]`` ("eager" or "sdpa")."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.head_ids = list(range(self.num_heads))  # original numbers of the heads present
        self.pruned_heads: set[int] = set()
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.output = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob

    def prune_heads(self, heads: Iterable[int]) -> None:
        """Remove ``heads`` (original 0-based numbers) for good (see :func:`prune_head_projections`)."""
        prune_head_projections(self, heads, self.head_dim)

    def forward(
        self,
        x: torch.Tensor,
        key_mask: torch.Tensor,
        prior: PriorOutput | None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
    ):
        """x (B, N, d), key_mask (B, N) bool, head_mask (H_original,) (1 keeps, 0 drops) or None
        -> ((B, N, d), attentions (B, H, N, N) or None).

        Heads listed in the prior's ``key_memories`` take their keys and values from that memory
        (:meth:`_grouped_attention`); the attentions of such a head are shown over words.
        """
        B, N, _ = x.shape
        q = self.query(x).view(B, N, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, N, d_k)
        attention = ATTENTION_FUNCTIONS[self.config._attn_implementation or "eager"]
        multiplicative = prior.multiplicative if prior is not None else None
        bias = prior.additive_bias(q) if prior is not None else None  # (B|1, H_original|H|1, N, N)
        if bias is not None and bias.shape[1] > 1 and bias.shape[1] != self.num_heads:
            bias = bias[:, self.head_ids]  # a per-head bias of the original heads: the ones present
        dropout_p = self.dropout_p if self.training else 0.0
        groups = self.head_groups(prior)
        if len(groups) == 1 and groups[0][1] is None:
            k, v = (
                lin(x).view(B, N, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, N, d_k)
                for lin in (self.key, self.value)
            )
            out, attn = attention(
                q, k, v, key_mask, multiplicative, dropout_p=dropout_p, output_attentions=output_attentions, bias=bias
            )  # (B, H, N, d_k)
        else:
            out, attn = self._grouped_attention(
                attention, groups, q, x, key_mask, multiplicative, bias, dropout_p, output_attentions
            )
        if head_mask is not None:
            keep = head_mask[self.head_ids].to(out.dtype)  # (H,) of the heads present
            out = out * keep[None, :, None, None]
            attn = attn * keep[None, :, None, None] if attn is not None else None
        out = out.transpose(1, 2).reshape(B, N, self.num_heads * self.head_dim)  # (B, N, H·d_k)
        return self.output(out), attn

    def head_groups(self, prior: PriorOutput | None) -> list[tuple[list[int], KeyMemory | None]]:
        """The heads present grouped by where their keys come from: ``(positions, memory)`` with
        positions among the heads present (after pruning) and memory None for the words; groups
        without a head present are left out."""
        memories = prior.key_memories if prior is not None else ()
        owner = {head: memory for memory in memories for head in memory.heads}
        groups = [([p for p, h in enumerate(self.head_ids) if h not in owner], None)]
        groups += [([p for p, h in enumerate(self.head_ids) if h in memory.heads], memory) for memory in memories]
        return [(positions, memory) for positions, memory in groups if positions]

    def head_projection(self, linear: nn.Linear, source: torch.Tensor, positions: list[int]) -> torch.Tensor:
        """``source`` (B, P, d): the words themselves (P = N) or a memory's phrases, projected by the rows
        of ``linear`` (W_K or W_V) of the heads at ``positions`` -> (B, h, P, d_k): a memory head applies
        the same weights to phrases as to words (Hao et al. 2019), and only the heads that read
        ``source`` are computed."""
        index = head_index(positions, self.head_dim).to(source.device)
        out = F.linear(source, linear.weight[index], linear.bias[index] if linear.bias is not None else None)
        return out.view(*source.shape[:2], len(positions), self.head_dim).transpose(1, 2)

    def _grouped_attention(self, attention, groups, q, x, key_mask, multiplicative, bias, dropout_p, output_attentions):
        """One kernel call per group of heads (a memory has its own key length P): word heads with
        the prior's multiplicative prior and bias, keys and values from ``x`` (B, N, d); memory heads
        over their memory (no bias). Returns ``(out (B, H, N, d_k), attentions (B, H, N, N) or None)``
        in head order."""
        outs, attns, order = [], [], []
        for positions, memory in groups:
            index = torch.tensor(positions, device=q.device)
            if memory is None:
                k, v = (self.head_projection(lin, x, positions) for lin in (self.key, self.value))
                group_bias = bias.index_select(1, index) if bias is not None and bias.shape[1] > 1 else bias
                out, attn = attention(
                    q.index_select(1, index),
                    k,
                    v,
                    key_mask,
                    multiplicative,
                    dropout_p=dropout_p,
                    output_attentions=output_attentions,
                    bias=group_bias,
                )
            else:
                k, v = (self.head_projection(lin, memory.hidden, positions) for lin in (self.key, self.value))
                out, attn = attention(
                    q.index_select(1, index),
                    k,
                    v,
                    memory.mask,
                    None,
                    dropout_p=dropout_p,
                    output_attentions=output_attentions,
                )  # (B, h, N, d_k), (B, h, N, P)
                if attn is not None:
                    attn = memory_attention_over_words(attn, memory.phrase_ids)
            outs.append(out)
            attns.append(attn)
            order += positions
        inverse = torch.argsort(torch.tensor(order, device=q.device))
        out = torch.cat(outs, dim=1).index_select(1, inverse)
        attn = torch.cat(attns, dim=1).index_select(1, inverse) if output_attentions else None
        return out, attn


def memory_attention_over_words(attn: torch.Tensor, phrase_ids: torch.Tensor | None) -> torch.Tensor:
    """Attention over memory slots shown over words: each slot's weight split evenly over its words.

    Args:
        attn: (B, h, N, P) attention of word queries over memory slots.
        phrase_ids: (B, N) long slot of each word, -1 at padding (None: the slots are the words, P = N).
    Returns:
        (B, h, N, N): ``attn[b, h, i, p(j)] / |p(j)|`` for word j of slot p(j), 0 at padding keys
        (rows keep their sums).
    """
    if phrase_ids is None:
        return attn
    B, h, N, P = attn.shape
    slot = phrase_ids.clamp_min(0)  # (B, N)
    real = (phrase_ids >= 0).to(attn.dtype)
    sizes = torch.zeros(B, P, dtype=attn.dtype, device=attn.device).scatter_add_(1, slot, real)  # words per slot
    share = real / sizes.gather(1, slot).clamp_min(1.0)  # (B, N)
    words = attn.gather(-1, slot[:, None, None, :].expand(B, h, N, N))  # (B, h, N, N)
    return words * share[:, None, None, :]


class FeedForward(nn.Module):
    """Linear -> GELU -> Dropout -> Linear."""

    def __init__(self, config):
        super().__init__()
        self.fc_in = nn.Linear(config.hidden_size, config.intermediate_size)
        self.fc_out = nn.Linear(config.intermediate_size, config.hidden_size)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc_out(self.dropout(F.gelu(self.fc_in(x))))


def check_positive_sizes(**sizes) -> None:
    """Raises ValueError naming the first of ``sizes`` (widths, counts: ``hidden_size=512``, ...) that is
    not a positive whole number (a float, a bool, zero or below), so a damaged configuration fails with
    its key named instead of deep inside a layer's construction (``range(2.0)``, ``512 % 0``)."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be a positive whole number, got {value!r}")


def check_attention_sizes(hidden_size, num_attention_heads, **other_sizes) -> None:
    """The size checks every multi-head configuration shares: ``hidden_size``, ``num_attention_heads``
    and ``other_sizes`` (``vocab_size=...``, ``num_hidden_layers=...``) must be positive whole numbers
    (:func:`check_positive_sizes`), and ``hidden_size`` d a multiple of the heads H (each head has d / H
    dimensions).

    Raises:
        ValueError: the first size that is not a positive whole number, named; or d not a multiple of H.
    """
    check_positive_sizes(hidden_size=hidden_size, num_attention_heads=num_attention_heads, **other_sizes)
    if hidden_size % num_attention_heads:
        raise ValueError(f"hidden_size {hidden_size} is not a multiple of num_attention_heads {num_attention_heads}")


#: initialisations of the residual branches' output projections (``config.residual_init``)
RESIDUAL_INITS = ("xavier", "zero")


def check_residual_init(residual_init: str) -> None:
    """Raises ValueError unless ``residual_init`` is one of :data:`RESIDUAL_INITS`."""
    if residual_init not in RESIDUAL_INITS:
        raise ValueError(f"residual_init must be one of {RESIDUAL_INITS}, got {residual_init!r}")


def mark_zero_residual(layer: nn.Module, config) -> None:
    """Under ``config.residual_init == "zero"`` mark the two output projections of a pre-LN layer's
    residual branches (``layer.attention.output``, ``layer.ffn.fc_out``) with ``zero_init = True``:
    the model's ``_init_weights`` then starts them at zero, so the untrained layer is the identity
    ``x -> x`` and the model starts as its embeddings plus the final LayerNorm (the "zero-init
    residual" idea of Goyal et al. 2017 and, for Transformers, ReZero, Bachlechner et al. 2021).
    ``"xavier"`` (or a config without the field) leaves them to the usual rule."""
    if getattr(config, "residual_init", "xavier") == "zero":
        layer.attention.output.zero_init = layer.ffn.fc_out.zero_init = True


def zero_init_if_marked(module: nn.Module) -> bool:
    """The models' ``_init_weights`` rule for a module marked ``zero_init = True`` (by
    :func:`mark_zero_residual`, or the pair head's output layer with ``zero_init_output``):
    weight and bias set to zero. Returns whether the module was marked (then no other rule applies)."""
    if not getattr(module, "zero_init", False):
        return False
    nn.init.zeros_(module.weight)
    nn.init.zeros_(module.bias)
    return True


class PreLNLayer(nn.Module):
    """One pre-LayerNorm block with the config's prior (module docstring).

    The prior module is registered under its registry name (``layer.constituent`` for the
    constituent prior) and is also :attr:`prior`; None for ``prior="none"``.
    """

    def __init__(self, config, layer_index: int):
        super().__init__()
        self.prior_name = prior_attribute(config.prior)
        prior = build_prior(config, layer_index)
        if prior is not None:
            self.add_module(self.prior_name, prior)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = MultiHeadSelfAttention(config)
        self.ffn_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.ffn = FeedForward(config)
        self.dropout = Dropout(config.hidden_dropout_prob)
        mark_zero_residual(self, config)

    @property
    def prior(self) -> nn.Module | None:
        """This layer's :class:`~syntaxformer.priors.base.StructuralPrior`, or None."""
        return getattr(self, self.prior_name) if self.prior_name else None

    def forward(
        self,
        x,
        key_mask,
        prior_state=None,
        head_mask=None,
        output_attentions=False,
        structure_inputs: dict[str, torch.Tensor] | None = None,
    ):
        """x (B, N, d), key_mask (B, N) bool, the prior's state from the layer below (or None),
        head_mask (H_original,) or None, structure_inputs (per-sentence structure handed to the prior
        as ``inputs``, e.g. ``{"heads": (B, N)}``; or None) -> ``(x, PriorOutput or None, attentions
        or None)``."""
        prior = self.prior(x, key_mask, prior_state, inputs=structure_inputs) if self.prior is not None else None
        h, attn = self.attention(self.attention_norm(x), key_mask, prior, head_mask, output_attentions)
        x = x + self.dropout(h)
        x = x + self.dropout(self.ffn(self.ffn_norm(x)))
        return x, prior, attn


def layer_head_masks(head_mask: torch.Tensor | None, num_layers: int, num_heads: int) -> list:
    """Hugging Face's ``head_mask`` as one (num_heads,) mask per layer (or None per layer).

    Args:
        head_mask: (num_heads,) for every layer, (num_layers, num_heads), or None; 1 keeps a head,
            0 drops it (fractions scale it); indexed by original head number.
    Raises:
        ValueError: any other shape.
    """
    if head_mask is None:
        return [None] * num_layers
    if head_mask.dim() == 1 and head_mask.shape[0] == num_heads:
        return [head_mask] * num_layers
    if head_mask.shape == (num_layers, num_heads):
        return list(head_mask.unbind(0))
    raise ValueError(
        f"head_mask of shape {tuple(head_mask.shape)}: expected ({num_heads},) or ({num_layers}, {num_heads})"
    )


@dataclass
class EncoderOutput:
    """What :class:`PreLNEncoder` returns (tuples over layers; ``records`` by the prior's names;
    ``loss`` the sum of the priors' auxiliary losses, or None)."""

    hidden: torch.Tensor
    loss: torch.Tensor | None = None
    records: dict[str, tuple] = field(default_factory=dict)
    priors: tuple | None = None
    attentions: tuple | None = None
    hidden_states: tuple | None = None


class PreLNEncoder(nn.ModuleList):
    """The stack of :class:`PreLNLayer` (a ``ModuleList``, so a model's parameter names are
    ``layers.{i}.…``), threading each prior's state to the layer above; the final LayerNorm is the
    model's."""

    def __init__(self, config):
        super().__init__(PreLNLayer(config, i) for i in range(config.num_hidden_layers))
        self.num_heads = config.num_attention_heads
        for layer, heads in (getattr(config, "pruned_heads", None) or {}).items():
            self[int(layer)].attention.prune_heads(heads)

    def forward(
        self,
        x: torch.Tensor,
        key_mask: torch.Tensor,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_priors: bool = False,
        output_hidden_states: bool = False,
        structure_inputs: dict[str, torch.Tensor] | None = None,
    ) -> EncoderOutput:
        """x (B, N, d) embeddings, key_mask (B, N) bool (True = real), head_mask (H,) or (L, H),
        structure_inputs (the same dict to every layer's prior, ``inputs``; None: none) -> output."""
        masks = layer_head_masks(head_mask, len(self), self.num_heads)
        state, records, loss = None, {}, None
        priors, attentions, hidden_states = [], [], [x]
        for layer, mask in zip(self, masks):
            x, prior, attn = layer(x, key_mask, state, mask, output_attentions, structure_inputs)
            if prior is not None:
                state = prior.state
                if prior.loss is not None:
                    loss = prior.loss if loss is None else loss + prior.loss
                for name, value in prior.record.items():
                    records.setdefault(name, []).append(value)
                if output_priors and prior.multiplicative is not None:
                    priors.append(torch.exp(prior.multiplicative.log_prior()))  # (B, N, N)
            attentions.append(attn)
            hidden_states.append(x)
        return EncoderOutput(
            hidden=x,
            loss=loss,
            records={k: tuple(v) for k, v in records.items()},
            priors=tuple(priors) if output_priors else None,
            attentions=tuple(attentions) if output_attentions else None,
            hidden_states=tuple(hidden_states) if output_hidden_states else None,
        )


class HeadPruningMixin:
    """``prune_heads`` for a ``PreTrainedModel`` whose :meth:`attention_modules` lists its layers'
    attention modules (each with ``prune_heads(heads)``), recorded in ``config.pruned_heads``.

    The model's constructor builds its layers without the heads in ``config.pruned_heads``, so
    ``from_pretrained`` restores a pruned model; pruning is idempotent (Hugging Face's
    ``init_weights`` calls it again with the config's heads).
    """

    def attention_modules(self) -> list[nn.Module]:
        """Each layer's self-attention, bottom-up (what :meth:`prune_heads` prunes); each model names its own."""
        raise NotImplementedError

    def prune_heads(self, heads_to_prune: dict[int, Iterable[int]]) -> None:
        """Remove heads for good: ``{layer: [heads]}``, 0-based layers and original head numbers.

        Raises:
            ValueError: a layer out of range, a head the layer never had, or every head of a layer.
        """
        modules = self.attention_modules()
        for layer in heads_to_prune:
            if not 0 <= int(layer) < len(modules):
                raise ValueError(f"prune_heads: no layer {layer} in a model of {len(modules)} layers")
        for layer, heads in heads_to_prune.items():
            modules[int(layer)].prune_heads(heads)
        merged = {int(k): set(v) for k, v in (self.config.pruned_heads or {}).items()}
        for layer, heads in heads_to_prune.items():
            merged.setdefault(int(layer), set()).update(int(h) for h in heads)
        self.config.pruned_heads = {k: sorted(v) for k, v in sorted(merged.items()) if v}


# --------------------------------------------------------------------------------------------------
# the heads of a model (head importance, pruning, gates)


@dataclass(frozen=True)
class HeadLayout:
    """The heads of a model: ``layers`` × ``heads`` original numbers, ``present[l]`` the heads of
    layer ``l`` not pruned (ascending). Flat index of (l, h): ``l * heads + h``."""

    layers: int
    heads: int
    present: tuple[tuple[int, ...], ...]

    @property
    def size(self) -> int:
        """Heads of the unpruned model, ``layers * heads``."""
        return self.layers * self.heads

    def kept(self) -> torch.Tensor:
        """``(L, H)`` bool, True at heads present."""
        keep = torch.zeros(self.layers, self.heads, dtype=torch.bool)
        for layer, heads in enumerate(self.present):
            keep[layer, list(heads)] = True
        return keep

    def grid(self, values, digits: int = 4) -> list[list[float | None]]:
        """``values`` (``(L·H,)`` or ``(L, H)``) as ``L`` lists of ``H`` rounded floats, None at
        pruned heads (and at NaN)."""
        flat = torch.as_tensor(values, dtype=torch.float64).reshape(self.layers, self.heads)
        keep = self.kept()
        return [
            [
                (round(float(flat[l, h]), digits) if keep[l, h] and not torch.isnan(flat[l, h]) else None)
                for h in range(self.heads)
            ]
            for l in range(self.layers)
        ]


def head_layout(model) -> HeadLayout:
    """The :class:`HeadLayout` of a model of the registry (``config.num_hidden_layers``,
    ``num_attention_heads``, ``pruned_heads``).

    Raises:
        InputError: a model with no attention heads to score.
    """
    config = model.config
    layers = int(getattr(config, "num_hidden_layers", 0) or 0)
    heads = int(getattr(config, "num_attention_heads", 0) or 0)
    if layers < 1 or heads < 1:
        raise InputError(
            f"{type(model).__name__} has no attention heads to score "
            f"(num_hidden_layers={layers}, num_attention_heads={heads})"
        )
    pruned = normalise_pruned_heads(getattr(config, "pruned_heads", None))
    present = tuple(tuple(h for h in range(heads) if h not in pruned.get(layer, ())) for layer in range(layers))
    return HeadLayout(layers, heads, present)
