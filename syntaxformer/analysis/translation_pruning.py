"""Pruning curves of a translation model with BLEU as the metric (Michel, Levy & Neubig, NeurIPS 2019, §4-5).

The heads of a :class:`~syntaxformer.models.translation.TranslationModel` (all three kinds, or one:
:mod:`syntaxformer.analysis.translation_heads`) are removed a fraction at a time and the model's
BLEU is measured at each point. The rules are :mod:`syntaxformer.analysis.pruning`'s, on the
stacked layout (:class:`~syntaxformer.analysis.translation_heads.TranslationHeadLayout`):

- **Fractions** ``0, step, 2·step, … ≤ 0.9``; at fraction ``f`` the first ``floor(f·n + 1/2)`` heads
  of the order are removed (``n`` = heads of the set); every attention module (a kind's layer) keeps
  at least one head; a fraction needing more than ``n − modules`` heads is left out.
- **Orders**: ``importance`` = ascending ℓ2-normalised importance of the unpruned model
  (:func:`~syntaxformer.analysis.translation_heads.translation_importance`; scored once; ties in
  stacked flat order); ``random`` = ``torch.randperm`` seeded by each seed (mean and sample sd over
  the seeds).
- **Removal**: a head's gate is 0 (:class:`~syntaxformer.analysis.translation_heads.GatedHeads`);
  the model is never changed.
- **BLEU** (:func:`~syntaxformer.evaluation.bleu.tokenized_bleu`): BLEU-4 of the tokenised,
  lower-cased translations against the tokenised references (the Multi30k literature's), the
  search of :class:`~syntaxformer.tasks.translator.Translator` (``beam`` 1: greedy) on the first
  ``max_sentences`` validation pairs.
- **Removable within a tolerance** (:func:`removable_share`): the largest fraction of heads
  removed at a point whose BLEU, and that of every point before it, is at least the full model's
  minus the tolerance (0.5 BLEU): the curve's first crossing, not any later recovery.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from syntaxformer.analysis.head_measures import normalise_by_layer
from syntaxformer.analysis.pruning import heads_at, present_heads, random_order, rank_heads, select_heads
from syntaxformer.analysis.translation_heads import KINDS, GatedHeads, TranslationHeadLayout
from syntaxformer.evaluation.bleu import tokenized_bleu
from syntaxformer.tasks.translation_data import EncodedPairs

logger = logging.getLogger(__name__)

#: The orders of the translation curves.
TRANSLATION_ORDERS = ("importance", "random")
#: BLEU points below the full model's that still count as "within" (the issue's target).
TOLERANCE = 0.5
#: Values averaged over the random seeds.
BLEU_MEASURES = ("bleu",)

PROTOCOL = {
    "bleu": "BLEU-4 (sacrebleu, tokenize=none, lowercase) of the tokenised translations against the tokenised "
    "references, on the first max_sentences validation pairs; the Translator's search (beam 1: greedy)",
    "removal": "gate 0 on the head's slice of its attention's output-projection input (forward pre-hook); "
    "the model itself is never changed",
    "orders": "importance: ascending l2-normalised importance of the unpruned model (scored once; ties in "
    "stacked flat order); random: torch.randperm from torch.Generator().manual_seed(seed), mean and sample "
    "sd (n - 1) over the seeds",
    "removable": f"largest fraction removed whose BLEU, and every smaller fraction's, is >= the full model's "
    f"- {TOLERANCE} (first crossing)",
}


@dataclass
class BleuData:
    """What each point is measured on.

    Attributes:
        translator: the model's :class:`~syntaxformer.tasks.translator.Translator` (its beam, batch size).
        pairs: the encoded sources (structures included). references: tokenised references, one a pair.
        full: the layout of every kind (the gates of a point cover them all). cache: BLEU per set of
            named heads removed.
    """

    translator: object
    pairs: EncodedPairs
    references: list[str]
    full: TranslationHeadLayout
    cache: dict = field(default_factory=dict)


def named_gates(full: TranslationHeadLayout, removed: Sequence[tuple[str, int, int]]) -> dict[str, torch.Tensor]:
    """Per kind ``(layers, heads)`` gates: 1, and 0 at the named ``(kind, layer, head)`` heads."""
    gates = full.gates()
    for kind, layer, head in removed:
        gates[kind][layer, head] = 0.0
    return gates


def measure_bleu(data: BleuData, removed: Sequence[tuple[str, int, int]]) -> dict:
    """BLEU (0-100) with the named heads removed (module docstring); memoised per set of heads.

    Returns:
        ``{"bleu", "precisions", "brevity_penalty"}``.
    """
    key = frozenset(removed)
    if key not in data.cache:
        model = data.translator.model
        with GatedHeads(model, named_gates(data.full, removed)):
            translations = data.translator.translate_encoded(data.pairs)
        score = tokenized_bleu([" ".join(words) for words in translations], data.references)
        data.cache[key] = {k: score[k] for k in ("bleu", "precisions", "brevity_penalty")}
    return dict(data.cache[key])


def translation_curve(
    layout: TranslationHeadLayout,
    order: str,
    fractions: Sequence[float],
    data: BleuData,
    importance: torch.Tensor | None = None,
    seed: int = 0,
) -> list[dict]:
    """One order's curve over the heads of ``layout`` (module docstring).

    Args:
        layout: the heads pruned (all kinds, or one). order: ``importance`` or ``random``.
        fractions: reachable fractions (:func:`~syntaxformer.analysis.pruning.reachable_fractions`).
        data: what is measured. importance: the stacked raw importance of ``layout`` (``importance``).
        seed: the random order's seed.

    Returns:
        Per fraction: ``fraction``, ``n_removed``, ``fraction_removed``, ``removed`` (``{kind: {layer:
        heads}}``), ``removed_per_kind``, ``removed_per_layer`` (stacked rows), and :func:`measure_bleu`'s values.

    Raises:
        ValueError: an unknown order, or ``importance`` without scores.
    """
    stacked = layout.layout
    if order == "random":
        candidates = random_order(stacked, seed)
    elif order == "importance" and importance is not None:
        candidates = rank_heads(normalise_by_layer(importance), stacked)
    else:
        raise ValueError(f"order {order!r} needs {'scores' if order == 'importance' else 'to be importance or random'}")
    n = len(present_heads(stacked))
    removed: list[tuple[int, int]] = []
    points = []
    for fraction in fractions:
        removed += select_heads(candidates, stacked, removed, heads_at(fraction, n) - len(removed))
        named = [layout.name(h) for h in removed]
        point = dict(
            fraction=fraction,
            n_removed=len(removed),
            fraction_removed=round(len(removed) / n, 6),
            removed=layout.by_kind(removed),
            removed_per_kind={k: sum(1 for kind, _, _ in named if kind == k) for k in layout.kinds},
            removed_per_layer=[sum(1 for r, _ in removed if r == row) for row in range(stacked.layers)],
            **measure_bleu(data, named),
        )
        logger.info(
            "%s%s: %d/%d heads removed, BLEU %.2f",
            order,
            f" seed {seed}" if order == "random" else "",
            len(removed),
            n,
            point["bleu"],
        )
        points.append(point)
    return points


def removable_share(points: Sequence[dict], full_bleu: float, tolerance: float = TOLERANCE) -> dict:
    """The largest share of heads removed before BLEU first falls below ``full_bleu − tolerance``
    (module docstring).

    Returns:
        ``{"fraction_removed", "n_removed", "bleu"}`` of that point (fraction 0 when the first
        step already falls below).
    """
    best = points[0]
    for point in points:
        if point["bleu"] < full_bleu - tolerance - 1e-9:
            break
        best = point
    return dict(fraction_removed=best["fraction_removed"], n_removed=best["n_removed"], bleu=best["bleu"])


def head_sets(names: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """``--curves`` names as ``(name, kinds)``: ``all`` = every kind, a kind = itself.

    Raises:
        ValueError: an unknown name.
    """
    out = []
    for name in names:
        if name == "all":
            out.append((name, KINDS))
        elif name in KINDS:
            out.append((name, (name,)))
        else:
            raise ValueError(f"unknown set of heads {name!r}: choose all or one of {', '.join(KINDS)}")
    return out


__all__ = [
    "TRANSLATION_ORDERS",
    "TOLERANCE",
    "BLEU_MEASURES",
    "PROTOCOL",
    "BleuData",
    "named_gates",
    "measure_bleu",
    "translation_curve",
    "removable_share",
    "head_sets",
]
