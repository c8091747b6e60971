"""The files a parse writes: ``trees.txt``, ``dependencies.conllu`` and ``structures.json``."""

from __future__ import annotations

import json
from pathlib import Path

from syntaxformer.data.dependency import DependencySentence, write_conllu
from syntaxformer.decoding.spans import to_bracketed


def write_outputs(out: Path, trees, heads, words_list) -> list[Path]:
    """Write ``trees.txt`` (bracketed, one tree per line) and, when there are heads,
    ``dependencies.conllu`` into ``out`` (created if missing).

    Args:
        out: the output folder.
        trees: one ``nltk.Tree`` per sentence, leaves = words.
        heads: per sentence its 1-based heads (0 = root), or None (no dependencies).
        words_list: per sentence its words (the CoNLL-U ``FORM`` column).

    Returns:
        The paths written, ``trees.txt`` first.
    """

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "trees.txt"]
    paths[0].write_text("".join(to_bracketed(t) + "\n" for t in trees), encoding="utf-8")
    if heads is not None:
        sentences = [
            DependencySentence(words=tuple(w), tags=("X",) * len(w), heads=tuple(h), punct=(False,) * len(w))
            for w, h in zip(words_list, heads)
        ]
        paths.append(out / "dependencies.conllu")
        write_conllu(sentences, paths[-1])
    return paths


def structures_json(structures) -> list[dict]:
    """``structures.json`` rows: per sentence its words and its structures rounded to 6 decimals
    (:meth:`syntaxformer.structures.Structures.to_json`: link probabilities ``[L][n-1]``, layer 0
    lowest; or distances ``[n-1]`` and heights ``[n]``)."""
    return [s.to_json() for s in structures]


def write_structures_json(out: Path, structures) -> Path:
    """Write :func:`structures_json` of ``structures`` to ``out/structures.json`` (one line);
    returns its path."""
    path = out / "structures.json"
    path.write_text(json.dumps(structures_json(structures)) + "\n")
    return path
