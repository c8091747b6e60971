"""The ensemble decoder (syntaxformer/decoding/ensemble.py): the minimum-Bayes-risk tree against brute
force over every binary tree, its tie rule, and the head vote."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syntaxformer.decoding.dependency import is_tree
from syntaxformer.decoding.ensemble import ensemble_spans, head_vote, mbr_tree, span_votes
from syntaxformer.decoding.spans import split_by_distance, tree_distances


@functools.cache
def binary_trees(i: int, j: int) -> tuple[frozenset, ...]:
    """Every binary tree over words i..j-1, as its spans of two or more words (brute force)."""
    if j - i == 1:
        return (frozenset(),)
    return tuple(
        frozenset({(i, j)}) | left | right
        for k in range(i + 1, j)
        for left in binary_trees(i, k)
        for right in binary_trees(k, j)
    )


def right_branching(n: int) -> set:
    return {(i, n) for i in range(n - 1)}


def vote_of(tree, votes) -> float:
    return sum(votes[i, j] for i, j in tree)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(2, 7).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.integers(0, 5), min_size=(n + 1) ** 2, max_size=(n + 1) ** 2))
    )
)
def test_mbr_tree_is_the_best_binary_tree(case):
    n, values = case
    votes = np.triu(np.asarray(values, dtype=float).reshape(n + 1, n + 1), 2)
    trees = binary_trees(0, n)
    best = max(vote_of(t, votes) for t in trees)
    found = mbr_tree(votes, keep_unvoted=True)
    assert frozenset(found) in trees  # a binary tree over the sentence
    # by default the spans of vote 0 are dropped, the others kept
    assert mbr_tree(votes) == {(i, j) for i, j in found if votes[i, j] > 0 or (i, j) == (0, n)}
    assert vote_of(found, votes) == best
    winners = [t for t in trees if vote_of(t, votes) == best]
    if len(winners) == 1:
        assert found == set(winners[0])


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 7).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.integers(0, 10**6), min_size=3, max_size=3)))
)
def test_members_trees_vote(case):
    n, picks = case
    trees = binary_trees(0, n)
    members = [trees[p % len(trees)] for p in picks]
    # one member: its own tree; identical members: that tree
    assert ensemble_spans([members[0]], n) == set(members[0])
    assert ensemble_spans([members[0]] * 3, n, weights=[0.5, 2.0, 1.0]) == set(members[0])
    # a member of weight above all the others together is followed
    assert ensemble_spans(members, n, weights=[3.0, 1.0, 1.0]) == set(members[0])
    # three members: the tree of the largest total vote over every binary tree
    votes = span_votes(members, n)
    assert vote_of(ensemble_spans(members, n), votes) == max(vote_of(t, votes) for t in trees)


def test_tie_rule_right_branching_without_votes():
    for n in range(2, 9):
        assert mbr_tree(np.zeros((n + 1, n + 1)), keep_unvoted=True) == right_branching(n)
        assert mbr_tree(np.zeros((n + 1, n + 1))) == {(0, n)}  # no span voted: flat


def test_one_flat_member_gives_its_own_tree():
    flat = {(0, 5), (0, 3)}  # ((a b c) d e): two flat constituents
    assert ensemble_spans([flat], 5) == flat
    assert ensemble_spans([flat, flat], 5, weights=[1.0, 3.0]) == flat
    binary = ensemble_spans([flat], 5, keep_unvoted=True)
    assert flat < binary and frozenset(binary) in binary_trees(0, 5)


def test_tie_rule_smallest_split_point():
    # two members that disagree everywhere, equal weights: ((a b) c d) against (a (b (c d))): the total
    # votes tie at 1 (the root span is not voted), and the smallest split point wins: right-branching
    n = 4
    left, right = {(0, 2), (0, 3)}, {(1, 4), (2, 4)}
    assert vote_of(ensemble_spans([left, right], n), span_votes([left, right], n)) == 2
    assert ensemble_spans([left, right], n) == {(0, 4), (1, 4), (2, 4)}  # every span voted once
    # the same with the left-branching member weighted a little higher: it wins
    assert ensemble_spans([left, right], n, weights=[1.01, 1.0]) == {(0, 4), (0, 3), (0, 2)}
    # float sums that differ only by rounding still tie: 0.1 + 0.2 against 0.3
    assert ensemble_spans([{(0, 2)}, {(0, 2)}, {(1, 3)}], 3, weights=[0.1, 0.2, 0.3]) == {(0, 3), (1, 3)}
    assert ensemble_spans([{(0, 2)}, {(0, 2)}, {(1, 3)}], 3, weights=[0.1, 0.2, 0.31]) == {(0, 3), (1, 3)}
    assert ensemble_spans([{(0, 2)}, {(0, 2)}, {(1, 3)}], 3, weights=[0.1, 0.21, 0.3]) == {(0, 3), (0, 2)}


def test_span_votes_table():
    votes = span_votes([{(0, 2), (0, 3), (0, 1)}, {(0, 2), (2, 3)}], 3, weights=[1.0, 0.5])
    expected = np.zeros((4, 4))
    expected[0, 2] = 1.5  # spans of one word and the whole sentence (0, 3) are not voted
    assert np.array_equal(votes, expected)
    assert mbr_tree(np.zeros((2, 2))) == set()


def test_bad_members():
    with pytest.raises(ValueError, match="outside a sentence of 3 words"):
        span_votes([{(0, 4)}], 3)
    with pytest.raises(ValueError, match="2 weights for 1 members"):
        span_votes([{(0, 2)}], 3, weights=[1, 2])
    with pytest.raises(ValueError, match="non-negative"):
        span_votes([{(0, 2)}], 3, weights=[-1])
    with pytest.raises(ValueError, match="different numbers of words"):
        head_vote([[0, 1], [0, 1, 1]])


def test_head_vote():
    one = [2, 0, 2, 3]
    assert head_vote([one]) == one  # one member: its heads
    assert head_vote([one, one, one]) == one  # identical members: theirs
    # majority per word where the majority is a tree
    assert head_vote([one, [2, 0, 2, 3], [3, 0, 2, 2]]) == one
    # a majority that is no tree (two roots) gives a tree
    votes = head_vote([[0, 0, 2], [0, 0, 2], [2, 0, 2]])
    assert is_tree(votes) and votes == [2, 0, 2]
    # weights decide between two members
    assert head_vote([[2, 0], [0, 1]], weights=[1, 2]) == [0, 1]


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, 10**6))))
def test_tree_distances_give_the_tree_back(case):
    n, pick = case
    trees = binary_trees(0, n)
    tree = set(trees[pick % len(trees)])
    distances = tree_distances(tree, n)
    assert split_by_distance(distances) == tree
    assert tree_distances(tree - {(0, n)}, n) == distances  # the whole sentence is implied


def test_tree_distances_values():
    # ((a b) (c (d e))): the root splits gap 1 (5 words), (a b) gap 0, (c d e) gap 2, (d e) gap 3
    assert tree_distances({(0, 5), (0, 2), (2, 5), (3, 5)}, 5) == [2, 5, 3, 2]
    assert tree_distances(set(), 1) == []


def test_baseline_voters_are_the_branching_trees():
    from syntaxformer.decoding.ensemble import BASELINE_VOTERS

    assert BASELINE_VOTERS["right-branching"](5) == {(0, 5), (1, 5), (2, 5), (3, 5)}
    assert BASELINE_VOTERS["left-branching"](5) == {(0, 2), (0, 3), (0, 4), (0, 5)}
    assert BASELINE_VOTERS["right-branching"](1) == set()
