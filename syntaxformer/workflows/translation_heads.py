"""``heads`` and ``prune`` on a translation model: importance, BLEU pruning curves, hard-concrete gates.

* :func:`run_translation_heads`: Michel et al.'s importance of every head of the three kinds
  (:mod:`syntaxformer.analysis.translation_heads`) on validation pairs → ``OUT/heads.json``.
* :func:`run_translation_prune`: pruning curves with BLEU (:mod:`syntaxformer.analysis.translation_pruning`),
  importance order against random orders over seeds, for all heads together and per kind
  (``curves``) → ``OUT/prune.json``; with ``gates`` (λ values) Voita et al.'s hard-concrete gates on
  the encoder heads (:mod:`syntaxformer.analysis.translation_gates`) → ``OUT/gates.json``.

The validation pairs are tokenised files (``source``, ``target``: one sentence a line, aligned); the
first ``max_sentences`` pairs are used. No argparse, no printing: each returns its report.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from syntaxformer.analysis.head_measures import normalise_by_layer
from syntaxformer.analysis.pruning import (
    average_runs,
    curve_fractions,
    plot_pruning_curves,
    present_heads,
    rank_heads,
    reachable_fractions,
    select_heads,
)
from syntaxformer.analysis.translation_gates import (
    GATE_LR,
    GATE_MAX_TOKENS,
    GATE_STEPS,
    MODEL_LR,
    check_lambdas,
    finetune_with_gates,
    gates_record,
    open_gates,
)
from syntaxformer.analysis.translation_gates import PROTOCOL as GATES_PROTOCOL
from syntaxformer.analysis.translation_heads import (
    KIND_ABOUT,
    TranslationHeadLayout,
    pair_batches,
    translation_head_layout,
    translation_importance,
)
from syntaxformer.analysis.translation_pruning import (
    BLEU_MEASURES,
    TOLERANCE,
    TRANSLATION_ORDERS,
    BleuData,
    head_sets,
    measure_bleu,
    removable_share,
    translation_curve,
)
from syntaxformer.analysis.translation_pruning import PROTOCOL as PRUNE_PROTOCOL
from syntaxformer.blocks.hard_concrete import LOG_ALPHA_INIT, TEMPERATURE
from syntaxformer.data.parallel import read_aligned
from syntaxformer.errors import InputError
from syntaxformer.figures import save_figure
from syntaxformer.parsing import read_training_record
from syntaxformer.runtime import code_version
from syntaxformer.tasks.translation_data import encode_pairs, source_structures
from syntaxformer.tasks.translator import Translator, load_translator, translation_folder

logger = logging.getLogger(__name__)

#: Validation pairs of the BLEU curves by default (a CPU budget; ``max_sentences``).
BLEU_SENTENCES = 500

IMPORTANCE_PROTOCOL = (
    "I_h = sum_b T_b |dL_b/dxi_h| / sum_b T_b; L_b = mean plain cross-entropy (nats, no label smoothing) of "
    "the T_b target pieces of batch b, teacher-forced; xi = gates of ones on each head's slice of its "
    "attention's output-projection input; evaluation mode; normalised = I / l2 norm of its layer "
    "(Michel et al. 2019, eq. 2-3)"
)


def _data_record(translator: Translator, source, target, n_pairs: int, n_read: int, pairs) -> dict:
    return dict(
        source=str(source),
        target=str(target),
        pairs=n_pairs,
        pairs_in_files=n_read,
        source_pieces=sum(len(s) for s in pairs.source),
        target_pieces=sum(len(t) + 1 for t in pairs.target),
        source_structure=translator.kind,
        parser=translator.parser if translator.kind else None,
    )


def encoded_pairs(translator: Translator, source, target, max_sentences: int | None, tree_cache=None):
    """The first ``max_sentences`` pairs of two aligned tokenised files, encoded with the model's
    vocabulary (and its encoder's source structure); the tokenised references; the data's record.

    Raises:
        InputError: unreadable or misaligned files, ``max_sentences`` below 1.
    """
    if max_sentences is not None and max_sentences < 1:
        raise InputError(f"--max-sentences must be at least 1, got {max_sentences}")
    read = read_aligned(source, target)
    chosen = read[:max_sentences] if max_sentences is not None else read
    words = [s.split() for s, _ in chosen]
    structures = None
    if translator.kind is not None:
        structures = source_structures(words, translator.kind, translator.parser, tree_cache, translator.tree_level)
    pairs = encode_pairs(translator.tokenizer, words, [t.split() for _, t in chosen], translator.kind, structures)
    return pairs, [t for _, t in chosen], _data_record(translator, source, target, len(chosen), len(read), pairs)


def _model_record(model, translator: Translator) -> dict:
    folder = translation_folder(model)
    info = read_training_record(folder)
    config = translator.model.config
    return dict(
        model=str(model),
        model_type=config.model_type,
        variant=config.variant,
        encoder=config.encoder_architecture,
        preset=info.get("preset"),
        training_seed=info.get("seed"),
        training_steps=info.get("steps"),
        device=str(translator.model.device),
        code=code_version(),
    )


def _importance_section(layout: TranslationHeadLayout, raw: torch.Tensor, n_tokens: int, loss: float, batch) -> dict:
    normalised = normalise_by_layer(raw)
    split = layout.split(raw)
    total = float(torch.nan_to_num(raw, nan=0.0).sum())
    per_kind = {
        k: dict(
            about=KIND_ABOUT[k],
            layers=layout.layers[k],
            heads=layout.heads[k],
            raw=layout.grids(raw, 8)[k],
            normalised=layout.grids(normalised, 4)[k],
            mean_raw=round(float(torch.nanmean(split[k])), 8),
            share_of_total=round(float(torch.nan_to_num(split[k], nan=0.0).sum()) / max(total, 1e-300), 4),
        )
        for k in layout.kinds
    }
    return dict(kinds=per_kind, mean_loss=round(loss, 6), n_target_pieces=n_tokens, batch_size=batch)


def run_translation_heads(
    model: str | Path,
    source: str | Path,
    target: str | Path,
    out: str | Path | None = None,
    max_sentences: int | None = None,
    batch_size: int = 32,
    device: str | None = "cpu",
    seed: int = 0,
    tree_cache: str | Path | None = None,
) -> dict:
    """Michel et al.'s importance of every head of a translation model; writes ``OUT/heads.json``.

    Args:
        model: a translation model folder (or shipped name). source, target: tokenised validation
            files, aligned. out: output folder (None: nothing written). max_sentences: the first N pairs
            (None: all). batch_size: pairs per gradient (importance takes ``|∂L_b/∂ξ|`` per batch).
        device: torch device. seed: torch's seed (the importance itself has no randomness).
        tree_cache: where a structured encoder's source trees are cached.

    Returns:
        ``heads.json``: per kind the raw and normalised importance ``[layer][head]``, its mean and
        share of the total; the data, protocol, model, seed, device and code.

    Raises:
        InputError: not a translation model; unreadable or misaligned files; no target piece.
    """
    torch.manual_seed(seed)
    translator = load_translator(model, device=device, beam=1)
    pairs, _, data = encoded_pairs(translator, source, target, max_sentences, tree_cache)
    layout = translation_head_layout(translator.model)
    t0 = time.perf_counter()
    raw, n_tokens, loss = translation_importance(
        translator.model, pair_batches(pairs, batch_size, translator.model.device), layout
    )
    report = dict(
        command="heads",
        task="translation",
        **_model_record(model, translator),
        seed=seed,
        data=data,
        protocol=dict(importance=IMPORTANCE_PROTOCOL),
        importance=_importance_section(layout, raw, n_tokens, loss, batch_size),
        seconds=round(time.perf_counter() - t0, 2),
    )
    if out is not None:
        _write(report, Path(out) / "heads.json")
    return report


def _write(report: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    files = report.setdefault("files", [])
    if str(path) not in files:
        files.append(str(path))
    path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def restricted(full: TranslationHeadLayout, values: torch.Tensor, sub: TranslationHeadLayout) -> torch.Tensor:
    """The stacked ``values`` of ``full`` restricted to ``sub``'s kinds (``sub``'s stacked shape; NaN where absent)."""
    out = torch.full((sub.layout.layers, sub.layout.heads), float("nan"), dtype=values.dtype)
    parts = full.split(values)
    for kind in sub.kinds:
        start = sub.offset(kind)
        out[start : start + sub.layers[kind], : sub.heads[kind]] = parts[kind]
    return out


def _curve_set(name, kinds, translator, full, raw, fractions_asked, data, orders, seeds, tolerance=TOLERANCE) -> dict:
    """One set of heads' curves: per order its points (random: mean ± sd and each run) and the share
    removable within ``tolerance``."""
    layout = translation_head_layout(translator.model, kinds)
    fractions, left_out = reachable_fractions(fractions_asked, layout.layout)
    importance = restricted(full, raw, layout)
    full_bleu = measure_bleu(data, [])["bleu"]
    result = dict(
        kinds=list(layout.kinds),
        n_heads=len(present_heads(layout.layout)),
        max_removable=len(present_heads(layout.layout)) - layout.layout.layers,
        fractions=fractions,
        fractions_left_out=left_out,
        full_bleu=full_bleu,
        orders={},
    )
    for order in orders:
        if order == "random":
            runs = [translation_curve(layout, order, fractions, data, seed=s) for s in seeds]
            points = average_runs(runs, BLEU_MEASURES)
            shares = [removable_share(r, full_bleu, tolerance) for r in runs]
            result["orders"][order] = dict(
                seeds=list(seeds),
                points=points,
                runs=runs,
                removable=removable_share(points, full_bleu, tolerance),
                removable_per_seed=shares,
            )
        else:
            points = translation_curve(layout, order, fractions, data, importance=importance)
            result["orders"][order] = dict(points=points, removable=removable_share(points, full_bleu, tolerance))
    logger.info(
        "%s: within %.1f BLEU of %.2f, %s",
        name,
        tolerance,
        full_bleu,
        ", ".join(f"{o} {100 * c['removable']['fraction_removed']:.0f}%" for o, c in result["orders"].items()),
    )
    return result


def check_prune_arguments(orders, step: float, seeds: int, curves, lambdas, beam: int) -> tuple[list, list, list]:
    """``(orders, fractions, head sets)`` after checking the arguments, before any work.

    Raises:
        InputError: an unknown order or set of heads, ``step`` outside (0, 1), seeds below 1 with the
            random order, a negative λ, ``beam`` below 1.
    """
    orders = list(dict.fromkeys(orders))
    for order in orders:
        if order not in TRANSLATION_ORDERS:
            raise InputError(f"unknown pruning order {order!r} for a translation model: choose from importance, random")
    if seeds < 0 or ("random" in orders and seeds < 1):
        raise InputError(f"--seeds must be at least 1 for the random order (0 drops the control), got {seeds}")
    if seeds > 0 and "random" not in orders:
        orders.append("random")
    if beam < 1:
        raise InputError(f"--beam must be at least 1, got {beam}")
    try:
        sets = head_sets(curves)
        check_lambdas(lambdas)
    except ValueError as e:
        raise InputError(str(e)) from None
    return orders, curve_fractions(step), sets


def _importance_order_bleu(data: BleuData, layout: TranslationHeadLayout, importance, count: int) -> dict | None:
    """BLEU of the unchanged model without ``count`` encoder heads, least important first (one per layer kept)."""
    if importance is None:
        return None
    scores = normalise_by_layer(restricted(data.full, importance, layout))
    removed = select_heads(rank_heads(scores, layout.layout), layout.layout, [], count)
    return dict(n_removed=len(removed), bleu=measure_bleu(data, [layout.name(h) for h in removed])["bleu"])


def run_gates(
    model,
    translator: Translator,
    data: BleuData,
    lambdas: Sequence[float],
    train_source=None,
    train_target=None,
    steps: int = GATE_STEPS,
    lr: float = MODEL_LR,
    gate_lr: float = GATE_LR,
    max_tokens: int = GATE_MAX_TOKENS,
    seed: int = 0,
    tree_cache=None,
    importance: torch.Tensor | None = None,
) -> dict:
    """Voita et al.'s gates on the encoder heads at each λ (:mod:`syntaxformer.analysis.translation_gates`):
    per λ the binarised gates, BLEU with the closed heads' gates at 0, BLEU of the fine-tuned model with
    every head open, the loss log; the settings and the training data (default: the model's ``training.json``).
    With ``importance`` (the stacked raw importance of every kind, :func:`translation_importance`) also
    the BLEU of the unchanged model without as many encoder heads, least important first (one kept per
    layer: at most the encoder's heads minus its layers).

    Raises:
        InputError: no training files given or recorded; unreadable files; ``steps`` below 1.
    """
    if steps < 1:
        raise InputError(f"--gate-steps must be at least 1, got {steps}")
    train_pairs, train_record = _gate_training_pairs(model, translator, train_source, train_target, tree_cache)
    layout = translation_head_layout(translator.model, ("encoder",))
    results = []
    for l0 in lambdas:
        t0 = time.perf_counter()
        tuned, gates, log = finetune_with_gates(
            translator.model, layout, train_pairs, l0, steps, lr, gate_lr, max_tokens, seed=seed
        )
        result = _gated_model_record(tuned, gates, layout, translator, data, importance)
        results.append(dict(gate_l0=l0, **result, log=log, minutes=round((time.perf_counter() - t0) / 60, 2)))
        logger.info(
            "gates lambda %g: %d of %d encoder heads kept, BLEU %.2f",
            l0,
            result["n_kept"],
            result["n_heads"],
            result["bleu"],
        )
    return dict(
        lambdas=list(lambdas),
        settings=dict(
            steps=steps,
            lr=lr,
            gate_lr=gate_lr,
            max_tokens=max_tokens,
            temperature=TEMPERATURE,
            init_log_alpha=LOG_ALPHA_INIT,
            seed=seed,
        ),
        training_data=train_record,
        full_bleu=measure_bleu(data, [])["bleu"],
        protocol=dict(GATES_PROTOCOL, bleu=PRUNE_PROTOCOL["bleu"]),
        results=results,
    )


def _gate_training_pairs(model, translator: Translator, train_source, train_target, tree_cache) -> tuple:
    """The encoded pairs the gates are fine-tuned on (default: the training files the model's
    ``training.json`` names) and their record.

    Raises:
        InputError: no training files given or recorded; unreadable files.
    """
    info = read_training_record(translation_folder(model))
    recorded = info.get("data") or {}
    train_source = train_source or recorded.get("source")
    train_target = train_target or recorded.get("target")
    if not train_source or not train_target:
        raise InputError("--gates: give --train-source and --train-target (the model's training.json names none)")
    arguments = info.get("arguments") or {}
    cache = tree_cache or arguments.get("tree_cache") or arguments.get("out")
    train_pairs, _, train_record = encoded_pairs(translator, train_source, train_target, None, cache)
    return train_pairs, train_record


def _gated_model_record(
    tuned, gates, layout: TranslationHeadLayout, translator: Translator, data: BleuData, importance
):
    """One λ's result: the binarised gates (:func:`gates_record`), BLEU of the fine-tuned model ``tuned``
    with the closed heads removed and with every head open, and (with ``importance``) the unchanged model
    without as many heads, least important first."""
    tuned_data = BleuData(
        Translator(tuned, translator.tokenizer, translator.beam, translator.batch_size, translator.parser),
        data.pairs,
        data.references,
        data.full,
    )
    record = gates_record(gates, layout)
    closed = (open_gates(gates) == 0) & layout.layout.kept()
    named = [("encoder", int(l), int(h)) for l, h in closed.nonzero().tolist()]
    return dict(
        bleu=measure_bleu(tuned_data, named)["bleu"],
        bleu_all_heads_open=measure_bleu(tuned_data, [])["bleu"],
        importance_order=_importance_order_bleu(data, layout, importance, len(named)),
        **record,
    )


def run_translation_prune(
    out: str | Path,
    model: str | Path,
    source: str | Path,
    target: str | Path,
    orders: Sequence[str] = ("importance",),
    step: float = 0.1,
    seed: int = 0,
    seeds: int = 3,
    curves: Sequence[str] = ("all", "encoder"),
    max_sentences: int | None = BLEU_SENTENCES,
    beam: int = 1,
    batch_size: int = 64,
    importance_batch_size: int = 32,
    device: str | None = "cpu",
    gates: Sequence[float] = (),
    gate_options: dict | None = None,
    tree_cache: str | Path | None = None,
) -> dict:
    """Pruning curves of a translation model with BLEU (and with ``gates``, Voita's gates); writes
    ``OUT/prune.json`` (and ``OUT/gates.json``).

    Args:
        out: output folder. model: a translation model folder (or shipped name). source, target: the
            tokenised validation files. orders: ``importance`` (``random`` is added unless ``seeds`` is 0).
        step: fraction of the heads per step. seed: the first random seed (seeds ``seed .. seed + seeds − 1``).
        curves: sets of heads, each pruned alone: ``all`` (every kind together) or a kind; none: no curve.
        max_sentences: the first N validation pairs (BLEU and importance). beam: the search (1: greedy).
        batch_size: sentences per search. importance_batch_size: pairs per importance gradient.
        device: torch device. gates: λ values of the hard-concrete gates (none: no gates).
        gate_options: :func:`run_gates`' keyword arguments (``train_source``, ``train_target``, ``steps``,
            ``lr``, ``gate_lr``, ``max_tokens``). tree_cache: where source trees are cached.

    Returns:
        ``prune.json``: the importance, per set of heads its curves and the share removable within
        0.5 BLEU per order; the data, protocol, model, seeds, device, code (and ``gates``: ``gates.json``).

    Raises:
        InputError: bad arguments (:func:`check_prune_arguments`), not a translation model, bad files.
    """
    orders, fractions, sets = check_prune_arguments(orders, step, seeds, curves, gates, beam)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    translator = load_translator(model, device=device, beam=beam, batch_size=batch_size)
    pairs, references, described = encoded_pairs(translator, source, target, max_sentences, tree_cache)
    full = translation_head_layout(translator.model)
    raw, n_tokens, loss = translation_importance(
        translator.model, pair_batches(pairs, importance_batch_size, translator.model.device), full
    )
    data = BleuData(translator, pairs, references, full)
    seed_list = list(range(seed, seed + seeds))
    curve_sets = {
        name: _curve_set(name, kinds, translator, full, raw, fractions, data, orders, seed_list) for name, kinds in sets
    }
    report = dict(
        command="prune",
        task="translation",
        **_model_record(model, translator),
        seed=seed,
        random_seeds=seed_list,
        step=step,
        beam=beam,
        search="greedy" if beam == 1 else f"beam {beam}",
        tolerance=TOLERANCE,
        data=described,
        protocol=dict(PRUNE_PROTOCOL, importance=IMPORTANCE_PROTOCOL),
        importance=_importance_section(full, raw, n_tokens, loss, importance_batch_size),
        full_bleu=measure_bleu(data, [])["bleu"],
        curves=curve_sets,
        minutes=round((time.perf_counter() - t0) / 60, 2),
    )
    out = Path(out)
    report["files"] = [str(p) for p in write_curve_figures(report, out)]
    _write(report, out / "prune.json")  # the curves are kept should the gates fail
    if gates:
        gate_options = dict(gate_options or {}, seed=seed, tree_cache=tree_cache, importance=raw)
        report["gates"] = _gates_section(out, model, translator, data, gates, gate_options, described)
        _write(report, out / "prune.json")
    return report


def _gates_section(out: Path, model, translator: Translator, data: BleuData, lambdas, options: dict, described) -> dict:
    """Run :func:`run_gates` (keyword arguments ``options``), write its whole report to ``OUT/gates.json``
    and return the summary ``prune.json`` keeps (the λ values, the full BLEU, heads kept and BLEU per λ)."""
    t0 = time.perf_counter()
    gate_report = run_gates(model, translator, data, lambdas, **options)
    gate_report = dict(
        command="prune --gates",
        task="translation",
        **_model_record(model, translator),
        data=described,
        beam=translator.beam,
        **gate_report,
        minutes=round((time.perf_counter() - t0) / 60, 2),
    )
    _write(gate_report, out / "gates.json")
    return {k: gate_report[k] for k in ("lambdas", "full_bleu", "files")} | dict(
        kept_and_bleu=[
            dict(gate_l0=r["gate_l0"], n_kept=r["n_kept"], bleu=r["bleu"], importance_order=r["importance_order"])
            for r in gate_report["results"]
        ]
    )


def write_curve_figures(report: dict, out: Path) -> list[Path]:
    """``OUT/prune-SET.{png,svg}`` per set of heads: BLEU against the share of heads removed, one line per
    order (random: mean ± sd). Returns the paths written."""
    written = []
    for name, curve in report["curves"].items():
        lines = [
            dict(
                label=f"{order} ({len(c['seeds'])} seeds, mean ± sd)" if order == "random" else order,
                points=c["points"],
            )
            for order, c in curve["orders"].items()
        ]
        title = (
            f"{Path(report['model']).name} ({report['variant']}): {name} heads ({curve['n_heads']}); "
            f"{report['data']['pairs']} pairs of {Path(report['data']['source']).name}, {report['search']}"
        )
        label = f"BLEU-4 (tokenised), {report['search']}"
        written += save_figure(plot_pruning_curves(lines, title, panels=[("bleu", label)]), out / f"prune-{name}")
    return written


__all__ = [
    "BLEU_SENTENCES",
    "IMPORTANCE_PROTOCOL",
    "encoded_pairs",
    "run_translation_heads",
    "restricted",
    "check_prune_arguments",
    "run_gates",
    "run_translation_prune",
]
