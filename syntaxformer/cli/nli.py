"""``syntaxformer nli train | evaluate | vectors``: natural-language inference with the Gaussian
Transformer and its twins (DESIGN.md §3.1, §6).

* ``train``: a sentence-pair classifier on SICK (``--data sick``: select on TRIAL, report TEST) or
  on JSON-lines / TSV files; checkpoints and ``--resume``; ``OUT/report.json``, a table or ``--json``.
* ``evaluate``: a saved model on one split.
* ``vectors``: word2vec vectors trained on the project's text (for ``train --word-vectors``).

The work is in :mod:`syntaxformer.workflows.nli`; this module parses and prints.
"""

from __future__ import annotations

import argparse

from syntaxformer.evaluation.report import format_header, format_table, to_json


def _add_train(sub) -> None:
    from syntaxformer.cli.arguments import config_override
    from syntaxformer.models import PAIR_MODELS, default_architecture
    from syntaxformer.workflows.nli import RECIPES

    p = sub.add_parser(
        "train",
        help="train a sentence-pair classifier, select on TRIAL, report TEST",
        description="Train on the training pairs by a recipe (epochs), select the model of "
        "the best selection accuracy, score it on the report pairs.",
    )
    p.add_argument(
        "--data",
        default="sick",
        help="sick (../shared/data/sick/SICK.txt, official split), a file in SICK's format, or a "
        "JSON-lines / TSV file of training pairs (premise/hypothesis/label or "
        "sentence1/sentence2/gold_label)",
    )
    p.add_argument("--valid", default=None, help="generic data: selection pairs (default: 5%% of --data held out)")
    p.add_argument("--test", default=None, help="generic data: report pairs (default: none)")
    p.add_argument("--model", default=default_architecture("pair_classifier"), choices=sorted(PAIR_MODELS))
    p.add_argument(
        "--recipe",
        default="default",
        choices=sorted(RECIPES),
        help="training recipe (syntaxformer.workflows.nli.RECIPES); the flags below override it",
    )
    p.add_argument("--preset", default=None, help="size preset: paper, small, tiny (default: the recipe's)")
    p.add_argument(
        "--prior",
        default=None,
        help="encoding block's prior: gaussian, none, constituent (default: the model's, gaussian)",
    )
    p.add_argument(
        "--word-vectors",
        default=None,
        metavar="PATH",
        help="pre-trained word vectors (gensim KeyedVectors or word2vec text; `nli vectors` makes "
        "them), frozen; default: learned word vectors",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        type=config_override,
        default=[],
        metavar="KEY=VALUE",
        help='override a config field (JSON value), e.g. --set classifier_features="match"',
    )
    p.add_argument("--epochs", type=int, default=None, help="passes over the training pairs (default: the recipe's)")
    p.add_argument("--max-steps", type=int, default=None, help="optimizer steps (default: the recipe's)")
    p.add_argument("--batch-size", type=int, default=None, help="pairs per batch (default: the recipe's)")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default: the recipe's)")
    p.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="stop cleanly (and save) after this many minutes of this process; resume with --resume "
        "(default: no limit)",
    )
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt if present")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: PyTorch's)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")
    p.add_argument("--bf16", action="store_true", help="train and select under bfloat16 autocast")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run_train)


def _add_evaluate(sub) -> None:
    p = sub.add_parser("evaluate", help="score a saved sentence-pair classifier on one split")
    p.add_argument("--model", required=True, help="a folder `nli train` wrote (OUT/best is the selected model)")
    p.add_argument("--data", default="sick", help="sick, a SICK-format file or a JSON-lines / TSV file")
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
        "--text",
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
    from syntaxformer.workflows.nli import run_nli_train

    report = run_nli_train(
        args.out,
        data=args.data,
        model=args.model,
        recipe=args.recipe,
        seed=args.seed,
        valid=args.valid,
        test=args.test,
        preset=args.preset,
        prior=args.prior,
        word_vectors=args.word_vectors,
        overrides=dict(args.overrides or []),
        epochs=args.epochs,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        lr=args.lr,
        max_minutes=args.max_minutes,
        resume=args.resume or None,
        threads=args.threads,
        device=args.device,
        bf16=args.bf16 or None,
        quiet=args.quiet or None,
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
