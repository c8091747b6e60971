"""Probing a frozen encoder's layers (``syntaxformer probe``; Conneau et al., ACL 2018; DESIGN.md §6).

:func:`run_probe` builds the probing tasks from a gold treebank (:mod:`syntaxformer.probing.tasks`),
mean-pools every layer's outputs of the trained model and of the same architecture untrained (same
config, initialised from the seed), fits a logistic-regression and a one-hidden-layer MLP probe per
task, layer and encoder (L2 chosen on dev, accuracy on test), beside the majority class and a
bag-of-words probe, and writes ``OUT/report.json``, ``OUT/probe.{png,svg}`` and ``OUT/tasks/*.tsv``.
"""
from __future__ import annotations

import copy
import logging
import time
from pathlib import Path
from typing import Sequence

import torch

from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)

PROTOCOL = ("probing (Conneau et al. 2018): frozen encoder, mean over a sentence's tokens of each layer's "
            "output, standardised; logistic regression and a 50-unit MLP, L2 strength chosen on dev; "
            "accuracy (%) on test; splits 80/10/10 of the treebank's sentences by seed")


def _untrained_twin(model, seed: int):
    """The same architecture and config, freshly initialised from ``seed`` (the control encoder)."""
    torch.manual_seed(seed)
    twin = type(model)(copy.deepcopy(model.config))
    return twin.to(next(model.parameters()).device).eval()


def _vectors(model, tokenizer, tasks, batch_size):
    """Per task, every layer's sentence vectors; the tasks sharing their sentences share vectors."""
    from syntaxformer.probing.features import sentence_vectors
    cache, out, counts = {}, {}, {}
    for name, items in tasks.items():
        key = tuple(it.words for it in items)
        if key not in cache:
            cache[key] = sentence_vectors(model, tokenizer, [list(w) for w in key], batch_size)
        out[name], counts[name] = cache[key]
    return out, counts


def _probe_layers(layers, labels, split, classifiers, seed) -> list[dict]:
    from syntaxformer.probing.classifiers import probe
    return [{kind: probe(features, labels, split, kind, seed) for kind in classifiers} for features in layers]


def _best(rows: list[dict], kind: str) -> dict:
    """The layer whose probe is best on dev, with its test accuracy (chosen on dev, reported on test)."""
    layer = max(range(len(rows)), key=lambda i: rows[i][kind]["dev"])
    return {"layer": layer, "dev": rows[layer][kind]["dev"], "test": rows[layer][kind]["test"]}


def _task_report(name, items, trained, untrained, counts, classifiers, seed) -> dict:
    from syntaxformer.probing.classifiers import bag_of_words, majority, probe
    labels, split = [it.label for it in items], [it.split for it in items]
    bow = bag_of_words([it.words for it in items], split)
    layers = {"trained": _probe_layers(trained, labels, split, classifiers, seed),
              "untrained": _probe_layers(untrained, labels, split, classifiers, seed)}
    return {
        "n_sentences": {part: split.count(part) for part in ("train", "dev", "test")},
        "classes": sorted(set(labels)), "majority": majority(labels, split),
        "bag_of_words": {kind: probe(bow, labels, split, kind, seed) for kind in classifiers},
        "layers": layers,
        "best_layer": {enc: {kind: _best(rows, kind) for kind in classifiers} for enc, rows in layers.items()},
        "encoding": counts,
    }


def run_probe(out: str | Path, model: str | Path | None = None, treebank: str = "ptb-sample",
              tasks: Sequence[str] | None = None, classifiers: Sequence[str] = ("logreg", "mlp"),
              seed: int = 0, batch_size: int = 64, device: str | None = "cpu",
              max_sentences: int | None = None) -> dict:
    """Probe every layer of ``model`` on the tasks of ``treebank``; write the report and the figure.

    Args:
        out: output folder (``report.json``, ``probe.{png,svg}``, ``tasks/TASK.tsv``).
        model: a model folder; None = the pretrained Tree Transformer shipped in the package.
        treebank: gold constituency trees (``ptb-sample``, ``ptb-sample:dev``, or a .mrg path).
        tasks: task names (default all: SentLen, TreeDepth, TopConst, BShift).
        classifiers: ``logreg`` and/or ``mlp``.
        seed: splits, BShift's draws, the untrained twin's initialisation and the MLP's.
        batch_size: sentences per forward pass.
        device: where the encoder runs.
        max_sentences: use only the treebank's first N sentences (None = all).

    Returns:
        The report: data, protocol, model, seed, and per task the split sizes, classes, majority
        class, bag-of-words probe, per-layer probes of the trained and untrained encoder, and the
        best layer on dev with its test accuracy (accuracies in 0-100).

    Raises:
        InputError: unreadable trees, an unknown task or classifier, a model without hidden states.
    """
    from syntaxformer.data import load_gold_trees
    from syntaxformer.figures.probing import plot_probe
    from syntaxformer.figures import save_figure
    from syntaxformer.evaluation.report import to_json
    from syntaxformer.parsing import load_model
    from syntaxformer.pretrained import pretrained_folder
    from syntaxformer.probing.classifiers import CLASSIFIERS
    from syntaxformer.probing.tasks import TASKS, build_tasks, write_task_files

    start = time.monotonic()
    unknown = [t for t in (tasks or []) if t not in TASKS] + [c for c in classifiers if c not in CLASSIFIERS]
    if unknown:
        raise InputError(f"unknown task or classifier {unknown[0]!r}: tasks {sorted(TASKS)}, "
                         f"classifiers {list(CLASSIFIERS)}")
    trees = load_gold_trees(treebank)
    if max_sentences is not None:
        if max_sentences < 10:
            raise InputError(f"--max-sentences must be at least 10 (three splits), got {max_sentences}")
        trees = trees[:max_sentences]
    built = build_tasks(trees, seed, tasks)
    out = Path(out)
    write_task_files(built, out / "tasks")
    folder = model or pretrained_folder()
    trained, tokenizer, _ = load_model(folder, device=device)
    untrained = _untrained_twin(trained, seed)
    vectors, counts = _vectors(trained, tokenizer, built, batch_size)
    control, _ = _vectors(untrained, tokenizer, built, batch_size)
    report = {"data": {"treebank": treebank, "n_sentences": len(trees)}, "protocol": PROTOCOL,
              "model": str(folder), "model_type": trained.config.model_type, "seed": seed,
              "classifiers": list(classifiers), "tasks": {}}
    for name, items in built.items():
        logger.info("probing %s (%d sentences)", name, len(items))
        report["tasks"][name] = _task_report(name, items, vectors[name], control[name], counts[name],
                                             classifiers, seed)
    report["minutes"] = round((time.monotonic() - start) / 60, 2)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(to_json(report) + "\n")
    save_figure(plot_probe(report), out / "probe")
    return report
