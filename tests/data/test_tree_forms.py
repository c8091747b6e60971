"""The two forms of a tree (syntaxformer/decoding/spans.py): the decoders' internal form, words beside
subtrees, and the field's form the library returns and draws, a preterminal ``X`` over each word. The
parser and ``show`` give the field's form; the readers and every scoring protocol read both forms the
same way, so every score is the one the internal form gets."""

from __future__ import annotations

import random

import pytest
from nltk import Tree
from nltk.tree.prettyprinter import TreePrettyPrinter

from syntaxformer.data import load_gold_trees, preprocess_tree
from syntaxformer.decoding.spans import PRETERMINAL, brackets, spans_to_tree, to_bracketed, with_preterminals
from syntaxformer.evaluation.baselines import balanced, random_binary, right_branching
from syntaxformer.evaluation.constituency import evaluate_constituency
from syntaxformer.evaluation.protocols import PROTOCOLS, tree_constituents
from syntaxformer.parser import load_parser, tokenize
from syntaxformer.workflows.evaluate import evaluate_predictions
from syntaxformer.workflows.show import run_show

WORDS = ["The", "old", "man", "sat", "on", "the", "bench", "."]
SPANS = {(0, 3), (3, 7), (4, 7), (5, 7)}


def tree_drawing(tree: Tree) -> str:
    """What ``tree.pretty_print()`` prints (nltk's ``TreePrettyPrinter``), words on the last line."""
    return TreePrettyPrinter(tree).text()


def test_with_preterminals_puts_an_x_over_each_word():
    internal = spans_to_tree(WORDS, SPANS)
    assert to_bracketed(internal) == "(S (X The old man) (X sat (X on (X the bench))) .)"
    field = with_preterminals(internal)
    assert to_bracketed(field) == "(S (X (X The) (X old) (X man)) (X (X sat) (X (X on) (X (X the) (X bench)))) (X .))"
    assert field.leaves() == internal.leaves() == WORDS
    assert field.pos() == [(w, PRETERMINAL) for w in WORDS]
    assert brackets(field) == brackets(internal) == SPANS
    assert with_preterminals(field) == field  # a tree in the field's form is kept as it is
    assert to_bracketed(internal) == "(S (X The old man) (X sat (X on (X the bench))) .)"  # not modified
    assert tree_drawing(field).splitlines()[-1].split() == WORDS  # nltk draws the words in order
    # a one-word tree is its own preterminal; a gold tree already has one over every word
    assert with_preterminals(Tree("S", ["Yes"])) == Tree("S", ["Yes"])
    gold = Tree.fromstring("(S (NP (DT the) (NN dog)) (VP (VBD sat)))")
    assert with_preterminals(gold) == gold


def _predictions(gold_trees) -> dict[str, list[Tree]]:
    """Internal-form predictions over the gold words: binary baselines and flat trees (half the gold
    brackets, so words stand beside subtrees), one-word sentences included."""
    rng = random.Random(0)
    predictions = {}
    for name, make in (("right", right_branching), ("balanced", balanced)):
        predictions[name] = [spans_to_tree(g.leaves(), make(len(g.leaves()))) for g in gold_trees]
    predictions["random"] = [spans_to_tree(g.leaves(), random_binary(len(g.leaves()), rng)) for g in gold_trees]
    predictions["flat"] = [
        spans_to_tree(g.leaves(), {s for s in brackets(g) if rng.random() < 0.5}) for g in gold_trees
    ]
    return predictions


@pytest.fixture(scope="module")
def test_gold():
    return load_gold_trees("ptb-sample:test")


def test_every_protocol_scores_both_forms_the_same(test_gold):
    assert min(len(g.leaves()) for g in test_gold) == 1  # one-word sentences are among them
    for name, internal in _predictions(test_gold).items():
        field = [with_preterminals(t) for t in internal]
        assert any(t != f for t, f in zip(internal, field))
        assert [tree_constituents(t) for t in field] == [tree_constituents(t) for t in internal], name
        assert evaluate_constituency(field, test_gold) == evaluate_constituency(internal, test_gold), name
        for protocol in PROTOCOLS.values():
            assert protocol.score(field, test_gold) == protocol.score(internal, test_gold), (name, protocol.name)


def test_evaluate_reads_both_forms_of_a_file_the_same(ptb_gold, tmp_path):
    """``evaluate --pred`` on right-branching trees in the field's form: the numbers of the bare form
    (39.91 / 35.75 sentence / corpus F1 on ptb-sample, tests/cli/test_cli_evaluate.py), under every protocol."""
    internal = [spans_to_tree(g.leaves(), right_branching(len(g.leaves()))) for g in ptb_gold]
    for form, trees in (("internal", internal), ("field", [with_preterminals(t) for t in internal])):
        (tmp_path / f"{form}.txt").write_text("".join(to_bracketed(t) + "\n" for t in trees))
    results = {}
    for form in ("internal", "field"):
        pred = str(tmp_path / f"{form}.txt")
        one = evaluate_predictions(pred, "ptb-sample")
        every = evaluate_predictions(pred, "ptb-sample", all_protocols=True)
        results[form] = [{k: v for k, v in r.items() if k not in ("pred", "seconds")} for r in (one, every)]
    assert results["field"] == results["internal"]
    one = results["field"][0]
    assert (round(one["sentence_f1"], 2), round(one["corpus_f1"], 2)) == (39.91, 35.75)


def test_the_gold_reader_reads_both_forms_of_a_predicted_file_the_same(tmp_path):
    """``load_gold_trees`` (``--gold``, ``--treebank``) on a predicted file: a word under a preterminal
    ``X`` beside other children is a word with no tag, as a bare word is; punctuation is kept either way."""
    internal = [spans_to_tree(WORDS, SPANS), spans_to_tree(["Dogs", "bark", "!"], {(0, 2)})]
    for form, trees in (("internal", internal), ("field", [with_preterminals(t) for t in internal])):
        (tmp_path / f"{form}.txt").write_text("".join(to_bracketed(t) + "\n" for t in trees))
    read = {form: list(load_gold_trees(tmp_path / f"{form}.txt")) for form in ("internal", "field")}
    assert read["field"] == read["internal"]
    assert [to_bracketed(t) for t in read["field"]] == [
        "(S (X the old man) (X sat (X on (X the bench))) .)",
        "(S (X dogs bark) !)",
    ]
    # a gold tree's real tags are untouched
    gold = Tree.fromstring("(S (NP (DT The) (NN dog)) (. .))")
    assert to_bracketed(preprocess_tree(gold)) == "(S+NP (DT the) (NN dog))"


def test_the_parser_returns_the_field_form(tiny_model):
    parser = load_parser(tiny_model("tree-transformer"))
    text = "The old man sat on the bench."
    tree = parser.parse(text)
    tokens = tokenize(text)
    assert tree.leaves() == tokens and tree.pos() == [(t, PRETERMINAL) for t in tokens]
    assert all(len(tree[p[:-1]]) == 1 for p in tree.treepositions("leaves"))  # each word alone under its X
    assert tree_drawing(tree).splitlines()[-1].split() == tokens
    words = [t for t in tokens if t != "."]
    internal = spans_to_tree(tokens, {s for s in parser.structures([words])[0].spans(parser.options) if s != (0, 7)})
    assert tree == with_preterminals(internal)  # the decoder's tree, a preterminal over each token
    assert parser.parse_tokens([tokens])[0] == [tree]
    assert parser.parse_sents([text, "Yes"]) == [tree, Tree("S", ["Yes"])]


def test_show_draws_and_reports_the_field_form(tiny_model, tmp_path):
    folder = tiny_model("tree-transformer")
    result = run_show(tmp_path / "figs", sentences=["the old man sat on the bench"], model=folder, layers="0")
    (entry,) = result["sentences"]
    expected = load_parser(folder).parse(entry["words"])
    assert Tree.fromstring(entry["tree"]) == expected
    assert Tree.fromstring(entry["tree"]).pos() == [(w, PRETERMINAL) for w in entry["words"]]
