"""Parser ensembles: the tree and the heads that several parsers' outputs agree on most.

**Tree averaging** (Shayegh, Cao, Zhu, Cheung & Mou, "Ensemble Distillation for Unsupervised
Constituency Parsing", ICLR 2024, §2.2). Given the trees ``T_1 .. T_K`` of K parsers (the *members*)
over one sentence of ``n`` words and member weights ``w_k >= 0``, the ensemble tree is the
minimum-Bayes-risk binary tree

    T* = argmax_{T binary over n words}  sum_k  w_k * |spans(T) ∩ spans(T_k)|

where ``spans`` are a tree's spans of two or more words (the whole sentence is in every tree: a
constant). The paper writes the risk with sentence F1; over binary trees of the same sentence every
tree has ``n - 1`` such spans, so F1 is the span hit count over a constant and the two argmaxes agree
(its §2.2). The objective is a sum over the chosen tree's own spans of the **span votes**

    v(i, j) = sum_k  w_k * [(i, j) in T_k]          (:func:`span_votes`, an ``(n+1, n+1)`` table)

so a CKY search finds it exactly (:func:`mbr_tree`):

    best(i, i+1) = 0,    best(i, j) = v(i, j) + max_{i<k<j} ( best(i, k) + best(k, j) ).

**Tie rule** (:data:`TIE_RULE`): at every span the smallest best split point ``k`` (the shortest left
child), applied from the root down; so with no vote at all the binary tree is right-branching, and among
trees of equal vote the one that splits off the leftmost words first is chosen. Sums of weights are
compared to within :data:`TIE_TOLERANCE` so that floating-point rounding does not decide a tie.

**Unvoted spans.** The paper's members give binary trees. A member may give a flatter tree (Algorithm 1
of the Tree Transformer leaves ``(the old man)`` flat); the binary tree must then split such a
constituent somewhere no member proposes. Those spans of vote 0 are dropped from the result by
default (``keep_unvoted=False``): removing them changes no span's vote, so the result keeps the
largest total vote, and it holds only spans some member supports; one member gives back its own tree.

**Head vote** (:func:`head_vote`) for members that give dependency heads: arc counts
``c(h, d) = sum_k w_k * [head_k(d) = h]`` and the maximum spanning tree over them with one word on
the root (Chu-Liu-Edmonds, :func:`~syntaxformer.decoding.dependency.chu_liu_edmonds`); with one such
member its heads themselves.

**Baseline voters** (:data:`BASELINE_VOTERS`): a member may be a structure-free tree instead of a
parser, ``"right-branching"`` or ``"left-branching"``, voting with its weight like any member (the
option the authors' ensemble code has, ED4UCP). It is a baseline, not induction: it helps an ensemble
of English parsers whose trees are too flat or too left-leaning, and it is chosen on the dev half like
any other member. It gives no dependency heads.

Spans are half-open word intervals; heads are 1-based, 0 = the root (ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from syntaxformer.decoding.dependency import chu_liu_edmonds
from syntaxformer.decoding.spans import Span, left_branching, right_branching

#: The tie rule of :func:`mbr_tree`, as reports name it.
TIE_RULE = "smallest split point (right-branching when votes tie)"
#: Two totals closer than this count as a tie.
TIE_TOLERANCE = 1e-9
#: The structure-free trees an ensemble may take as members, by the name its ``ensemble.json`` gives
#: them: a function of the sentence's length ``n`` giving the tree's spans (module docstring).
BASELINE_VOTERS: dict[str, Callable[[int], set[Span]]] = {
    "right-branching": right_branching,
    "left-branching": left_branching,
}


def _weights(k: int, weights: Sequence[float] | None) -> np.ndarray:
    """``weights`` as a float array of ``k`` non-negative numbers (None: all 1).

    Raises:
        ValueError: not one weight per member, or a negative or non-finite weight.
    """
    w = np.ones(k) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (k,):
        raise ValueError(f"{w.size} weights for {k} members: give one weight per member")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"member weights must be finite and non-negative, got {w.tolist()}")
    return w


def span_votes(member_spans: Sequence[Iterable[Span]], n: int, weights: Sequence[float] | None = None) -> np.ndarray:
    """The weighted vote of every span of two or more words.

    Args:
        member_spans: per member the spans of its tree of the sentence (half-open; spans of one word
            and the whole sentence may be given and are ignored; a span given twice counts once).
        n: the sentence's length in words.
        weights: per member its weight (None: 1 each).
    Returns:
        ``(n+1, n+1)`` float64 ``votes``: ``votes[i, j] = sum_k w_k [(i, j) in T_k]`` for
        ``j - i >= 2`` and ``(i, j) != (0, n)``, else 0.
    Raises:
        ValueError: a span outside the sentence; bad weights (:func:`_weights`).
    """
    w = _weights(len(member_spans), weights)
    votes = np.zeros((n + 1, n + 1))
    for weight, spans in zip(w, member_spans):
        for i, j in set(spans):
            if not 0 <= i < j <= n:
                raise ValueError(f"span ({i}, {j}) is outside a sentence of {n} words")
            if j - i >= 2 and (i, j) != (0, n):
                votes[i, j] += weight
    return votes


def mbr_tree(votes: np.ndarray, keep_unvoted: bool = False) -> set[Span]:
    """The binary tree of largest total span vote, by CKY (module docstring), with :data:`TIE_RULE`.

    Vectorised over the spans of each length: ``n`` numpy steps of at most ``n x n`` work, O(n³) in all.

    Args:
        votes: ``(n+1, n+1)`` span votes (:func:`span_votes`); entries of spans shorter than two words
            are not read.
        keep_unvoted: keep the binary tree's spans that no member has (vote 0). Default False: they are
            dropped, so the tree holds only spans some member proposes (module docstring, "unvoted
            spans"): one member gives back its own tree even where it is not binary (Algorithm 1's
            flat constituents), and with no vote at all the tree is flat.
    Returns:
        The tree's spans of two or more words, the whole sentence ``(0, n)`` included (``n >= 2``); an
        empty set for ``n <= 1``.
    """
    n = votes.shape[0] - 1
    if n <= 1:
        return set()
    best = np.zeros((n + 1, n + 1))  # best[i, j]: the largest vote of a binary tree over i..j-1
    split = np.zeros((n + 1, n + 1), dtype=np.int64)
    for length in range(2, n + 1):
        starts = np.arange(n - length + 1)  # (S,)
        cuts = starts[:, None] + np.arange(1, length)[None, :]  # (S, length-1): split points k
        totals = best[starts[:, None], cuts] + best[cuts, (starts + length)[:, None]]  # (S, length-1)
        top = totals.max(axis=1)  # (S,)
        first = np.argmax(totals >= top[:, None] - TIE_TOLERANCE, axis=1)  # the smallest best k
        split[starts, starts + length] = cuts[starts, first]
        best[starts, starts + length] = votes[starts, starts + length] + top
    spans, stack = set(), [(0, n)]
    while stack:
        i, j = stack.pop()
        if j - i >= 2:
            if keep_unvoted or votes[i, j] > 0 or (i, j) == (0, n):
                spans.add((i, j))
            k = int(split[i, j])
            stack += [(i, k), (k, j)]
    return spans


def ensemble_spans(
    member_spans: Sequence[Iterable[Span]], n: int, weights: Sequence[float] | None = None, keep_unvoted: bool = False
) -> set[Span]:
    """The members' minimum-Bayes-risk tree: :func:`mbr_tree` of :func:`span_votes` (same arguments)."""
    return mbr_tree(span_votes(member_spans, n, weights), keep_unvoted)


def head_vote(member_heads: Sequence[Sequence[int]], weights: Sequence[float] | None = None) -> list[int]:
    """The dependency tree the members' heads agree on most (module docstring).

    Args:
        member_heads: per member the 1-based heads of the sentence's ``n`` words (0 = root).
        weights: per member its weight (None: 1 each).
    Returns:
        ``n`` heads: with one member, its heads; with more, the maximum spanning tree (one word on the
        root) over the weighted arc counts.
    Raises:
        ValueError: no member, members of different lengths, a head outside ``0 .. n``; bad weights.
    """
    if not member_heads:
        raise ValueError("no member heads to vote on")
    n = len(member_heads[0])
    if any(len(h) != n for h in member_heads):
        raise ValueError(f"members give heads for different numbers of words: {[len(h) for h in member_heads]}")
    w = _weights(len(member_heads), weights)
    if len(member_heads) == 1:
        return [int(h) for h in member_heads[0]]
    counts = np.zeros((n + 1, n + 1))  # counts[h, d]: the weight of members whose head of word d is h
    for weight, heads in zip(w, member_heads):
        if any(not 0 <= h <= n for h in heads):
            raise ValueError(f"a head outside 0..{n}: {list(heads)}")
        counts[np.asarray(heads, dtype=np.int64), np.arange(1, n + 1)] += weight
    return chu_liu_edmonds(counts)


__all__ = ["BASELINE_VOTERS", "TIE_RULE", "TIE_TOLERANCE", "span_votes", "mbr_tree", "ensemble_spans", "head_vote"]
