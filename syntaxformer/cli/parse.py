"""``syntaxformer parse``: induce trees with a trained model.

Writes ``OUT/trees.txt`` (bracketed, one tree per line, leaves = words, readable by ``evaluate``),
for a StructFormer also ``OUT/dependencies.conllu``, and with ``--json`` ``OUT/structures.json``
(per sentence: words, link probabilities per layer or distances/heights).
"""
from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path

import torch

from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)


def add_decoder_arguments(parser) -> None:
    """The decoder flags shared by ``parse`` and ``induce``."""
    g = parser.add_argument_group("decoding (Tree Transformer: paper Algorithm 1 unless --layer)")
    g.add_argument("--threshold", type=float, default=0.8,
                   help="Algorithm 1 break threshold: a weakest link below it splits the span (default 0.8)")
    g.add_argument("--min-layer", type=int, default=None,
                   help="Algorithm 1 minimum layer, 0-based: lower layers are never used (default: "
                        "the decoder's, see syntaxformer.decoding.tree_transformer)")
    g.add_argument("--descend-rule", choices=["paper", "official"], default="paper",
                   help="official = also the public code's rule: a child span whose weakest link is "
                        "> 0.7 descends one layer before recursing")
    g.add_argument("--layer", type=int, default=None,
                   help="parse from this single layer (0-based) with the top-down greedy split "
                        "(paper Figure 4(b)) instead of Algorithm 1")
    g.add_argument("--dependency", choices=["mst", "argmax"], default="mst",
                   help="StructFormer dependency decoder: mst = Chu-Liu-Edmonds maximum spanning tree "
                        "(always a tree), argmax = the public code's rule (default mst)")


def decoder_options(args):
    """The :class:`~syntaxformer.parsing.DecoderOptions` the decoder flags name.

    Raises:
        InputError: ``--layer`` together with ``--min-layer`` (two decoders' options).
    """
    from syntaxformer.decoding.tree_transformer import OFFICIAL_DESCEND_THRESHOLD
    from syntaxformer.parsing import DecoderOptions

    if args.layer is not None and args.min_layer is not None:
        raise InputError("--layer (single-layer decoder) and --min-layer (Algorithm 1) exclude each other")
    return DecoderOptions(
        layer=args.layer, threshold=args.threshold, min_layer=args.min_layer,
        descend_threshold=OFFICIAL_DESCEND_THRESHOLD if args.descend_rule == "official" else None,
        dependency=args.dependency)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "parse", help="induce trees for sentences with a trained model",
        description="Parse sentences with a trained Tree Transformer or StructFormer. Input: a text "
                    "file (one sentence per line, whitespace-tokenised), '-' for standard input, or "
                    "--treebank (its gold trees' words after the PRPN preprocessing).")
    p.add_argument("--model", default=None,
                   help="model folder written by `syntaxformer train` (default: the pretrained Tree "
                        "Transformer shipped in the package, syntaxformer.load_pretrained)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", help="text file, one sentence per line; '-' = standard input")
    source.add_argument("--treebank", help="'ptb-sample' or a treebank path: parse its sentences' words")
    p.add_argument("--out", required=True, help="output folder (trees.txt, dependencies.conllu, structures.json)")
    add_decoder_arguments(p)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--json", action="store_true",
                   help="also write OUT/structures.json (link probabilities per layer / distances) "
                        "and print a JSON summary")
    p.add_argument("--draw", action="store_true", help="print each tree as text in the terminal")
    p.add_argument("--seed", type=int, default=0, help="random seed (parsing is deterministic; recorded)")
    p.set_defaults(func=run)


def read_sentences(args) -> tuple[list[list[str]], str]:
    """The sentences to parse and a name for them."""
    if args.treebank:
        from syntaxformer.data.preprocess import load_gold_trees
        return [t.leaves() for t in load_gold_trees(args.treebank)], args.treebank
    from syntaxformer.data.text import parse_text, read_text
    if args.input == "-":
        return parse_text(sys.stdin.read(), path="<stdin>"), "<stdin>"
    return read_text(args.input), args.input


def write_outputs(out: Path, trees, heads, structures, words_list) -> list[Path]:
    """Write trees.txt (and dependencies.conllu) into ``out``; returns the paths written."""
    from syntaxformer.data.dependency import DependencySentence, write_conllu
    from syntaxformer.decoding.spans import to_bracketed

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "trees.txt"]
    paths[0].write_text("".join(to_bracketed(t) + "\n" for t in trees), encoding="utf-8")
    if heads is not None:
        sentences = [DependencySentence(words=tuple(w), tags=("X",) * len(w), heads=tuple(h),
                                        punct=(False,) * len(w)) for w, h in zip(words_list, heads)]
        paths.append(out / "dependencies.conllu")
        write_conllu(sentences, paths[-1])
    return paths


def structures_json(structures) -> list[dict]:
    """``structures.json`` rows: per sentence its words and its structures rounded to 6 decimals
    (:meth:`syntaxformer.structures.Structures.to_json`: link probabilities ``[L][n-1]``, layer 0
    lowest; or distances ``[n-1]`` and heights ``[n]``)."""
    return [s.to_json() for s in structures]


def run(args) -> int:
    from syntaxformer.parsing import decode, load_model, model_structures
    from syntaxformer.pretrained import model_or_pretrained

    torch.manual_seed(args.seed)
    options = decoder_options(args)
    sentences, name = read_sentences(args)
    if not sentences:
        raise InputError("no sentence to parse", path=name)
    args.model, options = model_or_pretrained(args.model, options)  # default: the shipped parser
    model, tokenizer, _ = load_model(args.model)
    structures = model_structures(model, tokenizer, sentences, batch_size=args.batch_size)
    trees, heads = decode(structures, options)
    out = Path(args.out)
    paths = write_outputs(out, trees, heads, structures, sentences)
    if args.json:
        (out / "structures.json").write_text(json.dumps(structures_json(structures)) + "\n")
        paths.append(out / "structures.json")
    if args.draw:
        from syntaxformer.figures.trees import draw_text_tree
        for tree in trees:
            print(draw_text_tree(tree))
    summary = {"model": str(args.model), "data": name, "n_sentences": len(trees),
               "decoder": asdict(options),
               "seed": args.seed, "files": [str(p) for p in paths]}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"parsed {len(trees)} sentences from {name}; wrote " + ", ".join(str(p) for p in paths))
    return 0
