"""``syntaxformer parse``: induce trees with a trained model.

Writes ``OUT/trees.txt`` (bracketed, one tree per line, leaves = words, readable by ``evaluate``),
for a StructFormer also ``OUT/dependencies.conllu``, and with ``--json`` ``OUT/structures.json``
(per sentence: words, link probabilities per layer or distances/heights). The work is
:func:`syntaxformer.workflows.parse.run_parse`; this module reads the arguments and prints.
"""

from __future__ import annotations

import json
import sys

from syntaxformer.cli.arguments import add_decoder_arguments, decoder_options
from syntaxformer.errors import InputError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "parse",
        help="induce trees for sentences with a trained model",
        description="Parse sentences with a trained Tree Transformer or StructFormer. Input: a text "
        "file (one sentence per line, whitespace-tokenised), '-' for standard input, or "
        "--treebank (its gold trees' words after the PRPN preprocessing).",
    )
    p.add_argument(
        "--model",
        default=None,
        help="model folder written by `syntaxformer train` (default: the pretrained Tree "
        "Transformer shipped in the package, syntaxformer.load_pretrained)",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", help="text file, one sentence per line; '-' = standard input")
    p.add_argument(
        "--tokenize",
        choices=["whitespace", "treebank"],
        default="whitespace",
        help="how --input lines become tokens: whitespace = already tokenised (default); treebank = "
        "raw text, NLTK's Penn-Treebank-style tokenizer. Punctuation tokens are put back as "
        "leaves, never shown to the model (syntaxformer.parser)",
    )
    source.add_argument("--treebank", help="'ptb-sample' or a treebank path: parse its sentences' words")
    p.add_argument("--out", required=True, help="output folder (trees.txt, dependencies.conllu, structures.json)")
    add_decoder_arguments(p)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument(
        "--json",
        action="store_true",
        help="also write OUT/structures.json (link probabilities per layer / distances) and print a JSON summary",
    )
    p.add_argument("--draw", action="store_true", help="print each tree as text in the terminal")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for the model (PyTorch intra-op threads). Default: 1 when the input fits in one "
        "batch (at most --batch-size sentences), where a second thread only adds start-up and "
        "synchronisation (seconds on a busy machine); otherwise PyTorch's default. The trees and "
        "structures of ptb-sample are identical with 1 and 2 threads",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (parsing is deterministic; recorded)")
    p.set_defaults(func=run)


def read_sentences(args) -> tuple[list[list[str]], str]:
    """The sentences to parse and a name for them."""
    if args.treebank:
        from syntaxformer.data.preprocess import load_gold_trees

        return [t.leaves() for t in load_gold_trees(args.treebank)], args.treebank
    from syntaxformer.data.text import parse_text, read_text

    if args.input == "-":
        sentences, name = parse_text(sys.stdin.read(), path="<stdin>"), "<stdin>"
    else:
        sentences, name = read_text(args.input), args.input
    if args.tokenize == "treebank":
        from syntaxformer.parser import tokenize

        sentences = [tokenize(" ".join(words)) for words in sentences]
    return sentences, name


def cpu_threads(args, n_sentences: int) -> int | None:
    """The intra-op thread count ``parse`` sets: ``--threads``, else 1 for an input of at most one batch
    (a one-sentence parse: the forward passes take milliseconds, and a second OpenMP thread costs more
    than it saves, up to seconds per pass when the other core is busy), else None (PyTorch's default).

    Raises:
        InputError: ``--threads`` below 1.
    """
    if args.threads is not None:
        if args.threads < 1:
            raise InputError(f"--threads must be at least 1, got {args.threads}")
        return args.threads
    return 1 if n_sentences <= args.batch_size else None


def run(args) -> int:
    import torch

    from syntaxformer.workflows.parse import run_parse

    options = decoder_options(args)
    sentences, name = read_sentences(args)
    threads = cpu_threads(args, len(sentences))
    if threads is not None:
        torch.set_num_threads(threads)
    summary, trees = run_parse(
        sentences,
        args.out,
        model=args.model,
        options=options,
        data=name,
        batch_size=args.batch_size,
        write_json=args.json,
        seed=args.seed,
        punctuation=not args.treebank,
    )
    if args.draw:
        from syntaxformer.figures.trees import draw_text_tree

        for tree in trees:
            print(draw_text_tree(tree))
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"parsed {len(trees)} sentences from {name}; wrote " + ", ".join(summary["files"]))
    return 0
