"""Draw what a trained model computes for a few sentences (``syntaxformer show``).

For each sentence (given as text, or picked from a treebank by index), one forward pass of the model
folder's masked-LM (``AutoModelForMaskedLM`` + ``AutoTokenizer``) gives:

* the constituent prior C of every layer, a grid of heatmaps (Tree Transformer paper, Figure 5);
* the word-level link probabilities a^l of every layer, one layer-by-gap heatmap;
* the syntactic distances of a model that gives them (ON-LSTM: every layer, the parsed one
  highlighted; StructFormer: its one row), bar charts between the words;
* the attention of every head of the layers chosen (Appendix A); for a plain Transformer
  (``prior="none"``) these are the only model figures, so the two kinds of model can be compared
  (a model without attention, ON-LSTM, has none);
* the induced tree, from :mod:`syntaxformer.parsing` with the decoder options of
  ``syntaxformer parse`` (Algorithm 1 by default, ``layer`` for one layer; a StructFormer's
  syntactic distances), and on request the gold tree beside it;

each written as PNG and SVG into ``out``, with an ``index.html`` showing them all
(:func:`run_show`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch

from syntaxformer.data.preprocess import load_gold_trees, normalise_word
from syntaxformer.data.tokenization import encode
from syntaxformer.decoding.spans import spans_to_tree, to_bracketed, with_preterminals
from syntaxformer.errors import InputError
from syntaxformer.figures import (
    plot_attention_heads,
    plot_constituent_priors,
    plot_link_probabilities,
    plot_span_marginals,
    plot_syntactic_distances,
    plot_tree,
    plot_trees,
    save_figure,
    write_index,
)
from syntaxformer.models import capabilities_of
from syntaxformer.parsing import induces_structure, load_model, model_structures
from syntaxformer.pretrained import model_or_pretrained
from syntaxformer.structures import LinkProbabilities, SpanMarginals, SyntacticDistances, min_layer_of

logger = logging.getLogger(__name__)

#: Longer sentences still work, but word labels may start to overlap.
READABLE_WORDS = 40


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


def token_labels(tokens: list[str], word_ids: list[int | None], words: list[str], unk_token: str) -> list[str]:
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
        for a model without them) and ``attentions`` (``[L, H, T, T]``, or None for a model
        without attention), as numpy arrays.
    """

    ids, word_ids = encode(tokenizer, [words])
    ids, word_ids = ids[0], word_ids[0]
    input_ids = torch.tensor([ids], device=next(model.parameters()).device)
    kwargs = {"output_attentions": True}
    if capabilities_of(model).output_priors:
        kwargs["output_priors"] = True
    with torch.no_grad():
        out = model(input_ids=input_ids, **kwargs)
    priors = getattr(out, "priors", None)
    attentions = getattr(out, "attentions", None)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    return {
        "labels": token_labels(tokens, word_ids, words, tokenizer.unk_token),
        "unknown": {w for token, w in zip(tokens, word_ids) if w is not None and token == tokenizer.unk_token},
        "priors": (torch.stack([c[0] for c in priors]).float().cpu().numpy() if priors else None),
        "attentions": (torch.stack([e[0] for e in attentions]).float().cpu().numpy() if attentions else None),
    }


def sentences_to_show(
    sentences=(), treebank: str | None = None, indices=(), gold: bool = False, normalise: bool = True
) -> list[tuple[str, list[str], object]]:
    """``(heading, words, gold tree or None)`` for every sentence asked for.

    Args:
        sentences: sentences as text, words separated by spaces.
        treebank: ``'ptb-sample'`` or a treebank path to pick sentences from (preprocessed as for
            evaluation).
        indices: 0-based positions of sentences in ``treebank``.
        gold: also return the treebank sentences' gold trees.
        normalise: normalise the text sentences' words as the treebank preprocessing does
            (lower-case, words with a digit become ``N``).

    Raises:
        InputError: nothing to draw, ``indices``/``gold`` without ``treebank``, an index out of
            range, or an empty sentence.
    """

    if not sentences and not treebank:
        raise InputError("give sentences to draw, or --treebank with --index")
    if (indices or gold) and not treebank:
        raise InputError("--index and --gold need --treebank")
    if treebank and not indices:
        raise InputError("--treebank needs at least one --index (0-based sentence position)")
    items = []
    for number, text in enumerate(sentences, 1):
        words = text.split()
        if not words:
            raise InputError("empty sentence", sentence=number)
        if normalise:
            words = [normalise_word(w) for w in words]
        items.append((f"sentence {number}: {' '.join(words)}", words, None))
    if treebank:
        gold_trees = load_gold_trees(treebank)
        for index in indices:
            if not 0 <= index < len(gold_trees):
                raise InputError(
                    f"--index {index} is out of range: the treebank has {len(gold_trees)} sentences (0-based)",
                    path=treebank,
                )
            tree = gold_trees[index]
            words = [str(w) for w in tree.leaves()]
            items.append((f"{treebank} #{index}: {' '.join(words)}", words, tree if gold else None))
    return items


def _decoder_description(structure, options) -> str:
    """One line naming the tree decoder of a sentence's constituency ``structure``, as the figures'
    captions and the report show it."""

    if isinstance(structure, SpanMarginals):
        return "max-marginal tree (the binary tree of largest summed span marginals, by CKY)"
    if not isinstance(structure, LinkProbabilities):
        layer = options.layer if options.layer is not None else structure.layer
        return "top-down split at the largest syntactic distance" + (f", layer {layer}" if layer is not None else "")
    num_layers = structure.num_layers
    if options.layer is not None:
        return f"single layer {options.layer}, top-down greedy split (paper Figure 4(b))"
    rule = "official descend rule" if options.descend_threshold is not None else "paper rule"
    return f"Algorithm 1, threshold {options.threshold}, minimum layer {min_layer_of(options, num_layers)}, {rule}"


def _draw_sentence(job: dict, number: int, item: tuple, structure, notes: list[str]) -> tuple[list, dict]:
    """Every figure of one sentence (``job``: model, tokenizer, out, options, decoder, layers,
    title_name): ``(figures as (caption, PNG path), report entry)``; notes are appended to ``notes``."""

    heading, words, gold = item
    title_name, tokenizer = job["title_name"], job["tokenizer"]
    if len(words) > READABLE_WORDS:
        notes.append(
            f"sentence {number} has {len(words)} words: labels are sized for at most {READABLE_WORDS} and may overlap"
        )
    result = forward_one(job["model"], tokenizer, words)
    word_labels = [w + "*" if k in result["unknown"] else w for k, w in enumerate(words)]
    figures, entry = [], {"sentence": number, "words": words, "files": []}

    def save(fig, suffix: str, caption: str) -> None:
        paths = save_figure(fig, job["out"] / f"s{number}-{suffix}")
        figures.append((caption, paths[0]))
        entry["files"] += [str(path) for path in paths]

    if job["decoder"] is not None:
        predicted = with_preterminals(spans_to_tree(words, structure.spans(job["options"])))
        entry["tree"] = to_bracketed(predicted)
        fig = (
            plot_trees(predicted, gold, title=f"{title_name} - sentence {number}")
            if gold is not None
            else plot_tree(predicted, title=f"induced tree - {title_name}")
        )
        save(fig, "tree", f"Induced tree ({job['decoder']})" + (", beside the gold tree" if gold is not None else ""))
    elif gold is not None:
        save(plot_tree(gold, title="gold tree"), "gold", "Gold tree (this model induces none)")
    if result["priors"] is not None:
        save(
            plot_constituent_priors(result["priors"], result["labels"], title_name),
            "priors",
            "Constituent prior C of every layer",
        )
    if structure is not None:
        _draw_structure(structure.constituency, job["options"], word_labels, title_name, number, save, notes)
    for layer in job["layers"]:
        save(
            plot_attention_heads(result["attentions"][layer], result["labels"], layer, title_name),
            f"attention-layer{layer}",
            f"Attention of every head, layer {layer}",
        )
    if result["unknown"]:
        notes.append(
            f"sentence {number}: words marked * are not in the model's vocabulary (encoded as {tokenizer.unk_token})"
        )
    return figures, entry


def _draw_structure(
    constituency, options, word_labels: list[str], title_name: str, number: int, save, notes: list[str]
) -> None:
    """The figure of a sentence's constituency structure: link probabilities (Tree Transformer) or
    syntactic distances (the decoder's row highlighted); a note instead for a one-word sentence."""

    if isinstance(constituency, SpanMarginals) and len(word_labels) >= 2:
        save(
            plot_span_marginals(constituency.marginals, word_labels, title_name),
            "span-marginals",
            "Span marginals: the posterior probability of every span (row: first word, column: last word)",
        )
    if not isinstance(constituency, (LinkProbabilities, SyntacticDistances)):
        return
    what = "link probability" if isinstance(constituency, LinkProbabilities) else "distance"
    if len(word_labels) < 2:
        notes.append(f"sentence {number} has one word: no {what} to draw")
    elif isinstance(constituency, LinkProbabilities):
        save(
            plot_link_probabilities(constituency.probs, word_labels, title_name),
            "links",
            "Link probabilities of every layer (between the words they link)",
        )
    elif constituency.layers is not None:
        parsed = range(constituency.num_layers)[options.layer if options.layer is not None else constituency.layer]
        save(
            plot_syntactic_distances(constituency.layers, word_labels, title_name, parsed=parsed),
            "distances",
            f"Syntactic distances of every layer (layer {parsed} parsed; between the words of each gap)",
        )
    else:
        save(
            plot_syntactic_distances(constituency.distances, word_labels, title_name, parsed=0, layers=["distances"]),
            "distances",
            "Syntactic distances (between the words of each gap)",
        )


def kind_text(model_type: str, prior: str | None, induces: bool) -> str:
    """How the figures and reports name a model: its type, its prior, whether it induces nothing."""
    text = f"{model_type}, prior={prior}" if prior else model_type
    return text if induces else f"induces no structure: {text}"


def _describe(model, folder) -> dict:
    """What the figures' titles and the summary say of the model: ``kind``, ``prior``,
    ``kind_text``, ``induces``, ``name``, ``title_name``."""
    config = model.config
    prior = getattr(config, "prior", None)
    induces = induces_structure(model)
    kind_text_ = kind_text(config.model_type, prior, induces)
    name = Path(folder).resolve().name
    return dict(
        kind=config.model_type,
        prior=prior,
        kind_text=kind_text_,
        induces=induces,
        name=name,
        title_name=f"{name} ({kind_text_})",
    )


def _load_for_show(model, options, layers: str | None, device: str | None) -> tuple:
    """The model folder (None: the shipped one) loaded, with what drawing it needs: ``(folder, decoder
    options, model, tokenizer, attention heads or None, attention layers to draw)``.

    Raises:
        InputError: ``layers`` for a model without attention heads; see :func:`parse_layers`.
    """
    folder, options = model_or_pretrained(model, options)  # default: shipped
    loaded, tokenizer, _ = load_model(folder, device)
    config = loaded.config
    heads = getattr(config, "num_attention_heads", None)  # None: a model without attention (ON-LSTM)
    if not heads and layers is not None:
        raise InputError(f"--layers {layers!r}: this model ({config.model_type}) has no attention heads to draw")
    layers = parse_layers(layers, config.num_hidden_layers) if heads else []
    return folder, options, loaded, tokenizer, heads, layers


def _induced_structures(model, tokenizer, items: list, induces: bool, options) -> tuple[list, str | None]:
    """``(per sentence its structures from the parsing path, the decoder line)``; for a model inducing
    nothing, ``([None] * len(items), None)``."""
    # a model that induces no structure (e.g. prior="none"): nothing for the parsing path to do
    structures = (
        model_structures(model, tokenizer, [words for _, words, _ in items], normalise=False)
        if induces
        else [None] * len(items)
    )
    decoder = _decoder_description(structures[0].constituency, options) if induces else None
    return structures, decoder


def _draw_all(job: dict, items: list, structures: list) -> tuple[list, list[str], list[dict]]:
    """Every sentence's figures (:func:`_draw_sentence`): ``(page sections as (heading, figures), notes,
    report entries)``."""
    sections, notes, report = [], [], []
    for number, (item, structure) in enumerate(zip(items, structures), 1):
        figures, entry = _draw_sentence(job, number, item, structure, notes)
        sections.append((item[0], figures))
        report.append(entry)
    return sections, notes, report


def _write_page(job: dict, folder, about: dict, heads, data: str, seed: int, sections: list, notes: list[str]) -> Path:
    """Write ``index.html`` into ``job["out"]``, its header line naming the model, data, decoder and
    seed; returns its path."""
    config = job["model"].config
    meta = (
        f"model {folder} ({about['kind_text']}, {config.num_hidden_layers} layers, "
        f"{heads or 'no attention'} heads, hidden {config.hidden_size}); data: {data}; "
        f"decoder: {job['decoder'] or 'none'}; seed {seed}"
    )
    return write_index(job["out"], f"syntaxformer show - {about['name']}", sections, meta=meta, notes=notes)


def _summary(job: dict, folder, about: dict, heads, data: str, seed: int, index, report, notes, start: float) -> dict:
    """:func:`run_show`'s summary dict; ``seconds`` counts from ``start`` (:func:`time.perf_counter`)."""
    config = job["model"].config
    return {
        "model": str(folder),
        "model_type": about["kind"],
        "prior": about["prior"],
        "layers": config.num_hidden_layers,
        "heads": heads,
        "hidden": config.hidden_size,
        "data": data,
        "seed": seed,
        "decoder": job["decoder"],
        "attention_layers": job["layers"],
        "index": str(index),
        "sentences": report,
        "notes": notes,
        "seconds": round(time.perf_counter() - start, 3),
    }


def run_show(
    out: str | Path,
    sentences=(),
    treebank: str | None = None,
    indices=(),
    gold: bool = False,
    normalise: bool = True,
    model: str | Path | None = None,
    options=None,
    layers: str | None = None,
    device: str | None = "cpu",
    seed: int = 0,
) -> dict:
    """Draw the figures of every sentence asked for into ``out`` and write ``out/index.html``.

    Args:
        out: output folder (created if missing).
        sentences, treebank, indices, gold, normalise: the sentences (:func:`sentences_to_show`).
        model: a model folder; None = the pretrained Tree Transformer shipped in the package.
        options: decoder settings: None = the model's saved ones (``decoder.json``; the shipped parser's
            report), a dict = the settings chosen (flags) over them, a
            :class:`~syntaxformer.structures.DecoderOptions` = exactly these.
        layers: comma-separated 0-based layers whose attention heads are drawn (None = every layer).
        device: torch device name (None = CUDA if available).
        seed: torch seed (the forward pass is deterministic; recorded).

    Returns:
        The summary: ``model``, ``model_type``, ``prior``, ``layers``, ``heads``, ``hidden``, ``data``,
        ``seed``, ``decoder`` (a line naming it, or None for a model inducing nothing),
        ``attention_layers``, ``index`` (the page), ``sentences`` (per sentence: number, words, files,
        bracketed tree), ``notes`` and ``seconds``.

    Raises:
        InputError: see :func:`sentences_to_show` and :func:`parse_layers`; no pretrained model
            shipped; the loader's errors.
    """

    start = time.perf_counter()
    torch.manual_seed(seed)
    items = sentences_to_show(sentences, treebank, indices, gold, normalise)
    folder, options, loaded, tokenizer, heads, layers = _load_for_show(model, options, layers, device)
    about = _describe(loaded, folder)
    structures, decoder = _induced_structures(loaded, tokenizer, items, about["induces"], options)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    job = dict(
        model=loaded,
        tokenizer=tokenizer,
        out=out,
        options=options,
        decoder=decoder,
        layers=layers,
        title_name=about["title_name"],
    )
    sections, notes, report = _draw_all(job, items, structures)
    data = treebank or "command line"
    index = _write_page(job, folder, about, heads, data, seed, sections, notes)
    return _summary(job, folder, about, heads, data, seed, index, report, notes, start)
