"""The files a parse writes: ``trees.txt``, ``dependencies.conllu`` and ``structures.json``."""

from __future__ import annotations

import json
from pathlib import Path

from syntaxformer.data.dependency import DependencySentence, conllu_string
from syntaxformer.decoding.spans import to_bracketed, with_preterminals

#: The line of ``trees.txt`` for a blank input line: an empty bracket, which the treebank reader
#: (:func:`syntaxformer.data.treebank.parse_bracketed`) reads as a tree with no leaves, so tree *k*
#: of the file stays line *k* of the input.
EMPTY_TREE = "()"


def trees_text(trees) -> str:
    """``trees.txt``'s text: one bracketed tree per line in the field's form (a preterminal over each
    word, :func:`with_preterminals`; :func:`to_bracketed`), :data:`EMPTY_TREE` for None (a blank input
    line).

    Args:
        trees: per input line an ``nltk.Tree`` (leaves = words) or None.
    """
    return "".join((EMPTY_TREE if t is None else to_bracketed(with_preterminals(t))) + "\n" for t in trees)


def conllu_text(heads, words_list) -> str:
    """``dependencies.conllu``'s text: the sentences with their heads in CoNLL-U, each with
    ``# sent_id`` = its 1-based position in the lists (the input line); a blank line (no words) has
    no sentence, as CoNLL-U has no empty one.

    Args:
        heads: per input line its 1-based heads (0 = root), or None for a blank line.
        words_list: per input line its words (the ``FORM`` column).
    """
    numbered = [(i, w, h) for i, (w, h) in enumerate(zip(words_list, heads, strict=True), start=1) if w]
    sentences = [
        DependencySentence(words=tuple(w), tags=("X",) * len(w), heads=tuple(h), punct=(False,) * len(w))
        for _, w, h in numbered
    ]
    return conllu_string(sentences, sent_ids=[i for i, _, _ in numbered])


def write_outputs(out: Path, trees, heads, words_list) -> list[Path]:
    """Write ``trees.txt`` (bracketed, one tree per line, :func:`trees_text`) and, when there are
    heads, ``dependencies.conllu`` (:func:`conllu_text`) into ``out`` (created if missing).

    Args:
        out: the output folder.
        trees: one ``nltk.Tree`` per sentence, leaves = words; None for a blank input line.
        heads: per sentence its 1-based heads (0 = root; None for a blank line), or None (no
            dependencies).
        words_list: per sentence its words (the CoNLL-U ``FORM`` column; empty for a blank line).

    Returns:
        The paths written, ``trees.txt`` first.
    """

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "trees.txt"]
    paths[0].write_text(trees_text(trees), encoding="utf-8")
    if heads is not None:
        paths.append(out / "dependencies.conllu")
        paths[-1].write_text(conllu_text(heads, words_list), encoding="utf-8")
    return paths


def structures_json(structures) -> list[dict]:
    """``structures.json`` rows: per sentence its words and its structures rounded to 6 decimals
    (:meth:`syntaxformer.structures.Structures.to_json`: link probabilities ``[L][n-1]``, layer 0
    lowest; or distances ``[n-1]`` and heights ``[n]``); ``{"words": []}`` for None (a blank input
    line)."""
    return [{"words": []} if s is None else s.to_json() for s in structures]


def write_structures_json(out: Path, structures) -> Path:
    """Write :func:`structures_json` of ``structures`` to ``out/structures.json`` (one line);
    returns its path."""
    path = out / "structures.json"
    path.write_text(json.dumps(structures_json(structures)) + "\n")
    return path
