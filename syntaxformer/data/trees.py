"""A dependency tree per training sentence, for priors that read one (``train --trees``; a prior
whose ``structure_input`` is ``"trees"``, :mod:`syntaxformer.priors.base`).

``--trees`` takes (:class:`~syntaxformer.data.structure_source.StructureSource`)

* ``gold``: the training sentences *and* their trees come from the dependency source named by
  ``--corpus`` (``ptb-sample``, ``ptb-sample:dev`` / ``:test``, a CoNLL-U or ``.dp`` file, a folder;
  :func:`~syntaxformer.data.dependency.read_dependencies`). Punctuation tokens (the readers' rule:
  UPOS ``PUNCT``, or a PTB tag outside the word tags) are removed, as the constituency preprocessing
  removes them, so ``--corpus ptb-sample --trees gold`` trains on the same words as ``--corpus
  ptb-sample``; a removed token's dependents attach to its nearest kept ancestor (the root if none).
  Words are normalised by :func:`~syntaxformer.data.preprocess.normalise_word` (the corpora's rule).
* ``induced:MODEL_DIR``: the sentences of ``--corpus`` as usual (:func:`~syntaxformer.data.corpus.load_corpus`),
  their trees the maximum-spanning-tree heads (Chu-Liu-Edmonds) of a trained model that induces a
  dependency distribution (StructFormer), computed once before training through
  :func:`syntaxformer.parsing.model_structures`.

Heads here are per word, 1-based, 0 = root (ARCHITECTURE.md's convention). :func:`token_heads` maps
them onto the model's tokens: 0-based token positions, ``-1`` for the root, ``-100`` for tokens outside
the tree (special tokens such as ``[CLS]``; padding). **Rule for words split into pieces**: a word's
first piece carries the word's relation (its head = the first piece of the head word); every further
piece of the word has the first piece as its head.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from syntaxformer.data.batching import pad_rows
from syntaxformer.data.dependency import read_dependencies
from syntaxformer.data.preprocess import normalise_word
from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)

#: token head of the root word (0-based token positions)
ROOT = -1
#: token head of a token outside the tree (special tokens, padding)
NO_TREE = -100


def check_tree(heads: Sequence[int], n_words: int, path: str | None, sentence: int) -> None:
    """Raises :class:`InputError` naming ``path`` and the 1-based ``sentence`` unless ``heads``
    (1-based, 0 = root) is a tree over ``n_words`` words: one head per word, each in ``0 .. n``,
    no cycle (every word reaches the root)."""
    if len(heads) != n_words:
        raise InputError(f"the tree has {len(heads)} heads for {n_words} words", path=path, sentence=sentence)
    for i, h in enumerate(heads):
        if not 0 <= h <= n_words or h == i + 1:
            raise InputError(
                f"word {i + 1} has head {h} (expected 0..{n_words}, not itself)", path=path, sentence=sentence
            )
    depth_known = [False] * n_words
    for start in range(n_words):
        seen, i = [], start
        while i >= 0 and not depth_known[i]:
            if i in seen:
                raise InputError(f"the heads contain a cycle through word {i + 1}", path=path, sentence=sentence)
            seen.append(i)
            i = heads[i] - 1
        for j in seen:
            depth_known[j] = True


def drop_tokens(heads: Sequence[int], keep: Sequence[bool]) -> list[int]:
    """Heads (1-based, 0 = root) of the kept tokens after removing the others; a removed token's
    dependents attach to its nearest kept ancestor (0 if none). Assumes a tree (:func:`check_tree`)."""
    new_index = {}
    for i, k in enumerate(keep):
        if k:
            new_index[i + 1] = len(new_index) + 1
    out = []
    for i, k in enumerate(keep):
        if not k:
            continue
        h = heads[i]
        while h != 0 and not keep[h - 1]:
            h = heads[h - 1]
        out.append(0 if h == 0 else new_index[h])
    return out


def gold_tree_sentences(source: str) -> tuple[list[list[str]], list[list[int]]]:
    """The words (normalised, punctuation removed) and heads (1-based) of every sentence of a
    dependency ``source`` (module docstring); sentences left empty are dropped (logged).

    Raises:
        InputError: as :func:`~syntaxformer.data.dependency.read_dependencies`, or a sentence whose
            heads do not form a tree (naming the source and the 1-based sentence).
    """
    sentences, trees, empty = [], [], 0
    for number, sent in enumerate(read_dependencies(source), start=1):
        check_tree(list(sent.heads), len(sent.words), source, number)
        keep = [not p for p in sent.punct]
        if not any(keep):
            empty += 1
            continue
        sentences.append([normalise_word(w) for w, k in zip(sent.words, keep) if k])
        trees.append(drop_tokens(sent.heads, keep))
    if empty:
        logger.info("%s: %d sentences of punctuation only dropped", source, empty)
    return sentences, trees


def token_heads(word_heads: Sequence[int], word_ids: Sequence[int | None]) -> list[int]:
    """Map per-word heads (1-based, 0 = root) onto tokens (module docstring's rule).

    Args:
        word_heads: n heads of the n words.
        word_ids: per token, its 0-based word or None (special token), as
            :func:`~syntaxformer.data.tokenization.encode` returns them.
    Returns:
        Per token: the 0-based position of its head token, :data:`ROOT` or :data:`NO_TREE`.
    """
    first: dict[int, int] = {}
    for t, w in enumerate(word_ids):
        if w is not None and w not in first:
            first[w] = t
    out = []
    for t, w in enumerate(word_ids):
        if w is None:
            out.append(NO_TREE)
        elif first[w] != t:
            out.append(first[w])
        else:
            h = word_heads[w]
            out.append(ROOT if h == 0 else first[h - 1])
    return out


def pad_heads(heads: Sequence[Sequence[int]], length: int | None = None) -> torch.Tensor:
    """Right-pad token heads with :data:`NO_TREE` into a (B, N) long tensor (N = the longest, or ``length``)."""
    return pad_rows(heads, NO_TREE, length)


__all__ = [
    "ROOT",
    "NO_TREE",
    "check_tree",
    "drop_tokens",
    "gold_tree_sentences",
    "token_heads",
    "pad_heads",
]
