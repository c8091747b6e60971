"""Pruning curves of a model folder (``syntaxformer prune``; DESIGN.md §3.5).

Loads a model (default: the parser shipped in the package, with its minimum layer), removes its
attention heads a fraction at a time in each order asked for (importance, confidence, random; the
random order over several seeds as the control), measures the masked-LM perplexity (the project's
one-mask protocol) on held-out text and, for models that induce structure, bracket F1 on
``ptb-sample:dev``; writes ``OUT/prune.json`` and ``OUT/prune.{png,svg}``, and with ``save_at`` the
pruned model at that fraction (``OUT/pruned-F/``). The rules are in :mod:`syntaxformer.analysis.pruning`.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import asdict
from pathlib import Path

import torch

from syntaxformer.analysis.heads import choose_text, encode_counted, head_layout, mlm_batches
from syntaxformer.analysis.pruning import (
    ORDERS,
    PROTOCOL,
    SCORED_ORDERS,
    PruneData,
    average_runs,
    by_layer,
    curve_fractions,
    plot_pruning_curves,
    present_heads,
    pruning_curve,
    reachable_fractions,
)
from syntaxformer.data import load_gold_trees
from syntaxformer.data.tokenization import save_tokenizer
from syntaxformer.errors import InputError
from syntaxformer.evaluation.constituency import PROTOCOL as F1_PROTOCOL
from syntaxformer.evaluation.perplexity import PROTOCOL as PPL_PROTOCOL
from syntaxformer.figures import save_figure
from syntaxformer.parsing import induces_structure, load_model
from syntaxformer.pretrained import model_or_pretrained
from syntaxformer.training.mlm import IGNORE_INDEX

logger = logging.getLogger(__name__)

#: Gold trees of the F1 curve (choices are made on dev, ARCHITECTURE.md).
F1_TREEBANK = "ptb-sample:dev"
#: Default number of seeds of the random control.
N_SEEDS = 3


def check_arguments(orders, step: float, seeds: int, save_at: float | None, via: str) -> list[float]:
    """Validate the arguments before any work; returns the curve's fractions.

    Raises:
        InputError: an unknown order, no order, ``step`` outside (0, 1), a negative number of seeds
            (or none with the random order), ``save_at`` not one of the fractions, an unknown ``via``.
    """

    if not orders:
        raise InputError(f"no pruning order: choose from {', '.join(ORDERS)}")
    for order in orders:
        if order not in ORDERS:
            raise InputError(f"unknown pruning order {order!r}: choose from {', '.join(ORDERS)}")
    fractions = curve_fractions(step)
    if seeds < 0 or ("random" in orders and seeds < 1):
        raise InputError(f"--seeds must be at least 1 for the random order (0 drops the control), got {seeds}")
    if save_at is not None and not any(abs(save_at - f) < 1e-9 for f in fractions):
        shown = ", ".join(f"{f:g}" for f in fractions)
        raise InputError(f"--save-at {save_at} is not a fraction of the curve ({shown})")
    if via not in ("prune", "mask"):
        raise InputError(f"via must be 'prune' or 'mask', not {via!r}")
    return fractions


def prepare_data(
    model,
    tokenizer,
    info: dict,
    text: str | None,
    max_sentences: int | None,
    seed: int,
    options,
    batch_size: int,
    batch_tokens: int,
    via: str,
    treebank: str | None = F1_TREEBANK,
):
    """The :class:`~syntaxformer.analysis.pruning.PruneData` of a loaded model and a description of it
    (text, importance masking, treebank) for the report; F1 against ``treebank`` for models that
    induce structure (None: no F1).

    Raises:
        InputError: an unreadable or empty text, no sentence that fits the model.
    """

    choice = choose_text(info, text, max_sentences)
    encoded = encode_counted(tokenizer, choice.sentences, getattr(model.config, "max_position_embeddings", None))
    if not encoded.ids:
        raise InputError("no sentence of the text fits the model", path=choice.source)
    args = info.get("arguments") or {}
    rate, replace = float(args.get("mask_rate", 0.15)), str(args.get("mask_replace", "bert"))
    device = next(model.parameters()).device
    batches = mlm_batches(tokenizer, encoded.ids, batch_size, rate, replace, seed, device)
    gold = None
    induces = induces_structure(model)
    if treebank is not None and induces:
        gold = load_gold_trees(treebank)
    data = PruneData(
        sentences=encoded.words,
        encoded=encoded,
        batches=batches,
        frequencies=choice.frequencies,
        gold=gold,
        options=options,
        batch_tokens=batch_tokens,
        batch_size=batch_size,
        via=via,
    )
    described = dict(
        text=dict(source=choice.source, **encoded.stats()),
        importance=dict(
            n_masked_tokens=sum(int((b[2] != IGNORE_INDEX).sum()) for b in batches),
            mask_rate=rate,
            mask_replace=replace,
            batch_size=batch_size,
            seed=seed,
        ),
        treebank=treebank if gold is not None else None,
        n_treebank_sentences=len(gold) if gold is not None else None,
    )
    return data, described


def save_pruned(pruned, tokenizer, source: Path, folder: Path, record: dict) -> Path:
    """Write a pruned model where :func:`~syntaxformer.parsing.load_model` reads it: ``save_pretrained``
    (``config.pruned_heads`` restores the shape), the tokenizer, the source's ``training.json`` and
    ``pruning.json`` (``record``: order, fraction, heads removed)."""

    folder.mkdir(parents=True, exist_ok=True)
    pruned.save_pretrained(folder, safe_serialization=True)
    save_tokenizer(tokenizer, folder)
    if (source / "training.json").is_file():
        shutil.copy(source / "training.json", folder / "training.json")
    (folder / "pruning.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    logger.info("saved the pruned model (%s heads removed) to %s", record["n_removed"], folder)
    return folder


def _label(order: str, recompute: bool, seeds=None) -> str:
    if order == "random":
        return f"random (mean ± sd, {len(seeds)} seeds)"
    return f"{order} (recomputed)" if recompute else f"{order} (scored once)"


def run_curves(model, tokenizer, orders, fractions, data, recompute: bool, seeds: list[int], saver) -> dict:
    """``{order: {"label", "recompute", "points", ("seeds", "runs" for random)}}``; ``saver`` (the
    :func:`~syntaxformer.analysis.pruning.pruning_curve` ``on_point``, or None) watches the first order
    (its first seed)."""

    curves = {}
    for i, order in enumerate(orders):
        watch = saver if i == 0 else None
        if order == "random":
            runs = [
                pruning_curve(model, tokenizer, order, fractions, data, seed=s, on_point=watch if j == 0 else None)
                for j, s in enumerate(seeds)
            ]
            curves[order] = dict(
                label=_label(order, False, seeds), recompute=False, seeds=seeds, points=average_runs(runs), runs=runs
            )
        else:
            points = pruning_curve(model, tokenizer, order, fractions, data, recompute=recompute, on_point=watch)
            curves[order] = dict(
                label=_label(order, recompute), recompute=recompute and order in SCORED_ORDERS, points=points
            )
    return curves


def _pruned_model_saver(save_at, order, seed, folder, tokenizer, out: Path, saved: dict):
    """The callback :func:`run_curves` calls after each step: at the fraction ``save_at`` it saves the
    first order's pruned model into ``OUT/pruned-F/`` and fills ``saved`` with its record."""

    def saver(fraction, removed, pruned):
        if save_at is not None and abs(fraction - save_at) < 1e-9:
            record = dict(
                source=str(folder),
                order=order,
                fraction=fraction,
                n_removed=len(removed),
                removed={str(k): v for k, v in by_layer(removed).items()},
                seed=seed if order == "random" else None,
            )
            saved.update(
                record, path=str(save_pruned(pruned, tokenizer, Path(folder), out / f"pruned-{save_at:g}", record))
            )

    return saver


def _prune_report(loaded, folder, info, layout, seed, seeds, run, data, described, options, curves, saved) -> dict:
    """``prune.json``: the model, its heads, the seeds, the run's settings (``run``: step, recompute, via,
    fractions), the data, the protocols and the curves."""
    config = loaded.config
    return dict(
        command="prune",
        model=str(folder),
        model_type=getattr(config, "model_type", None),
        prior=getattr(config, "prior", None),
        preset=info.get("preset"),
        training_seed=info.get("seed"),
        device=str(next(loaded.parameters()).device),
        layers=layout.layers,
        heads=layout.heads,
        n_heads=len(present_heads(layout)),
        max_removable=len(present_heads(layout)) - layout.layers,
        seed=seed,
        random_seeds=list(range(seed, seed + seeds)),
        **run,
        data=described,
        decoder=asdict(options) if data.gold is not None else None,
        protocol=dict(perplexity=PPL_PROTOCOL, f1=F1_PROTOCOL if data.gold is not None else None, pruning=PROTOCOL),
        orders=curves,
        saved=saved or None,
    )


def run_prune(
    out: str | Path,
    model: str | Path | None = None,
    orders=("importance",),
    step: float = 0.1,
    recompute: bool = False,
    seed: int = 0,
    seeds: int = N_SEEDS,
    save_at: float | None = None,
    text: str | None = None,
    options=None,
    device: str | None = "cpu",
    max_sentences: int | None = None,
    batch_size: int = 32,
    batch_tokens: int = 4096,
    via: str = "prune",
    treebank: str | None = F1_TREEBANK,
) -> dict:
    """Pruning curves of a model folder; writes ``OUT/prune.json``, ``OUT/prune.{png,svg}`` and with
    ``save_at`` ``OUT/pruned-F/``.

    Args:
        out: output folder. model: a model folder (None: the shipped parser, with its minimum layer).
        orders: names of :data:`~syntaxformer.analysis.pruning.ORDERS`; ``random`` is added as the
            control unless ``seeds`` is 0. step: fraction of the heads per step, in (0, 1).
        recompute: rescore the pruned model before each step. seed: the importance masks' seed; the
            random seeds are ``seed .. seed + seeds − 1``. save_at: a fraction of the curve at which to
            save the first order's pruned model. text: the perplexity / scoring text (default: the
            model's held-out text, else ptb-sample:dev). options: decoder settings (None = the model's
            saved ones; a dict = choices over them; a :class:`~syntaxformer.structures.DecoderOptions`
            = exactly these; :func:`syntaxformer.parsing.resolve_decoder_options`). device: torch device. max_sentences: of
            the text. batch_size: sentences per importance / confidence / parsing batch. batch_tokens:
            tokens per perplexity pass. via: ``"prune"`` or ``"mask"`` (how the perplexity removes heads).
            treebank: the gold trees of the sentence F1 (default ptb-sample's dev half; None: no F1).

    Returns:
        The ``prune.json`` dictionary: per order its points (fraction, heads removed per layer,
        perplexity, F1 0–100), the data, protocols, model and seeds.

    Raises:
        InputError: bad arguments (:func:`check_arguments`), no model, unreadable text, a tokenizer
            without one token per word (the perplexity protocol).
    """

    orders = list(dict.fromkeys(orders))
    fractions = check_arguments(orders, step, seeds, save_at, via)
    if seeds > 0 and "random" not in orders:
        orders.append("random")
    folder, options = model_or_pretrained(model, options)
    torch.manual_seed(seed)
    loaded, tokenizer, info = load_model(folder, device=device)
    layout = head_layout(loaded)
    fractions, left_out = reachable_fractions(fractions, layout)
    if save_at is not None and not any(abs(save_at - f) < 1e-9 for f in fractions):
        raise InputError(f"--save-at {save_at}: more heads than can go with one kept per layer")
    data, described = prepare_data(
        loaded, tokenizer, info, text, max_sentences, seed, options, batch_size, batch_tokens, via, treebank
    )
    out, saved = Path(out), {}
    saver = _pruned_model_saver(save_at, orders[0], seed, folder, tokenizer, out, saved)
    curves = run_curves(loaded, tokenizer, orders, fractions, data, recompute, list(range(seed, seed + seeds)), saver)
    run = dict(step=step, recompute=recompute, via=via, fractions=fractions, fractions_left_out=left_out)
    report = _prune_report(loaded, folder, info, layout, seed, seeds, run, data, described, options, curves, saved)
    write_prune_outputs(report, out)
    return report


def write_prune_outputs(report: dict, out: str | Path) -> list[Path]:
    """Write ``OUT/prune.json`` and the plot ``OUT/prune.png`` / ``.svg``; the report gets ``files``.
    Returns the paths written (JSON first)."""

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    curves = [dict(label=c["label"], points=c["points"]) for c in report["orders"].values()]
    title = (
        f"{Path(report['model']).name} ({report['model_type']}, {report['n_heads']} heads); text: "
        f"{report['data']['text']['source']}; seed {report['seed']}"
    )
    figures = save_figure(plot_pruning_curves(curves, title=title), out / "prune")
    json_path = out / "prune.json"
    written = [json_path, *figures]
    report["files"] = [str(p) for p in written]
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return written
