"""``syntaxformer parse``: induce trees with a trained model.

Without ``--out`` (or with ``--out -``) prints the trees on standard output, one bracketed tree per
input line (``--format conllu``: a StructFormer's dependencies in CoNLL-U); messages, drawings and
logs go to standard error. With ``--out DIR`` writes ``DIR/trees.txt`` (bracketed, one tree per line,
leaves = words, readable by ``evaluate``), for a StructFormer also ``DIR/dependencies.conllu``, and
with ``--json`` ``DIR/structures.json`` (per sentence: words, link probabilities per layer or
distances/heights). A blank input line gives the empty tree ``()``
(:data:`syntaxformer.workflows.outputs.EMPTY_TREE`), so line *k* of the trees is line *k* of the
input. The work is :func:`syntaxformer.workflows.parse.run_parse`; this module reads the arguments
and prints.
"""

from __future__ import annotations

import argparse
import json
import sys

from syntaxformer.cli.arguments import add_decoder_arguments, add_device_argument, decoder_options
from syntaxformer.errors import InputError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "parse",
        help="induce trees for sentences with a trained model",
        description="Parse sentences with a trained Tree Transformer, StructFormer or ON-LSTM. Input: a text "
        "file (one sentence per line, whitespace-tokenised), '-' for standard input, or "
        "--treebank (its gold trees' words after the PRPN preprocessing). Output: without --out, "
        "one bracketed tree per input line on standard output (a blank line gives the empty tree "
        "'()'); messages and logs go to standard error.",
    )
    p.add_argument(
        "--model",
        default=None,
        help="model folder written by `syntaxformer train`, or a shipped parser's name (default: the shipped "
        "structformer-ptb-lm); several joined by ',' (or a shipped ensemble, ensemble-ptb-lm, or a folder with an "
        "ensemble.json) parse as one ensemble: the tree their trees agree on most, each member with its "
        "saved decoder settings",
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
    p.add_argument(
        "--out",
        default=None,
        help="output folder (trees.txt, dependencies.conllu, structures.json); absent or '-' = standard "
        "output, one tree per input line (a blank line gives the empty tree '()')",
    )
    p.add_argument(
        "--format",
        choices=["trees", "conllu"],
        default=None,
        help="what goes to standard output (no --out): trees = one bracketed tree per input line "
        "(default); conllu = the dependency trees in CoNLL-U, # sent_id = the input line (a model "
        "with dependency heads: a StructFormer; blank lines have no sentence)",
    )
    add_decoder_arguments(p)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument(
        "--json",
        action="store_true",
        help="also write OUT/structures.json (link probabilities per layer / distances) and print a JSON "
        "summary (needs --out DIR)",
    )
    p.add_argument(
        "--draw",
        action="store_true",
        help="print each tree as text in the terminal (on standard error when the trees go to standard output)",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,  # absent: keep `syntaxformer -v`'s value
        help="show the libraries' progress bars and messages while the model loads, and log at DEBUG "
        "level (as `syntaxformer -v parse`)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for the model (PyTorch intra-op threads). Default: 1 when the input fits in one "
        "batch (at most --batch-size sentences), where a second thread only adds start-up and "
        "synchronisation (seconds on a busy machine); otherwise PyTorch's default. The trees and "
        "structures of ptb-sample are identical with 1 and 2 threads",
    )
    add_device_argument(p)
    p.add_argument("--seed", type=int, default=0, help="random seed (parsing is deterministic; recorded)")
    p.set_defaults(func=run)


def read_sentences(args) -> tuple[list[list[str]], str]:
    """The sentences to parse and a name for them: a treebank's, or per ``--input`` line its tokens
    (an empty list for a blank line).

    Raises:
        InputError: an unreadable input, or one with no sentence.
    """
    if args.treebank:
        from syntaxformer.data.preprocess import load_gold_trees

        return [t.leaves() for t in load_gold_trees(args.treebank)], args.treebank
    from syntaxformer.data.text import parse_text, read_text

    if args.input == "-":
        sentences, name = parse_text(sys.stdin.read(), path="<stdin>", keep_blank=True), "<stdin>"
    else:
        sentences, name = read_text(args.input, keep_blank=True), args.input
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


def output_folder(args) -> str | None:
    """The folder ``--out`` names, or None for standard output (absent or ``-``).

    Raises:
        InputError: ``--json`` without a folder; ``--format`` with one (every file is written there).
    """
    out = None if args.out in (None, "-") else args.out
    if out is None and args.json:
        raise InputError("--json writes OUT/structures.json: give --out DIR")
    if out is not None and args.format is not None:
        raise InputError("--format chooses what goes to standard output; with --out DIR every file is written")
    return out


def run(args) -> int:
    """Parse the sentences ``args`` names and print or write the trees; returns 0.

    Raises:
        InputError: bad arguments or input (:func:`output_folder`, :func:`read_sentences`,
            :func:`cpu_threads`, :func:`~syntaxformer.workflows.parse.run_parse`).
    """
    import torch

    from syntaxformer.workflows.parse import run_parse

    options = decoder_options(args)
    out = output_folder(args)
    sentences, name = read_sentences(args)
    threads = cpu_threads(args, sum(1 for s in sentences if s))
    if threads is not None:
        torch.set_num_threads(threads)
    result = run_parse(
        sentences,
        out,
        model=args.model,
        options=options,
        data=name,
        batch_size=args.batch_size,
        write_json=args.json,
        seed=args.seed,
        punctuation=not args.treebank,
        dependencies=args.format == "conllu",
        verbose=getattr(args, "verbose", False),
        device=args.device,
    )
    report(args, result, out)
    return 0


def report(args, result, out: str | None) -> None:
    """Print what ``parse`` gives: without ``out`` the trees (or CoNLL-U) on standard output and the
    rest on standard error; with it the drawings and a summary (``--json``: the summary as JSON)."""
    from syntaxformer.workflows.outputs import EMPTY_TREE, conllu_text, trees_text

    messages = sys.stdout if out is not None else sys.stderr
    if args.draw:
        from syntaxformer.figures.trees import draw_text_tree

        for tree in result.trees:
            print(EMPTY_TREE if tree is None else draw_text_tree(tree), file=messages)
    summary = result.summary
    if out is None:
        text = conllu_text(result.heads, result.words) if args.format == "conllu" else trees_text(result.trees)
        sys.stdout.write(text)
        sys.stdout.flush()
    if args.json:
        print(json.dumps(summary))
        return
    blank = f"; {summary['n_blank_lines']} blank line(s) kept as {EMPTY_TREE}" if summary["n_blank_lines"] else ""
    wrote = "; wrote " + ", ".join(summary["files"]) if summary["files"] else ""
    print(f"parsed {summary['n_sentences']} sentences from {summary['data']}{blank}{wrote}", file=messages)
