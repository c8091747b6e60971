"""``syntaxformer induce``: the main job — train, parse, score against gold, compare with baselines.

On the embedded default it trains a Tree Transformer (or ``--model structformer`` / ``on-lstm``) on ptb-sample's
raw words with a named recipe (:data:`RECIPES`: ``default`` <= 20 minutes on 2 CPU cores, ``long``
<= 150), recording the learning curve on ``ptb-sample:dev`` (DESIGN.md §7); then it parses
ptb-sample and scores the test half, the dev half and all of it with the field's protocol, each
beside the same model untrained (step 0: same seed, same decoder) and left-/right-branching, random
and balanced trees. This is the transductive setting (the sentences parsed are in the training text,
as the Tree Transformer paper's "WSJ-all"). It writes into ``--out``: the model folder (``model/``),
``trees.txt`` (all sentences), (StructFormer: ``dependencies.conllu``), ``report.json`` and
``curve.{png,svg}``.

A recipe is a fixed number of steps (reproducible from the seed: the same model on any machine);
``--max-minutes`` stops training early only when given, and the header then says ``STOPPED EARLY: N of M
planned steps``. The recipes were chosen on the dev half (``benchmarks/recipe_search.py``,
docs/recipes.md); the report says so, and the test half is the headline. The work:
:func:`syntaxformer.workflows.induce.run_induce`; this module reads the arguments and prints the report.
"""

from __future__ import annotations

import argparse

from syntaxformer.cli.arguments import add_decoder_arguments, config_override, decoder_options
from syntaxformer.evaluation.report import BASELINE_NAMES, format_header, format_table, score_cell, to_json
from syntaxformer.workflows.induce import RECIPES, resolve_recipe

_TRAIN_FLAGS = (
    "preset",
    "max_steps",
    "max_minutes",
    "batch_size",
    "lr",
    "warmup_steps",
    "schedule",
    "schedule_steps",
    "mask_rate",
    "min_freq",
)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "induce",
        help="the main job: train on raw words, parse, score vs gold and baselines",
        description="Train a model on raw text, parse a treebank with it, score the trees against the "
        "gold ones (sentence- and corpus-level unlabelled F1, WSJ-10, label recall) and "
        "compare with the untrained model and left-/right-branching, random and balanced "
        "trees. On ptb-sample: scores on the test half, the dev half and all of it.",
    )
    p.add_argument("--model", default="tree-transformer", choices=sorted(RECIPES))
    p.add_argument(
        "--recipe",
        default="default",
        choices=["default", "long"],
        help="default: <= 20 min on 2 CPU cores; long: <= 150 min, on the ptb-lm training text "
        "(Tree Transformer, StructFormer: give its path with --corpus) "
        "(syntaxformer.cli.induce.RECIPES)",
    )
    p.add_argument(
        "--treebank",
        default="ptb-sample",
        help="gold treebank to parse and score ('ptb-sample', 'ptb-sample:dev|test' or a path)",
    )
    p.add_argument(
        "--dependencies",
        default=None,
        help="gold dependencies of --treebank's sentences for UAS/UUAS (StructFormer): "
        "'ptb-sample', a .conllu or .dp path (default: ptb-sample's with --treebank "
        "ptb-sample, else none)",
    )
    p.add_argument("--corpus", default=None, help="training text: 'ptb-sample' (its words; default) or raw-text files")
    p.add_argument(
        "--curve-treebank",
        default=None,
        help="treebank of the learning curve (default: ptb-sample:dev with ptb-sample, else "
        "--treebank); 'none' for no curve",
    )
    p.add_argument("--out", default="induce-out", help="output folder (default induce-out)")
    p.add_argument("--seed", type=int, default=0)
    for flag in _TRAIN_FLAGS:
        kind = {"schedule": str, "preset": str, "max_minutes": float, "lr": float, "mask_rate": float}.get(flag, int)
        p.add_argument(
            "--" + flag.replace("_", "-"),
            type=kind,
            default=None,
            help="training (default: the recipe's, per model; see syntaxformer.cli.induce.RECIPES)",
        )
    p.add_argument("--prior", default=None, help="Tree Transformer prior: constituent (default) or none")
    p.add_argument(
        "--variant",
        default=None,
        choices=["paper", "official"],
        help="Tree Transformer constituent variant (default: the recipe's)",
    )
    p.add_argument(
        "--set",
        dest="config",
        action="append",
        type=config_override,
        default=[],
        metavar="KEY=VALUE",
        help="override a model config field (JSON value) after the recipe's, "
        "e.g. --set constituent_diagonal='\"one\"'; repeatable",
    )
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the training in OUT/model from its checkpoint (same command; a run cut "
        "by --max-minutes or a signal goes on), then parse and score",
    )
    p.add_argument("--json", action="store_true", help="print report.json instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_decoder_arguments(p)
    p.set_defaults(func=run)


def _recipe(args) -> tuple[dict, dict, int | None]:
    """(TrainArguments fields, config overrides, Algorithm 1 minimum layer) of the recipe and flags
    (:func:`syntaxformer.workflows.induce.resolve_recipe`)."""
    return resolve_recipe(
        args.model,
        args.recipe,
        {flag: getattr(args, flag) for flag in _TRAIN_FLAGS},
        variant=args.variant,
        prior=args.prior,
        config=dict(args.config),
    )


def run(args: argparse.Namespace) -> int:
    from syntaxformer.workflows.induce import run_induce

    train, overrides, min_layer = _recipe(args)
    report = run_induce(
        args.out,
        model=args.model,
        recipe=args.recipe,
        train=train,
        overrides=overrides,
        min_layer=min_layer,
        treebank=args.treebank,
        corpus=args.corpus,
        curve_treebank=args.curve_treebank,
        dependencies=args.dependencies,
        seed=args.seed,
        prior=args.prior,
        threads=args.threads,
        device=args.device,
        quiet=args.quiet,
        resume=args.resume,
        options=decoder_options(args),
    )
    print(to_json(report) if args.json else format_induce_report(report))
    return 0


def _steps_text(training: dict) -> str:
    """``6,000 steps``, or ``STOPPED EARLY: 4,374 of 6,000 steps (max_minutes)`` for a cut run."""
    steps, planned = training.get("steps"), training.get("planned_steps")
    if steps is None:
        return "? steps"
    if planned is None or steps == planned:
        return f"{steps:,} steps"
    return f"STOPPED EARLY: {steps:,} of {planned:,} planned steps ({training.get('stopped') or 'stopped'})"


def format_induce_report(report: dict) -> str:
    """The tables of ``induce``: per scored part, the model beside the untrained model and every baseline."""
    name = report["model"].replace("-", "_")
    names = {name: report["model"], "untrained": "same model, untrained (step 0)", **BASELINE_NAMES}
    header = format_header(
        "syntaxformer induce",
        {
            "model": f"{report['model']} (preset {report['preset']}, recipe {report['recipe']}, seed {report['seed']})",
            "training": f"{report['data']['train']}, {_steps_text(report['training'])}, "
            f"{report['minutes']['train']:.1f} min",
            "treebank": f"{report['data']['treebank']} ({report['data']['setting']})",
            "protocol": report["protocol"],
            "decoder": ", ".join(f"{k}={v}" for k, v in report["decoder"].items()),
            "chosen": report["selection"],
        },
    )
    keys = ("sentence_f1", "corpus_f1", "wsj10_sentence_f1", "wsj10_corpus_f1", "mean_depth")
    parts = [header]
    for part, scores in report["parts"].items():
        rows = [n for n in names if n in scores]
        source = report["data"]["parts"][part]
        parts.append(
            f"{part}: {source['source']}, {source['n_sentences']:,} sentences\n"
            + format_table(
                ["trees", "sentence F1", "corpus F1", "WSJ-10 sent. F1", "WSJ-10 corpus F1", "mean depth"],
                [[names[n]] + [score_cell(scores[n], k) for k in keys] for n in rows],
            )
        )
        if scores.get("single_layer"):
            parts.append(
                "single-layer decoder (one layer's links or distances), sentence F1 by layer: "
                + ", ".join(f"{layer}: {r['sentence_f1']:.2f}" for layer, r in scores["single_layer"].items())
            )
        if scores.get("dependency"):
            parts.append(
                format_table(
                    ["dependencies", "UAS", "UUAS"],
                    [[k.replace("_", " "), v["uas"], v["uuas"]] for k, v in scores["dependency"].items()],
                )
            )
    labels = list(report[name]["label_recall"])
    rows = [n for n in names if n in report]
    parts.append(
        f"label recall ({report['primary']})\n"
        + format_table(
            ["recall (%)"] + labels,
            [[names[n]] + [score_cell(report[n], "label_recall", lab) for lab in labels] for n in rows],
        )
    )
    return "\n\n".join(parts)
