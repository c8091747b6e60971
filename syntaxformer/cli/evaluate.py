"""``syntaxformer evaluate``: score predicted trees (or dependencies) against a gold treebank.

Constituency: ``--pred`` holds bracketed trees, one per line, leaves = words (punctuation-free, as the
preprocessed gold), aligned with the gold sentences by order. Dependency: a ``--pred`` ending in
``.conllu``, scored against ``ptb-sample``'s dependency trees, a ``.conllu`` file or ``.dp`` files.
Protocols: :mod:`syntaxformer.evaluation.protocols` (``--protocol NAME``, default ``prpn``;
``--all-protocols`` scores the prediction and the right- and left-branching trees under every one),
:mod:`syntaxformer.evaluation.dependency`; the work:
:func:`syntaxformer.workflows.evaluate.evaluate_predictions`.
"""

from __future__ import annotations

import argparse

from syntaxformer.evaluation.protocols import DEFAULT_PROTOCOL, PROTOCOLS
from syntaxformer.evaluation.report import format_header, format_table, to_json


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="score predicted trees or dependencies against gold (F1, UAS)",
        description="Unlabelled bracket F1 (sentence-level PRPN rule and corpus-level micro, all "
        "sentences and WSJ-10, recall per gold label, mean depth) of predicted trees; "
        "or UAS/UUAS of a predicted .conllu file. Sentences are aligned by order.",
    )
    parser.add_argument(
        "--pred", required=True, help="predicted trees, bracketed, one per line; or a .conllu file of heads"
    )
    parser.add_argument(
        "--gold",
        required=True,
        help="'ptb-sample' (embedded) or a treebank path (file, folder or glob); for "
        "a .conllu prediction: 'ptb-sample', a .conllu file or .dp file(s)",
    )
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument(
        "--protocol",
        choices=list(PROTOCOLS),
        default=DEFAULT_PROTOCOL,
        help="constituency scoring protocol: "
        + "; ".join(f"{name} = {p.source}" for name, p in PROTOCOLS.items())
        + " (docs/reference/protocols.md)",
    )
    choice.add_argument(
        "--all-protocols",
        action="store_true",
        help="one table: the prediction, right-branching and left-branching trees under every protocol",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seed", type=int, default=0, help="recorded in the report (evaluation is deterministic)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from syntaxformer.workflows.evaluate import evaluate_predictions

    result = evaluate_predictions(
        args.pred, args.gold, seed=args.seed, protocol=args.protocol, all_protocols=args.all_protocols
    )
    if args.json:
        print(to_json(result))
    elif result["task"] == "dependency":
        print(format_dependency_report(result))
    elif result["task"] == "protocols":
        print(format_protocols_report(result))
    elif result["protocol_name"] == DEFAULT_PROTOCOL:
        print(format_constituency_report(result))
    else:
        print(format_protocol_report(result))
    return 0


def _skipped(result: dict) -> str | None:
    """The header's ``gold skipped`` value (None when no gold sentence was left out)."""
    return ", ".join(map(str, result["gold_skipped"])) if result.get("gold_skipped") else None


def format_constituency_report(result: dict) -> str:
    """The readable report of a ``prpn`` constituency evaluation (header, scores, label recall)."""
    header = format_header(
        "syntaxformer evaluate (constituency)",
        {
            "prediction": result["pred"],
            "gold": result["gold"],
            "sentences": f"{result['n_sentences']:,} ({result['n_wsj10']:,} of at most 10 words)",
            "gold skipped": _skipped(result),
            "protocol": f"{result['protocol_name']}: {result['protocol']}",
            "source": result["protocol_source"],
            "seed": result["seed"],
            "time": f"{result['seconds']:.2f} s",
        },
    )
    scores = format_table(
        ["F1 (%)", "all", "WSJ-10"],
        [
            ["sentence-level", result["sentence_f1"], result["wsj10_sentence_f1"]],
            ["corpus-level", result["corpus_f1"], result["wsj10_corpus_f1"]],
        ],
    )
    recall = format_table(
        ["gold label", "recall (%)", "gold spans"],
        [[label, value, result["label_counts"][label]] for label, value in result["label_recall"].items()],
    )
    depth = f"mean depth of the predicted trees: {result['mean_depth']:.2f}"
    return "\n\n".join([header, scores, recall, depth])


def format_protocol_report(result: dict) -> str:
    """The readable report of a constituency evaluation under a protocol other than ``prpn``: its
    headline scores (the protocol's ``columns``) and the counts behind the corpus scores."""
    protocol = PROTOCOLS[result["protocol_name"]]
    header = format_header(
        f"syntaxformer evaluate (constituency, protocol {protocol.name})",
        {
            "prediction": result["pred"],
            "gold": result["gold"],
            "sentences": f"{result['n_sentences']:,} ({result['n_scored']:,} scored)",
            "gold skipped": _skipped(result),
            "protocol": f"{protocol.name}: {result['protocol']}",
            "source": result["protocol_source"],
            "seed": result["seed"],
            "time": f"{result['seconds']:.2f} s",
        },
    )
    scores = format_table(["score (%)", "value"], [[title, result[key]] for key, title in protocol.columns])
    counts = (
        f"brackets: {result['matched']:,} matched, {result['pred_brackets']:,} predicted, "
        f"{result['gold_brackets']:,} gold"
    )
    return "\n\n".join([header, scores, counts])


def format_protocols_report(result: dict) -> str:
    """The readable report of ``--all-protocols``: one table, the prediction and the two branching
    baselines under every protocol, then each protocol's source and rules."""
    header = format_header(
        "syntaxformer evaluate (every constituency protocol)",
        {
            "prediction": result["pred"],
            "gold": result["gold"],
            "sentences": f"{result['n_sentences']:,}",
            "gold skipped": _skipped(result),
            "seed": result["seed"],
            "time": f"{result['seconds']:.2f} s",
        },
    )
    from syntaxformer.workflows.evaluate import COMPARED_TREES

    rows = []
    for name, entry in result["protocols"].items():
        for key, title in COMPARED_TREES.items():
            s = entry["scores"][key]
            rows.append(
                [
                    name if key == "prediction" else "",
                    title,
                    s.get("sentence_f1"),
                    s["corpus_f1"],
                    s["corpus_precision"],
                    s["corpus_recall"],
                    s["n_scored"],
                ]
            )
    table = format_table(
        ["protocol", "trees", "sentence F1", "corpus F1", "corpus P", "corpus R", "sentences scored"], rows
    )
    notes = "\n".join(
        f"{name}: {entry['source']}.\n    rules: {entry['rules']}" for name, entry in result["protocols"].items()
    )
    return "\n\n".join([header, table, "scores in percent; '-': the protocol has no sentence-level F1", notes])


def format_dependency_report(result: dict) -> str:
    """The readable report of a dependency evaluation."""
    header = format_header(
        "syntaxformer evaluate (dependency)",
        {
            "prediction": result["pred"],
            "gold": result["gold"],
            "sentences": result["n_sentences"],
            "scored tokens": result["n_tokens"],
            "protocol": result["protocol"],
            "seed": result["seed"],
            "time": f"{result['seconds']:.2f} s",
        },
    )
    scores = format_table(["score (%)", "value"], [["UAS", result["uas"]], ["UUAS", result["uuas"]]])
    return "\n\n".join([header, scores])
