"""Pruning curves: remove attention heads in a chosen order and measure what is lost (DESIGN.md §3.5).

Michel, Levy & Neubig (NeurIPS 2019) remove the least important heads a fraction at a time and report
the metric against the fraction removed; this module does that for any model of the registry
(``head_mask`` / ``prune_heads``, original head numbers), with three orders:

- ``importance``: ascending ℓ2-normalised importance (Michel;
  :func:`~syntaxformer.analysis.heads.head_importance` and
  :func:`~syntaxformer.analysis.heads.normalise_by_layer`), least important first;
- ``confidence``: ascending confidence (Voita: mean maximum attention weight,
  :func:`~syntaxformer.analysis.heads.text_roles`), least confident first;
- ``random``: a permutation of the heads drawn from ``torch.Generator().manual_seed(seed)``; the
  control, run over several seeds (mean and sample standard deviation, ``n - 1``, per fraction).

Rules (exact; :data:`PROTOCOL` repeats them in every report):

- **Fractions** ``0, step, 2·step, …`` up to :data:`MAX_FRACTION`; at fraction ``f`` the first
  ``floor(f·n + 1/2)`` heads of the order are removed (``n`` = heads the model has). Every layer keeps
  at least one head: when the order's next head is the last left in its layer it is skipped and the
  next candidate is taken. A fraction needing more than ``n − layers`` heads cannot be reached and is
  left out of the curve (listed in the report).
- **Scores once or recomputed**: by default the order comes from the unpruned model; with
  ``recompute`` the scores (importance or confidence) are computed again on the model pruned so far
  before each step, and the step removes the lowest-scoring heads still present.
- **Ties**: equal scores go in flat order ``layer · H + head`` (stable sort).
- **Measures** at each point: masked-LM perplexity with the project's protocol
  (:data:`syntaxformer.evaluation.perplexity.PROTOCOL`: one ``[MASK]`` per input, every word in turn,
  exp of the mean cross-entropy in nats) on held-out text; and, for models that induce structure,
  unlabelled bracket F1 (sentence- and corpus-level, 0–100) of the decoded trees against gold trees
  (:func:`~syntaxformer.evaluation.constituency.evaluate_constituency`).
- **How heads are removed**: the model is never changed. ``via="prune"`` (default) measures a
  physically pruned copy (``copy.deepcopy(model).prune_heads``); ``via="mask"`` multiplies the
  removed heads' outputs by 0 through ``head_mask`` (:class:`HeadMasked`) for the perplexity. The two
  are equal (tests/models/test_heads.py, tests/tasks/test_pruning.py); parsing always uses the pruned copy
  (``induce`` takes no head mask).
"""

from __future__ import annotations

import copy
import logging
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from syntaxformer.analysis.heads import (
    PROTOCOL as HEADS_PROTOCOL,
)
from syntaxformer.analysis.heads import (
    EncodedSentences,
    HeadLayout,
    head_importance,
    head_layout,
    normalise_by_layer,
    text_roles,
)
from syntaxformer.errors import InputError
from syntaxformer.evaluation.constituency import evaluate_constituency
from syntaxformer.evaluation.perplexity import masked_lm_perplexity
from syntaxformer.models import Capabilities
from syntaxformer.parsing import decode, model_structures

logger = logging.getLogger(__name__)

#: The pruning orders.
ORDERS = ("importance", "confidence", "random")
#: The curve stops at this fraction of heads removed.
MAX_FRACTION = 0.9
#: Orders whose scores come from the model (``recompute`` applies to them).
SCORED_ORDERS = ("importance", "confidence")

PROTOCOL = {
    "fractions": f"0, step, 2*step, ... <= {MAX_FRACTION}; at fraction f the first floor(f*n + 1/2) heads of "
    "the order are removed (n = heads of the model); every layer keeps >= 1 head (a head "
    "that is the last of its layer is skipped for the next candidate); a fraction needing "
    "more than n - layers heads is left out",
    "importance": "ascending l2-normalised importance (least important first): " + HEADS_PROTOCOL["importance"],
    "confidence": "ascending confidence (least confident first): " + HEADS_PROTOCOL["confidence"],
    "random": "a permutation of the heads from torch.Generator().manual_seed(seed); mean and sample sd "
    "(n - 1) over the seeds",
    "recompute": "scores from the unpruned model, or (recompute) from the model pruned so far before each "
    "step; ties in flat order layer*H + head",
    "removal": "a physically pruned copy of the model (prune_heads), equal to head_mask = 0 at the removed "
    "heads; the model itself is never changed",
}

Head = tuple[int, int]


# --------------------------------------------------------------------------------------------------
# fractions and orders


def curve_fractions(step: float, max_fraction: float = MAX_FRACTION) -> list[float]:
    """``[0, step, 2·step, …]`` up to ``max_fraction`` (inclusive, to 1e-9), rounded to 10 digits.

    Raises:
        InputError: ``step`` not strictly between 0 and 1.
    """
    if not (isinstance(step, (int, float)) and 0.0 < step < 1.0) or math.isnan(step):
        raise InputError(f"--step must be strictly between 0 and 1 (a fraction of the heads), got {step}")
    count = int(math.floor(max_fraction / step + 1e-9))
    return [round(i * step, 10) for i in range(count + 1)]


def heads_at(fraction: float, n_heads: int) -> int:
    """Heads removed at ``fraction`` of ``n_heads``: ``floor(fraction · n_heads + 1/2)``."""
    return int(math.floor(fraction * n_heads + 0.5 + 1e-9))


def present_heads(layout: HeadLayout) -> list[Head]:
    """Every ``(layer, head)`` the model has, in flat order."""
    return [(layer, head) for layer, heads in enumerate(layout.present) for head in heads]


def rank_heads(scores: torch.Tensor, layout: HeadLayout, exclude: Sequence[Head] = ()) -> list[Head]:
    """The heads present and not in ``exclude``, by ascending score (ties: flat order).

    Args:
        scores: ``(L, H)`` (or ``(L·H,)``); NaN at heads pruned from the model.
        layout: the model's heads. exclude: heads already removed.

    Raises:
        ValueError: a NaN score at a head that is present (a programming error).
    """
    flat = torch.as_tensor(scores, dtype=torch.float64).reshape(layout.layers, layout.heads)
    skip = set(exclude)
    heads = [h for h in present_heads(layout) if h not in skip]
    if any(math.isnan(float(flat[h])) for h in heads):
        raise ValueError("a head that is present has no score")
    return sorted(heads, key=lambda h: float(flat[h]))  # sorted is stable: ties stay in flat order


def random_order(layout: HeadLayout, seed: int) -> list[Head]:
    """The heads present in a random order: ``torch.randperm`` with a generator seeded by ``seed``."""
    heads = present_heads(layout)
    permutation = torch.randperm(len(heads), generator=torch.Generator().manual_seed(int(seed)))
    return [heads[int(i)] for i in permutation]


def select_heads(candidates: Sequence[Head], layout: HeadLayout, removed: Sequence[Head], count: int) -> list[Head]:
    """The next ``count`` heads to remove: ``candidates`` in order, skipping heads already removed
    and any head that is the last one left in its layer.

    Args:
        candidates: heads in pruning order. layout: the model's heads. removed: heads removed so far.
        count: how many more to remove (fewer are returned only when every layer is down to one head).
    """
    left = [len(heads) for heads in layout.present]
    done = set(removed)
    for layer, _ in done:
        left[layer] -= 1
    chosen: list[Head] = []
    for head in candidates:
        if len(chosen) >= count:
            break
        if head in done or left[head[0]] <= 1:
            continue
        chosen.append(head)
        done.add(head)
        left[head[0]] -= 1
    if len(chosen) < count:
        logger.warning("only %d of %d heads could be removed (one head left per layer)", len(chosen), count)
    return chosen


def by_layer(heads: Sequence[Head]) -> dict[int, list[int]]:
    """``{layer: sorted heads}`` of a list of ``(layer, head)``, layers ascending."""
    out: dict[int, list[int]] = {}
    for layer, head in heads:
        out.setdefault(int(layer), []).append(int(head))
    return {layer: sorted(out[layer]) for layer in sorted(out)}


# --------------------------------------------------------------------------------------------------
# removing heads


def removal_mask(layout: HeadLayout, removed: Sequence[Head], dtype=torch.float32, device=None) -> torch.Tensor:
    """``(L, H)`` head mask: 1 keeps a head, 0 at ``removed`` (and at heads pruned from the model)."""
    mask = layout.kept().to(dtype)
    for layer, head in removed:
        mask[layer, head] = 0.0
    return mask.to(device) if device is not None else mask


def pruned_copy(model: nn.Module, removed: Sequence[Head]) -> nn.Module:
    """A deep copy of ``model`` with ``removed`` pruned for good (``prune_heads``), evaluation mode;
    ``model`` itself is unchanged.

    Raises:
        ValueError: as ``prune_heads`` (a head the model does not have, every head of a layer).
    """
    pruned = copy.deepcopy(model)
    if removed:
        pruned.prune_heads(by_layer(removed))
    return pruned.eval()


class HeadMasked(nn.Module):
    """``model`` with a fixed ``head_mask`` on every forward pass (the cheap path: no weight surgery).

    Callable as the masked LM itself by :func:`~syntaxformer.evaluation.perplexity.masked_lm_perplexity`
    (``input_ids``, ``attention_mask``, ``labels``, ``masked_only``, ``masked_positions``); ``config`` is
    the model's.
    """

    #: what the wrapper's forward accepts (:func:`~syntaxformer.models.capabilities_of`)
    capabilities = Capabilities(masked_only=True)

    def __init__(self, model: nn.Module, head_mask: torch.Tensor):
        super().__init__()
        self.model = model
        self.config = model.config
        self.register_buffer("head_mask", head_mask.to(next(model.parameters()).device))

    def forward(self, input_ids, attention_mask=None, labels=None, masked_only: bool = False, masked_positions=None):
        """The masked LM's forward (``(B, N)`` inputs; ``labels``, ``masked_only`` and ``masked_positions``
        ``(M,)`` only with ``masked_only``) with the fixed ``head_mask``."""
        kwargs = dict(labels=labels, masked_only=True, masked_positions=masked_positions) if masked_only else {}
        return self.model(input_ids=input_ids, attention_mask=attention_mask, head_mask=self.head_mask, **kwargs)


# --------------------------------------------------------------------------------------------------
# measures


@dataclass
class PruneData:
    """What every point of a curve is measured on, and how the orders are scored.

    Attributes:
        sentences: the perplexity text (word lists, normalised as the training corpus was).
        encoded: the same text encoded (:func:`~syntaxformer.analysis.heads.encode_counted`), for
            confidence. batches: masked batches (:func:`~syntaxformer.analysis.heads.mlm_batches`), for
            importance. frequencies: training-text word counts (:func:`text_roles` needs them).
        gold: gold trees for F1 (None: no F1). options: the decoder's
            :class:`~syntaxformer.structures.DecoderOptions`. batch_tokens: tokens per perplexity pass.
        batch_size: sentences per confidence / parsing pass. via: ``"prune"`` or ``"mask"``.
    """

    sentences: list[list[str]]
    encoded: EncodedSentences
    batches: list
    frequencies: object
    gold: Sequence | None = None
    options: object = None
    batch_tokens: int = 4096
    batch_size: int = 32
    via: str = "prune"
    cache: dict = field(default_factory=dict)


def head_scores(model: nn.Module, tokenizer, order: str, data: PruneData) -> torch.Tensor:
    """``(L, H)`` float64 scores of ``order`` on ``model`` (NaN at pruned heads): ℓ2-normalised
    importance (dimensionless, 0–1) or confidence (0–1).

    Raises:
        ValueError: an order with no scores (``random``).
    """
    layout = head_layout(model)
    if order == "importance":
        raw, _, _ = head_importance(model, data.batches, layout)
        return normalise_by_layer(raw)
    if order == "confidence":
        roles = text_roles(model, tokenizer, data.encoded, data.frequencies, layout, data.batch_size)
        scores = roles["confidence"].reshape(layout.layers, layout.heads).clone()
        scores[~layout.kept()] = float("nan")
        return scores
    raise ValueError(f"order {order!r} has no scores")


def parse_f1(model: nn.Module, tokenizer, gold: Sequence, options) -> dict:
    """Sentence- and corpus-level unlabelled bracket F1 (0–100) of ``model``'s trees of the gold
    trees' sentences (:func:`~syntaxformer.parsing.model_structures`, decoded with ``options``).

    Raises:
        InputError: as :func:`~syntaxformer.parsing.model_structures` (a model without structure).
    """

    structures = model_structures(model, tokenizer, [tree.leaves() for tree in gold])
    trees, _ = decode(structures, options)
    scores = evaluate_constituency(trees, gold)
    return {k: scores[k] for k in ("sentence_f1", "corpus_f1", "wsj10_sentence_f1", "n_sentences")}


def measure(
    model: nn.Module, tokenizer, removed: Sequence[Head], data: PruneData, pruned: nn.Module | None = None
) -> dict:
    """Perplexity (and F1) with ``removed`` heads taken out of ``model`` (module docstring).

    Args:
        model: the unpruned model (never changed). removed: heads to remove.
        data: the texts and settings. pruned: ``pruned_copy(model, removed)`` if already built.

    Returns:
        ``perplexity`` (exp of mean nats per word), ``cross_entropy`` (nats), ``n_words``, and with
        gold trees ``sentence_f1`` / ``corpus_f1`` / ``wsj10_sentence_f1`` (0–100); memoised per set
        of removed heads in ``data.cache``.

    Raises:
        InputError: as :func:`~syntaxformer.evaluation.perplexity.masked_lm_perplexity`.
    """

    key = frozenset(removed)
    if key in data.cache:
        return dict(data.cache[key])
    if pruned is None:
        pruned = pruned_copy(model, removed) if removed else model
    if data.via == "mask" and removed:
        lm = HeadMasked(model, removal_mask(head_layout(model), removed))
    else:
        lm = pruned
    ppl = masked_lm_perplexity(lm, tokenizer, data.sentences, batch_tokens=data.batch_tokens, too_long="skip")
    result = dict(perplexity=ppl["perplexity"], cross_entropy=ppl["cross_entropy"], n_words=ppl["n_tokens"])
    if data.gold is not None:
        f1 = parse_f1(pruned, tokenizer, data.gold, data.options)
        result.update(
            sentence_f1=f1["sentence_f1"], corpus_f1=f1["corpus_f1"], wsj10_sentence_f1=f1["wsj10_sentence_f1"]
        )
    data.cache[key] = dict(result)
    return result


# --------------------------------------------------------------------------------------------------
# curves


def pruning_curve(
    model: nn.Module,
    tokenizer,
    order: str,
    fractions: Sequence[float],
    data: PruneData,
    recompute: bool = False,
    seed: int = 0,
    on_point: Callable[[float, list[Head], nn.Module], None] | None = None,
) -> list[dict]:
    """One order's curve: the points at ``fractions`` (module docstring).

    Args:
        model: the model (unchanged). order: a name of :data:`ORDERS`. fractions: of the heads, each
            reachable (:func:`reachable_fractions`). data: what is measured.
        recompute: rescore the pruned model before each step (importance and confidence).
        seed: the random order's seed. on_point: called ``(fraction, removed, pruned model)`` at each
            point (e.g. to save the model).

    Returns:
        Per fraction: ``fraction``, ``n_removed``, ``fraction_removed`` (actual), ``removed``
        (``{layer: heads}``), ``removed_per_layer`` and ``heads_left_per_layer`` (lists over layers),
        the :func:`measure` values, and for scored orders ``scores`` (``[L][H]`` used for the step).

    Raises:
        InputError: an unknown order.
    """
    if order not in ORDERS:
        raise InputError(f"unknown pruning order {order!r}: choose from {', '.join(ORDERS)}")
    layout = head_layout(model)
    n = len(present_heads(layout))
    removed: list[Head] = []
    current, candidates, scores = model, None, None
    points = []
    for fraction in fractions:
        if order == "random" and candidates is None:
            candidates = random_order(layout, seed)
        elif order in SCORED_ORDERS and (candidates is None or (recompute and removed)):
            scores = head_scores(current, tokenizer, order, data)
            candidates = rank_heads(scores, layout, removed)
        removed += select_heads(candidates, layout, removed, heads_at(fraction, n) - len(removed))
        current = pruned_copy(model, removed) if removed else model
        point = dict(
            fraction=fraction,
            n_removed=len(removed),
            fraction_removed=round(len(removed) / n, 6),
            removed={str(k): v for k, v in by_layer(removed).items()},
            removed_per_layer=[sum(1 for l, _ in removed if l == layer) for layer in range(layout.layers)],
            heads_left_per_layer=[
                len(layout.present[layer]) - sum(1 for l, _ in removed if l == layer) for layer in range(layout.layers)
            ],
            **measure(model, tokenizer, removed, data, pruned=current),
        )
        if scores is not None:
            point["scores"] = layout.grid(scores, 4)
        logger.info(
            "%s%s: %d/%d heads removed, perplexity %.2f%s",
            order,
            f" seed {seed}" if order == "random" else "",
            len(removed),
            n,
            point["perplexity"],
            f", sentence F1 {point['sentence_f1']:.2f}" if "sentence_f1" in point else "",
        )
        points.append(point)
        if on_point is not None:
            on_point(fraction, list(removed), current)
    return points


def reachable_fractions(fractions: Sequence[float], layout: HeadLayout) -> tuple[list[float], list[float]]:
    """``(reachable, left out)``: a fraction is reachable when its head count (:func:`heads_at`) is at
    most ``n − layers`` (one head kept per layer)."""
    n = len(present_heads(layout))
    most = n - layout.layers
    reachable = [f for f in fractions if heads_at(f, n) <= most]
    return reachable, [f for f in fractions if heads_at(f, n) > most]


#: Values averaged over the random seeds.
MEASURES = ("perplexity", "cross_entropy", "sentence_f1", "corpus_f1", "wsj10_sentence_f1")


def average_runs(runs: Sequence[Sequence[dict]], measures: Sequence[str] = MEASURES) -> list[dict]:
    """Per fraction, the mean and sample standard deviation (``n − 1``; 0 for one run) of
    ``measures`` (default :data:`MEASURES`) over ``runs`` (one curve each, same fractions):
    ``perplexity`` = the mean, ``perplexity_sd`` = the sd, and so on; ``fraction``, ``n_removed``,
    ``fraction_removed`` kept."""
    points = []
    for at in zip(*runs):
        point = {k: at[0][k] for k in ("fraction", "n_removed", "fraction_removed")}
        for name in measures:
            if name in at[0]:
                values = [p[name] for p in at]
                point[name] = statistics.fmean(values)
                point[f"{name}_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
        point["removed_per_layer_mean"] = [statistics.fmean(c) for c in zip(*(p["removed_per_layer"] for p in at))]
        points.append(point)
    return points


# --------------------------------------------------------------------------------------------------
# the figure


def plot_pruning_curves(curves: Sequence[dict], title: str = "", panels: Sequence[tuple[str, str]] | None = None):
    """Perplexity (log scale) and, where measured, sentence F1 (0–100) against the fraction of heads
    removed: one line per curve, a band of ± one sd where the curve has ``*_sd`` values (random).

    Args:
        curves: ``{"label": str, "points": [...]}`` with points as :func:`pruning_curve` /
            :func:`average_runs` return. title: the figure's title (name the model, data and seed).
        panels: ``(measure, axis label)`` per panel (default: perplexity, and sentence F1 where
            measured; e.g. ``[("bleu", "BLEU-4")]`` for a translation model).

    Returns:
        A matplotlib figure (save it with :func:`syntaxformer.figures.save_figure`).
    """
    import matplotlib.pyplot as plt  # optional heavy dependency, imported on use (start-up time)

    if panels is None:
        with_f1 = any("sentence_f1" in p for c in curves for p in c["points"])
        panels = [("perplexity", "masked-LM perplexity (one mask per input)")]
        if with_f1:
            panels.append(("sentence_f1", "sentence-level F1 (%), ptb-sample:dev"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, (name, label) in zip(axes[0], panels):
        for curve in curves:
            xs = [100 * p["fraction_removed"] for p in curve["points"]]
            ys = [p[name] for p in curve["points"]]
            (line,) = ax.plot(xs, ys, marker="o", markersize=3, label=curve["label"])
            if any(f"{name}_sd" in p for p in curve["points"]):
                sd = [p[f"{name}_sd"] for p in curve["points"]]
                ax.fill_between(
                    xs,
                    [y - s for y, s in zip(ys, sd)],
                    [y + s for y, s in zip(ys, sd)],
                    color=line.get_color(),
                    alpha=0.2,
                    linewidth=0,
                )
        if name == "perplexity":
            ax.set_yscale("log")
        ax.set_xlabel("heads removed (%)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


__all__ = [
    "ORDERS",
    "MAX_FRACTION",
    "PROTOCOL",
    "PruneData",
    "HeadMasked",
    "curve_fractions",
    "heads_at",
    "present_heads",
    "rank_heads",
    "random_order",
    "select_heads",
    "by_layer",
    "removal_mask",
    "pruned_copy",
    "head_scores",
    "parse_f1",
    "measure",
    "pruning_curve",
    "reachable_fractions",
    "average_runs",
    "plot_pruning_curves",
]
