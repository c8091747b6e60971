"""``syntaxformer probe``: linguistic probing of a frozen encoder's layers (Conneau et al., ACL 2018;
DESIGN.md §6). The work is :func:`syntaxformer.workflows.probe.run_probe`; this module reads the
arguments and prints."""

from __future__ import annotations

from syntaxformer.cli.arguments import add_device_argument, add_structure_input_arguments, parse_structure_sources


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "probe",
        help="probing tasks (SentLen, TreeDepth, TopConst, BShift) on every layer of a model",
        description="Build the probing tasks from a gold treebank, mean-pool every layer of the frozen "
        "model and of the same architecture untrained, and score logistic-regression and "
        "MLP probes (L2 chosen on dev, accuracy on test) beside the majority class and a "
        "bag-of-words probe. Writes OUT/report.json, OUT/probe.{png,svg}, OUT/tasks/*.tsv.",
    )
    p.add_argument(
        "--model", default=None, help="model folder (default: the pretrained Tree Transformer shipped in the package)"
    )
    p.add_argument(
        "--treebank",
        default="ptb-sample",
        help="gold trees: 'ptb-sample' (default), 'ptb-sample:dev', a .mrg file (all four tasks), or a "
        "CoNLL-U file such as UD English-EWT's (SentLen and BShift, from its words)",
    )
    p.add_argument("--out", required=True, help="output folder")
    add_structure_input_arguments(
        p,
        gold_trees="ptb-sample's gold dependency trees of the probed sentences (BShift: the unswapped "
        "sentence's tree, by position)",
        gold_phrases="the probed sentences' own gold trees (BShift: the unswapped sentence's partition, by position)",
        note="The untrained twin gets the same.",
    )
    p.add_argument(
        "--task",
        action="append",
        default=None,
        metavar="NAME",
        help="a task to run (repeatable; default: all, SentLen, TreeDepth, TopConst, BShift)",
    )
    p.add_argument(
        "--classifier",
        action="append",
        default=None,
        choices=["logreg", "mlp"],
        help="probe classifier (repeatable; default: both)",
    )
    p.add_argument(
        "--max-sentences", type=int, default=None, help="use only the treebank's first N sentences (default: all)"
    )
    p.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass")
    add_device_argument(p)
    p.add_argument(
        "--seed", type=int, default=0, help="splits, BShift's swaps, the untrained twin's initialisation, the MLP's"
    )
    p.add_argument("--json", action="store_true", help="print report.json instead of the table")
    p.set_defaults(func=run)


def format_probe_report(report: dict) -> str:
    """The table: per task, the majority class, bag of words, and the best layer (chosen on dev) of
    the trained and the untrained encoder, test accuracy (%); then test accuracy per layer."""
    from syntaxformer.evaluation.report import format_header, format_table

    kinds = report["classifiers"]
    header = format_header(
        "syntaxformer probe",
        {
            "model": f"{report['model']} ({report['model_type']}, seed {report['seed']})",
            "data": f"{report['data']['treebank']} ({report['data']['n_sentences']:,} sentences)",
            **({"trees": report["trees"]} if report.get("trees") else {}),
            **(
                {"phrases": f"{report['phrases']} (cut at level {report.get('tree_level')})"}
                if report.get("phrases")
                else {}
            ),
            "protocol": report["protocol"],
        },
    )
    rows, layer_rows = [], []
    for name, task in report["tasks"].items():
        for kind in kinds:
            best = task["best_layer"]
            rows.append(
                [
                    name,
                    kind,
                    task["majority"]["test"],
                    task["bag_of_words"][kind]["test"],
                    f"{best['trained'][kind]['test']:.2f} (layer {best['trained'][kind]['layer']})",
                    f"{best['untrained'][kind]['test']:.2f} (layer {best['untrained'][kind]['layer']})",
                ]
            )
            layer_rows.append([name, kind] + [f"{r[kind]['test']:.1f}" for r in task["layers"]["trained"]])
    n_layers = max(len(r) for r in layer_rows) - 2
    return "\n\n".join(
        [
            header,
            format_table(
                ["task", "probe", "majority", "bag of words", "trained, best layer on dev", "untrained, best layer"],
                rows,
            ),
            "trained encoder, test accuracy per layer (0 = embeddings)\n"
            + format_table(["task", "probe"] + [str(i) for i in range(n_layers)], layer_rows),
        ]
    )


def run(args) -> int:
    from syntaxformer.evaluation.report import to_json
    from syntaxformer.workflows.probe import run_probe

    parse_structure_sources(args)  # a bad value before the model is loaded
    report = run_probe(
        args.out,
        model=args.model,
        treebank=args.treebank,
        tasks=args.task,
        classifiers=args.classifier or ["logreg", "mlp"],
        seed=args.seed,
        batch_size=args.batch_size,
        device=args.device,
        max_sentences=args.max_sentences,
        trees=args.trees,
        phrases=args.phrases,
    )
    print(to_json(report) if args.json else format_probe_report(report))
    return 0
