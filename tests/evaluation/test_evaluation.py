"""Bracket F1 (sentence, corpus, WSJ-10, label recall, depth) and UAS/UUAS: exact values by hand and on
the embedded ptb-sample, plus properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk import Tree

from syntaxformer.data import preprocess_tree
from syntaxformer.data.dependency import DependencySentence, read_dependencies
from syntaxformer.decoding.spans import brackets, spans_to_tree, split_by_distance
from syntaxformer.errors import InputError
from syntaxformer.evaluation.baselines import baseline_trees, right_branching
from syntaxformer.evaluation.constituency import (
    RECALL_LABELS,
    GoldBrackets,
    base_labels,
    bracket_depth,
    corpus_f1,
    evaluate_constituency,
    gold_labelled_brackets,
    read_gold_brackets,
    score_brackets,
    sentence_f1,
)
from syntaxformer.evaluation.dependency import evaluate_dependency, reattach_heads


def gold(text: str) -> Tree:
    """A gold tree as the field preprocesses it."""
    return preprocess_tree(Tree.fromstring(text))


def pred(words: str, spans) -> Tree:
    return spans_to_tree(words.split(), spans)


# ---------------------------------------------------------------- sentence_f1 and its conventions


def test_sentence_f1_by_hand():
    assert sentence_f1({(0, 2), (2, 5), (3, 5)}, {(1, 5), (2, 5), (3, 5)}) == pytest.approx(2 / 3)
    # P = 1/2, R = 1/3 -> F1 = 2 * (1/6) / (5/6) = 2/5
    assert sentence_f1({(0, 2), (2, 4)}, {(0, 2), (1, 4), (0, 3)}) == pytest.approx(0.4)
    assert sentence_f1({(0, 2)}, {(1, 3)}) == 0.0


def test_sentence_f1_empty_set_conventions():
    assert sentence_f1(set(), set()) == 1.0  # R = 1 (gold empty), P = 1 (pred empty too)
    assert sentence_f1({(0, 2)}, set()) == 0.0  # R = 1, P = 0
    assert sentence_f1(set(), {(0, 2)}) == 0.0  # R = 0


def test_corpus_f1_counts():
    assert corpus_f1(2, 4, 4) == 0.5
    assert corpus_f1(1, 2, 4) == pytest.approx(2 * 0.5 * 0.25 / 0.75)
    assert corpus_f1(0, 0, 0) == 0.0


# ---------------------------------------------------------------- evaluate_constituency by hand


def test_length_one_and_two_sentences_score_one():
    golds = [gold("( (S (NN dog) (. .)) )"), gold("( (S (DT the) (NN dog)) )")]
    preds = [pred("dog", []), pred("the dog", [])]
    result = evaluate_constituency(preds, golds)
    assert result["sentence_f1"] == 100.0
    assert result["wsj10_sentence_f1"] == 100.0
    assert result["n_sentences"] == 2 and result["n_wsj10"] == 2
    # corpus-level: no bracket anywhere (length-1 skipped, length-2 has none) -> 0 by definition
    assert result["corpus_f1"] == 0.0


def test_unary_chain_duplicates_count_once():
    # (NP (NP ...)) and (S (VP ...)): repeated spans; without collapsing them they still count once.
    raw = Tree.fromstring("(S (NP (NP (DT the) (NN dog))) (VP (VP (VBD ran) (RB away))))")
    assert brackets(raw) == {(0, 2), (2, 4)}
    result = evaluate_constituency([pred("the dog ran away", [(0, 2)])], [raw])
    assert result["sentence_f1"] == pytest.approx(100 * 2 * 1 * 0.5 / 1.5)  # P = 1, R = 1/2
    assert result["corpus_f1"] == pytest.approx(100 * 2 / 3)


def test_corpus_and_sentence_f1_differ():
    # Sentence 1 (5 words): gold {(0,2),(2,5),(3,5)}, right-branching {(1,5),(2,5),(3,5)}: F1 2/3.
    # Sentence 2 (3 words): gold {(1,3)}, left-branching {(0,2)}: F1 0.
    # Sentence-level: (2/3 + 0) / 2 = 1/3. Corpus-level: tp 2, pred 4, gold 4 -> 1/2.
    golds = [gold("(S (NP (DT a) (NN b)) (VP (VB c) (NP (DT d) (NN e))))"), gold("(S (NN a) (VP (VB b) (NN c)))")]
    preds = [pred("a b c d e", right_branching(5)), pred("a b c", [(0, 2)])]
    result = evaluate_constituency(preds, golds)
    assert result["sentence_f1"] == pytest.approx(100 / 3)
    assert result["corpus_f1"] == pytest.approx(50.0)
    assert result["wsj10_sentence_f1"] == pytest.approx(100 / 3)
    assert result["wsj10_corpus_f1"] == pytest.approx(50.0)


def test_wsj10_keeps_sentences_of_at_most_ten_words():
    long_words = " ".join(f"(NN w{i})" for i in range(11))
    golds = [
        gold(f"(S (NP {long_words}))"),  # 11 words, flat: no bracket
        gold("(S (NP (DT a) (NN b)) (VB c))"),
    ]  # 3 words, gold {(0,2)}
    preds = [pred(" ".join(f"w{i}" for i in range(11)), right_branching(11)), pred("a b c", [(0, 2)])]
    result = evaluate_constituency(preds, golds)
    assert result["n_wsj10"] == 1
    assert result["sentence_f1"] == pytest.approx(50.0)  # (0 + 1) / 2: non-empty pred, empty gold -> 0
    assert result["wsj10_sentence_f1"] == 100.0
    assert result["wsj10_corpus_f1"] == 100.0
    assert result["corpus_f1"] == pytest.approx(100 * 2 * (1 / 10) * 1 / (1 / 10 + 1))


def test_label_recall_by_hand():
    g = gold("( (S (NP-SBJ (DT the) (JJ big) (NN dog)) (VP (VBD ran) (ADVP (RB very) (RB fast))) (. .)) )")
    result = evaluate_constituency([pred("the big dog ran very fast", right_branching(6))], [g])
    assert result["label_counts"] == {"NP": 1, "VP": 1, "PP": 0, "SBAR": 0, "ADJP": 0, "ADVP": 1}
    assert result["label_recall"] == {"NP": 0.0, "VP": 100.0, "PP": None, "SBAR": None, "ADJP": None, "ADVP": 100.0}
    assert list(result["label_recall"]) == list(RECALL_LABELS)


def test_collapsed_label_counts_for_each_part():
    t = Tree.fromstring("(S (NP (DT a) (NN b)) (S+VP (TO to) (VB go)) (NN c))")
    assert gold_labelled_brackets(t) == {(0, 2, "NP"), (2, 4, "S"), (2, 4, "VP")}
    assert base_labels("NP-SBJ-1") == ["NP"]
    assert base_labels("ADVP|PRT") == ["ADVP"]
    assert base_labels("SBAR+S") == ["SBAR", "S"]
    # the real preprocessing makes S+VP out of (S (VP ...)) under a VP:
    g = gold("(S (NP (PRP he)) (VP (VBZ wants) (S (VP (TO to) (VP (VB go) (RB now))))))")
    assert (2, 5, "VP") in gold_labelled_brackets(g) and (2, 5, "S") in gold_labelled_brackets(g)


def test_the_gold_read_once_holds_its_brackets_and_the_recall_labels():
    g = gold("(S (NP (DT a) (NN b)) (S+VP (TO to) (VB go)) (NN c))")  # S (2, 4) is not a recall label
    assert read_gold_brackets([g]) == [
        GoldBrackets(5, frozenset({(0, 2), (2, 4)}), frozenset({(0, 2, "NP"), (2, 4, "VP")}))
    ]


def test_scores_against_the_gold_read_once_equal_those_against_the_trees(ptb_gold):
    golds = ptb_gold[:300]
    read = read_gold_brackets(golds)
    for trees in (baseline_trees(golds, right_branching), golds):
        spans = [brackets(t) for t in trees]
        assert score_brackets(spans, read) == score_brackets(spans, golds)
        assert evaluate_constituency(trees, golds, read=read) == evaluate_constituency(trees, golds)


def test_tree_depth():
    assert bracket_depth(pred("a", [])) == 0
    assert bracket_depth(pred("a b", [])) == 1
    assert bracket_depth(pred("a b c d e", right_branching(5))) == 4
    assert bracket_depth(Tree.fromstring("(S (X (X a b) c))")) == 2  # (0,3) and (0,2); unary once
    golds = [gold("(S (NP (DT a) (NN b)) (VB c))"), gold("(S (NN a))")]
    result = evaluate_constituency([pred("a b c", right_branching(3)), pred("a", [])], golds)
    assert result["mean_depth"] == 1.0  # (2 + 0) / 2


def test_predicted_leaves_are_normalised_like_gold():
    g = gold("( (S (NP (NNP Pierre) (NNP Vinken)) (, ,) (NP (CD 61) (NNS years))) )")
    assert g.leaves() == ["pierre", "vinken", "N", "years"]
    for words in ("Pierre Vinken 61 years", "pierre vinken N years"):
        result = evaluate_constituency([pred(words, [(0, 2), (2, 4)])], [g])
        assert result["sentence_f1"] == 100.0


def test_count_mismatch_names_the_sentence():
    golds = [gold("(S (NN a) (NN b))")] * 3
    with pytest.raises(InputError, match=r"sentence 3: .*2 sentences .* 3"):
        evaluate_constituency([pred("a b", [])] * 2, golds)


def test_word_mismatch_names_sentence_and_words():
    golds = [gold("(S (NN a) (NN b))"), gold("(S (NN c) (NN d) (NN e))")]
    with pytest.raises(InputError, match=r"sentence 2: word 2 differs: predicted 'x', gold 'd'"):
        evaluate_constituency([pred("a b", []), pred("c x e", [])], golds)
    with pytest.raises(InputError, match=r"sentence 2: predicted 2 words, gold 3"):
        evaluate_constituency([pred("a b", []), pred("c d", [])], golds)
    with pytest.raises(InputError, match=r"sentence 1: .*word 3: predicted '\.', gold '<end>'"):
        evaluate_constituency([pred("a b .", []), pred("c d e", [])], golds)


# ---------------------------------------------------------------- properties


@st.composite
def span_sets(draw):
    """Two binary trees over the same words, from random distances (one decoder)."""
    n = draw(st.integers(1, 25))
    distances = st.lists(st.floats(0, 1), min_size=n - 1, max_size=n - 1)
    a = split_by_distance(draw(distances)) - {(0, n)}
    b = split_by_distance(draw(distances)) - {(0, n)}
    return n, a, b


@given(span_sets())
@settings(max_examples=200, deadline=None)
def test_f1_properties(sets):
    n, a, b = sets
    f = sentence_f1(a, b)
    assert 0.0 <= f <= 1.0
    assert f == sentence_f1(b, a)  # symmetric, empty conventions included
    assert sentence_f1(a, a) == 1.0
    assert (f == 1.0) == (a == b)
    words = [f"w{i}" for i in range(n)]
    result = evaluate_constituency([spans_to_tree(words, a)], [spans_to_tree(words, b)])
    assert 0.0 <= result["sentence_f1"] <= 100.0
    assert math.isclose(result["sentence_f1"], 100 * f)
    if a and b:  # one sentence: micro = sentence F1
        assert math.isclose(result["corpus_f1"], 100 * f)


# ---------------------------------------------------------------- the embedded ptb-sample


def test_gold_against_itself_is_100(ptb_gold):
    result = evaluate_constituency(ptb_gold, ptb_gold)
    for key in ("sentence_f1", "corpus_f1", "wsj10_sentence_f1", "wsj10_corpus_f1"):
        assert result[key] == 100.0
    assert all(value == 100.0 for value in result["label_recall"].values())
    assert result["n_sentences"] == 3914


def test_right_branching_on_ptb_sample_is_the_reference(ptb_gold):
    """DESIGN.md §4: right-branching sentence-level F1 on ptb-sample = 39.91."""
    result = evaluate_constituency(baseline_trees(ptb_gold, right_branching), ptb_gold)
    assert round(result["sentence_f1"], 2) == 39.91
    assert round(result["corpus_f1"], 2) == 35.75
    assert round(result["wsj10_sentence_f1"], 2) == 58.60
    assert round(result["wsj10_corpus_f1"], 2) == 55.00
    assert result["n_sentences"] == 3914 and result["n_wsj10"] == 555
    assert result["label_counts"] == {"NP": 24247, "VP": 13500, "PP": 9290, "SBAR": 2877, "ADJP": 929, "ADVP": 409}
    assert round(result["label_recall"]["VP"], 2) == 71.74


# ---------------------------------------------------------------- dependencies


def dep(words: str, heads, punct=None) -> DependencySentence:
    w = tuple(words.split())
    return DependencySentence(
        w, ("X",) * len(w), tuple(heads), tuple(punct) if punct is not None else (False,) * len(w)
    )


# "a , b c ." : a -> ","(punct) -> b ; b root ; c -> b ; "." -> b
GOLD = dep("a , b c .", [2, 3, 0, 3, 3], [False, True, False, False, True])


def test_reattach_punctuation_heads():
    assert reattach_heads(GOLD.heads, GOLD.punct) == [2, 0, 2]
    # a chain of punctuation heads ending at the root
    assert reattach_heads([2, 3, 0], [False, True, True]) == [0]


def test_uas_uuas_by_hand():
    reduced = evaluate_dependency([dep("a b c", [2, 0, 2])], [GOLD])
    assert (reduced["uas"], reduced["uuas"], reduced["n_tokens"]) == (100.0, 100.0, 3)
    full = evaluate_dependency([dep("a , b c .", [3, 3, 0, 3, 3])], [GOLD])
    assert (full["uas"], full["uuas"]) == (100.0, 100.0)
    # a full-length prediction is reduced like gold: a head on punctuation is re-attached
    assert evaluate_dependency([GOLD], [GOLD])["uas"] == 100.0
    on_punct = evaluate_dependency([dep("a , b c .", [5, 3, 0, 3, 3])], [GOLD])  # a -> . -> b
    assert on_punct["uas"] == 100.0
    # ... unless its head chain cycles through punctuation only (a -> , -> . -> ,): wrong
    cycle = evaluate_dependency([dep("a , b c .", [2, 5, 0, 3, 2])], [GOLD])
    assert (cycle["uas"], cycle["uuas"]) == pytest.approx((200 / 3, 200 / 3))
    # pred a <- root, b -> a, c -> b: directed only c; undirected {a,b} and {b,c} of {a,b},{b,root},{b,c}
    inverted = evaluate_dependency([dep("a b c", [0, 1, 2])], [GOLD])
    assert inverted["uas"] == pytest.approx(100 / 3)
    assert inverted["uuas"] == pytest.approx(200 / 3)


def test_dependency_mismatches_name_the_sentence():
    with pytest.raises(InputError, match="sentence 2: .*1 sentences .* 2"):
        evaluate_dependency([GOLD], [GOLD, GOLD])
    with pytest.raises(InputError, match=r"sentence 2: predicted 4 tokens; gold has 5 tokens, 3 "):
        evaluate_dependency([GOLD, dep("a b c d", [0, 1, 1, 1])], [GOLD, GOLD])
    with pytest.raises(InputError, match=r"sentence 1: token 3 differs: predicted 'x', gold 'c'"):
        evaluate_dependency([dep("a b x", [2, 0, 2])], [GOLD])
    with pytest.raises(InputError, match=r"sentence 1: token 1: predicted head 7 out of range"):
        evaluate_dependency([dep("a b c", [7, 0, 2])], [GOLD])


def test_dependency_gold_against_itself_on_ptb_sample(ptb_gold):
    gold_sentences = read_dependencies("ptb-sample")
    result = evaluate_dependency(gold_sentences, gold_sentences)
    assert (result["uas"], result["uuas"], result["n_sentences"]) == (100.0, 100.0, 3914)
    # the scored tokens are exactly the words of the preprocessed gold trees
    assert result["n_tokens"] == sum(len(t.leaves()) for t in ptb_gold) == 82369
