"""``syntaxformer nli train | evaluate | vectors``: natural-language inference with the Gaussian
Transformer and its twins (DESIGN.md §3.1, §6).

* ``train``: a sentence-pair classifier on SICK (``--corpus sick``: select on TRIAL, report TEST) or
  on JSON-lines / TSV files; checkpoints and ``--resume``; ``OUT/report.json``, a table or ``--json``.
* ``evaluate``: a saved model on one split.
* ``vectors``: word2vec vectors trained on the project's text (for ``train --word-vectors``).

The work is in :mod:`syntaxformer.workflows.nli`; this module parses and prints.
"""

from __future__ import annotations

import argparse

from syntaxformer.evaluation.report import format_header, format_table, to_json

#: the options of ``nli train`` that are not :class:`~syntaxformer.tasks.nli.NliTrainArguments` fields
TRAIN_COMMAND_ONLY = ("--recipe", "--json")


def _add_train(sub) -> None:
    """``nli train``: one option per :class:`~syntaxformer.tasks.nli.NliTrainArguments` field; those a
    recipe sets default to the recipe's, the others to the field's default."""
    from syntaxformer.cli.arguments import STATED_DEFAULT, add_dataclass_arguments
    from syntaxformer.models import PAIR_MODELS
    from syntaxformer.tasks.nli import NliTrainArguments
    from syntaxformer.workflows.nli import RECIPES

    p = sub.add_parser(
        "train",
        help="train a sentence-pair classifier, select on TRIAL, report TEST",
        description="Train on the training pairs by a recipe (epochs), select the model of "
        "the best selection accuracy, score it on the report pairs.",
    )
    p.add_argument(
        "--recipe",
        default="default",
        choices=sorted(RECIPES),
        help="training recipe (syntaxformer.workflows.nli.RECIPES); the options below override it",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    from_recipe = {name for recipe in RECIPES.values() for name in recipe}
    options = add_dataclass_arguments(p, NliTrainArguments, defaults=dict.fromkeys(from_recipe - {"overrides"}))
    options["model"].choices = sorted(PAIR_MODELS)  # as registered now (an architecture may be added later)
    for name in from_recipe - {"overrides"}:
        action = options[name]
        action.help = STATED_DEFAULT.sub("", action.help).rstrip() + " (default: the recipe's)"
    p.set_defaults(func=run_train)


def _add_evaluate(sub) -> None:
    p = sub.add_parser("evaluate", help="score a saved sentence-pair classifier on one split")
    p.add_argument("--model", required=True, help="a folder `nli train` wrote (OUT/best is the selected model)")
    p.add_argument("--corpus", dest="data", default="sick", help="sick, a SICK-format file or a JSON-lines / TSV file")
    p.add_argument(
        "--split", default=None, help="SICK: train, trial or test; other files: all (default: test for SICK, else all)"
    )
    p.add_argument("--batch-size", type=int, default=64, help="pairs per batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: PyTorch's)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run_evaluate)


def _add_vectors(sub) -> None:
    from syntaxformer.data.word_vectors import DEFAULT_TEXT

    p = sub.add_parser("vectors", help="train word2vec vectors on text files (for train --word-vectors)")
    p.add_argument(
        "--corpus",
        dest="text",
        nargs="+",
        default=list(DEFAULT_TEXT),
        help="text files, one sentence per line (default: ptb-lm + WikiText-2 training text)",
    )
    p.add_argument("--out", required=True, help="the vectors' file (gensim KeyedVectors)")
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--min-count", type=int, default=3)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run_vectors)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "nli",
        help="natural-language inference: the Gaussian Transformer on SICK",
        description="Sentence-pair classification (entailment / neutral / "
        "contradiction): train, evaluate, word vectors.",
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    _add_train(sub)
    _add_evaluate(sub)
    _add_vectors(sub)


def run_train(args: argparse.Namespace) -> int:
    """``nli train``: :func:`~syntaxformer.workflows.nli.run_nli_train` with the options given (None and
    an absent flag: the recipe's)."""
    from syntaxformer.cli.arguments import dataclass_values
    from syntaxformer.tasks.nli import NliTrainArguments
    from syntaxformer.workflows.nli import run_nli_train

    values = dataclass_values(args, NliTrainArguments)
    values = {key: (value or None) if isinstance(value, bool) else value for key, value in values.items()}
    report = run_nli_train(
        values.pop("out"),
        data=values.pop("data"),
        model=values.pop("model"),
        recipe=args.recipe,
        seed=values.pop("seed"),
        valid=values.pop("valid_file"),
        test=values.pop("test_file"),
        **values,
    )
    print(to_json(report) if args.json else format_train_report(report))
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from syntaxformer.data.nli import detect_format
    from syntaxformer.workflows.nli import run_nli_evaluate

    split = args.split
    if split is None:
        sick = args.data == "sick" or detect_format(Path(args.data)) == "sick"
        split = "test" if sick else "all"
    report = run_nli_evaluate(
        args.model,
        data=args.data,
        split=split,
        batch_size=args.batch_size,
        seed=args.seed,
        threads=args.threads,
        device=args.device,
    )
    if args.json:
        print(to_json(report))
        return 0
    header = format_header(
        "syntaxformer nli evaluate",
        {
            "model": f"{report['model']} ({report['model_type']}, prior {report['prior']}, "
            f"{report['parameters']:,} parameters)",
            "data": f"{report['data']['source']} ({report['data']['format']}): {report['data']['split']}, "
            f"{report['data']['pairs']:,} pairs",
            "protocol": report["protocol"],
            "seed": report["seed"],
            "device": f"{report['device']}, {report['threads']} threads",
        },
    )
    print("\n\n".join([header, format_scores(report["scores"])]))
    return 0


def run_vectors(args: argparse.Namespace) -> int:
    from syntaxformer.data.word_vectors import train_word2vec

    report = train_word2vec(
        args.text,
        args.out,
        dim=args.dim,
        window=args.window,
        min_count=args.min_count,
        epochs=args.epochs,
        seed=args.seed,
    )
    print(to_json(report) if args.json else format_header("syntaxformer nli vectors", report))
    return 0


def format_scores(scores: dict) -> str:
    """Accuracy, per-class table, confusion matrix and inference speed of one split's scores."""
    labels = scores["confusion"]["labels"]
    inference = scores["inference"]
    lines = [
        f"accuracy: {scores['accuracy']:.2f}% of {scores['n']:,} pairs (macro F1 {scores['macro_f1']:.2f}); "
        f"words outside the vocabulary: {scores['unknown_words']:,} of {scores['words']:,}",
        f"inference: {inference['pairs_per_second']:,.0f} pairs/s (model forward, batch "
        f"{inference['batch_size']}), {inference['pairs_per_second_end_to_end']:,.0f} pairs/s with encoding",
        "",
        format_table(
            ["class", "precision", "recall", "F1", "gold", "predicted"],
            [
                [name, v["precision"], v["recall"], v["f1"], v["support"], v["predicted"]]
                for name, v in scores["per_class"].items()
            ],
        ),
        "",
        format_table(
            ["gold \\ predicted"] + labels, [[name] + row for name, row in zip(labels, scores["confusion"]["matrix"])]
        ),
    ]
    return "\n".join(lines)


def format_train_report(report: dict) -> str:
    """The readable report of :func:`syntaxformer.workflows.nli.run_nli_train`."""
    data = report["data"]
    splits = data["splits"]
    vectors = report["word_vectors"]
    header = format_header(
        "syntaxformer nli train",
        {
            "data": f"{data['source']} ({data['format']}): train {splits['train']['pairs']:,}, selection "
            f"{splits['valid']['pairs']:,} ({data['valid']}), report {splits['test']['pairs']:,} ({data['test']})"
            f"; skipped (label -): {data['skipped_no_label']}",
            "protocol": report["protocol"],
            "model": f"{report['model']}, preset {report['preset']}, prior {report['prior']}; "
            f"{report['parameters']:,} parameters ({report['trainable_parameters']:,} trained)",
            "word vectors": vectors
            if isinstance(vectors, str)
            else f"{vectors['path']} (frozen: {vectors['frozen']}; {vectors['with_vector']:,} of {vectors['vocabulary']:,} "
            "vocabulary words have a vector)",
            "recipe": f"{report['recipe']}: {report['steps']:,} steps, {report['epochs']:.2f} epochs ({report['stopped']})",
            "seed": report["seed"],
            "training": f"{report['train_minutes']:.2f} min, {report['train_pairs_per_second']:,.0f} pairs/s "
            f"({report['device']}, {report['threads']} threads)",
            "selected": f"step {report['selected_step']} (selection accuracy "
            f"{report['scores']['valid']['accuracy']:.2f}) -> {report['out']}/best",
        },
    )
    parts = [header]
    if "test" in report["scores"]:
        majority = report["scores"]["majority_test"]
        parts.append(
            f"report split\n{format_scores(report['scores']['test'])}\n"
            f"majority class ({majority['class']}): {majority['accuracy']:.2f}%"
        )
    else:
        parts.append(f"selection split\n{format_scores(report['scores']['valid'])}")
    return "\n\n".join(parts)


__all__ = ["add_parser", "run_train", "run_evaluate", "run_vectors", "format_scores", "format_train_report"]
