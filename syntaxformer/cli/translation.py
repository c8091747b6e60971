"""``syntaxformer translation train | evaluate``: a Transformer translation model whose encoder is any of
the project's structured encoders (DESIGN.md, "Translation").

* ``train``: on two aligned, tokenised files (``--source``, ``--target``; validation files likewise),
  checkpoints and ``--resume``; the model left in OUT averages the last epoch-end models; its BLEU on
  the validation pairs goes into ``OUT/report.json``.
* ``average``: a finished run's model replaced by the average of its last N kept epoch-end models (N
  chosen on validation), re-scored on the validation pairs.
* ``evaluate``: a saved model (a folder or a shipped name) on one test set, both BLEUs.

The work is in :mod:`syntaxformer.workflows.translation`; this module parses and prints.
"""

from __future__ import annotations

import argparse

from syntaxformer.evaluation.report import format_header, to_json


def _add_train(sub) -> None:
    from syntaxformer.cli.arguments import add_dataclass_arguments
    from syntaxformer.tasks.translation import TranslationArguments

    p = sub.add_parser(
        "train",
        help="train a translation model on aligned files",
        description="Train an encoder-decoder Transformer (the encoder with --variant's structure) on two aligned, "
        "tokenised files; the model left in OUT averages the last epoch-end models and is scored on the "
        "validation pairs (OUT/report.json).",
    )
    p.add_argument("--beam", type=int, default=5, help="beam size of the final validation BLEU")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_dataclass_arguments(p, TranslationArguments)
    p.set_defaults(func=run_train)


def _add_evaluate(sub) -> None:
    p = sub.add_parser("evaluate", help="score a translation model on one test set (both BLEUs)")
    p.add_argument("--model", required=True, help="a folder `translation train` wrote, or a shipped model's name")
    p.add_argument("--source", required=True, help="tokenised source sentences, one a line")
    p.add_argument("--reference", required=True, help="tokenised, lower-cased references, aligned with --source")
    p.add_argument(
        "--raw-reference",
        default=None,
        help="the raw references (plain or .gz) for sacreBLEU (default: --reference detokenised by Moses)",
    )
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64, help="sentences per beam search")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")
    p.add_argument(
        "--hypotheses",
        default=None,
        metavar="FILE",
        help="write the tokenised translations here (default: not written)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run_evaluate)


def _add_average(sub) -> None:
    p = sub.add_parser(
        "average",
        help="average a finished run's last kept epoch-end models again (a number chosen on validation)",
        description="Replace OUT's model by the average of its last --last epoch-end snapshots and score it on the "
        "run's validation pairs again (report.json, training.json).",
    )
    p.add_argument("--model", required=True, help="a folder `translation train` finished")
    p.add_argument("--last", type=int, required=True, help="how many of the last kept snapshots to average")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run_average)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "translation",
        help="translation: train a structured-encoder Transformer, score it in BLEU",
        description="Machine translation with the project's structured encoders: train, evaluate.",
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    _add_train(sub)
    _add_average(sub)
    _add_evaluate(sub)


def format_scores(report: dict) -> str:
    """Both BLEUs and the speed of one scored set."""
    tok, sacre = report["bleu_tokenized"], report["sacrebleu"]
    return (
        f"BLEU-4 (tokenised, lower-cased): {tok['bleu']:.2f}  [{tok['signature']}]\n"
        f"sacreBLEU (detokenised): {sacre['bleu']:.2f}  [{sacre['signature']}]\n"
        f"{report['sentences']:,} sentences, beam {report['beam']}, {report['seconds']:.1f} s "
        f"({report['sentences_per_second']:,.1f} sentences/s)"
    )


def run_train(args: argparse.Namespace) -> int:
    from syntaxformer.cli.arguments import dataclass_values
    from syntaxformer.tasks.translation import TranslationArguments
    from syntaxformer.workflows.translation import run_translation_train

    report = run_translation_train(TranslationArguments(**dataclass_values(args, TranslationArguments)), beam=args.beam)
    if args.json:
        print(to_json(report))
        return 0
    data = report["data"]
    header = format_header(
        "syntaxformer translation train",
        {
            "data": f"{data['source']} -> {data['target']}: {data['train']['pairs']:,} pairs; vocabulary "
            f"{data['vocabulary']:,} joint BPE pieces",
            "model": f"{report['variant']} ({report['about']}), preset {report['preset']}, "
            f"{report['parameters']:,} parameters" + (f"; source trees: {data['parser']}" if data["parser"] else ""),
            "training": f"{report['steps']:,} steps, {report['epochs']:.1f} epochs ({report['stopped']}), "
            f"{report['train_minutes_total']:.1f} min, {report['train_tokens_per_second']:,.0f} target tokens/s "
            f"({report['device']}, {report['threads']} threads)",
            "averaged": f"the models of steps {report['averaged']['steps']}",
            "seed": report["seed"],
        },
    )
    print(header + "\n\nvalidation\n" + format_scores(report["valid"]))
    return 0


def run_average(args: argparse.Namespace) -> int:
    from syntaxformer.workflows.translation import run_translation_average

    report = run_translation_average(args.model, args.last, beam=args.beam, device=args.device)
    if args.json:
        print(to_json(report))
        return 0
    print(
        f"averaged the models of steps {report['averaged']['steps']}\n\nvalidation\n" + format_scores(report["valid"])
    )
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from syntaxformer.workflows.translation import run_translation_evaluate

    report = run_translation_evaluate(
        args.model,
        args.source,
        args.reference,
        raw_reference=args.raw_reference,
        beam=args.beam,
        device=args.device,
        batch_size=args.batch_size,
        hypotheses_out=args.hypotheses,
    )
    if args.json:
        print(to_json(report))
        return 0
    header = format_header(
        "syntaxformer translation evaluate",
        {"model": f"{report['model']} ({report['variant']})", "data": report["source"], "device": report["device"]},
    )
    print(header + "\n\n" + format_scores(report))
    return 0


__all__ = ["add_parser", "run_train", "run_average", "run_evaluate", "format_scores"]
