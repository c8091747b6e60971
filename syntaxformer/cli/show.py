"""``syntaxformer show``: draw what a trained model computes for a few sentences.

For each sentence (given on the command line, or picked from a treebank with ``--index``), one
forward pass of the model folder's masked-LM (``AutoModelForMaskedLM`` + ``AutoTokenizer``) gives:

* the constituent prior C of every layer, a grid of heatmaps (Tree Transformer paper, Figure 5);
* the word-level link probabilities a^l of every layer, one layer-by-gap heatmap;
* syntactic distances as bar charts between the words (ON-LSTM: every layer, the parsed one
  highlighted, ``--layer`` picks it; StructFormer: its one row);
* the attention of every head of the ``--layers`` chosen (Appendix A); for a plain Transformer
  (``prior="none"``) these are the only model figures, so the two kinds of model can be compared;
* the induced tree, from :mod:`syntaxformer.parsing` with the decoder flags of
  ``syntaxformer parse`` (Algorithm 1 by default, ``--layer`` for one layer; a StructFormer's
  syntactic distances), and with ``--gold`` the gold tree beside it;

each written as PNG and SVG into ``--out``, with an ``index.html`` showing them all. The work:
:func:`syntaxformer.workflows.show.run_show`; this module reads the arguments and prints.
"""

from __future__ import annotations

import argparse

from syntaxformer.cli.arguments import add_decoder_arguments, add_device_argument, decoder_options


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "show",
        help="draw constituent priors, link probabilities, distances, attention heads and trees",
        description="Run a model folder on a few sentences and write PNG and SVG figures (the "
        "constituent prior of every layer, link probabilities or syntactic distances, "
        "the attention heads of chosen layers, the induced tree beside the gold tree) "
        "and an index.html.",
    )
    parser.add_argument(
        "sentences", nargs="*", metavar="SENTENCE", help="a sentence, words separated by spaces (quote it)"
    )
    parser.add_argument(
        "--model",
        default=None,
        help="a model folder (save_pretrained + tokenizer); default: the pretrained "
        "Tree Transformer shipped in the package",
    )
    parser.add_argument("--out", required=True, help="folder for the figures and index.html")
    parser.add_argument(
        "--treebank",
        help="'ptb-sample' or a treebank path: draw the sentences picked by --index (preprocessed as for "
        "evaluation); default: the sentences given as arguments",
    )
    parser.add_argument(
        "--index",
        type=int,
        action="append",
        default=[],
        help="0-based position of a sentence in --treebank (repeatable)",
    )
    parser.add_argument(
        "--gold", action="store_true", help="draw the gold tree beside the induced one (needs --treebank)"
    )
    parser.add_argument(
        "--layers",
        default=None,
        help="comma-separated 0-based layers whose attention heads are drawn (default: every layer)",
    )
    parser.add_argument(
        "--no-normalise",
        action="store_true",
        help="use command-line words as given (default: lower-case, words with a "
        "digit become N, as the treebank preprocessing)",
    )
    add_device_argument(parser)
    parser.add_argument("--seed", type=int, default=0, help="torch seed (the forward pass is deterministic; recorded)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_decoder_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from syntaxformer.evaluation.report import format_header, to_json
    from syntaxformer.workflows.show import kind_text, run_show

    summary = run_show(
        args.out,
        args.sentences,
        args.treebank,
        args.index,
        args.gold,
        normalise=not args.no_normalise,
        model=args.model,
        options=decoder_options(args),
        layers=args.layers,
        device=args.device,
        seed=args.seed,
    )
    if args.json:
        print(to_json(summary))
        return 0
    kind = kind_text(summary["model_type"], summary["prior"], summary["decoder"] is not None)
    print(
        format_header(
            "syntaxformer show",
            {
                "model": f"{summary['model']} ({kind}, {summary['layers']} layers)",
                "data": summary["data"],
                "decoder": summary["decoder"],
                "attention layers": ",".join(map(str, summary["attention_layers"])),
                "seed": summary["seed"],
                "time": f"{summary['seconds']:.2f} s",
            },
        )
    )
    for entry in summary["sentences"]:
        print(f"\nsentence {entry['sentence']}: {' '.join(entry['words'])}")
        if "tree" in entry:
            print(f"  tree: {entry['tree']}")
        print(f"  {len(entry['files'])} files ({len(entry['files']) // 2} figures, PNG + SVG)")
    for note in summary["notes"]:
        print(f"note: {note}")
    print(f"\nopen {summary['index']}")
    return 0
