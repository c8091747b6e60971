"""``syntaxformer show``: draw what a trained model computes for a few sentences.

For each sentence (given on the command line, or picked from a treebank with ``--index``), one
forward pass of the model folder's masked-LM (``AutoModelForMaskedLM`` + ``AutoTokenizer``) gives:

* the constituent prior C of every layer, a grid of heatmaps (Tree Transformer paper, Figure 5);
* the word-level link probabilities a^l of every layer, one layer-by-gap heatmap;
* the attention of every head of the ``--layers`` chosen (Appendix A); for a plain Transformer
  (``prior="none"``) these are the only model figures, so the two kinds of model can be compared;
* the induced tree, from :mod:`syntaxformer.parsing` with the decoder flags of
  ``syntaxformer parse`` (Algorithm 1 by default, ``--layer`` for one layer; a StructFormer's
  syntactic distances), and with ``--gold`` the gold tree beside it;

each written as PNG and SVG into ``--out``, with an ``index.html`` showing them all.
"""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)

#: Longer sentences still work, but word labels may start to overlap.
READABLE_WORDS = 40


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "show", help="draw constituent priors, link probabilities, attention heads and trees",
        description="Run a model folder on a few sentences and write PNG and SVG figures (the "
                    "constituent prior of every layer, link probabilities, the attention heads "
                    "of chosen layers, the induced tree beside the gold tree) and an index.html.")
    parser.add_argument("sentences", nargs="*", metavar="SENTENCE",
                        help="a sentence, words separated by spaces (quote it)")
    parser.add_argument("--model", default=None,
                        help="a model folder (save_pretrained + tokenizer); default: the pretrained "
                             "Tree Transformer shipped in the package")
    parser.add_argument("--out", required=True, help="folder for the figures and index.html")
    parser.add_argument("--treebank", help="'ptb-sample' or a treebank path: draw the sentences "
                                           "picked by --index (preprocessed as for evaluation)")
    parser.add_argument("--index", type=int, action="append", default=[],
                        help="0-based position of a sentence in --treebank (repeatable)")
    parser.add_argument("--gold", action="store_true",
                        help="draw the gold tree beside the induced one (needs --treebank)")
    parser.add_argument("--layers", default=None,
                        help="comma-separated 0-based layers whose attention heads are drawn "
                             "(default: every layer)")
    parser.add_argument("--no-normalise", action="store_true",
                        help="use command-line words as given (default: lower-case, words with a "
                             "digit become N, as the treebank preprocessing)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--seed", type=int, default=0,
                        help="torch seed (the forward pass is deterministic; recorded)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    from syntaxformer.cli.parse import add_decoder_arguments

    add_decoder_arguments(parser)
    parser.set_defaults(func=run)


def parse_layers(text: str | None, num_layers: int) -> list[int]:
    """``"0,3"`` -> ``[0, 3]``; ``None`` -> every layer.

    Raises:
        InputError: not a comma-separated list of integers, or a layer outside ``0 .. L-1``.
    """
    if text is None:
        return list(range(num_layers))
    try:
        layers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"--layers must be comma-separated integers, got {text!r}") from None
    bad = [l for l in layers if not 0 <= l < num_layers]
    if bad or not layers:
        raise InputError(f"--layers {text!r}: layers are 0-based, 0..{num_layers - 1} for this model")
    return sorted(set(layers))


def token_labels(tokens: list[str], word_ids: list[int | None], words: list[str],
                 unk_token: str) -> list[str]:
    """Axis labels of the token-level figures: the word for a one-piece word, the piece for a word
    of several pieces, the token itself for special tokens, and ``word*`` for a word the vocabulary
    lacks (encoded as ``[UNK]``)."""
    pieces: dict[int, int] = {}
    for w in word_ids:
        if w is not None:
            pieces[w] = pieces.get(w, 0) + 1
    labels = []
    for token, w in zip(tokens, word_ids):
        if w is None:
            labels.append(token)
        elif token == unk_token:
            labels.append(words[w] + "*")
        elif pieces[w] == 1:
            labels.append(words[w])
        else:
            labels.append(token)
    return labels


def forward_one(model, tokenizer, words: list[str]) -> dict:
    """One forward pass over one (normalised) sentence for the token-level figures.

    Link probabilities and trees come from :func:`syntaxformer.parsing.model_structures` (the
    path ``syntaxformer parse`` uses); this pass adds what only figures need, batch dimension
    removed.

    Returns:
        dict with ``labels`` (token axis labels, see :func:`token_labels`), ``unknown`` (indices
        of the words the vocabulary lacks), ``priors`` (``[L, T, T]`` constituent priors, or None
        for a model without them) and ``attentions`` (``[L, H, T, T]``), as numpy arrays.
    """
    import torch

    from syntaxformer.data.tokenization import encode

    ids, word_ids = encode(tokenizer, [words])
    ids, word_ids = ids[0], word_ids[0]
    input_ids = torch.tensor([ids], device=next(model.parameters()).device)
    import inspect

    kwargs = {"output_attentions": True}
    if "output_priors" in inspect.signature(model.forward).parameters:
        kwargs["output_priors"] = True
    with torch.no_grad():
        out = model(input_ids=input_ids, **kwargs)
    priors = getattr(out, "priors", None)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    return {
        "labels": token_labels(tokens, word_ids, words, tokenizer.unk_token),
        "unknown": {w for token, w in zip(tokens, word_ids)
                    if w is not None and token == tokenizer.unk_token},
        "priors": (torch.stack([c[0] for c in priors]).float().cpu().numpy() if priors else None),
        "attentions": torch.stack([e[0] for e in out.attentions]).float().cpu().numpy(),
    }


def _sentences(args) -> list[tuple[str, list[str], object]]:
    """``(heading, words, gold tree or None)`` for every sentence asked for.

    Raises:
        InputError: nothing to draw, ``--index``/``--gold`` without ``--treebank``, an index out of
            range, or an empty sentence.
    """
    from syntaxformer.data.preprocess import normalise_word

    if not args.sentences and not args.treebank:
        raise InputError("give sentences to draw, or --treebank with --index")
    if (args.index or args.gold) and not args.treebank:
        raise InputError("--index and --gold need --treebank")
    if args.treebank and not args.index:
        raise InputError("--treebank needs at least one --index (0-based sentence position)")
    items = []
    for number, text in enumerate(args.sentences, 1):
        words = text.split()
        if not words:
            raise InputError("empty sentence", sentence=number)
        if not args.no_normalise:
            words = [normalise_word(w) for w in words]
        items.append((f"sentence {number}: {' '.join(words)}", words, None))
    if args.treebank:
        from syntaxformer.data.preprocess import load_gold_trees

        gold_trees = load_gold_trees(args.treebank)
        for index in args.index:
            if not 0 <= index < len(gold_trees):
                raise InputError(f"--index {index} is out of range: the treebank has "
                                 f"{len(gold_trees)} sentences (0-based)", path=args.treebank)
            tree = gold_trees[index]
            words = [str(w) for w in tree.leaves()]
            items.append((f"{args.treebank} #{index}: {' '.join(words)}", words,
                          tree if args.gold else None))
    return items


def _decoder_description(structure, options) -> str:
    """One line naming the tree decoder of a sentence's constituency ``structure``, as the figures'
    captions and the report show it."""
    from syntaxformer.structures import LinkProbabilities, min_layer_of

    if not isinstance(structure, LinkProbabilities):
        return "top-down split at the largest syntactic distance"
    num_layers = structure.num_layers
    if options.layer is not None:
        return f"single layer {options.layer}, top-down greedy split (paper Figure 4(b))"
    rule = "official descend rule" if options.descend_threshold is not None else "paper rule"
    return (f"Algorithm 1, threshold {options.threshold}, minimum layer "
            f"{min_layer_of(options, num_layers)}, {rule}")


def run(args: argparse.Namespace) -> int:
    import torch

    from syntaxformer.cli.parse import decoder_options
    from syntaxformer.decoding.spans import spans_to_tree, to_bracketed
    from syntaxformer.evaluation.report import format_header, to_json
    from syntaxformer.figures import (plot_attention_heads, plot_constituent_priors,
                                      plot_link_probabilities, plot_tree, plot_trees, save_figure,
                                      write_index)
    from syntaxformer.parsing import load_model, model_structures
    from syntaxformer.pretrained import model_or_pretrained
    from syntaxformer.structures import LinkProbabilities

    start = time.perf_counter()
    torch.manual_seed(args.seed)
    items = _sentences(args)
    args.model, options = model_or_pretrained(args.model, decoder_options(args))  # default: shipped
    model, tokenizer, _ = load_model(args.model, args.device)
    config = model.config
    kind = config.model_type
    num_layers = config.num_hidden_layers
    layers = parse_layers(args.layers, num_layers)
    prior = getattr(config, "prior", None)
    name = Path(args.model).resolve().name
    kind_text = f"{kind}, prior={prior}" if prior else kind
    induces = callable(getattr(model, "induce", None)) and getattr(model, "induces_structure", False)
    if not induces:
        kind_text = f"induces no structure: {kind_text}"
    title_name = f"{name} ({kind_text})"
    # a model that induces no structure (e.g. prior="none"): nothing for the parsing path to do
    structures = (model_structures(model, tokenizer, [words for _, words, _ in items], normalise=False)
                  if induces else [None] * len(items))
    decoder = _decoder_description(structures[0].constituency, options) if induces else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    sections, notes, report = [], [], []
    for number, ((heading, words, gold), structure) in enumerate(zip(items, structures), 1):
        if len(words) > READABLE_WORDS:
            notes.append(f"sentence {number} has {len(words)} words: labels are sized for at most "
                         f"{READABLE_WORDS} and may overlap")
        result = forward_one(model, tokenizer, words)
        word_labels = [w + "*" if k in result["unknown"] else w for k, w in enumerate(words)]
        stem = f"s{number}"
        figures, entry = [], {"sentence": number, "words": words, "files": []}

        def save(fig, suffix: str, caption: str) -> None:
            paths = save_figure(fig, out / f"{stem}-{suffix}")
            figures.append((caption, paths[0]))
            entry["files"] += [str(path) for path in paths]

        predicted = None
        if decoder is not None:
            predicted = spans_to_tree(words, structure.spans(options))
            entry["tree"] = to_bracketed(predicted)
            fig = (plot_trees(predicted, gold, title=f"{title_name} - sentence {number}")
                   if gold is not None
                   else plot_tree(predicted, title=f"induced tree - {title_name}"))
            save(fig, "tree", f"Induced tree ({decoder})"
                              + (", beside the gold tree" if gold is not None else ""))
        elif gold is not None:
            save(plot_tree(gold, title="gold tree"), "gold", "Gold tree (this model induces none)")
        if result["priors"] is not None:
            save(plot_constituent_priors(result["priors"], result["labels"], title_name),
                 "priors", "Constituent prior C of every layer")
        if structure is not None and isinstance(structure.constituency, LinkProbabilities):
            if len(words) >= 2:
                save(plot_link_probabilities(structure.constituency.probs, word_labels, title_name),
                     "links", "Link probabilities of every layer (between the words they link)")
            else:
                notes.append(f"sentence {number} has one word: no link probability to draw")
        for layer in layers:
            save(plot_attention_heads(result["attentions"][layer], result["labels"], layer,
                                      title_name),
                 f"attention-layer{layer}", f"Attention of every head, layer {layer}")
        if result["unknown"]:
            notes.append(f"sentence {number}: words marked * are not in the model's vocabulary "
                         f"(encoded as {tokenizer.unk_token})")
        sections.append((heading, figures))
        report.append(entry)

    data = args.treebank or "command line"
    meta = (f"model {args.model} ({kind_text}, {num_layers} layers, "
            f"{config.num_attention_heads} heads, hidden {config.hidden_size}); data: {data}; "
            f"decoder: {decoder or 'none'}; seed {args.seed}")
    index = write_index(out, f"syntaxformer show - {name}", sections, meta=meta, notes=notes)
    summary = {
        "model": str(args.model), "model_type": kind, "prior": prior, "layers": num_layers,
        "heads": config.num_attention_heads, "hidden": config.hidden_size, "data": data,
        "seed": args.seed, "decoder": decoder, "attention_layers": layers, "index": str(index),
        "sentences": report, "notes": notes, "seconds": round(time.perf_counter() - start, 3)}
    if args.json:
        print(to_json(summary))
        return 0
    print(format_header("syntaxformer show", {
        "model": f"{args.model} ({kind_text}, {num_layers} layers)", "data": data,
        "decoder": decoder, "attention layers": ",".join(map(str, layers)), "seed": args.seed,
        "time": f"{summary['seconds']:.2f} s"}))
    for entry in report:
        print(f"\nsentence {entry['sentence']}: {' '.join(entry['words'])}")
        if "tree" in entry:
            print(f"  tree: {entry['tree']}")
        print(f"  {len(entry['files'])} files ({len(entry['files']) // 2} figures, PNG + SVG)")
    for note in notes:
        print(f"note: {note}")
    print(f"\nopen {index}")
    return 0
