"""``syntaxformer perplexity``: perplexity of a trained model with its objective's protocol.

Masked LMs: every word of every sentence of ``--corpus`` is masked in turn (one ``[MASK]`` per
input), the Tree Transformer protocol; causal LMs (ON-LSTM): next-word perplexity of each sentence
framed as ``[CLS] w_1 .. w_n [CLS]``. The perplexity is exp(mean cross-entropy) and the report names
the protocol; see :mod:`syntaxformer.evaluation.perplexity`. Words are normalised as the model's training corpus was
(the preprocessing recorded in the folder's ``training.json``, else the default: lower-case, digits
-> ``N``). A model whose prior reads a dependency tree per sentence (``structural-position``) needs
``--trees gold|induced:MODEL_DIR`` (as ``train --trees``); a model whose multi-granularity prior has
``tree`` heads needs ``--phrases gold|induced:MODEL_DIR`` (as ``train --phrases``); an induced structure
is induced from each masked copy unless ``--induced-from sentence``. The work:
:func:`syntaxformer.workflows.perplexity.evaluate_folder`.
"""

from __future__ import annotations

import argparse
import json

from syntaxformer.cli.arguments import add_device_argument, add_structure_input_arguments, parse_structure_sources
from syntaxformer.errors import InputError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "perplexity",
        help="perplexity: masked LM (one [MASK] per input) or next-word (causal LM)",
        description="Perplexity with the model's protocol. Masked LMs: the Tree Transformer paper's "
        "protocol, every word of every sentence masked in turn, one [MASK] per input, "
        "perplexity = exp(mean cross-entropy over all words). Causal LMs (ON-LSTM): "
        "next-word perplexity of [CLS] w_1 .. w_n [CLS] (words and sentence ends; the "
        "words alone reported beside it). Out-of-vocabulary words are scored as [UNK] "
        "targets and counted.",
    )
    p.add_argument(
        "--model",
        required=True,
        metavar="MODEL",
        help="a trained model: a folder (written by `syntaxformer train`) or a shipped parser's name "
        "(syntaxformer.pretrained.SHIPPED)",
    )
    p.add_argument(
        "--corpus",
        required=True,
        metavar="FILE|ptb-sample",
        help="test sentences: raw text (one sentence per line; comma-separated files or "
        "globs) or the embedded ptb-sample",
    )
    add_structure_input_arguments(
        p,
        gold_trees="the sentences and trees of the dependency source --corpus (ptb-sample:test, a CoNLL-U or .dp file)",
        gold_phrases="the sentences and gold trees of the treebank --corpus (ptb-sample, ptb-sample:test, a .mrg file)",
    )
    p.add_argument(
        "--induced-from",
        choices=["masked", "sentence"],
        default="masked",
        help="for --trees / --phrases induced:MODEL_DIR: 'masked' (default) parses each masked copy, "
        "so the source model sees the [MASK] the scored model sees and no structure carries "
        "information about the masked word (a sentence of n words costs n parses); 'sentence' "
        "gives every copy the unmasked sentence's structure, as train --induced-from sentence "
        "trains (the number then belongs to the pair of models, the source having seen the "
        "masked word)",
    )
    p.add_argument("--batch-tokens", type=int, default=4096, help="tokens (rows x padded length) per forward pass")
    p.add_argument(
        "--skip-long",
        action="store_true",
        help="leave out sentences longer than the model accepts, counted in the report "
        "(default: stop with an error naming the sentence)",
    )
    add_device_argument(p)
    p.add_argument(
        "--seed", type=int, default=0, help="random seed (the protocol is deterministic; recorded in the report)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(func=run)


def format_perplexity_report(result: dict) -> str:
    """A plain-text report naming data, protocol, model, preset and seed
    (:func:`syntaxformer.evaluation.report.format_header`)."""
    from syntaxformer.evaluation.report import format_header

    return format_header(
        "syntaxformer perplexity",
        {
            "data": result["data"],
            **({"trees": result["trees"]} if result.get("trees") else {}),
            **(
                {"phrases": f"{result['phrases']} (cut at level {result.get('tree_level')})"}
                if result.get("phrases")
                else {}
            ),
            **(
                {
                    "induced structure": (
                        "of each masked copy ([MASK] included)"
                        if result["induced_from"] == "masked"
                        else "of the unmasked sentence, for every copy"
                    )
                }
                if result.get("induced_from")
                else {}
            ),
            "protocol": result["protocol"],
            "model": f"{result['model']} ({result.get('model_type')}, preset {result.get('preset')}, "
            f"{result.get('n_parameters', 0):,} parameters)",
            "seed": result["seed"],
            "sentences scored": result["n_sentences"],
            "words scored": result.get("n_words", result["n_tokens"]),
            **({"sentence ends scored": result["n_tokens"] - result["n_words"]} if "n_words" in result else {}),
            "[UNK] targets": result["n_unk"],
            "skipped (too long)": f"{result['n_skipped']:,} sentences, {result['n_skipped_words']:,} "
            f"words (limit {result['max_length']} tokens)",
            "cross-entropy": f"{result['cross_entropy']:.4f} nats per prediction",
            "perplexity": f"{result['perplexity']:.2f}",
            **(
                {"word perplexity (words only)": f"{result['word_perplexity']:.2f}"}
                if "word_perplexity" in result
                else {}
            ),
            "minutes": f"{result['minutes']:.2f}",
        },
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from syntaxformer.pretrained import model_folder
    from syntaxformer.workflows.perplexity import evaluate_folder

    parse_structure_sources(args)  # a bad value before the model is loaded
    if args.batch_tokens < 1:
        raise InputError(f"--batch-tokens must be positive, got {args.batch_tokens}")
    result = evaluate_folder(
        args.model if Path(args.model).exists() else model_folder(args.model),  # a folder, or a shipped name
        args.corpus,
        batch_tokens=args.batch_tokens,
        skip_long=args.skip_long,
        device=args.device,
        seed=args.seed,
        progress=not args.json,
        trees=args.trees,
        phrases=args.phrases,
        induced_from=args.induced_from,
    )
    print(json.dumps(result, indent=2) if args.json else format_perplexity_report(result))
    return 0
