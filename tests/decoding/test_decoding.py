"""Tree and dependency decoders against hand-worked cases, brute force and the embedded ptb-sample."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from syntaxformer.decoding import (
    algorithm1,
    argmax_heads,
    brackets,
    chu_liu_edmonds,
    head_scores,
    is_tree,
    resolve_min_layer,
    single_layer,
    spans_to_tree,
    split_by_distance,
    to_bracketed,
    tree_score,
)

FAST = settings(max_examples=100, deadline=None)


# ----------------------------------------------------------------------------------------------
# helpers


def words(n):
    return [f"w{i}" for i in range(n)]


def assert_valid_tree(spans, n):
    """Laminar spans of length >= 2 in range, (0, n) included for n >= 2; the tree round-trips."""
    assert all(0 <= i < j <= n and j - i >= 2 for i, j in spans), spans
    assert ((0, n) in spans) == (n >= 2)
    for (i, j), (k, m) in itertools.combinations(spans, 2):
        assert j <= k or m <= i or (i <= k and m <= j) or (k <= i and j <= m), ((i, j), (k, m))
    tree = spans_to_tree(words(n), spans)
    assert tree.leaves() == words(n)
    assert brackets(tree) == spans - {(0, n)}


def random_links(rng, layers, n, hierarchical=True):
    """[layers, n-1] link probabilities in (0, 1); non-decreasing in the layer when hierarchical."""
    a = rng.uniform(0.01, 0.99, size=(layers, n - 1))
    return np.sort(a, axis=0) if hierarchical else a


link_matrices = st.integers(1, 6).flatmap(
    lambda layers: st.integers(1, 25).flatmap(
        lambda n: arrays(
            np.float64, (layers, n - 1), elements=st.floats(0.0, 1.0, allow_nan=False, allow_subnormal=False)
        )
    )
)


def break_key_split(a, threshold, min_layer):
    """Algorithm 1 without the 0.7 rule, written as a top-down split by a lexicographic distance.

    Gap k breaks at h_k, the highest layer in [min_layer, top] where a[l, k] < threshold; the
    split order is (h_k, -a[h_k, k]); a span is a constituent iff it is the whole sentence or
    both its outer gaps break (the split that created it was a real break). See the docstring of
    ``algorithm1``.
    """
    top, n = a.shape[0] - 1, a.shape[1] + 1
    keys, breaks = [], []
    for k in range(n - 1):
        hs = [l for l in range(min_layer, top + 1) if a[l, k] < threshold]
        breaks.append(bool(hs))
        keys.append((max(hs), -a[max(hs), k]) if hs else (-1, 0.0))
    spans = split_by_distance(keys)
    return {(i, j) for i, j in spans if (i, j) == (0, n) or ((i == 0 or breaks[i - 1]) and (j == n or breaks[j - 1]))}


def official_reference(a, threshold=0.8, min_layer=2, rule=0.7):
    """Recursive statement of the public code's Algorithm 1 (its 0.7 rule), for cross-checking."""
    n = a.shape[1] + 1
    out = set()

    def visit(s, e, l):
        if e - s < 2:
            return
        out.add((s, e))
        links = a[l, s : e - 1]
        p = s + int(np.argmin(links))
        if a[l, p] >= threshold:
            if l > min_layer:
                visit(s, e, l - 1)
            return
        for cs, ce in ((s, p + 1), (p + 1, e)):
            inner = a[l, cs : ce - 1]
            visit(cs, ce, max(l - 1, min_layer) if inner.size and inner.min() > rule else l)

    visit(0, n, a.shape[0] - 1)
    return out


# ----------------------------------------------------------------------------------------------
# Algorithm 1: hand-worked cases

# Two layers (0 = low, 1 = top), five words, hierarchical (low <= top everywhere).
TOP = [0.95, 0.90, 0.30, 0.85]
LOW = [0.20, 0.60, 0.10, 0.50]
TWO_LAYERS = [LOW, TOP]


def test_algorithm1_descends_per_span_hand_case():
    # top: weakest gap 2 (0.3 < 0.8) -> (0,3) (3,5), both visited at layer 1.
    # (0,3): top links 0.95, 0.90 >= 0.8 -> layer 0: weakest gap 0 (0.2) -> w0 | (1,3).
    # (1,3) at layer 0: 0.6 < 0.8 -> words.  (3,5): 0.85 -> layer 0: 0.5 -> words.
    spans = algorithm1(TWO_LAYERS, threshold=0.8, min_layer=0)
    assert spans == {(0, 5), (0, 3), (1, 3), (3, 5)}
    assert to_bracketed(spans_to_tree(words(5), spans)) == "(S (X w0 (X w1 w2)) (X w3 w4))"
    # the top layer alone splits (0,3) at its weakest top link, gap 1: a different tree
    assert single_layer(TOP) == {(0, 5), (0, 3), (0, 2), (3, 5)}
    assert single_layer(LOW) == spans


def test_algorithm1_min_layer_gives_flat_constituent():
    # min_layer = 1 (the top layer only): (0,3) has no top link below 0.8 and nothing below -> flat.
    spans = algorithm1(TWO_LAYERS, threshold=0.8, min_layer=1)
    assert spans == {(0, 5), (0, 3), (3, 5)}
    assert to_bracketed(spans_to_tree(words(5), spans)) == "(S (X w0 w1 w2) (X w3 w4))"
    # nothing below the threshold anywhere: one flat constituent over the whole sentence
    assert algorithm1(TWO_LAYERS, threshold=0.05, min_layer=0) == {(0, 5)}
    assert to_bracketed(spans_to_tree(words(5), {(0, 5)})) == "(S w0 w1 w2 w3 w4)"


def test_algorithm1_threshold_is_strict():
    # threshold 0.95, top layer only: gap 2 splits; in (0,3) gap 1 (0.90) splits; (0,2): 0.95 is not
    # below 0.95 -> flat (0,2).
    assert algorithm1(TWO_LAYERS, threshold=0.95, min_layer=1) == {(0, 5), (0, 3), (0, 2), (3, 5)}


def test_algorithm1_official_descend_rule_changes_the_tree():
    a = [
        [0.50, 0.20, 0.05],  # layer 0
        [0.75, 0.78, 0.10],
    ]  # layer 1 (top)
    # paper: split gap 2 at the top; (0,3) at the top: weakest 0.75 < 0.8 -> w0 | (1,3)
    assert algorithm1(a, min_layer=0) == {(0, 4), (0, 3), (1, 3)}
    # public code: (0,3)'s weakest top link 0.75 > 0.7 -> visit it at layer 0: weakest gap 1 -> (0,2)
    assert algorithm1(a, min_layer=0, descend_threshold=0.7) == {(0, 4), (0, 3), (0, 2)}
    assert official_reference(np.array(a), min_layer=0) == {(0, 4), (0, 3), (0, 2)}


def test_algorithm1_short_sentences_and_inputs():
    assert algorithm1(np.zeros((3, 0))) == set()  # 1 word
    assert algorithm1([[0.9], [0.95]], min_layer=0) == {(0, 2)}  # 2 words, no break: flat pair
    assert algorithm1([[0.1], [0.3]], min_layer=0) == {(0, 2)}  # 2 words, break
    assert single_layer([]) == set() and single_layer([0.4]) == {(0, 2)}
    t = torch.tensor(TWO_LAYERS, requires_grad=True)
    assert algorithm1(t, min_layer=0) == algorithm1(np.array(TWO_LAYERS), min_layer=0)
    assert single_layer(t[1]) == single_layer(TOP)


def test_algorithm1_bad_arguments():
    with pytest.raises(ValueError, match="dimension"):
        algorithm1([0.5, 0.5])
    with pytest.raises(ValueError, match="no layer"):
        algorithm1(np.zeros((0, 4)))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        algorithm1([[0.5, 1.5]])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        algorithm1([[0.5, float("nan")]])
    with pytest.raises(ValueError, match="min_layer"):
        algorithm1(TWO_LAYERS, min_layer=2)
    with pytest.raises(ValueError, match="min_layer"):
        algorithm1(TWO_LAYERS, min_layer=-1)


def test_resolve_min_layer():
    assert resolve_min_layer(10) == 2  # public code: layer index 2 = the paper's m = 3
    assert resolve_min_layer(2) == 1 and resolve_min_layer(1) == 0  # tiny models: the top layer
    assert resolve_min_layer(10, 0) == 0 and resolve_min_layer(10, 9) == 9


# ----------------------------------------------------------------------------------------------
# single_layer: hand-worked cases


def test_single_layer_monotone_links():
    # Links weakening to the right: the last gap splits first -> left-branching.
    assert single_layer([0.9, 0.8, 0.7, 0.6]) == {(0, 5), (0, 4), (0, 3), (0, 2)}
    # Links strengthening to the right: the first gap splits first -> right-branching.
    assert single_layer([0.6, 0.7, 0.8, 0.9]) == {(0, 5), (1, 5), (2, 5), (3, 5)}
    # Ties split at the leftmost weakest link: right-branching too.
    assert single_layer([0.5, 0.5, 0.5, 0.5]) == {(0, 5), (1, 5), (2, 5), (3, 5)}


# ----------------------------------------------------------------------------------------------
# Algorithm 1: properties


def test_algorithm1_valid_tree_every_length_1_to_60():
    rng = np.random.default_rng(0)
    for n in range(1, 61):
        for layers, hierarchical in ((10, True), (3, False), (1, True)):
            a = random_links(rng, layers, n, hierarchical)
            for kwargs in (
                {},
                {"min_layer": 0},
                {"descend_threshold": 0.7},
                {"threshold": 0.5, "min_layer": layers - 1},
            ):
                assert_valid_tree(algorithm1(a, **kwargs), n)
            assert_valid_tree(single_layer(a[-1]), n)


@FAST
@given(link_matrices, st.floats(0.0, 1.0), st.data())
def test_algorithm1_property_valid_and_equals_lexicographic_split(a, threshold, data):
    layers, n = a.shape[0], a.shape[1] + 1
    m = data.draw(st.integers(0, layers - 1))
    spans = algorithm1(a, threshold=threshold, min_layer=m)
    assert_valid_tree(spans, n)
    assert spans == break_key_split(a, threshold, m)
    assert_valid_tree(algorithm1(a, threshold=threshold, min_layer=m, descend_threshold=0.7), n)


@FAST
@given(link_matrices, st.data())
def test_algorithm1_everything_breaks_is_the_single_layer_split(a, data):
    # a threshold above every probability makes every gap a break point at the top layer
    m = data.draw(st.integers(0, a.shape[0] - 1))
    assert algorithm1(a, threshold=1.5, min_layer=m) == single_layer(a[-1])


def test_algorithm1_official_rule_matches_recursive_reference():
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        a = random_links(rng, 10, n)
        assert algorithm1(a, min_layer=2, descend_threshold=0.7) == official_reference(a)


# ----------------------------------------------------------------------------------------------
# Real trees: the embedded ptb-sample encoded as link probabilities


def gold_structure(tree):
    """(n, spans with their depth, gap -> depth of the smallest gold span holding both words)."""
    n = len(tree.leaves())
    spans = brackets(tree) | {(0, n)}
    depth = {s: sum(1 for t in spans if t != s and t[0] <= s[0] and s[1] <= t[1]) for s in spans}
    gap_depth = [max(depth[s] for s in spans if s[0] <= k and k + 2 <= s[1]) for k in range(n - 1)]
    return n, depth, gap_depth


def expected_truncated_right_binarised(n, depth, gap_depth, max_break_depth):
    """Gold spans of depth <= K+1, plus the right-branching binarisation of nodes of depth <= K."""
    out = {s for s, d in depth.items() if d <= max_break_depth + 1}
    for (i, j), d in depth.items():
        if d > max_break_depth:
            continue
        cuts = [k for k in range(i, j - 1) if gap_depth[k] == d]  # the node's child boundaries
        out |= {(k + 1, j) for k in cuts[:-1]}
    return {s for s in out if s[1] - s[0] >= 2}


def test_decoders_recover_real_trees(ptb_gold):
    layers = 6
    top = layers - 1
    for tree in ptb_gold[:1500]:
        n, depth, gap_depth = gold_structure(tree)
        # one layer: link strength grows with the depth of the smallest common constituent
        a1 = np.array([1 - 1 / (2 + d) for d in gap_depth])
        assert single_layer(a1) == expected_truncated_right_binarised(n, depth, gap_depth, n)
        # all layers: a gap whose common constituent has depth d breaks (0.5) at layers <= top - d
        a = np.array([[0.5 if l <= top - d else 0.95 for d in gap_depth] for l in range(layers)])
        a = a.reshape(layers, n - 1)
        for m in (0, 2, top):
            assert algorithm1(a, threshold=0.8, min_layer=m) == expected_truncated_right_binarised(
                n, depth, gap_depth, top - m
            ), to_bracketed(tree)


# ----------------------------------------------------------------------------------------------
# Chu-Liu-Edmonds: brute force


@functools.lru_cache(maxsize=None)
def all_trees(n, single_root=True):
    """Every dependency tree over n words, as an int array [trees, n] (1-based heads, 0 = root)."""
    heads = np.array(list(itertools.product(range(n + 1), repeat=n)), dtype=np.int64)
    heads = heads.reshape(-1, n)
    idx = np.arange(1, n + 1)
    ok = (heads != idx).all(axis=1)
    if single_root:
        ok &= (heads == 0).sum(axis=1) == 1
    node = np.broadcast_to(idx, heads.shape).copy()
    padded = np.concatenate([np.zeros((len(heads), 1), np.int64), heads], axis=1)  # padded[t, 0] = 0
    for _ in range(n):  # follow heads n times: in a tree every word reaches the root
        node = np.take_along_axis(padded, node, axis=1)
    return heads[ok & (node == 0).all(axis=1)]


def brute_force_best(scores):
    s = np.asarray(scores, dtype=np.float64)
    n = s.shape[0] - 1
    trees = all_trees(n)
    totals = s[trees, np.arange(1, n + 1)].sum(axis=1)
    return totals.max()


def test_brute_force_enumeration_counts_trees():
    # Cayley: n^(n-1) single-root trees, (n+1)^(n-1) trees allowing several root children
    for n in range(1, 7):
        assert len(all_trees(n)) == n ** (n - 1)
        assert len(all_trees(n, single_root=False)) == (n + 1) ** (n - 1)
        assert all(is_tree(t.tolist()) for t in all_trees(n)[:500])
    assert not is_tree([2, 1, 0]) and not is_tree([0, 0]) and is_tree([0, 0], single_root=False)
    assert not is_tree([1, 0]) and not is_tree([3, 0])


score_matrices = st.integers(1, 6).flatmap(
    lambda n: arrays(np.float64, (n + 1, n + 1), elements=st.floats(-30.0, 5.0, allow_nan=False))
)
tied_matrices = st.integers(1, 6).flatmap(
    lambda n: arrays(np.float64, (n + 1, n + 1), elements=st.integers(-3, 1).map(float))
)


@FAST
@given(score_matrices)
def test_chu_liu_edmonds_is_the_best_single_root_tree(scores):
    heads = chu_liu_edmonds(scores)
    assert is_tree(heads)
    assert tree_score(scores, heads) == pytest.approx(brute_force_best(scores), abs=1e-7)


@FAST
@given(tied_matrices)
def test_chu_liu_edmonds_with_ties(scores):
    heads = chu_liu_edmonds(scores)
    assert is_tree(heads)
    assert tree_score(scores, heads) == brute_force_best(scores)
    assert chu_liu_edmonds(scores) == heads  # deterministic


@FAST
@given(score_matrices, st.data())
def test_chu_liu_edmonds_forbidden_arcs(scores, data):
    n = scores.shape[0] - 1
    forbid = data.draw(arrays(bool, scores.shape, elements=st.booleans()))
    s = np.where(forbid, -np.inf, scores)
    best = brute_force_best(s)
    if best == -np.inf:
        with pytest.raises(ValueError, match="no single-root"):
            chu_liu_edmonds(s)
    else:
        heads = chu_liu_edmonds(s)
        assert is_tree(heads) and len(heads) == n
        assert tree_score(s, heads) == pytest.approx(best, abs=1e-7)


def test_chu_liu_edmonds_hand_case_two_root_children():
    # Unconstrained, words 1 and 2 both take the root (5 each) and 3 takes 1 (4): two root children.
    # Single root: 0->1, 1->2, 1->3 scores 5 + 2 + 4 = 11; 0->2, 2->1, 1->3 only 5 + 1 + 4 = 10.
    ninf = -np.inf
    s = np.array([[ninf, 5, 5, 0], [ninf, ninf, 2, 4], [ninf, 1, ninf, 3], [ninf, 0, 0, ninf]])
    assert chu_liu_edmonds(s) == [0, 1, 1]
    assert chu_liu_edmonds(torch.tensor(s)) == [0, 1, 1]


def test_chu_liu_edmonds_cycle_contraction_hand_case():
    # Words 1 and 2 prefer each other (10 each): a cycle. Entering it at 1 from the root costs
    # 10 - 1 = 9, at 2 costs 10 - 3 = 7, so the root takes 2: heads [2, 0, 1] (3 prefers 1, 6).
    ninf = -np.inf
    s = np.array([[ninf, 1, 3, 2], [ninf, ninf, 10, 6], [ninf, 10, ninf, 5], [ninf, 0, 0, ninf]])
    assert chu_liu_edmonds(s) == [2, 0, 1]
    assert tree_score(s, [2, 0, 1]) == 10 + 3 + 6


def test_chu_liu_edmonds_sizes_and_errors():
    assert chu_liu_edmonds(np.zeros((1, 1))) == []
    assert chu_liu_edmonds(np.zeros((2, 2))) == [0]
    rng = np.random.default_rng(0)
    for n in (10, 50, 120):
        heads = chu_liu_edmonds(np.log(rng.random((n + 1, n + 1))))
        assert is_tree(heads) and len(heads) == n
    with pytest.raises(ValueError, match="square"):
        chu_liu_edmonds(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="NaN"):
        chu_liu_edmonds(np.array([[0.0, np.nan], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="-inf"):
        chu_liu_edmonds(np.full((3, 3), -np.inf))


# ----------------------------------------------------------------------------------------------
# Real dependency trees of ptb-sample


def test_dependency_decoders_recover_ptb_sample_trees():
    from syntaxformer.data.dependency import read_dependencies

    rng = np.random.default_rng(0)
    sentences = read_dependencies("ptb-sample")
    assert len(sentences) == 3914
    for sent in sentences[:800]:
        n = len(sent)
        gold = list(sent.heads)
        # p_D(j | i): 0.6 on the gold head, the rest spread over the other words; the root word
        # has no parent, so its row keeps 0.6 of missing mass = its root probability
        probs = np.zeros((n, n))
        for i, h in enumerate(gold):
            others = [j for j in range(n) if j != i and j != h - 1]
            if others:
                probs[i, others] = 0.4 * rng.dirichlet(np.ones(len(others)))
            if h > 0:
                probs[i, h - 1] = 0.6
        heights = np.array([1.0 if h == 0 else 0.0 for h in gold])
        assert argmax_heads(probs, heights) == gold
        assert chu_liu_edmonds(head_scores(probs)) == gold
        # noisy arc scores: the decoded tree is a tree and scores at least as much as gold
        noisy = head_scores(probs) + rng.normal(0, 1.0, (n + 1, n + 1))
        heads = chu_liu_edmonds(noisy)
        assert is_tree(heads) and tree_score(noisy, heads) >= tree_score(noisy, gold) - 1e-9


# ----------------------------------------------------------------------------------------------
# argmax rule and scores from p_D


def test_argmax_heads_public_rule():
    probs = np.array([[0.0, 0.7, 0.3], [0.2, 0.0, 0.1], [0.6, 0.4, 0.0]])
    assert argmax_heads(probs, [0.1, 0.9, 0.5]) == [2, 0, 1]
    # not a tree decoder: a cycle (1 <-> 3) and tied heights giving two roots are both possible
    cyc = np.array([[0.0, 0.0, 1.0], [0.5, 0.0, 0.5], [1.0, 0.0, 0.0]])
    assert argmax_heads(cyc, [0.0, 1.0, 0.0]) == [3, 0, 1] and not is_tree([3, 0, 1])
    assert argmax_heads(probs, [0.9, 0.9, 0.5]) == [0, 0, 1]
    assert argmax_heads(torch.tensor(probs), torch.tensor([0.1, 0.9, 0.5])) == [2, 0, 1]
    assert argmax_heads(np.zeros((0, 0)), []) == []
    with pytest.raises(ValueError):
        argmax_heads(probs, [0.1, 0.2])


def test_head_scores_layout():
    probs = np.array([[0.0, 0.7, 0.3], [0.2, 0.0, 0.1], [0.6, 0.4, 0.0]])
    s = head_scores(probs)
    assert s.shape == (4, 4)
    assert s[2, 1] == pytest.approx(np.log(0.7)) and s[1, 3] == pytest.approx(np.log(0.6))
    assert s[0, 2] == pytest.approx(np.log(0.7))  # word 2's missing mass 1 - 0.3
    assert s[0, 1] == pytest.approx(np.log(1e-12))  # word 1's row sums to 1: floor
    assert np.isneginf(np.diag(s)).all() and np.isneginf(s[:, 0]).all()
    # word 2 is the root (0.7), 1 <- 2 (0.7), 3 <- 1 (0.6)
    assert chu_liu_edmonds(s) == [2, 0, 1]
    assert head_scores(probs, root_probs=[1.0, 0.0, 0.0])[0, 1] == 0.0
    with pytest.raises(ValueError):
        head_scores(probs, root_probs=[1.0])
