"""The constituency scoring protocols (syntaxformer/evaluation/protocols.py): hand-computed values on
small trees exercising every rule that differs, properties, equality with today's evaluator, bad input,
and the ``--protocol`` / ``--all-protocols`` command lines on ptb-sample."""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk import Tree

from syntaxformer.cli import main
from syntaxformer.decoding.spans import spans_to_tree, to_bracketed
from syntaxformer.errors import InputError
from syntaxformer.evaluation.baselines import left_branching, right_branching
from syntaxformer.evaluation.constituency import evaluate_constituency
from syntaxformer.evaluation.protocols import (
    PROTOCOLS,
    CpcfgProtocol,
    EvalbProtocol,
    constituents_from_spans,
    get_protocol,
    tree_constituents,
)

T = Tree.fromstring

# Four sentences, gold with preterminals (as the readers preprocess it), predictions with bare words.
# A: one word.           gold (NP (NN dog))                       pred (S dog)
# B: two words, a unary chain at the root (collapsed S+NP).
# C: four words: a single-word phrase (NP (PRP he)) and a chain NP+QP inside.
# D: three words, a unary chain at the root (S+VP).
GOLD = [
    T("(NP (NN dog))"),
    T("(S+NP (DT the) (NN dog))"),
    T("(S (NP (PRP he)) (VP (VBD saw) (NP+QP (CD two) (NNS dogs))))"),
    T("(S+VP (VB go) (ADVP (RB right) (RB now)))"),
]
PRED = [T("(S dog)"), T("(S the dog)"), T("(S (X he saw) (X two dogs))"), T("(S (X go right) now)")]


def by_hand(result: dict, expected: dict):
    for key, value in expected.items():
        assert result[key] == pytest.approx(value, abs=1e-9), key


# ------------------------------------------------------------------------------- reading trees


def test_reading_preterminals_chains_and_bare_words():
    gold = tree_constituents(GOLD[2])
    assert gold.tags == ("PRP", "VBD", "CD", "NNS")
    assert gold.nodes == ((0, 4, "S"), (0, 1, "NP"), (1, 4, "VP"), (2, 4, "NP+QP"))
    pred = tree_constituents(PRED[2])
    assert pred.tags == (None,) * 4 and pred.nodes == ((0, 4, "S"), (0, 2, "X"), (2, 4, "X"))
    assert tree_constituents(PRED[0]).nodes == ()  # (S dog) is a preterminal


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_constituents_from_spans_reads_like_the_tree(n):
    words = [f"w{k}" for k in range(n)]
    for spans in (right_branching(n), left_branching(n), {(0, n), (0, 1)} if n > 1 else set()):
        assert constituents_from_spans(n, spans) == tree_constituents(spans_to_tree(words, spans))


# ------------------------------------------------------------------------------- hand-computed values


def test_prpn_by_hand():
    # sentence F1: A 1 (both empty), B 1 (both empty: the whole sentence never counts), C 1/2 (pred
    # {(0,2),(2,4)}, gold {(1,4),(2,4)}), D 0 (pred {(0,2)}, gold {(1,3)}) -> 2.5 / 4.
    # corpus (length-1 skipped): tp 0+1+0, pred 0+2+1, gold 0+2+1 -> P = R = 1/3.
    result = PROTOCOLS["prpn"].score(PRED, GOLD)
    by_hand(
        result,
        {
            "sentence_f1": 62.5,
            "corpus_f1": 100 / 3,
            "corpus_precision": 100 / 3,
            "corpus_recall": 100 / 3,
            "matched": 1,
            "pred_brackets": 3,
            "gold_brackets": 3,
            "n_sentences": 4,
            "n_scored": 3,
            "n_sentence_f1": 4,
        },
    )


def test_cpcfg_by_hand():
    # A skipped (one word). Span sets, whole sentence kept once more for a root chain (B, D gold):
    # B pred {} gold {(0,2)}; C pred {(0,2),(2,4)} gold {(1,4),(2,4)}; D pred {(0,2)} gold {(0,3),(1,3)}.
    # corpus: tp 0+1+0 = 1, pred 0+2+1 = 3, gold 1+2+2 = 5 -> P 1/3, R 1/5, F 1/4.
    # sentence F1 (eval.py): B skipped (pred empty), C 1/2, D 0 -> 1/4 over 2 sentences.
    result = PROTOCOLS["cpcfg"].score(PRED, GOLD)
    by_hand(
        result,
        {
            "sentence_f1": 25.0,
            "corpus_f1": 25.0,
            "corpus_precision": 100 / 3,
            "corpus_recall": 20.0,
            "matched": 1,
            "pred_brackets": 3,
            "gold_brackets": 5,
            "n_scored": 3,
            "n_sentence_f1": 2,
        },
    )
    # compare_trees.py: PRPN's rule over B, C, D: B 0 (gold non-empty, pred empty), C 1/2, D 0.
    trees = PROTOCOLS["cpcfg-trees"].score(PRED, GOLD)
    by_hand(trees, {"sentence_f1": 100 / 6, "corpus_f1": 25.0, "n_scored": 3, "n_sentence_f1": 3})
    # without Kim's gold (chains read collapsed) the whole sentence never counts: the prpn corpus sets
    collapsed = CpcfgProtocol(kim_gold=False).score(PRED, GOLD)
    by_hand(collapsed, {"gold_brackets": 3, "corpus_f1": 100 / 3, "sentence_f1": 25.0})


def test_cpcfg_trees_length_cutoff():
    words = [f"w{k}" for k in range(5)]
    pred = [spans_to_tree(words, right_branching(5))]
    gold = [spans_to_tree(words, left_branching(5))]
    assert CpcfgProtocol(length_cutoff=5).score(pred, gold)["n_scored"] == 1
    short = CpcfgProtocol(length_cutoff=4).score(pred, gold)
    assert (short["n_scored"], short["gold_brackets"], short["sentence_f1"]) == (0, 0, 0.0)


def test_evalb_by_hand():
    # brackets: every constituent node, whole sentence and single-word phrases, a chain once per part.
    # A gold {(0,1)}, pred {} -> 0 of 1.  B gold (0,2) x2, pred (0,2) -> 1.
    # C gold (0,4) (0,1) (1,4) (2,4) x2, pred (0,4) (0,2) (2,4) -> (0,4) + min(2,1) = 2.
    # D gold (0,3) x2 (1,3), pred (0,3) (0,2) -> 1.   matched 4, pred 0+1+3+2 = 6, gold 1+2+5+3 = 11.
    result = PROTOCOLS["evalb"].score(PRED, GOLD)
    precision, recall = 400 / 6, 400 / 11
    by_hand(
        result,
        {
            "matched": 4,
            "pred_brackets": 6,
            "gold_brackets": 11,
            "corpus_precision": precision,
            "corpus_recall": recall,
            "corpus_f1": 2 * precision * recall / (precision + recall),
            "complete_match": 0.0,
            "n_scored": 4,
            "n_cutoff": 4,
            "cutoff_matched": 4,
        },
    )
    assert result["corpus_f1"] == pytest.approx(100 * 16 / 34)


def test_evalb_deletes_punctuation_traces_and_top():
    # Gold with punctuation and a trace: words "the dog barked * , -- ."; EVALB keeps "the dog barked".
    # Gold brackets: S (0,3), NP (0,2), VP (2,3) (its trace deleted); the trace's NP and the
    # punctuation-only PRN are left with no word and dropped. The prediction's second X holds only
    # deleted words: dropped too; its S and first X both cover (0,3).
    gold = T("(TOP (S (NP (DT the) (NN dog)) (VP (VBD barked) (NP (-NONE- *))) (PRN (, ,) (: --)) (. .)))")
    pred = T("(S (X (DT the) (NN dog) (VBD barked)) (X (-NONE- *) (, ,) (: --) (. .)))")
    evalb = PROTOCOLS["evalb"]
    assert evalb.brackets(tree_constituents(gold)) == Counter({(0, 3): 1, (0, 2): 1, (2, 3): 1})
    assert evalb.brackets(tree_constituents(pred)) == Counter({(0, 3): 2})
    assert evalb.length(tree_constituents(gold)) == 6  # punctuation counts, the trace not
    result = evalb.score([pred], [gold])
    by_hand(
        result,
        {
            "matched": 1,
            "pred_brackets": 2,
            "gold_brackets": 3,
            "corpus_precision": 50.0,
            "corpus_recall": 100 / 3,
            "corpus_f1": 40.0,
            "n_cutoff": 1,
        },
    )
    assert EvalbProtocol(cutoff_len=5).score([pred], [gold])["n_cutoff"] == 0
    # prpn and cpcfg read the same trees as given: the punctuation are words, (0,3) a bracket
    assert PROTOCOLS["prpn"].score([pred], [gold])["sentence_f1"] == 0.0


def test_empty_gold_set():
    # Flat three-word gold: no bracket but the whole sentence.
    gold, pred = [T("(S (DT a) (NN b) (VB c))")], [T("(S (X a b) c)")]
    by_hand(PROTOCOLS["prpn"].score(pred, gold), {"sentence_f1": 0.0, "corpus_f1": 0.0, "gold_brackets": 0})
    by_hand(PROTOCOLS["cpcfg"].score(pred, gold), {"sentence_f1": 0.0, "n_sentence_f1": 0, "pred_brackets": 1})
    by_hand(PROTOCOLS["cpcfg-trees"].score(pred, gold), {"sentence_f1": 0.0, "n_sentence_f1": 1})
    by_hand(PROTOCOLS["evalb"].score(pred, gold), {"corpus_precision": 50.0, "corpus_recall": 100.0})
    # both empty: PRPN's rule gives 1, eval.py skips the sentence
    assert PROTOCOLS["cpcfg-trees"].score(gold, gold)["sentence_f1"] == 100.0
    assert PROTOCOLS["cpcfg"].score(gold, gold)["n_sentence_f1"] == 0


# ------------------------------------------------------------------------------- properties

LABELS = ["S", "NP", "VP", "S+VP", "NP+QP", "X", "TOP"]


@st.composite
def trees(draw, n):
    """A random tree over the words w0 .. w(n-1): random splits, labels (chains included), unary
    nodes, preterminals or bare words, single-word phrases."""

    def build(i, j):
        if j - i == 1:
            word = f"w{i}"
            kind = draw(st.sampled_from(["bare", "tag", "phrase"]))
            leaf = word if kind == "bare" else Tree("NN", [word])
            return Tree(draw(st.sampled_from(LABELS)), [Tree("NN", [word])]) if kind == "phrase" else leaf
        cuts = sorted(draw(st.sets(st.integers(i + 1, j - 1), max_size=j - i - 1)))
        bounds = [i] + (cuts or list(range(i + 1, j))) + [j]  # no cut: a flat node over its words
        children = [build(a, b) for a, b in pairwise(bounds)]
        node = Tree(draw(st.sampled_from(LABELS)), children)
        return Tree(draw(st.sampled_from(LABELS)), [node]) if draw(st.booleans()) else node

    tree = build(0, n)
    return tree if isinstance(tree, Tree) else Tree("S", [tree])


@st.composite
def tree_pairs(draw):
    lengths = draw(st.lists(st.integers(1, 7), min_size=1, max_size=4))
    return [draw(trees(n)) for n in lengths], [draw(trees(n)) for n in lengths]


@settings(max_examples=60, deadline=None)
@given(tree_pairs())
def test_every_protocol_scores_a_tree_against_itself_100(pair):
    corpus, _ = pair
    for protocol in PROTOCOLS.values():
        result = protocol.score(corpus, corpus)
        if result["gold_brackets"]:
            assert result["corpus_f1"] == pytest.approx(100.0), protocol.name
            assert result["corpus_precision"] == result["corpus_recall"] == pytest.approx(100.0)
        if result.get("n_sentence_f1"):
            assert result["sentence_f1"] == pytest.approx(100.0), protocol.name
        if "complete_match" in result:
            assert result["complete_match"] == 100.0


@settings(max_examples=60, deadline=None)
@given(tree_pairs())
def test_every_protocol_is_symmetric(pair):
    first, second = pair
    for protocol in PROTOCOLS.values():
        forward, backward = protocol.score(first, second), protocol.score(second, first)
        assert forward["corpus_f1"] == backward["corpus_f1"], protocol.name
        assert forward["corpus_precision"] == backward["corpus_recall"], protocol.name
        assert (forward["pred_brackets"], forward["matched"]) == (backward["gold_brackets"], backward["matched"])
        if "sentence_f1" in forward:
            assert forward["sentence_f1"] == backward["sentence_f1"], protocol.name


# ------------------------------------------------------------------------------- prpn = today's numbers


def test_prpn_equals_evaluate_constituency_on_ptb_sample(ptb_gold):
    right = [spans_to_tree(t.leaves(), right_branching(len(t.leaves()))) for t in ptb_gold]
    today = evaluate_constituency(right, ptb_gold)
    result = PROTOCOLS["prpn"].score(right, ptb_gold)
    assert {k: result[k] for k in today if k != "protocol"} == {k: v for k, v in today.items() if k != "protocol"}
    assert round(result["sentence_f1"], 2) == 39.91 and round(result["corpus_f1"], 2) == 35.75
    assert PROTOCOLS["prpn"].rules == today["protocol"]


# ------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("name", list(PROTOCOLS))
def test_bad_input_is_one_line_input_error(name):
    protocol = PROTOCOLS[name]
    with pytest.raises(InputError, match="the prediction has 3 sentences but the gold has 4") as error:
        protocol.score(PRED[:3], GOLD)
    assert "\n" not in str(error.value) and "sentence 4" in str(error.value)
    wrong = PRED[:2] + [T("(S (X he sat) (X two dogs))")] + PRED[3:]
    with pytest.raises(InputError, match="sentence 3: word 2 differs: predicted 'sat', gold 'saw'"):
        protocol.score(wrong, GOLD)


def test_unknown_protocol():
    with pytest.raises(InputError, match="unknown protocol 'nope'; known: prpn, cpcfg, cpcfg-trees, evalb"):
        get_protocol("nope")


# ------------------------------------------------------------------------------- command lines


def right_lines(gold) -> str:
    return "\n".join(to_bracketed(spans_to_tree(t.leaves(), right_branching(len(t.leaves())))) for t in gold) + "\n"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The first 3 files of ptb-sample (gold .mrg) and right-branching predictions over their words."""
    from syntaxformer.data import load_gold_trees, ptb_sample_members

    folder = tmp_path_factory.mktemp("small")
    for name, text in ptb_sample_members("combined")[:3]:
        (folder / name.split("/")[1]).write_text(text)
    gold = load_gold_trees(folder / "wsj_000*.mrg")
    pred = folder / "right.txt"
    pred.write_text(right_lines(gold))
    return str(folder / "*.mrg"), gold, str(pred)


def test_all_protocols_on_ptb_sample(ptb_gold, tmp_path, capsys):
    pred = tmp_path / "right.txt"
    pred.write_text(right_lines(ptb_gold))
    assert main(["evaluate", "--pred", str(pred), "--gold", "ptb-sample", "--all-protocols", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["task"] == "protocols" and result["n_sentences"] == 3914 and result["seed"] == 0
    assert list(result["protocols"]) == list(PROTOCOLS)
    assert result["seconds"] < 60  # seconds, not minutes (2 busy cores)
    for name, entry in result["protocols"].items():
        scores = entry["scores"]
        assert scores["prediction"] == scores["right_branching"], name  # the prediction is right-branching
        assert scores["left_branching"]["corpus_f1"] < scores["right_branching"]["corpus_f1"], name
        assert entry["source"] == PROTOCOLS[name].source and entry["rules"] == PROTOCOLS[name].rules
    prpn = result["protocols"]["prpn"]["scores"]["prediction"]
    assert round(prpn["sentence_f1"], 2) == 39.91 and round(prpn["corpus_f1"], 2) == 35.75
    gold_read = [tree_constituents(t) for t in ptb_gold]
    left = [constituents_from_spans(r.n_words, left_branching(r.n_words)) for r in gold_read]
    expected = PROTOCOLS["evalb"].score_constituents(left, gold_read, ptb_gold)
    assert result["protocols"]["evalb"]["scores"]["left_branching"] == pytest.approx(expected)


def test_all_protocols_text_table(small, capsys):
    gold, _, pred = small
    assert main(["evaluate", "--pred", pred, "--gold", gold, "--all-protocols"]) == 0
    out = capsys.readouterr().out
    assert "right-branching" in out and "left-branching" in out and "compare_trees.py" in out
    assert all(f"\n{name} " in out for name in PROTOCOLS)  # one block of rows per protocol
    assert "evalb.c with COLLINS.prm" in out


def test_evaluate_one_protocol(small, capsys):
    gold, trees, pred = small
    assert main(["evaluate", "--pred", pred, "--gold", gold, "--protocol", "cpcfg", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["protocol_name"] == "cpcfg" and "eval.py" in result["protocol_source"]
    assert result["n_sentences"] == len(trees) and "label_recall" not in result
    right = [spans_to_tree(t.leaves(), right_branching(len(t.leaves()))) for t in trees]
    expected = PROTOCOLS["cpcfg"].score(right, trees)
    assert {k: result[k] for k in expected} == pytest.approx(expected)
    assert main(["evaluate", "--pred", pred, "--gold", gold, "--protocol", "evalb"]) == 0
    out = capsys.readouterr().out
    assert "protocol evalb" in out and "COLLINS.prm" in out and "len<=40 F1" in out
    assert main(["evaluate", "--pred", pred, "--gold", gold]) == 0
    out = capsys.readouterr().out  # the default names prpn and its source
    assert "protocol:   prpn: unlabelled bracket F1" in out and "test_phrase_grammar.py" in out


def test_protocol_refused_for_dependencies(tmp_path, capsys):
    conllu = tmp_path / "pred.conllu"
    conllu.write_text("1\tdog\t_\tNN\t_\t_\t0\troot\t_\t_\n\n")
    assert main(["evaluate", "--pred", str(conllu), "--gold", "ptb-sample", "--protocol", "evalb"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "a .conllu prediction is scored by UAS/UUAS" in err


def test_baselines_protocol(small, capsys):
    gold, trees, _ = small
    args = ["baselines", "--treebank", gold, "--protocol", "cpcfg-trees"]
    assert main(args + ["--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["meta"]["protocol_name"] == "cpcfg-trees" and "dependency" not in result
    right = [spans_to_tree(t.leaves(), right_branching(len(t.leaves()))) for t in trees]
    assert result["right_branching"] == pytest.approx(PROTOCOLS["cpcfg-trees"].score(right, trees))
    assert set(result["random"]["std"]) >= {"sentence_f1", "corpus_f1"} and result["random"]["seeds"] == [0, 1, 2, 3, 4]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "cpcfg-trees" in out and "compare_trees.py" in out and "corpus P" in out and "±" in out
