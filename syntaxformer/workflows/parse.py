"""Parse sentences with a model folder and write the trees (``syntaxformer parse``)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import torch
from nltk import Tree

from syntaxformer.errors import InputError
from syntaxformer.parser import EnsembleParser, Parser, load_parser
from syntaxformer.workflows.outputs import write_outputs, write_structures_json


class ParseResult(NamedTuple):
    """What :func:`run_parse` gives back, one entry per input line.

    Attributes:
        summary: ``model``, ``data``, ``n_sentences`` (parsed), ``n_blank_lines``, ``decoder``,
            ``seed``, ``files`` (the files written; none without an output folder).
        trees: per input line its ``nltk.Tree`` (leaves = its tokens), None for a blank line.
        heads: per input line its 1-based token heads (0 = root; None for a blank line), or None for a
            model without dependencies.
        words: per input line its tokens (empty for a blank line).
    """

    summary: dict
    trees: list[Tree | None]
    heads: list[list[int] | None] | None
    words: list[list[str]]


def run_parse(
    sentences: list[list[str]],
    out: str | Path | None = None,
    model: str | Path | None = None,
    options=None,
    data: str = "<sentences>",
    batch_size: int = 64,
    write_json: bool = False,
    seed: int = 0,
    punctuation: bool = True,
    dependencies: bool = False,
    verbose: bool = False,
    device: str | None = "cpu",
) -> ParseResult:
    """Induce trees for ``sentences`` with a :class:`~syntaxformer.parser.Parser`; write them into ``out``.

    With ``out``, writes ``OUT/trees.txt``, for a model with dependency heads
    ``OUT/dependencies.conllu`` and with ``write_json`` ``OUT/structures.json``
    (:mod:`syntaxformer.workflows.outputs`; a blank line is the empty tree ``()``, no CoNLL-U sentence,
    and ``{"words": []}``). Without it, writes nothing: the caller renders the result.

    Args:
        sentences: per input line its tokens (punctuation tokens are not shown to the model and are
            put back as leaves: :mod:`syntaxformer.parser`); an empty list is a blank line, which gets
            no tree (None) but keeps its place, so output *k* is line *k*.
        out: output folder (created if missing); None = write no file.
        model: a model folder; None = the pretrained Tree Transformer shipped in the package.
        options: decoder settings: None = the model's saved ones (``decoder.json``), a dict = the
            settings chosen (flags) over them, a :class:`~syntaxformer.structures.DecoderOptions` =
            exactly these.
        data: a name for the sentences (the input file), recorded in the summary and named by errors.
        batch_size: sentences per forward pass.
        write_json: also write ``structures.json`` (needs ``out``).
        seed: torch seed (parsing is deterministic; recorded).
        punctuation: find punctuation tokens and keep them from the model (False: a treebank's
            leaves, every token a word).
        dependencies: require dependency heads: refuse, before parsing, a model that induces none.
        verbose: let the libraries show their progress bars and messages while the model loads.
        device: where the model runs ("cpu", "cuda", ...; None = CUDA if available, else the CPU).

    Returns:
        A :class:`ParseResult`.

    Raises:
        InputError: no sentence, ``write_json`` without ``out`` or with an ensemble, ``dependencies`` with a model that
            induces none, no pretrained model shipped, a line of only punctuation (naming ``data`` and
            the line), or the loader's / decoder's errors.
    """
    torch.manual_seed(seed)
    if write_json and out is None:
        raise InputError("structures.json is written into an output folder: give one (--out DIR)")
    if not any(sentences):
        raise InputError("no sentence to parse", path=data)
    parser = load_parser(
        model, options, batch_size=batch_size, device=device, verbose=verbose
    )  # None: the shipped parser
    if write_json and isinstance(parser, EnsembleParser):
        raise InputError(
            f"{parser.name}: structures.json holds one model's structures; an ensemble has several (parse with one member)"
        )
    if dependencies and not parser.gives_dependencies:
        raise InputError(f"{parser.name}: this model induces no dependency heads (a StructFormer does)")
    trees, heads, structures = _parse_lines(parser, sentences, punctuation, data)
    paths = []
    if out is not None:
        paths = write_outputs(Path(out), trees, heads, sentences)
        if write_json:
            paths.append(write_structures_json(Path(out), structures))
    summary = {
        "model": str(parser.name),
        "data": data,
        "n_sentences": sum(1 for t in trees if t is not None),
        "n_blank_lines": sum(1 for t in trees if t is None),
        "decoder": parser.options.to_dict(),
        "seed": seed,
        "files": [str(p) for p in paths],
    }
    return ParseResult(summary, trees, heads, [list(s) for s in sentences])


def _parse_lines(parser: Parser, sentences: list[list[str]], punctuation: bool, data: str) -> tuple[list, list, list]:
    """Trees, heads and structures per input line (None for a blank line; heads None for a model
    without dependencies); an error about a sentence names its line of ``data``."""
    kept = [i for i, tokens in enumerate(sentences) if tokens]
    try:
        trees, heads, structures = parser.parse_tokens([sentences[i] for i in kept], punctuation=punctuation)
    except InputError as e:
        if e.sentence is None:
            raise
        raise InputError(e.message, path=data, line=kept[e.sentence - 1] + 1) from None

    def by_line(values):
        placed = [None] * len(sentences)
        for i, value in zip(kept, values):
            placed[i] = value
        return placed

    return by_line(trees), (None if heads is None else by_line(heads)), by_line(structures)


__all__ = ["ParseResult", "run_parse"]
