"""Attention heads: importance (Michel et al. 2019) and roles (Voita et al. 2019), DESIGN.md §3.5.

Per layer × head of any model of the registry (its ``forward`` takes ``head_mask`` of shape
``(L, H)``; ``output_attentions=True`` returns per layer ``(B, H, N, N)`` weights). Layers and heads
are numbered from 0 by their original numbers; a pruned head (``config.pruned_heads``) is ``None``
in every per-head table.

This module runs the analysis and writes its report (``heads.json``, the heatmaps); the arithmetic
of the measures is :mod:`syntaxformer.analysis.head_measures`'s, the texts and gold trees
:mod:`syntaxformer.analysis.head_data`'s (both re-exported here).

Definitions (exact; :data:`PROTOCOL` repeats them in every report):

- **Importance** (Michel et al. 2019, DESIGN.md §3.5). ``ξ`` is an ``(L, H)`` head mask of ones
  with a gradient; the text is cut into batches of ``batch_size`` sentences (sorted by length,
  stable), masked with :func:`~syntaxformer.training.mlm.mask_tokens` at the model's training rate
  and rule (``training.json``; 0.15 / BERT 80-10-10 if unknown) from one generator seeded with
  ``seed``. For batch ``b`` with ``T_b`` masked (predicted) tokens, ``L_b`` is the mean
  cross-entropy (nats) over them and ``g_b = ∂L_b/∂ξ`` (evaluation mode: no dropout). Then
  ``I = Σ_b T_b |g_b| / Σ_b T_b``: the token-weighted mean over batches of the absolute gradient
  (the reference code's ``calculate_head_importance`` accumulates ``|∂L_b/∂ξ|`` per batch and
  divides by the tokens). With one batch, ``I = |∂L/∂ξ|`` exactly. Normalised:
  ``I_h / ‖I_layer‖₂`` within each layer (Michel's exponent 2).
- **Words.** Attention is over tokens; each word's row is the row of its **first piece**, and the
  weight a row gives a word is the sum over that word's pieces (one token per word: the identity).
  Weight on special tokens (``[CLS]``) is one extra column, "special". Each row is divided by its sum
  before taking maxima (Tree Transformer ``C ⊙ softmax`` and StructFormer's sigmoid rows do not sum
  to 1); ``confidence_raw`` keeps the unnormalised maximum. Ties go to the first (leftmost) column.
- **Confidence** (Voita): mean over words of the row's maximum weight (0-1).
- **Positional**: share (%) of words whose maximum falls on the previous word, among words that have
  one (``i ≥ 1``); likewise the next word (``i ≤ n-2``). Positional when either share ≥
  :data:`POSITIONAL_THRESHOLD`.
- **Rare word**: share (%) of words, other than the rarest word itself, whose maximum falls on the
  sentence's rarest word (lowest frequency in the model's training text when ``training.json``
  names a readable corpus, else in the analysed text; unknown words count 0; ties: the first).
  Sentences of one word are not counted.
- **Syntactic** (Voita), against gold trees with punctuation removed (the models see
  punctuation-free words; a head on punctuation is re-attached to its nearest non-punctuation
  ancestor, :func:`~syntaxformer.evaluation.dependency.reattach_heads`). Per pair (dependent ``d``,
  head ``h``, relation ``r`` = the UD label before ``:``): *dependent→head* is correct when ``d``'s
  maximum falls on ``h``; *head→dependent* when ``h``'s maximum falls on ``d``. Accuracy (%) over
  the pairs; the baseline always predicts the most frequent relative position of the target for
  that relation and direction (ties: the smaller distance, then the left); ``gain = accuracy −
  baseline`` (points). Every relation found is reported; a head is *syntactic* for a relation of
  :data:`RELATIONS` (or ``any``) when ``gain ≥`` :data:`SYNTACTIC_MARGIN` on a group of at least
  :data:`MIN_RELATION_PAIRS` pairs (rarer relations, e.g. ``vocative``, are too noisy to judge).
  Relation ``any``: every non-root pair (the unlabelled "attends to its head" accuracy; the only
  relation of sources without labels, e.g. ptb-sample).
- Unknown words (``[UNK]``) and words split into pieces are kept and counted; sentences longer
  than the model's positions or empty after punctuation removal are skipped and counted.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import torch

from syntaxformer.analysis.head_data import (  # noqa: F401  (re-exported)
    FALLBACK_TEXT,
    DependencyData,
    EncodedSentences,
    TextChoice,
    choose_text,
    encode_counted,
    load_dependency_data,
    read_relations,
)
from syntaxformer.analysis.head_measures import (  # noqa: F401  (re-exported)
    ANY,
    DIRECTIONS,
    RELATIONS,
    DependencyCounts,
    RoleCounts,
    attention_weights,
    dependency_pairs,
    dependency_roles,
    head_importance,
    max_attention,
    mlm_batches,
    normalise_by_layer,
    rarest_word,
    relation_baselines,
    text_roles,
    word_attention,
)
from syntaxformer.errors import InputError
from syntaxformer.figures import save_figure, write_index
from syntaxformer.figures.head_maps import plot_head_map
from syntaxformer.models.encoder import HeadLayout, head_layout, normalise_pruned_heads  # noqa: F401  (re-exported)
from syntaxformer.parsing import load_model

logger = logging.getLogger(__name__)

#: Positional when the share of maxima on the previous (or next) word is at least this (%), DESIGN.md §3.5.
POSITIONAL_THRESHOLD = 90.0
#: Syntactic for a relation when its accuracy beats the relation's baseline by this many points.
SYNTACTIC_MARGIN = 10.0
#: A relation group with fewer pairs is reported but never makes a head syntactic nor "best".
MIN_RELATION_PAIRS = 50

PROTOCOL = {
    "importance": "I = sum_b T_b |dL_b/dxi| / sum_b T_b; L_b = mean masked-LM cross-entropy (nats) over "
    "the T_b masked tokens of batch b; xi = (L, H) head mask of ones; evaluation mode; "
    "normalised = I / l2 norm of its layer (DESIGN.md §3.5, Michel et al. 2019)",
    "words": "a word's row = its first piece's row; weight on a word = sum over its pieces; special "
    "tokens one extra column; rows divided by their sum before maxima; ties to the leftmost",
    "confidence": "mean over words of the row maximum (0-1), Voita et al. 2019",
    "positional": f"share (%) of words with a previous (next) word whose maximum is on it; positional "
    f"when >= {POSITIONAL_THRESHOLD}",
    "rare_word": "share (%) of words other than the rarest whose maximum is on the sentence's rarest "
    "word (ties: first); one-word sentences not counted",
    "syntactic": f"accuracy (%) of pairs whose dependent's (head's) maximum is on its head (dependent), "
    f"punctuation removed and heads re-attached; baseline = most frequent relative "
    f"position per relation and direction; syntactic for a relation of {', '.join(RELATIONS)} "
    f"or 'any' when gain >= {SYNTACTIC_MARGIN} points on >= {MIN_RELATION_PAIRS} pairs; "
    f"relation = UD label before ':'; 'any' = every non-root pair",
}


# --------------------------------------------------------------------------------------------------
# the report


def _dependency_section(result: dict, data: DependencyData, encoded: EncodedSentences, layout: HeadLayout) -> dict:
    """One gold source's part of ``heads.json``."""
    groups = [
        dict(
            relation=relation,
            direction=direction,
            n=g["n"],
            baseline_offset=g["baseline_offset"],
            baseline=None if g["baseline"] is None else round(g["baseline"], 2),
            accuracy=layout.grid(g["accuracy"], 2),
            gain=layout.grid(g["gain"], 2),
        )
        for (relation, direction), g in result.items()
    ]
    unlabelled = result[(ANY, DIRECTIONS[0])]
    stats = encoded.stats()
    stats["n_skipped_empty"] = data.n_empty
    return dict(
        source=data.source,
        labelled=data.relations is not None,
        **stats,
        n_punctuation_removed=data.n_punctuation,
        unlabelled_accuracy=layout.grid(unlabelled["accuracy"], 2),
        unlabelled_baseline=unlabelled["baseline"] and round(unlabelled["baseline"], 2),
        unlabelled_baseline_offset=unlabelled["baseline_offset"],
        groups=groups,
    )


def _syntactic_summary(sections: list[dict], layout: HeadLayout) -> tuple[list, list]:
    """Per head: the groups (relations of :data:`RELATIONS` and ``any``, at least
    :data:`MIN_RELATION_PAIRS` pairs) it is syntactic for, and its best group (the largest gain;
    among :data:`RELATIONS` when a source has labels, else relation ``any``)."""
    labelled = any(s["labelled"] for s in sections)
    syntactic = [[[] for _ in range(layout.heads)] for _ in range(layout.layers)]
    best = [[None] * layout.heads for _ in range(layout.layers)]
    for section in sections:
        for g in section["groups"]:
            if g["n"] < MIN_RELATION_PAIRS or (g["relation"] != ANY and g["relation"] not in RELATIONS):
                continue
            for layer in range(layout.layers):
                for head in range(layout.heads):
                    gain = g["gain"][layer][head]
                    if gain is None:
                        continue
                    entry = dict(
                        source=section["source"],
                        relation=g["relation"],
                        direction=g["direction"],
                        n=g["n"],
                        accuracy=g["accuracy"][layer][head],
                        baseline=g["baseline"],
                        gain=gain,
                    )
                    if gain >= SYNTACTIC_MARGIN:
                        syntactic[layer][head].append(entry)
                    candidate = (g["relation"] != ANY) if labelled else True
                    if candidate and (best[layer][head] is None or gain > best[layer][head]["gain"]):
                        best[layer][head] = entry
    return syntactic, best


def _role_sections(roles: dict, layout: HeadLayout, choice: TextChoice) -> dict:
    """The confidence, positional and rare-word parts of ``heads.json``."""
    previous, following = layout.grid(roles["previous"], 2), layout.grid(roles["next"], 2)

    def positional(p, n):
        if p is None:
            return None
        return "previous" if p >= POSITIONAL_THRESHOLD else ("next" if n >= POSITIONAL_THRESHOLD else False)

    return dict(
        confidence=layout.grid(roles["confidence"], 4),
        confidence_raw=layout.grid(roles["confidence_raw"], 4),
        positional=dict(
            previous=previous,
            next=following,
            n_previous=roles["n_previous"],
            n_next=roles["n_next"],
            threshold=POSITIONAL_THRESHOLD,
            role=[[positional(p, n) for p, n in zip(pr, nr)] for pr, nr in zip(previous, following)],
        ),
        self_share=layout.grid(roles["self"], 2),
        special_share=layout.grid(roles["special"], 2),
        rare_word=dict(
            share=layout.grid(roles["rare_word"], 2), n=roles["n_rare"], frequency_source=choice.frequency_source
        ),
    )


def analyse_model(
    model,
    tokenizer,
    info: dict,
    text: str | None = None,
    dependencies: Sequence[str] = (FALLBACK_TEXT,),
    seed: int = 0,
    max_sentences: int | None = None,
    batch_size: int = 32,
) -> dict:
    """Every measure of the module docstring for a loaded model (evaluation mode).

    Args:
        model, tokenizer: a masked LM of the registry and its tokenizer.
        info: its ``training.json`` (``{}`` if none): the held-out text, the training text's word
            frequencies, the masking rate and rule.
        text: a :func:`~syntaxformer.data.corpus.load_corpus` spec, or None (:func:`choose_text`).
        dependencies: gold dependency sources (ptb-sample parts, CoNLL-U files ...).
        seed: the masking generator's seed. max_sentences: at most this many sentences of each text.
        batch_size: sentences per forward pass (and per importance batch: it changes ``I``).

    Returns:
        The ``heads.json`` dictionary (per-head values as ``[L][H]`` lists, None at pruned heads).

    Raises:
        InputError: a model without heads or attention weights, unreadable or empty text / trees.
    """
    if batch_size < 1 or (max_sentences is not None and max_sentences < 1):
        raise InputError(f"--batch-size and --max-sentences must be at least 1, got {batch_size}, {max_sentences}")
    layout = head_layout(model)
    max_length = getattr(model.config, "max_position_embeddings", None)
    gold = [load_dependency_data(source, max_sentences) for source in dependencies]  # bad input first
    choice = choose_text(info, text, max_sentences)
    encoded = encode_counted(tokenizer, choice.sentences, max_length)
    if not encoded.ids:
        raise InputError("no sentence of the text fits the model", path=choice.source)
    args = info.get("arguments") or {}
    rate, replace = float(args.get("mask_rate", 0.15)), str(args.get("mask_replace", "bert"))
    device = next(model.parameters()).device
    raw, n_masked, loss = head_importance(
        model, mlm_batches(tokenizer, encoded.ids, batch_size, rate, replace, seed, device), layout
    )
    logger.info("importance: %d sentences, %d masked tokens, loss %.4f", len(encoded.ids), n_masked, loss)
    roles = text_roles(model, tokenizer, encoded, choice.frequencies, layout, batch_size)
    sections = []
    for data in gold:
        result, dep_encoded = dependency_roles(model, tokenizer, data, layout, batch_size, max_length)
        sections.append(_dependency_section(result, data, dep_encoded, layout))
    syntactic, best = _syntactic_summary(sections, layout)
    importance = dict(
        raw=layout.grid(raw, 8),
        normalised=layout.grid(normalise_by_layer(raw), 4),
        mean_loss=round(loss, 6),
        n_masked_tokens=n_masked,
        mask_rate=rate,
        mask_replace=replace,
        batch_size=batch_size,
        seed=seed,
    )
    config = model.config
    return dict(
        command="heads",
        model_type=getattr(config, "model_type", type(model).__name__),
        prior=getattr(config, "prior", None),
        preset=info.get("preset"),
        training_seed=info.get("seed"),
        layers=layout.layers,
        heads=layout.heads,
        pruned_heads={str(k): v for k, v in normalise_pruned_heads(getattr(config, "pruned_heads", None)).items()},
        seed=seed,
        protocol=PROTOCOL,
        text=dict(source=choice.source, **encoded.stats()),
        importance=importance,
        **_role_sections(roles, layout, choice),
        dependencies=sections,
        syntactic=dict(margin=SYNTACTIC_MARGIN, min_pairs=MIN_RELATION_PAIRS, heads=syntactic, best=best),
    )


def analyse_heads(
    model_folder: str | os.PathLike,
    text: str | None = None,
    dependencies: Sequence[str] = (FALLBACK_TEXT,),
    seed: int = 0,
    max_sentences: int | None = None,
    batch_size: int = 32,
    device: str | None = "cpu",
) -> dict:
    """:func:`analyse_model` on a model folder (:func:`~syntaxformer.parsing.load_model`); the
    report names the folder (``model``) and the device.

    Raises:
        InputError: as :func:`analyse_model`, or a folder that holds no model.
    """

    torch.manual_seed(seed)
    model, tokenizer, info = load_model(model_folder, device=device)
    report = analyse_model(model, tokenizer, info, text, dependencies, seed, max_sentences, batch_size)
    return dict(model=str(model_folder), device=str(next(model.parameters()).device), **report)


# --------------------------------------------------------------------------------------------------
# outputs


def _nan_grid(grid: list[list[float | None]]) -> list[list[float]]:
    return [[float("nan") if v is None else float(v) for v in row] for row in grid]


def _positional_and_syntactic(report: dict) -> tuple[list, list, list, list]:
    """The positional heatmap's shares and arrow labels, the syntactic one's gains and relation labels."""
    positional = report["positional"]
    shares = [
        [None if p is None else max(p, n) for p, n in zip(pr, nr)]
        for pr, nr in zip(positional["previous"], positional["next"])
    ]
    arrows = [
        [None if p is None else (f"←{p:.0f}" if p >= n else f"→{n:.0f}") for p, n in zip(pr, nr)]
        for pr, nr in zip(positional["previous"], positional["next"])
    ]
    best = report["syntactic"]["best"]
    gains = [[None if b is None else b["gain"] for b in row] for row in best]
    names = [
        [
            None
            if b is None
            else f"{b['relation']} {'d→h' if b['direction'] == DIRECTIONS[0] else 'h→d'}\n{b['gain']:+.1f}"
            for b in row
        ]
        for row in best
    ]
    return shares, arrows, gains, names


def heatmap_values(report: dict) -> list[tuple[str, str, dict]]:
    """``(file stem, caption, keyword arguments of plot_head_map)`` for each heatmap of a report."""
    shares, arrows, gains, names = _positional_and_syntactic(report)
    text = report["text"]["source"]
    return [
        (
            "importance",
            f"head importance (Michel et al.), ℓ2-normalised per layer; text: {text}",
            dict(
                values=_nan_grid(report["importance"]["normalised"]),
                title="importance (normalised per layer)",
                colorbar_label="I_h / ||I_layer||",
                vmin=0.0,
                vmax=1.0,
            ),
        ),
        (
            "confidence",
            "confidence (Voita et al.): mean maximum attention weight",
            dict(
                values=_nan_grid(report["confidence"]),
                title="confidence",
                colorbar_label="mean max weight",
                vmin=0.0,
                vmax=1.0,
            ),
        ),
        (
            "positional",
            f"positional share: maximum on the previous (←) or next (→) word, %; positional at "
            f"≥ {POSITIONAL_THRESHOLD:g}",
            dict(
                values=_nan_grid(shares),
                title="positional share (%)",
                colorbar_label="% of words",
                vmin=0.0,
                vmax=100.0,
                labels=arrows,
            ),
        ),
        (
            "syntactic",
            "best syntactic gain: accuracy − baseline (points) of the head's best relation "
            "and direction; syntactic at ≥ "
            f"{SYNTACTIC_MARGIN:g}",
            dict(
                values=_nan_grid(gains),
                title="best syntactic gain (points)",
                colorbar_label="points over baseline",
                center=0.0,
                labels=names,
            ),
        ),
        (
            "rare_word",
            f"rare-word share (%): maximum on the sentence's rarest word "
            f"(frequencies: {report['rare_word']['frequency_source']})",
            dict(
                values=_nan_grid(report["rare_word"]["share"]),
                title="rare-word share (%)",
                colorbar_label="% of words",
                vmin=0.0,
                vmax=100.0,
            ),
        ),
    ]


def write_heads_outputs(report: dict, out: str | os.PathLike) -> list[Path]:
    """Write ``OUT/heads.json``, the heatmaps (``OUT/<measure>.png`` and ``.svg``: importance,
    confidence, positional, syntactic, rare_word) and ``OUT/index.html`` linking them; the report
    gets a ``files`` list. Returns the paths written (JSON first)."""

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    figures, written = [], []
    for stem, caption, kwargs in heatmap_values(report):
        paths = save_figure(plot_head_map(**kwargs), out / stem)
        figures.append((caption, paths[0]))
        written.extend(paths)
    meta = (
        f"model {report.get('model')} ({report['model_type']}, prior {report['prior']}); text "
        f"{report['text']['source']}; dependencies "
        f"{', '.join(s['source'] for s in report['dependencies']) or 'none'}; seed {report['seed']}"
    )
    index = write_index(
        out,
        "Attention heads: importance and roles",
        [("layers × heads", figures)],
        meta=meta,
        notes=list(f"{k}: {v}" for k, v in PROTOCOL.items()),
    )
    json_path = out / "heads.json"
    written = [json_path, *written, index]
    report["files"] = [str(p) for p in written]
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return written
