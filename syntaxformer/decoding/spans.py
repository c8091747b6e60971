"""Spans, brackets and bracketed trees: the one place where trees become spans and back.

Index convention (used everywhere in syntaxformer): a **span** ``(i, j)`` is the half-open word
interval ``i .. j-1`` of a sentence, 0-based; a sentence of ``n`` words has the whole-sentence span
``(0, n)``. A **bracket** is a span scored by unlabelled bracket F1: length at least 2 and not the
whole sentence (DESIGN.md §4).

**Two forms of a tree.** :func:`spans_to_tree` builds the decoders' *internal* form: words are leaves
directly under their smallest covering constituent, ``(S (X The old man) sat)``; the decoders and
evaluators work on it. The trees the parser returns (:class:`syntaxformer.parser.Parser`, so also
``syntaxformer parse``'s ``trees.txt``) and ``show`` draws are in the *field's form*
(:func:`with_preterminals`): a preterminal :data:`PRETERMINAL` over each word,
``(S (X (X The) (X old) (X man)) (X sat))``, so NLTK's ``pretty_print``, ``pos()`` and other tools
read it as a Penn Treebank tree. The two forms have the same brackets (a preterminal spans one word,
never a bracket), and every reader and scoring protocol reads both the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

from nltk import Tree

Span = tuple[int, int]

#: The label of the preterminal over each word in the field's form (:func:`with_preterminals`): the
#: induced trees carry no part-of-speech tags, so every word, punctuation included, gets ``X``.
PRETERMINAL = "X"

#: Penn Treebank escapes for brackets inside words, so a word never breaks the bracketing.
_ESCAPES = {"(": "-LRB-", ")": "-RRB-"}


def labelled_spans(tree: Tree) -> list[tuple[int, int, str]]:
    """Every constituent of ``tree`` as ``(start, end, label)``, pre-order, half-open word spans.

    Leaves are the strings of ``tree``; every subtree (preterminals included) gives one entry, so
    unary chains give the same span several times, once per label.
    """
    out: list[tuple[int, int, str]] = []

    def walk(node, start: int) -> int:
        if not isinstance(node, Tree):
            return start + 1
        index = len(out)
        out.append((start, start, node.label()))  # end filled in below
        end = start
        for child in node:
            end = walk(child, end)
        out[index] = (start, end, node.label())
        return end

    walk(tree, 0)
    return out


def brackets(tree: Tree) -> set[Span]:
    """The unlabelled brackets of ``tree``: spans of length >= 2 other than the whole sentence.

    Duplicates from unary chains count once (a set). This is the span set of sentence- and
    corpus-level F1 (DESIGN.md §4).
    """
    n = len(tree.leaves())
    return {(i, j) for i, j, _ in labelled_spans(tree) if j - i >= 2 and (i, j) != (0, n)}


def spans_to_tree(words: Sequence[str], spans: Iterable[Span], label: str = "X", root_label: str = "S") -> Tree:
    """Build the tree whose constituents are ``spans`` (plus the whole sentence) over ``words``.

    Words are leaves directly under their smallest covering span (no preterminals: the internal form
    of the module docstring; :func:`with_preterminals` gives the field's form). Spans of length < 2,
    duplicates and the whole-sentence span are accepted and ignored.

    Raises:
        ValueError: if a span is out of range ``0 <= i < j <= n`` or two spans cross.
    """
    n = len(words)
    if n == 0:
        raise ValueError("cannot build a tree over an empty sentence")
    keep = set()
    for i, j in spans:
        if not 0 <= i < j <= n:
            raise ValueError(f"span ({i}, {j}) is out of range for a sentence of {n} words")
        if j - i >= 2 and (i, j) != (0, n):
            keep.add((i, j))
    # Sorting by (start, -end) lists every span after the spans that contain it.
    ordered = sorted(keep, key=lambda s: (s[0], -s[1]))
    root = Tree(root_label, [])
    stack: list[tuple[int, int, Tree]] = [(0, n, root)]
    position = 0
    for i, j in ordered:
        while not (stack[-1][0] <= i and j <= stack[-1][1]):
            if i < stack[-1][1] < j:
                raise ValueError(f"spans cross: ({i}, {j}) and {stack[-1][:2]}")
            _close(stack, words, position)
            position = stack.pop()[1]
        start, end, node = stack[-1]
        node.extend(words[position:i])
        position = i
        child = Tree(label, [])
        node.append(child)
        stack.append((i, j, child))
    while stack:
        _close(stack, words, position)
        position = stack.pop()[1]
    return root


def with_preterminals(tree: Tree, label: str = PRETERMINAL) -> Tree:
    """The tree in the field's form: a copy of ``tree`` with a preterminal ``label`` over every word
    that stands beside other children (module docstring, "Two forms of a tree").

    ``(S (X The old man) sat)`` -> ``(S (X (X The) (X old) (X man)) (X sat))``. A word that is already
    the only child of its node keeps that node as its preterminal, so a tree in the field's form (a
    gold tree, or the output of this function) is returned unchanged, and a one-word tree stays
    ``(S word)``: its root is the word's preterminal (as the scoring protocols and EVALB read it). The
    brackets (:func:`brackets`) and the leaves are those of ``tree``.

    Args:
        tree: an ``nltk.Tree`` with string leaves, e.g. from :func:`spans_to_tree`.
        label: the preterminal label (default :data:`PRETERMINAL`).

    Returns:
        A new ``nltk.Tree``; ``tree`` is not modified.
    """

    def wrap(node: Tree) -> Tree:
        if len(node) == 1 and not isinstance(node[0], Tree):
            return Tree(node.label(), [node[0]])
        return Tree(node.label(), [wrap(c) if isinstance(c, Tree) else Tree(label, [c]) for c in node])

    return wrap(tree)


def _close(stack, words, position):
    """Append the words from ``position`` to the end of the innermost open span."""
    start, end, node = stack[-1]
    node.extend(words[position:end])


def escape_word(word: str) -> str:
    """Replace ``(`` and ``)`` in a word by the Penn Treebank escapes ``-LRB-`` / ``-RRB-``."""
    for raw, escaped in _ESCAPES.items():
        word = word.replace(raw, escaped)
    return word


def to_bracketed(tree: Tree) -> str:
    """One-line bracketed string of ``tree`` (words escaped), readable by the treebank reader."""

    def escaped(node):
        if isinstance(node, Tree):
            return Tree(node.label(), [escaped(c) for c in node])
        return escape_word(node)

    return escaped(tree).pformat(margin=sys.maxsize)


def split_by_distance(distances: Sequence[float]) -> set[Span]:
    """Top-down greedy binary tree from syntactic distances (Shen et al., ACL 2018, §3.2).

    Args:
        distances: length ``n - 1``; ``distances[k]`` is the distance of the gap between words
            ``k`` and ``k + 1``. Larger = split earlier. Ties split at the leftmost maximum.

    Returns:
        The spans of the binary tree (every internal node, the whole sentence ``(0, n)`` included;
        single words are not listed), half-open.
    """
    n = len(distances) + 1
    spans: set[Span] = set()
    stack = [(0, n)]
    while stack:
        i, j = stack.pop()
        if j - i < 2:
            continue
        spans.add((i, j))
        gaps = distances[i : j - 1]
        k = i + max(range(len(gaps)), key=lambda g: (gaps[g], -g))
        stack.append((i, k + 1))
        stack.append((k + 1, j))
    return spans


def right_branching(n: int) -> set[Span]:
    """Spans of the right-branching binary tree over ``n`` words: ``{(i, n) : 0 <= i <= n - 2}``
    (:func:`split_by_distance` of distances decreasing left to right); ``set()`` for ``n < 2``."""
    return split_by_distance([n - 1 - k for k in range(n - 1)]) if n >= 2 else set()


def left_branching(n: int) -> set[Span]:
    """Spans of the left-branching binary tree over ``n`` words: ``{(0, j) : 2 <= j <= n}``
    (:func:`split_by_distance` of distances increasing left to right); ``set()`` for ``n < 2``."""
    return split_by_distance(list(range(n - 1))) if n >= 2 else set()


def tree_distances(spans: Iterable[Span], n: int) -> list[int]:
    """Syntactic distances that give back a binary tree: the inverse of :func:`split_by_distance`.

    The distance of the gap between words ``k`` and ``k + 1`` is the length (in words) of the smallest
    span of the tree that contains both words, the constituent that this gap splits (Shen et al., ACL
    2018, §3.1, with the constituent's length for its height). Within any constituent its own split
    gap has the largest distance, so ``split_by_distance(tree_distances(spans, n)) == spans`` for a
    binary tree given with its whole-sentence span (tests/decoding/test_ensemble.py).

    Args:
        spans: the tree's spans (half-open; the whole sentence is added when absent; spans of one
            word are ignored).
        n: the sentence's length in words.
    Returns:
        ``n - 1`` integer distances.
    """
    distances = [n] * max(n - 1, 0)
    for i, j in sorted(set(spans), key=lambda span: span[0] - span[1]):  # longest first: smaller spans win
        for k in range(i, j - 1):
            distances[k] = j - i
    return distances
