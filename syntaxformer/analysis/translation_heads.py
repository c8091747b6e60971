"""The attention heads of a translation model: their layout, gates on them, and their importance.

A :class:`~syntaxformer.models.translation.TranslationModel` has three kinds of heads (:data:`KINDS`):

- ``encoder``: the encoder's self-attention (the registry's encoder: ``model.encoder.body``'s
  ``attention_modules()``, :class:`~syntaxformer.models.encoder.MultiHeadSelfAttention`; for the
  ON-LSTM hybrid its self-attention stack);
- ``decoder_self``: the decoder's causal self-attention (``model.decoder.layers[l].self_attn``);
- ``cross``: the decoder's encoder-decoder attention (``model.decoder.layers[l].encoder_attn``).

Every one of these modules ends with an output projection that takes the heads' outputs side by
side, ``W_O [o_1; …; o_H] + b`` with ``o_h`` ``(B, T, d_h)`` (``output`` in the encoder, mBART's
``out_proj`` in the decoder). A **gate** ``ξ_h`` multiplies head ``h``'s slice of that input (a
forward pre-hook, :class:`GatedHeads`), so ``W_O [ξ_1 o_1; …; ξ_H o_H] + b``: ``ξ_h = 0`` removes
the head's contribution (the bias stays), ``ξ = 1`` leaves the output bit for bit, and a gate with a
gradient gives ``∂L/∂ξ_h`` — Michel et al.'s head mask (NeurIPS 2019, §3, eq. 2) on all three kinds
without touching the model's code. The gates are tensors the caller owns, read at every call.

**Heads as one list.** :class:`TranslationHeadLayout` stacks the kinds' layers into one
:class:`~syntaxformer.models.encoder.HeadLayout` (rows: the encoder's layers, then the decoder's
self-attention layers, then its cross-attention layers; the kinds' own numbers are kept in
:meth:`TranslationHeadLayout.name`), so the pruning rules of :mod:`syntaxformer.analysis.pruning`
(fractions, one head kept per attention module, random orders) and the per-layer normalisation of
:func:`~syntaxformer.analysis.head_measures.normalise_by_layer` apply unchanged.

**Importance** (Michel et al. 2019, eq. 3; :func:`translation_importance`): with every gate 1 and a
gradient, ``I_h = Σ_b T_b |∂L_b/∂ξ_h| / Σ_b T_b`` over batches ``b`` of ``T_b`` target pieces,
``L_b`` the teacher-forced **plain** cross-entropy (nats per target piece, no label smoothing: the
log-likelihood of the references, not the training regulariser), evaluation mode; normalised by the
ℓ2 norm of its layer (Michel's exponent 2).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from syntaxformer.analysis.head_measures import mean_abs_gradient
from syntaxformer.errors import InputError
from syntaxformer.models.encoder import HeadLayout
from syntaxformer.tasks.translation_data import EncodedPairs, TranslationBatch, make_batch

#: The kinds of heads of a translation model, in the stacked order.
KINDS = ("encoder", "decoder_self", "cross")
#: One line per kind, for reports.
KIND_ABOUT = {
    "encoder": "the encoder's self-attention",
    "decoder_self": "the decoder's causal self-attention",
    "cross": "the decoder's encoder-decoder attention",
}

#: A head of the stacked layout: (row, head); a named head: (kind, layer, head).
Head = tuple[int, int]


@dataclass(frozen=True)
class GatedProjection:
    """One attention module's output projection: ``linear`` takes ``(…, len(head_ids) · head_dim)``,
    the heads present side by side in the order ``head_ids`` (original numbers)."""

    linear: nn.Linear
    head_ids: tuple[int, ...]
    head_dim: int


def attention_projections(model) -> dict[str, list[GatedProjection]]:
    """Per kind, each layer's :class:`GatedProjection`, bottom-up (module docstring).

    Raises:
        InputError: a model that is not a translation model (no ``encoder.body`` / ``decoder.layers``).
    """
    body = getattr(getattr(model, "encoder", None), "body", None)
    decoder = getattr(model, "decoder", None)
    if body is None or not hasattr(body, "attention_modules") or not hasattr(decoder, "layers"):
        raise InputError(f"{type(model).__name__} is not a translation model with attention heads")
    encoder = [GatedProjection(m.output, tuple(m.head_ids), m.head_dim) for m in body.attention_modules()]

    def decoder_side(name: str) -> list[GatedProjection]:
        modules = [getattr(layer, name) for layer in decoder.layers]
        return [GatedProjection(m.out_proj, tuple(range(m.num_heads)), m.head_dim) for m in modules]

    return {"encoder": encoder, "decoder_self": decoder_side("self_attn"), "cross": decoder_side("encoder_attn")}


@dataclass(frozen=True)
class TranslationHeadLayout:
    """The heads of ``kinds`` stacked into one :class:`HeadLayout` (module docstring).

    Attributes:
        kinds: the kinds included, in :data:`KINDS` order. layers: per kind, its number of layers.
        heads: per kind, heads per layer (original numbers). layout: the stacked layout
            (``sum(layers)`` rows × ``max(heads)``; a kind with fewer heads has the others absent).
    """

    kinds: tuple[str, ...]
    layers: dict
    heads: dict
    layout: HeadLayout

    def offset(self, kind: str) -> int:
        """The first row of ``kind`` in the stacked layout."""
        return sum(self.layers[k] for k in self.kinds[: self.kinds.index(kind)])

    def name(self, head: Head) -> tuple[str, int, int]:
        """A stacked ``(row, head)`` as ``(kind, layer, head)``."""
        row, h = head
        for kind in self.kinds:
            if row < self.layers[kind]:
                return kind, row, h
            row -= self.layers[kind]
        raise ValueError(f"row {head[0]} is beyond the {self.layout.layers} rows of the layout")

    def split(self, values: torch.Tensor) -> dict[str, torch.Tensor]:
        """A stacked ``(rows, H)`` tensor as ``{kind: (layers, heads) view}`` (views: gradients flow)."""
        return {k: values[self.offset(k) : self.offset(k) + self.layers[k], : self.heads[k]] for k in self.kinds}

    def gates(self, removed: Iterable[Head] = (), dtype=torch.float32, device=None) -> dict[str, torch.Tensor]:
        """Per kind ``(layers, heads)`` gates: 1, and 0 at the ``removed`` stacked heads."""
        values = torch.ones(self.layout.layers, self.layout.heads, dtype=dtype, device=device)
        for row, h in removed:
            values[row, h] = 0.0
        return {k: v.clone() for k, v in self.split(values).items()}

    def grids(self, values, digits: int = 4) -> dict[str, list[list[float | None]]]:
        """Stacked ``(rows, H)`` values as ``{kind: [layer][head]}`` rounded (None where absent or NaN)."""
        grid = self.layout.grid(values, digits)
        return {
            k: [row[: self.heads[k]] for row in grid[self.offset(k) : self.offset(k) + self.layers[k]]]
            for k in self.kinds
        }

    def by_kind(self, heads: Iterable[Head]) -> dict[str, dict[str, list[int]]]:
        """Stacked heads as ``{kind: {layer: sorted heads}}`` (kinds with none left out)."""
        out: dict[str, dict[str, list[int]]] = {}
        for head in heads:
            kind, layer, h = self.name(head)
            out.setdefault(kind, {}).setdefault(str(layer), []).append(h)
        return {k: {layer: sorted(v) for layer, v in sorted(out[k].items(), key=lambda kv: int(kv[0]))} for k in out}


def translation_head_layout(model, kinds: Sequence[str] = KINDS) -> TranslationHeadLayout:
    """The :class:`TranslationHeadLayout` of ``model``'s heads of ``kinds``.

    Raises:
        InputError: an unknown kind, or not a translation model.
    """
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise InputError(f"unknown kind of heads {unknown or kinds}: choose from {', '.join(KINDS)}")
    kinds = tuple(k for k in KINDS if k in kinds)
    projections = attention_projections(model)
    encoder_heads = int(model.encoder.body.config.num_attention_heads)
    heads = {"encoder": encoder_heads, "decoder_self": int(model.config.decoder_attention_heads)}
    heads["cross"] = heads["decoder_self"]
    layers = {k: len(projections[k]) for k in kinds}
    width = max(heads[k] for k in kinds)
    present = tuple(tuple(sorted(p.head_ids)) for k in kinds for p in projections[k])
    layout = HeadLayout(sum(layers.values()), width, present)
    return TranslationHeadLayout(kinds, layers, {k: heads[k] for k in kinds}, layout)


class GatedHeads:
    """Forward pre-hooks that multiply each head's slice of the output projections' input by its gate.

    ``gates``: ``{kind: (layers, heads) tensor}`` owned by the caller (a kind left out is not gated);
    the hooks read ``gates[kind]`` at every call, so the caller may change the values or replace the
    tensors between calls. A context manager (hooks removed on exit) or :meth:`remove`.

    Args:
        model: a :class:`~syntaxformer.models.translation.TranslationModel`.
        gates: the gates (module docstring: ``ξ_h`` at original head numbers).
    """

    def __init__(self, model, gates: dict[str, torch.Tensor]):
        self.gates = gates
        self.handles = []
        for kind, projections in attention_projections(model).items():
            if kind in gates:
                for layer, projection in enumerate(projections):
                    self.handles.append(
                        projection.linear.register_forward_pre_hook(self._hook(kind, layer, projection))
                    )

    def _hook(self, kind: str, layer: int, projection: GatedProjection):
        ids, d = list(projection.head_ids), projection.head_dim

        def hook(module, args):
            x = args[0]  # (…, H_present · d_h)
            gate = self.gates[kind][layer][ids].to(x.dtype)  # (H_present,)
            gated = (x.unflatten(-1, (len(ids), d)) * gate[:, None]).flatten(-2)
            return (gated, *args[1:])

        return hook

    def remove(self) -> None:
        """Remove every hook (the model is as it was)."""
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def __enter__(self) -> GatedHeads:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def pair_batches(pairs: EncodedPairs, batch_size: int, device=None) -> list[TranslationBatch]:
    """Teacher-forced batches of ``pairs``: sorted by source length (stable), ``batch_size`` pairs each.

    Raises:
        InputError: ``batch_size`` below 1, or no pair.
    """
    if batch_size < 1:
        raise InputError(f"--batch-size must be at least 1, got {batch_size}")
    if len(pairs) == 0:
        raise InputError("no sentence pair to score the heads on")
    order = sorted(range(len(pairs)), key=lambda i: len(pairs.source[i]))
    batches = [make_batch(pairs, order[i : i + batch_size]) for i in range(0, len(order), batch_size)]
    return [b.to(device) for b in batches] if device is not None else batches


def translation_importance(
    model, batches: Iterable[TranslationBatch], layout: TranslationHeadLayout
) -> tuple[torch.Tensor, int, float]:
    """Michel et al.'s head importance over the heads of ``layout`` (module docstring).

    Args:
        model: a translation model (evaluation mode is set here and restored).
        batches: teacher-forced :class:`TranslationBatch` es on the model's device (:func:`pair_batches`).
        layout: the heads scored (:func:`translation_head_layout`).

    Returns:
        ``(I, T, loss)``: ``I`` the stacked ``(rows, H)`` float64 importance (NaN at absent heads), ``T``
        the target pieces scored, ``loss`` the mean plain cross-entropy (nats per target piece).

    Raises:
        InputError: no target piece in any batch.
    """
    param = next(model.parameters())
    xi = torch.ones(layout.layout.layers, layout.layout.heads, dtype=param.dtype, device=param.device)
    xi.requires_grad_(True)
    was_training = model.training
    model.eval()

    def losses():
        for batch in batches:
            t = batch.n_tokens
            if t == 0:
                continue
            features = {k: v for k, v in batch.features.items() if k != "labels"}
            logits = model(**features).logits  # (B, T, V)
            logits = logits.flatten(0, 1).to(torch.promote_types(logits.dtype, torch.float32))  # float32 at least
            yield F.cross_entropy(logits, batch.labels.flatten(), ignore_index=-100), t

    try:
        with GatedHeads(model, layout.split(xi)):
            importance, n_tokens, loss = mean_abs_gradient(losses(), xi)
    finally:
        model.train(was_training)
    if n_tokens == 0:
        raise InputError("no target piece to compute head importance on (empty data?)")
    importance[~layout.layout.kept()] = float("nan")
    return importance, n_tokens, loss


__all__ = [
    "KINDS",
    "KIND_ABOUT",
    "GatedProjection",
    "attention_projections",
    "TranslationHeadLayout",
    "translation_head_layout",
    "GatedHeads",
    "pair_batches",
    "translation_importance",
]
