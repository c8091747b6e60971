"""Baselines: exact trees and chains, properties (binary, covers the words), scores on ptb-sample."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk import Tree

from syntaxformer.data.dependency import read_dependencies
from syntaxformer.decoding.spans import spans_to_tree
from syntaxformer.evaluation.baselines import (
    balanced,
    left_branching,
    left_chain,
    random_binary,
    right_branching,
    right_chain,
    run_baselines,
)
from syntaxformer.evaluation.constituency import bracket_depth


def test_exact_trees():
    assert right_branching(4) == {(0, 4), (1, 4), (2, 4)}
    assert left_branching(4) == {(0, 4), (0, 3), (0, 2)}
    # [0,5) splits at 2; [2,5) at 3 (the extra word goes right)
    assert balanced(5) == {(0, 5), (0, 2), (2, 5), (3, 5)}
    assert balanced(4) == {(0, 4), (0, 2), (2, 4)}
    for make in (right_branching, left_branching, balanced, lambda n: random_binary(n, random.Random(0))):
        assert make(0) == set() and make(1) == set()
        assert make(2) == {(0, 2)}


def test_exact_chains():
    assert right_chain(4) == [0, 1, 2, 3]
    assert left_chain(4) == [2, 3, 4, 0]
    assert right_chain(1) == left_chain(1) == [0]
    assert right_chain(0) == left_chain(0) == []


def test_random_binary_is_reproducible_and_varies():
    a = [random_binary(12, random.Random(3)) for _ in range(2)]
    assert a[0] == a[1]
    rng = random.Random(3)
    assert len({frozenset(random_binary(12, rng)) for _ in range(20)}) > 1


def is_binary(tree: Tree) -> bool:
    return len(tree) == 2 and all(is_binary(c) for c in tree if isinstance(c, Tree))


@given(st.integers(1, 60), st.integers(0, 2**32 - 1))
@settings(max_examples=150, deadline=None)
def test_every_baseline_tree_covers_exactly_the_words(n, seed):
    words = [f"w{i}" for i in range(n)]
    for spans in (left_branching(n), right_branching(n), balanced(n), random_binary(n, random.Random(seed))):
        tree = spans_to_tree(words, spans)
        assert tree.leaves() == words
        if n >= 2:
            assert len(spans) == n - 1 and (0, n) in spans  # full binary tree: n - 1 nodes
            assert is_binary(tree)
    assert bracket_depth(spans_to_tree(words, balanced(n))) == math.ceil(math.log2(n))
    assert bracket_depth(spans_to_tree(words, right_branching(n))) == max(n - 1, 0)


@given(st.integers(1, 60))
def test_chains_are_trees(n):
    for heads in (left_chain(n), right_chain(n)):
        assert len(heads) == n and heads.count(0) == 1
        for i in range(1, n + 1):  # every token reaches the root
            seen, h = set(), i
            while h != 0:
                assert h not in seen and 1 <= h <= n
                seen.add(h)
                h = heads[h - 1]


@pytest.fixture(scope="module")
def ptb_baselines(ptb_gold):
    return run_baselines(ptb_gold, gold_dependencies=read_dependencies("ptb-sample"))


def test_baselines_on_ptb_sample(ptb_baselines):
    r = ptb_baselines
    assert set(r) == {"left_branching", "right_branching", "random", "balanced", "dependency"}
    assert round(r["right_branching"]["sentence_f1"], 2) == 39.91  # DESIGN.md §4
    assert round(r["left_branching"]["sentence_f1"], 2) == 8.63
    assert round(r["balanced"]["sentence_f1"], 2) == 24.13
    assert round(r["random"]["sentence_f1"], 2) == 17.87
    for name in ("left_branching", "right_branching", "random", "balanced"):
        assert r[name]["n_sentences"] == 3914
        assert set(r[name]) >= {
            "sentence_f1",
            "corpus_f1",
            "wsj10_sentence_f1",
            "wsj10_corpus_f1",
            "n_sentences",
            "label_recall",
            "mean_depth",
            "protocol",
        }
    chains = r["dependency"]
    assert round(chains["left_chain"]["uas"], 2) == 30.22
    assert round(chains["right_chain"]["uas"], 2) == 20.27
    assert chains["left_chain"]["n_tokens"] == 82369


def test_random_baseline_mean_and_std_over_seeds(ptb_baselines):
    rnd = ptb_baselines["random"]
    assert rnd["seeds"] == [0, 1, 2, 3, 4] and len(rnd["per_seed"]) == 5
    for key in ("sentence_f1", "corpus_f1", "wsj10_sentence_f1", "mean_depth"):
        values = [s[key] for s in rnd["per_seed"]]
        assert rnd[key] == pytest.approx(statistics.fmean(values))
        assert rnd["std"][key] == pytest.approx(statistics.stdev(values))
        assert len(set(values)) == 5  # seeds differ
    np_values = [s["label_recall"]["NP"] for s in rnd["per_seed"]]
    assert rnd["label_recall"]["NP"] == pytest.approx(statistics.fmean(np_values))
