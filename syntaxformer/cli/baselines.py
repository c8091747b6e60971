"""``syntaxformer baselines``: structure-free baselines scored by one protocol (``--protocol``, default ``prpn``).

Left- and right-branching, random binary (mean and standard deviation over 5 seeds) and balanced
binary trees; left and right dependency chains when the treebank has dependency trees (``ptb-sample``
does; for another treebank pass ``--dependencies``). Definitions: :mod:`syntaxformer.evaluation.baselines`;
the work: :func:`syntaxformer.workflows.baselines.baselines_report`.
"""

from __future__ import annotations

import argparse

from syntaxformer.evaluation.protocols import DEFAULT_PROTOCOL, PROTOCOLS
from syntaxformer.evaluation.report import BASELINE_NAMES, format_header, format_table, score_cell, to_json
from syntaxformer.workflows.baselines import N_SEEDS


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "baselines",
        help="left/right-branching, random and balanced trees; dependency chains",
        description="Score structure-free baselines against a gold treebank with the field's "
        "protocol (sentence- and corpus-level unlabelled F1, WSJ-10, label recall; "
        "UAS/UUAS of left and right chains).",
    )
    parser.add_argument(
        "--treebank",
        default="ptb-sample",
        help="'ptb-sample' (embedded, default) or a treebank path (file, folder, glob)",
    )
    parser.add_argument(
        "--dependencies",
        default=None,
        help="gold dependencies for the chains: 'ptb-sample', a .conllu file or .dp "
        "file(s) (default: ptb-sample's when --treebank is ptb-sample, else none)",
    )
    parser.add_argument(
        "--protocol",
        choices=list(PROTOCOLS),
        default=DEFAULT_PROTOCOL,
        help="constituency scoring protocol (see `syntaxformer evaluate --help` and docs/reference/protocols.md)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--seed", type=int, default=0, help=f"first seed of the random baseline; seeds SEED .. SEED+{N_SEEDS - 1}"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from syntaxformer.workflows.baselines import baselines_report

    result = baselines_report(args.treebank, dependencies=args.dependencies, seed=args.seed, protocol=args.protocol)
    print(to_json(result) if args.json else format_baselines_report(result))
    return 0


def format_baselines_report(result: dict) -> str:
    """The readable report of :func:`syntaxformer.workflows.baselines.baselines_report`."""
    meta = result["meta"]
    first = result["right_branching"]
    protocol = PROTOCOLS[meta["protocol_name"]]
    sentences = f"{meta['n_sentences']:,}" + (
        f" ({first['n_wsj10']:,} of at most 10 words)" if "n_wsj10" in first else f" ({first['n_scored']:,} scored)"
    )
    header = format_header(
        "syntaxformer baselines",
        {
            "treebank": meta["treebank"],
            "sentences": sentences,
            "protocol": f"{protocol.name}: {meta['protocol']}",
            "source": meta["protocol_source"],
            "seed": f"{meta['seed']} (random trees: seeds {', '.join(map(str, meta['seeds']))}; mean ± sample std)",
            "time": f"{meta['seconds']:.2f} s",
        },
    )
    names = [name for name in BASELINE_NAMES if name in result]
    scores = format_table(
        ["baseline"] + [title for _, title in protocol.columns],
        [[BASELINE_NAMES[name]] + [score_cell(result[name], key) for key, _ in protocol.columns] for name in names],
    )
    parts = [header, scores]
    if "label_recall" in first:
        labels = list(first["label_recall"])
        parts.append(
            format_table(
                ["recall (%)"] + labels,
                [
                    [BASELINE_NAMES[name]] + [score_cell(result[name], "label_recall", label) for label in labels]
                    for name in names
                ],
            )
        )
    if "dependency" in result:
        chains = result["dependency"]
        any_chain = next(iter(chains.values()))
        parts.append(
            "\n".join(
                [
                    format_header(
                        "dependency chains",
                        {
                            "gold": meta["dependencies"],
                            "scored tokens": f"{any_chain['n_tokens']:,} in {any_chain['n_sentences']:,} sentences",
                            "protocol": meta["dependency_protocol"],
                        },
                    ),
                    "",
                    format_table(
                        ["chain", "UAS", "UUAS"],
                        [[name.replace("_", " "), r["uas"], r["uuas"]] for name, r in chains.items()],
                    ),
                ]
            )
        )
    return "\n\n".join(parts)
