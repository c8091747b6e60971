"""A phrase partition per training sentence, cut from a constituency tree, for a prior that reads
phrases (``train --phrases``; a prior whose ``structure_input`` is ``"phrases"``, e.g. the one in
:mod:`syntaxformer.priors.multi_granularity`; DESIGN.md §3.3, Hao et al., EMNLP 2019).

``--phrases`` takes (:class:`~syntaxformer.data.structure_source.StructureSource`)

* ``gold``: the gold constituency trees of the treebank ``--corpus`` names (``ptb-sample``,
  ``ptb-sample:dev`` / ``:test``, a ``.mrg`` / bracketed file, a folder or glob), read by
  :func:`~syntaxformer.data.preprocess.load_gold_trees` with the preprocessing
  :func:`~syntaxformer.data.corpus.load_corpus` applies (:data:`~syntaxformer.data.preprocess.PRPN`),
  so the sentences are the usual training words (``--corpus ptb-sample --phrases gold`` trains on the
  same words as ``--corpus ptb-sample``). With ``--trees gold`` as well, the sentences come from the
  dependency source and each gold constituency tree must have the same words.
* ``induced:MODEL_DIR``: the trees a trained parser (Tree Transformer, StructFormer or ON-LSTM)
  induces for the sentences, decoded as ``syntaxformer parse`` decodes them
  (:func:`syntaxformer.parsing.model_structures` and :func:`~syntaxformer.parsing.decode` with the
  model's own decoder settings, :func:`~syntaxformer.parsing.resolve_decoder_options`), computed once
  before training (:mod:`syntaxformer.sources.induced`).

Each tree is cut at the level the reading prior gives (its ``tree_level(config)``, default 1) by
:func:`~syntaxformer.decoding.phrases.tree_phrases`. :func:`token_phrase_ids` maps the
per-word phrase ids onto the model's tokens: every piece of a word has its word's phrase, special
tokens (``[CLS]``) and padding have :data:`NO_PHRASE` (-1). Phrase labels (when the
reading prior asks for them, gold trees only) are the outer label of each phrase's constituent
(``S+VP`` -> ``S``; a single-word phrase has its POS tag), indexed in a fixed vocabulary
(:func:`label_vocabulary`: the labels seen in the training sentences, sorted, then :data:`OTHER` for
any label not seen there); padding slots are -100.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from syntaxformer.data.batching import pad_rows
from syntaxformer.data.preprocess import load_gold_trees
from syntaxformer.decoding.phrases import tree_phrases
from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)

#: token phrase id of special tokens and padding (the prior's convention)
NO_PHRASE = -1
#: phrase-label target of padding slots (ignored by the loss)
NO_LABEL = -100
#: the label of a phrase whose label the vocabulary lacks (or that has none)
OTHER = "other"

#: a phrase: ``(start, end, label)``, a half-open word span and its label (None: unlabelled)
Phrase = tuple[int, int, "str | None"]


def check_tree_words(tree, words: Sequence[str], path: str | None, sentence: int) -> None:
    """Raise :class:`InputError` naming ``path`` and the 1-based ``sentence`` unless the leaves of
    ``tree`` (an ``nltk.Tree``) are exactly ``words``."""
    leaves = list(tree.leaves())
    if leaves != list(words):
        diff = next((i for i, (a, b) in enumerate(zip(leaves, words)) if a != b), min(len(leaves), len(words)))
        raise InputError(
            f"the constituency tree's words do not match the sentence ({len(leaves)} vs "
            f"{len(words)} words, first difference at word {diff + 1}: "
            f"{leaves[diff] if diff < len(leaves) else None!r} vs "
            f"{words[diff] if diff < len(words) else None!r})",
            path=path,
            sentence=sentence,
        )


def gold_phrase_trees(source: str, sentences: Sequence[Sequence[str]] | None = None) -> tuple[list[list[str]], list]:
    """The sentences (normalised words) and preprocessed gold trees of the treebank ``source``.

    Args:
        source: ``ptb-sample``, ``ptb-sample:dev`` / ``:test``, a bracketed file, folder or glob.
        sentences: the sentences read elsewhere (``--trees gold``); each tree must then have the
            words of the sentence at the same position, and the counts must agree.
    Raises:
        InputError: as :func:`~syntaxformer.data.preprocess.load_gold_trees`; a different number of
            sentences; a tree whose words differ from its sentence (naming ``source`` and the sentence).
    """
    trees = list(load_gold_trees(source))
    if sentences is None:
        return [list(t.leaves()) for t in trees], trees
    if len(trees) != len(sentences):
        raise InputError(
            f"--phrases gold: the treebank has {len(trees)} sentences, the --trees source {len(sentences)}", path=source
        )
    for number, (tree, words) in enumerate(zip(trees, sentences), start=1):
        check_tree_words(tree, words, source, number)
    return [list(s) for s in sentences], trees


def cut_tree(tree, level: int) -> list[Phrase]:
    """The phrases of ``tree`` at ``level`` (:func:`~syntaxformer.decoding.phrases.tree_phrases`),
    each label reduced to its outer part (``S+VP`` -> ``S``)."""
    return [(i, j, None if label is None else label.split("+")[0]) for i, j, label in tree_phrases(tree, level)]


def word_phrase_ids(phrases: Sequence[Phrase]) -> list[int]:
    """Per word, the 0-based index of its phrase (``phrases`` cover the words in order)."""
    ids: list[int] = []
    for p, (i, j, _) in enumerate(phrases):
        ids += [p] * (j - i)
    return ids


def token_phrase_ids(word_phrases: Sequence[int], word_ids: Sequence[int | None]) -> list[int]:
    """Map per-word phrase ids onto tokens.

    Args:
        word_phrases: n phrase ids of the n words (:func:`word_phrase_ids`).
        word_ids: per token, its 0-based word or None (special token), as
            :func:`~syntaxformer.data.tokenization.encode` returns them.
    Returns:
        Per token, its word's phrase id (a word's pieces share it), :data:`NO_PHRASE` for special tokens.
    """
    return [NO_PHRASE if w is None else word_phrases[w] for w in word_ids]


def label_vocabulary(sentences_phrases: Sequence[Sequence[Phrase]]) -> list[str]:
    """The phrase labels seen in ``sentences_phrases`` (the training sentences), sorted, then :data:`OTHER`."""
    seen = {label for phrases in sentences_phrases for _, _, label in phrases if label is not None}
    seen.discard(OTHER)
    return sorted(seen) + [OTHER]


def phrase_label_ids(phrases: Sequence[Phrase], vocabulary: Sequence[str]) -> list[int]:
    """Per phrase, the index of its label in ``vocabulary`` (:data:`OTHER`'s for an unseen or missing label)."""
    index = {label: k for k, label in enumerate(vocabulary)}
    return [index.get(label, index[OTHER]) for _, _, label in phrases]


def pad_phrases(rows: Sequence[Sequence[int]], value: int = NO_PHRASE, length: int | None = None) -> torch.Tensor:
    """Right-pad per-sentence lists into a (B, N) long tensor with ``value`` (N = the longest, or
    ``length``): token phrase ids (pad :data:`NO_PHRASE`) or phrase labels (pad :data:`NO_LABEL`)."""
    return pad_rows(rows, value, length)


__all__ = [
    "NO_PHRASE",
    "NO_LABEL",
    "OTHER",
    "check_tree_words",
    "gold_phrase_trees",
    "cut_tree",
    "word_phrase_ids",
    "token_phrase_ids",
    "label_vocabulary",
    "phrase_label_ids",
    "pad_phrases",
]
