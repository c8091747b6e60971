"""Dependency decoding: arc scores or head distributions -> one head per word.

* :func:`chu_liu_edmonds` - the maximum spanning arborescence with exactly one child of the root
  (Chu & Liu 1965; Edmonds 1967), the tree decoder for StructFormer's p_D (DESIGN.md §2).
* :func:`argmax_heads` - the public StructFormer code's rule (head = argmax p_D(.|i), the word(s) of
  greatest height are the root); not always a tree.
* :func:`head_scores` - StructFormer's p_D (rows = dependents) as the ``[n+1, n+1]`` log-score matrix
  :func:`chu_liu_edmonds` takes, with the missing probability mass of each row as its root score.
* :func:`tree_score`, :func:`is_tree` - small helpers used by the decoders' tests and callers.

Conventions (ARCHITECTURE.md): heads are 1-based with 0 = the root (CoNLL-U), one per word, listed in
word order; score matrices put the root at index 0 and word ``i`` (1-based) at index ``i``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def _as_float_array(x) -> np.ndarray:
    """A list, numpy array or tensor as a float64 numpy array."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def is_tree(heads: Sequence[int], single_root: bool = True) -> bool:
    """Whether ``heads`` (1-based, 0 = root) is a dependency tree over its words.

    A tree: every head in ``0 .. n``, no word its own head, no cycle (every word reaches the root),
    and - with ``single_root`` - exactly one word attached to the root.
    """
    n = len(heads)
    if any(not 0 <= h <= n for h in heads) or any(h == d for d, h in enumerate(heads, 1)):
        return False
    if single_root and sum(h == 0 for h in heads) != 1:
        return False
    for d in range(1, n + 1):  # follow heads from every word: a cycle never reaches 0
        seen = 0
        while d != 0:
            d = heads[d - 1]
            seen += 1
            if seen > n:
                return False
    return True


def tree_score(scores, heads: Sequence[int]) -> float:
    """Total score ``sum_d scores[heads[d-1], d]`` of a head assignment (arc-factored model).

    Args:
        scores: ``[n+1, n+1]``, ``scores[h, d]`` = score of head ``h`` for dependent ``d``.
        heads: ``[n]`` 1-based heads, 0 = root.
    """
    s = _as_float_array(scores)
    return float(sum(s[h, d] for d, h in enumerate(heads, 1)))


def _find_cycle(heads: np.ndarray) -> list[int] | None:
    """One cycle of the head graph ``heads`` (``heads[0] = -1`` for the root), or None.

    Returns the nodes of the cycle, in head-following order.
    """
    m = len(heads)
    state = np.zeros(m, dtype=np.int8)  # 0 = unvisited, 1 = on the current path, 2 = done
    state[0] = 2
    for start in range(1, m):
        path = []
        v = start
        while state[v] == 0:
            state[v] = 1
            path.append(v)
            v = heads[v]
        if state[v] == 1:  # walked back into the current path: a cycle from v
            return path[path.index(v) :]
        for u in path:
            state[u] = 2
    return None


def _max_arborescence(s: np.ndarray) -> np.ndarray:
    """Chu-Liu-Edmonds maximum spanning arborescence rooted at node 0 (no root-degree constraint).

    Recursive contraction (Chu & Liu 1965; Edmonds 1967; the presentation of McDonald et al.,
    HLT-EMNLP 2005, §2.2.1, Figure 3): every node takes its best head; if that makes a cycle C,
    contract C into one node c whose incoming arc from u scores
    ``max_{v in C} s[u, v] - s[head(v), v]`` (breaking the cycle at v) and whose outgoing arc to w
    scores ``max_{v in C} s[v, w]``; solve the smaller graph; expand c. O(n^2) per contraction, at
    most n contractions: O(n^3).

    Args:
        s: ``(m, m)`` float64, ``s[h, d]``; column 0 and the diagonal must be ``-inf`` and every
            other column must have a finite entry (node 0 is the root).

    Returns:
        ``(m,)`` int heads, ``heads[0] = -1``.
    """
    m = s.shape[0]
    heads = s.argmax(axis=0)  # best head of every node
    heads[0] = -1
    cycle = _find_cycle(heads)
    if cycle is None:
        return heads

    in_cycle = np.zeros(m, dtype=bool)
    in_cycle[cycle] = True
    cyc = np.flatnonzero(in_cycle)  # cycle nodes
    rest = np.flatnonzero(~in_cycle)  # the others; rest[0] == 0, the root is never in a cycle
    k = len(rest)  # the contracted node gets index k in the smaller graph
    kept = s[heads[cyc], cyc]  # (|C|,) score of each cycle node's cycle arc

    enter = s[rest[:, None], cyc] - kept  # (k, |C|) gain of entering the cycle at v from u
    enter_at = enter.argmax(axis=1)  # (k,) best v for every u
    leave = s[cyc[:, None], rest]  # (|C|, k) arcs from the cycle to the others
    leave_from = leave.argmax(axis=0)  # (k,) best cycle node as head of every w

    sub = np.full((k + 1, k + 1), -np.inf)
    sub[:k, :k] = s[rest[:, None], rest]
    sub[:k, k] = enter[np.arange(k), enter_at]
    sub[k, :k] = leave[leave_from, np.arange(k)]
    sub[:, 0] = -np.inf
    sub_heads = _max_arborescence(sub)

    out = heads.copy()  # cycle nodes keep their cycle arcs, except the one entered
    for i in range(1, k):
        h = sub_heads[i]
        out[rest[i]] = cyc[leave_from[i]] if h == k else rest[h]
    u = sub_heads[k]
    out[cyc[enter_at[u]]] = rest[u]
    return out


def chu_liu_edmonds(scores) -> list[int]:
    """Maximum spanning dependency tree with a single root (arc-factored; Chu-Liu-Edmonds).

    Source: Chu & Liu (1965), Edmonds (1967) via :func:`_max_arborescence`; the single-root
    constraint (UAS evaluation expects exactly one word attached to the root; Zmigrod, Vieira &
    Cotterell, EMNLP 2020, "Please Mind the Root") by a penalty on root arcs: every root arc loses
    ``M = n * (max - min) + 1`` (range of the finite arc scores, after the -inf replacement below).
    Any two trees differ by less than M in score, and every tree has at least one root arc, so the
    unconstrained maximum under the penalty has exactly one root arc and is the best such tree:
    one exact Chu-Liu-Edmonds run, O(n^3), instead of one run per candidate root child. Float64
    rounding of the penalised scores can only swap trees whose scores differ by ~1e-10 * M.

    Args:
        scores: ``[n+1, n+1]`` (list, numpy array or tensor); ``scores[h, d]`` = score (e.g. the
            log-probability) of head ``h`` for dependent ``d``; index 0 = the root, word ``i`` (1-based)
            at index ``i``. Column 0 (the root's head) and the diagonal (self-loops) are ignored.
            ``-inf`` forbids an arc.

    Returns:
        ``heads``, length ``n``: ``heads[i-1]`` is the head of word ``i``, 1-based, 0 = root. Always a
        tree (no cycle) with exactly one word attached to the root. Ties: deterministic, lower head
        index first where the plain argmax decides.

    Raises:
        ValueError: not a square 2-D matrix, NaN or +inf scores, or no single-root tree avoids the
            ``-inf`` arcs.
    """
    s = _as_float_array(scores)
    if s.ndim != 2 or s.shape[0] != s.shape[1] or s.shape[0] < 1:
        raise ValueError(f"scores must be a square [n+1, n+1] matrix, got shape {s.shape}")
    n = s.shape[0] - 1
    if n == 0:
        return []
    s = s.copy()
    s[:, 0] = -np.inf  # nothing heads the root
    s[np.arange(n + 1), np.arange(n + 1)] = -np.inf  # no self-loops
    used = np.ones_like(s, dtype=bool)
    used[:, 0] = False
    np.fill_diagonal(used, False)
    if np.isnan(s).any() or np.isposinf(s).any():
        raise ValueError("scores must not contain NaN or +inf")
    finite = used & np.isfinite(s)
    if not finite.any():
        raise ValueError("every arc score is -inf: no single-root dependency tree avoids the -inf arcs")

    # Forbidden (-inf) arcs become finite but so low that a tree using one scores below any tree
    # that does not; that keeps every column finite for the contraction.
    lo, hi = s[finite].min(), s[finite].max()
    forbidden = used & ~finite
    s[forbidden] = lo - (n + 1) * (hi - lo + 1.0)
    low = s[used].min()
    # The single-root penalty.
    s[0, 1:] -= n * (hi - low) + 1.0

    heads = _max_arborescence(s)[1:].tolist()
    assert is_tree(heads), heads
    if any(forbidden[h, d] for d, h in enumerate(heads, 1)):
        raise ValueError("no single-root dependency tree avoids the -inf arcs")
    return [int(h) for h in heads]


def argmax_heads(probs, heights) -> list[int]:
    """The public StructFormer code's dependency decoding: each word's most probable parent.

    Source: google-research ``structformer/test_phrase_grammar.py`` (Shen et al., ACL 2021): the head
    of word i is ``argmax_j p_D(j | i)`` (1-based), except that a word whose syntactic height equals
    the sentence's maximum height is attached to the root. Not a tree decoder: the result may have
    cycles, or several roots when heights tie (DESIGN.md §2); use :func:`chu_liu_edmonds` for a tree.

    Args:
        probs: ``[n, n]``, ``probs[i, j] = p_D(j | i)``, probability that word j is the parent of
            word i (0-based rows = dependents, columns = heads, as the model outputs it).
        heights: ``[n]`` syntactic heights δ_i.

    Returns:
        ``heads``, length ``n``, 1-based, 0 = root. Ties in a row: the leftmost head.

    Raises:
        ValueError: shapes that do not match ``[n, n]`` and ``[n]``.
    """
    p = _as_float_array(probs)
    h = _as_float_array(heights)
    if p.ndim != 2 or p.shape[0] != p.shape[1] or h.shape != (p.shape[0],):
        raise ValueError(f"need probs [n, n] and heights [n], got {p.shape} and {h.shape}")
    if p.shape[0] == 0:
        return []
    top = h.max()
    return [0 if h[i] >= top else int(p[i].argmax()) + 1 for i in range(p.shape[0])]


def head_scores(probs, root_probs=None, eps: float = 1e-12) -> np.ndarray:
    """StructFormer's parent distribution as the log-score matrix of :func:`chu_liu_edmonds`.

    ``scores[j+1, i+1] = log p_D(j | i)`` and ``scores[0, i+1] = log p(root | i)``. p_D rows sum to
    at most 1 (DESIGN.md §2: only the root lacks a parent), so by default the root probability of
    word i is the missing mass ``1 - sum_j p_D(j | i)``. Probabilities are clipped to ``eps`` before
    the log so that no arc is forbidden outright.

    Args:
        probs: ``[n, n]``, ``probs[i, j] = p_D(j | i)`` (rows = dependents), probabilities.
        root_probs: ``[n]`` probability that word i attaches to the root; default: the missing mass.
        eps: floor applied before the log.

    Returns:
        ``[n+1, n+1]`` float64 log-probabilities, ``scores[h, d]`` (root at index 0); column 0 and
        the diagonal are ``-inf``.

    Raises:
        ValueError: ``probs`` not square, or ``root_probs`` not of length n.
    """
    p = _as_float_array(probs)
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ValueError(f"probs must be [n, n], got shape {p.shape}")
    n = p.shape[0]
    root = 1.0 - p.sum(axis=1) if root_probs is None else _as_float_array(root_probs)
    if root.shape != (n,):
        raise ValueError(f"root_probs must have length {n}, got shape {root.shape}")
    scores = np.full((n + 1, n + 1), -np.inf)
    scores[1:, 1:] = np.log(np.clip(p.T, eps, None))  # (head, dependent)
    scores[0, 1:] = np.log(np.clip(root, eps, None))
    np.fill_diagonal(scores, -np.inf)
    return scores
