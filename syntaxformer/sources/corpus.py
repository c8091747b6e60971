"""Corpora with their per-sentence structure: ``--trees`` / ``--phrases`` as ``gold`` (read from a
treebank) or ``induced:DIR`` (parsed by a trained model, :mod:`syntaxformer.sources.induced`)."""

from __future__ import annotations

from collections.abc import Sequence

from syntaxformer.data.corpus import load_corpus
from syntaxformer.data.phrases import gold_phrase_trees
from syntaxformer.data.structure_source import StructureSource
from syntaxformer.data.trees import gold_tree_sentences
from syntaxformer.sources.induced import induced_heads, induced_phrase_trees


def load_tree_corpus(trees: str | StructureSource, corpus: str) -> tuple[list[list[str]], list[list[int]]]:
    """Sentences and per-word heads for ``--trees`` (``gold`` or ``induced:MODEL_DIR``) and ``--corpus``.

    Raises:
        InputError: a bad ``trees`` value (:meth:`StructureSource.parse`), or as
            :func:`gold_tree_sentences` / :func:`induced_heads`.
    """
    trees = StructureSource.parse(trees, "--trees")
    if trees.is_gold:
        return gold_tree_sentences(corpus)
    sentences = load_corpus(corpus)
    return sentences, induced_heads(trees.model_dir, sentences)


def load_phrase_trees(
    phrases: str | StructureSource, corpus: str, sentences: Sequence[Sequence[str]] | None = None
) -> tuple[list[list[str]], list]:
    """Sentences and a constituency tree per sentence for ``--phrases`` and ``--corpus``.

    Args:
        phrases: ``"gold"`` or ``"induced:MODEL_DIR"`` (a string or a :class:`StructureSource`).
        corpus: the ``--corpus`` (or ``--valid``) spec.
        sentences: sentences already read (with ``--trees gold``), or None: gold reads the treebank's
            words, induced reads :func:`~syntaxformer.data.corpus.load_corpus`.
    Raises:
        InputError: a bad ``phrases`` value, or as :func:`gold_phrase_trees` / :func:`induced_phrase_trees`.
    """
    phrases = StructureSource.parse(phrases, "--phrases")
    if phrases.is_gold:
        return gold_phrase_trees(corpus, sentences)
    if sentences is None:
        sentences = load_corpus(corpus)
    sentences = [list(s) for s in sentences]
    return sentences, induced_phrase_trees(phrases.model_dir, sentences)


def load_structured_corpus(
    corpus: str, trees: str | StructureSource | None = None, phrases: str | StructureSource | None = None
) -> tuple[list[list[str]], list[list[int]] | None, list | None]:
    """``(sentences, per-word heads or None, constituency trees or None)`` of ``corpus``, the rule of
    ``train --trees / --phrases``: the sentences come from the dependency source (``trees="gold"``), else
    the treebank (``phrases="gold"``), else :func:`~syntaxformer.data.corpus.load_corpus`; each structure
    is then read or induced for those sentences.

    Raises:
        InputError: a bad ``trees`` / ``phrases`` value; as :func:`~syntaxformer.sources.corpus.load_tree_corpus`,
            :func:`~syntaxformer.sources.corpus.load_phrase_trees` (words that do not match, naming the
            sentence) or :func:`~syntaxformer.sources.induced.induced_heads`.
    """
    trees, phrases = StructureSource.parse(trees, "--trees"), StructureSource.parse(phrases, "--phrases")
    sentences = heads = constituency = None
    if trees is not None and (trees.is_gold or phrases is None):
        sentences, heads = load_tree_corpus(trees, corpus)
    if phrases is not None:
        sentences, constituency = load_phrase_trees(phrases, corpus, sentences)
    if trees is not None and heads is None:
        heads = induced_heads(trees.model_dir, sentences)
    if sentences is None:
        sentences = load_corpus(corpus)
    return sentences, heads, constituency


__all__ = ["load_tree_corpus", "load_phrase_trees", "load_structured_corpus"]
