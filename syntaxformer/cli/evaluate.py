"""``syntaxformer evaluate``: score predicted trees (or dependencies) against a gold treebank.

Constituency: ``--pred`` holds bracketed trees, one per line, leaves = words (punctuation-free, as the
preprocessed gold), aligned with the gold sentences by order. Dependency: a ``--pred`` ending in
``.conllu``, scored against ``ptb-sample``'s dependency trees, a ``.conllu`` file or ``.dp`` files.
Protocols: :mod:`syntaxformer.evaluation.constituency`, :mod:`syntaxformer.evaluation.dependency`;
the work: :func:`syntaxformer.workflows.evaluate.evaluate_predictions`.
"""
from __future__ import annotations

import argparse

from syntaxformer.evaluation.report import format_header, format_table, to_json


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "evaluate", help="score predicted trees or dependencies against gold (F1, UAS)",
        description="Unlabelled bracket F1 (sentence-level PRPN rule and corpus-level micro, all "
                    "sentences and WSJ-10, recall per gold label, mean depth) of predicted trees; "
                    "or UAS/UUAS of a predicted .conllu file. Sentences are aligned by order.")
    parser.add_argument("--pred", required=True,
                        help="predicted trees, bracketed, one per line; or a .conllu file of heads")
    parser.add_argument("--gold", required=True,
                        help="'ptb-sample' (embedded) or a treebank path (file, folder or glob); for "
                             "a .conllu prediction: 'ptb-sample', a .conllu file or .dp file(s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seed", type=int, default=0,
                        help="recorded in the report (evaluation is deterministic)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from syntaxformer.workflows.evaluate import evaluate_predictions

    result = evaluate_predictions(args.pred, args.gold, seed=args.seed)
    if args.json:
        print(to_json(result))
    elif result["task"] == "dependency":
        print(format_dependency_report(result))
    else:
        print(format_constituency_report(result))
    return 0


def format_constituency_report(result: dict) -> str:
    """The readable report of a constituency evaluation (header, scores, label recall)."""
    header = format_header("syntaxformer evaluate (constituency)", {
        "prediction": result["pred"], "gold": result["gold"],
        "sentences": f"{result['n_sentences']:,} ({result['n_wsj10']:,} of at most 10 words)",
        "gold skipped": (", ".join(map(str, result["gold_skipped"])) or None)
        if result.get("gold_skipped") else None,
        "protocol": result["protocol"], "seed": result["seed"],
        "time": f"{result['seconds']:.2f} s"})
    scores = format_table(["F1 (%)", "all", "WSJ-10"], [
        ["sentence-level", result["sentence_f1"], result["wsj10_sentence_f1"]],
        ["corpus-level", result["corpus_f1"], result["wsj10_corpus_f1"]],
    ])
    recall = format_table(["gold label", "recall (%)", "gold spans"], [
        [label, value, result["label_counts"][label]]
        for label, value in result["label_recall"].items()])
    depth = f"mean depth of the predicted trees: {result['mean_depth']:.2f}"
    return "\n\n".join([header, scores, recall, depth])


def format_dependency_report(result: dict) -> str:
    """The readable report of a dependency evaluation."""
    header = format_header("syntaxformer evaluate (dependency)", {
        "prediction": result["pred"], "gold": result["gold"],
        "sentences": result["n_sentences"], "scored tokens": result["n_tokens"],
        "protocol": result["protocol"], "seed": result["seed"],
        "time": f"{result['seconds']:.2f} s"})
    scores = format_table(["score (%)", "value"], [["UAS", result["uas"]], ["UUAS", result["uuas"]]])
    return "\n\n".join([header, scores])
