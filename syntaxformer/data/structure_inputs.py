"""Per-sentence structure for evaluation: the dependency heads (``--trees``, :mod:`syntaxformer.data.trees`)
and / or the phrase partition (``--phrases``, :mod:`syntaxformer.data.phrases`) of each sentence, as
``perplexity`` and ``probe`` give them to a model that reads them.

A sentence's structure is a small dict of per-word lists, keyed by the ``structure_inputs`` name the
model reads:

* ``"heads"``: n heads (1-based, 0 = root), mapped onto tokens by
  :func:`~syntaxformer.data.trees.token_heads` (padding :data:`~syntaxformer.data.trees.NO_TREE`, -100);
* ``"phrase_ids"``: n phrase ids (0-based, in order), mapped onto tokens by
  :func:`~syntaxformer.data.phrases.token_phrase_ids` (padding :data:`~syntaxformer.data.phrases.NO_PHRASE`, -1).

:func:`load_structured_corpus` reads the sentences and their structures exactly as ``train --trees /
--phrases`` reads a corpus; :func:`token_structures` maps them onto tokens; :func:`pad_structures`
batches them into ``structure_inputs={"heads": (B, N), "phrase_ids": (B, N)}`` (long).

A structure a model induces from the whole sentence carries information about a masked word (its
depth, its tree distances, its phrase). So an induced structure can instead come from the input as the
masked LM reads it: :func:`masked_copy_structures` parses each one-mask copy of the perplexity protocol
(``perplexity --induced-from masked``), :class:`MaskedInputInducer` each training batch (``train
--induced-from masked``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from syntaxformer.data.batching import pad_rows
from syntaxformer.data.phrases import NO_PHRASE, cut_tree, token_phrase_ids, word_phrase_ids
from syntaxformer.data.trees import NO_TREE, token_heads
from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)


def _mappers() -> dict:
    """``structure_inputs`` key -> (word -> token mapping, padding value)."""
    return {"heads": (token_heads, NO_TREE), "phrase_ids": (token_phrase_ids, NO_PHRASE)}


def sentence_structures(
    n: int, heads: Sequence[Sequence[int]] | None = None, phrase_trees: Sequence | None = None, level: int = 1
) -> list[dict] | None:
    """Per sentence (``n`` of them), its structure dict: ``"heads"`` from ``heads`` (per word, 1-based),
    ``"phrase_ids"`` from ``phrase_trees`` (``nltk.Tree`` per sentence, cut at ``level`` by
    :func:`~syntaxformer.data.phrases.cut_tree`); None when both are None."""
    if heads is None and phrase_trees is None:
        return None
    out: list[dict] = [{} for _ in range(n)]
    for s, structure in enumerate(out):
        if heads is not None:
            structure["heads"] = list(heads[s])
        if phrase_trees is not None:
            structure["phrase_ids"] = word_phrase_ids(cut_tree(phrase_trees[s], level))
    return out


def token_structures(
    structures: Sequence[dict], word_ids: Sequence[Sequence[int | None]], n_words: Sequence[int]
) -> list[dict]:
    """Map each sentence's per-word structure onto its tokens.

    Args:
        structures: per sentence, ``{"heads": [...], "phrase_ids": [...]}`` (either or both; per word).
        word_ids: per sentence, per token its 0-based word or None (special token).
        n_words: per sentence, its number of words.
    Returns:
        Per sentence, the same keys with per-token lists (module docstring).
    Raises:
        InputError: not one structure per sentence, an unknown key, or a list that is not one entry per
            word (naming the 1-based sentence).
    """
    if len(structures) != len(word_ids):
        raise InputError(f"{len(structures)} structures (trees / phrases) for {len(word_ids)} sentences")
    return [
        token_structure(structure, wids, n, s + 1)
        for s, (structure, wids, n) in enumerate(zip(structures, word_ids, n_words))
    ]


def token_structure(structure: dict, word_ids: Sequence[int | None], n_words: int, sentence: int) -> dict:
    """One sentence's :func:`token_structures`: ``structure``'s per-word lists mapped onto the tokens
    ``word_ids`` (per token, its 0-based word or None).

    Raises:
        InputError: an unknown key, or a list that is not one entry per word (naming the 1-based ``sentence``).
    """
    mappers = _mappers()
    row = {}
    for key, values in structure.items():
        if key not in mappers:
            raise InputError(f"unknown structure input {key!r} (known: {', '.join(mappers)})")
        if len(values) != n_words:
            what = "heads" if key == "heads" else "phrase ids"
            raise InputError(
                f"the {'tree' if key == 'heads' else 'phrase partition'} has {len(values)} {what} for {n_words} words",
                sentence=sentence,
            )
        row[key] = mappers[key][0](values, word_ids)
    return row


def pad_structures(rows: Sequence[dict], width: int) -> dict[str, torch.Tensor]:
    """Right-pad the token structures of a batch (one dict per row, the same keys) into
    ``{key: (B, width) long}``, each key with its padding value (module docstring)."""
    mappers = _mappers()
    return {key: pad_rows([row[key] for row in rows], mappers[key][1], width) for key in (rows[0] if rows else {})}


__all__ = ["sentence_structures", "token_structures", "token_structure", "pad_structures"]
