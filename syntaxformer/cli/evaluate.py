"""``syntaxformer evaluate``: score predicted trees (or dependencies) against a gold treebank.

Constituency: ``--pred`` holds bracketed trees, one per line, leaves = words (punctuation-free, as the
preprocessed gold), aligned with the gold sentences by order. Dependency: a ``--pred`` ending in
``.conllu``, scored against ``ptb-sample``'s dependency trees, a ``.conllu`` file or ``.dp`` files.
Protocols: :mod:`syntaxformer.evaluation.constituency`, :mod:`syntaxformer.evaluation.dependency`.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from syntaxformer.errors import InputError
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


def _with_path(error: InputError, path: str) -> InputError:
    """``error`` with the prediction file named, when it does not name a file already."""
    return error if error.path is not None else InputError(str(error), path=path)


def run_constituency(pred_path: str, gold: str) -> dict:
    """Read, preprocess and score; the report dict of :func:`evaluate_constituency` plus the data."""
    from syntaxformer.data import load_gold_trees, read_treebank
    from syntaxformer.evaluation.constituency import evaluate_constituency

    pred_trees = read_treebank(pred_path)  # first: a bad prediction file fails fast
    gold_trees = load_gold_trees(gold)
    try:
        result = evaluate_constituency(pred_trees, gold_trees)
    except InputError as e:
        raise _with_path(e, pred_path) from None
    skipped = list(getattr(gold_trees, "skipped", ()))
    return {"task": "constituency", **result, "gold_skipped": skipped}


def run_dependency(pred_path: str, gold: str) -> dict:
    """Read and score a ``.conllu`` prediction; the dict of :func:`evaluate_dependency`."""
    from syntaxformer.data.dependency import read_conllu, read_dependencies
    from syntaxformer.evaluation.dependency import evaluate_dependency

    pred_sentences = read_conllu(pred_path)
    gold_sentences = read_dependencies(gold)
    try:
        result = evaluate_dependency(pred_sentences, gold_sentences)
    except InputError as e:
        raise _with_path(e, pred_path) from None
    return {"task": "dependency", **result}


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    if not Path(args.pred).is_file():
        raise InputError("no such prediction file", path=args.pred)
    dependency = str(args.pred).endswith(".conllu")
    result = (run_dependency if dependency else run_constituency)(args.pred, args.gold)
    result.update(pred=str(args.pred), gold=str(args.gold), seed=args.seed,
                  seconds=round(time.perf_counter() - start, 3))
    if args.json:
        print(to_json(result))
    elif dependency:
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
