"""The inside algorithm of a binary PCFG (syntaxformer/blocks/inside.py) against brute force over every
binary tree and every labelling: the partition function, the span marginals and the Viterbi score and
tree."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from syntaxformer.blocks.inside import inside, span_marginals, viterbi_spans


@functools.cache
def binary_trees(i: int, j: int) -> tuple:
    """Every binary tree over words i..j-1 as nested (i, j, left, right) tuples; a word is (i, i+1)."""
    if j - i == 1:
        return ((i, j),)
    return tuple(
        (i, j, left, right) for k in range(i + 1, j) for left in binary_trees(i, k) for right in binary_trees(k, j)
    )


def spans_of(tree) -> set:
    return set() if len(tree) == 2 else {tree[:2]} | spans_of(tree[2]) | spans_of(tree[3])


def tree_scores(tree, emissions, rules, nt, reduce):
    """Per symbol the (sum or max over labellings) probability of ``tree`` below it: a vector of A."""
    a = rules.shape[1]
    if len(tree) == 2:
        out = np.zeros(a)
        out[nt:] = emissions[tree[0]]
        return out
    left = tree_scores(tree[2], emissions, rules, nt, reduce)
    right = tree_scores(tree[3], emissions, rules, nt, reduce)
    products = rules * left[None, :, None] * right[None, None, :]  # (NT, A, A)
    out = np.zeros(a)
    out[:nt] = products.reshape(nt, -1).sum(-1) if reduce == "sum" else products.reshape(nt, -1).max(-1)
    return out


def random_grammar(seed: int, nt: int, t: int, n: int):
    g = torch.Generator().manual_seed(seed)
    a = nt + t
    rules = torch.randn(1, nt, a * a, generator=g).mul(2).log_softmax(-1).view(1, nt, a, a).double()
    roots = torch.randn(1, nt, generator=g).log_softmax(-1).double()
    emissions = torch.randn(1, n, t, generator=g).mul(2).double() - 1.0
    return emissions, rules, roots


def brute_force(emissions, rules, roots, nt, reduce):
    e, r, root = emissions[0].exp().numpy(), rules[0].exp().numpy(), roots[0].exp().numpy()
    n = e.shape[0]
    per_tree = []
    for tree in binary_trees(0, n):
        scores = tree_scores(tree, e, r, nt, reduce)[:nt] * root
        per_tree.append((tree, scores.sum() if reduce == "sum" else scores.max()))
    return per_tree


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 3), st.integers(1, 3), st.integers(2, 6))
def test_inside_equals_brute_force(seed, nt, t, n):
    emissions, rules, roots = random_grammar(seed, nt, t, n)
    lengths = torch.tensor([n])
    per_tree = brute_force(emissions, rules, roots, nt, "sum")
    z = sum(p for _, p in per_tree)
    assert inside(emissions, rules, roots, lengths).item() == pytest.approx(math.log(z), rel=1e-9, abs=1e-9)
    log_z, marginals = span_marginals(emissions, rules, roots, lengths)
    expected = np.zeros((n + 1, n + 1))
    for tree, p in per_tree:
        for i, j in spans_of(tree):
            expected[i, j] += p / z
    np.testing.assert_allclose(marginals[0].numpy(), expected, atol=1e-9)
    assert marginals[0, 0, n].item() == pytest.approx(1.0)
    # every binary tree has n - 1 spans of two or more words: the marginals sum to n - 1
    assert marginals[0].sum().item() == pytest.approx(n - 1)
    best = brute_force(emissions, rules, roots, nt, "max")
    top_tree, top = max(best, key=lambda x: x[1])
    score, chosen = viterbi_spans(emissions, rules, roots, lengths)
    assert score.item() == pytest.approx(math.log(top), rel=1e-9)
    chosen_spans = {(int(i), int(j)) for i, j in zip(*chosen[0].numpy().nonzero())}
    assert len(chosen_spans) == n - 1
    # the chosen tree's best labelling scores the maximum (ties between trees: any of them)
    chosen_score = max(p for tree, p in best if spans_of(tree) == chosen_spans)
    assert chosen_score == pytest.approx(top, rel=1e-9)


def test_padding_changes_nothing():
    emissions, rules, roots = random_grammar(3, 2, 3, 6)
    short = inside(emissions[:, :4], rules, roots, torch.tensor([4]))
    both = inside(emissions.expand(2, 6, 3), rules, roots, torch.tensor([4, 6]))
    assert both[0].item() == pytest.approx(short.item(), rel=1e-12)
    assert both[1].item() == pytest.approx(inside(emissions, rules, roots, torch.tensor([6])).item(), rel=1e-12)


def test_a_grammar_certain_of_one_tree_gives_that_tree():
    # 2 nonterminals, 2 preterminals (symbols 2, 3); words alternate preterminal 2 and 3;
    # S -> 0; 0 -> 2 1 (certain); 1 -> 3 0 ... a grammar whose only tree over 4 words is right-branching
    # with labels 0 -> (2, 1), 1 -> (3, 0)... for 4 words: 0 -> 2 1, 1 -> 3 0', so use 3 nonterminals.
    nt, t, n = 3, 2, 4
    a = nt + t
    rules = torch.full((1, nt, a, a), -1e9, dtype=torch.float64)
    rules[0, 0, 3, 1] = 0.0  # A0 -> T0 A1
    rules[0, 1, 4, 2] = 0.0  # A1 -> T1 A2
    rules[0, 2, 3, 4] = 0.0  # A2 -> T0 T1
    roots = torch.tensor([[0.0, -1e9, -1e9]], dtype=torch.float64)
    emissions = torch.tensor([[[0.0, -1e9], [-1e9, 0.0], [0.0, -1e9], [-1e9, 0.0]]], dtype=torch.float64)
    lengths = torch.tensor([n])
    _, chosen = viterbi_spans(emissions, rules, roots, lengths)
    assert {(int(i), int(j)) for i, j in zip(*chosen[0].numpy().nonzero())} == {(0, 4), (1, 4), (2, 4)}
    log_z, marginals = span_marginals(emissions, rules, roots, lengths)
    assert log_z.item() == pytest.approx(0.0, abs=1e-6)
    for span in [(0, 4), (1, 4), (2, 4)]:
        assert marginals[0][span].item() == pytest.approx(1.0)
    assert marginals[0].sum().item() == pytest.approx(3.0)


@pytest.mark.parametrize("semiring", ["log", "max"])
def test_recomputed_products_give_the_same_scores_and_spans(semiring):
    emissions, rules, roots = random_grammar(7, 3, 4, 9)
    emissions = emissions.expand(3, 9, 4).clone()
    emissions[1] += 0.5
    lengths = torch.tensor([9, 5, 2])
    decode = span_marginals if semiring == "log" else viterbi_spans
    kept, recomputed = decode(emissions, rules, roots, lengths), decode(emissions, rules, roots, lengths, True)
    np.testing.assert_allclose(recomputed[0].numpy(), kept[0].numpy(), rtol=1e-12)
    np.testing.assert_allclose(recomputed[1].numpy(), kept[1].numpy(), atol=1e-12)
    assert recomputed[1][0].sum().item() == pytest.approx(8.0)  # 9 words: 8 spans of two or more words
