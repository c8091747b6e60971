"""Phrases of a constituency tree cut at a depth (Hao et al. 2019, §2.2, "syntactic phrases"): the
partition the multi-granularity prior's ``tree`` heads read, computed from a tree or its spans."""

from __future__ import annotations

from syntaxformer.decoding.spans import labelled_spans


def _constituents(tree_or_spans, n_words: int | None):
    """(distinct spans with their topmost label, sentence length) from an nltk Tree or spans."""
    if hasattr(tree_or_spans, "leaves"):  # an nltk Tree
        n_words = len(tree_or_spans.leaves())
        items = labelled_spans(tree_or_spans)
    else:
        items = [tuple(s) for s in tree_or_spans]
    labels: dict[tuple[int, int], str | None] = {}
    for item in items:  # pre-order: the first label of a span is the top of a unary chain
        labels.setdefault((int(item[0]), int(item[1])), item[2] if len(item) > 2 else None)
    if n_words is None:
        n_words = max((j for _, j in labels), default=0)
    return labels, n_words


def tree_phrases(tree_or_spans, level: int, n_words: int | None = None) -> list[tuple[int, int, str | None]]:
    """The syntactic phrases of a sentence cut at ``level`` (Hao et al. 2019, §2.2 "syntactic phrases").

    Definition. The constituents are the distinct spans of the tree (half-open word spans; a unary
    chain is one span, labelled by its topmost node); the whole sentence ``(0, n)`` is depth 0
    whether listed or not, and a constituent's *depth* is the number of distinct constituents that
    strictly contain it. The phrases at ``level`` are the constituents of depth ``level``, plus one
    single-word phrase for every word that none of them covers (a word under a shallower leaf).
    So level 0 is the whole sentence, level 1 its immediate constituents, and a level below every
    leaf gives one phrase per word.

    Args:
        tree_or_spans: an ``nltk.Tree`` (its leaves are the words) or constituents ``(i, j)`` /
            ``(i, j, label)``.
        level: depth, >= 0.
        n_words: sentence length (default: the tree's leaves, or the largest span end).
    Returns:
        the phrases ``(i, j, label)`` in word order, covering ``0 .. n`` without overlap; ``label`` is
        the constituent's (None when the spans have none, or for an uncovered word that is no span).
    """
    if level < 0:
        raise ValueError(f"tree level must be >= 0, got {level}")
    labels, n = _constituents(tree_or_spans, n_words)
    spans = set(labels) | {(0, n)}
    depth = {s: sum(1 for t in spans if t != s and t[0] <= s[0] and s[1] <= t[1]) for s in spans}
    chosen = sorted(s for s in spans if depth[s] == level and s[1] > s[0])
    phrases, word = [], 0
    for i, j in chosen + [(n, n)]:
        if i < word or j > n:
            raise ValueError(f"constituents {chosen} at level {level} overlap or leave a sentence of {n} words")
        phrases += [(w, w + 1, labels.get((w, w + 1))) for w in range(word, i)]  # uncovered words
        if j > i:
            phrases.append((i, j, labels.get((i, j))))
        word = max(word, j)
    return phrases


def tree_partition(tree_or_spans, level: int, n_words: int | None = None) -> list[int]:
    """Phrase id of each word (0-based, in word order) for the phrases of :func:`tree_phrases`."""
    ids: list[int] = []
    for p, (i, j, _) in enumerate(tree_phrases(tree_or_spans, level, n_words)):
        ids += [p] * (j - i)
    return ids


__all__ = ["tree_phrases", "tree_partition"]
