"""The one-call parser (``syntaxformer.load_parser`` / ``Parser.parse`` / ``syntaxformer.parse``)."""

from __future__ import annotations

import io
import json
import sys

import pytest
import torch
from nltk import Tree

import syntaxformer
from syntaxformer.cli import main
from syntaxformer.data.treebank import parse_bracketed
from syntaxformer.decoding.spans import spans_to_tree, with_preterminals
from syntaxformer.errors import InputError
from syntaxformer.parser import is_punctuation, load_parser, tokenize
from syntaxformer.parsing import decode, load_model, model_structures
from syntaxformer.structures import DecoderOptions, save_decoder_options

torch.set_num_threads(1)

SENTENCE = 'He said, "I can\'t pay $3.50 (or 10%) today."'


def test_tokenize_keeps_the_text_and_finds_punctuation():
    tokens = tokenize(SENTENCE)
    assert tokens == [
        "He",
        "said",
        ",",
        '"',
        "I",
        "ca",
        "n't",
        "pay",
        "$",
        "3.50",
        "(",
        "or",
        "10",
        "%",
        ")",
        "today",
        ".",
        '"',
    ]
    assert [t for t in tokens if is_punctuation(t)] == [",", '"', "$", "(", ")", ".", '"']


@pytest.fixture(scope="module")
def shipped():
    return load_parser()


def test_shipped_parser_equals_the_cli_and_the_decoder(shipped, capsys, monkeypatch, tmp_path):
    tree = shipped.parse("The old man sat on the bench.")
    assert tree.leaves() == ["The", "old", "man", "sat", "on", "the", "bench", "."]
    folder = syntaxformer.pretrained.pretrained_folder()
    saved = DecoderOptions.from_dict(json.loads((folder / "report.json").read_text())["decoder"])
    assert shipped.options == saved  # the shipped report's decoder
    # the same tree as the three-call path on the words (punctuation removed, the saved decoder) ...
    model, tokenizer, _ = load_model(folder)
    words = ["The", "old", "man", "sat", "on", "the", "bench"]
    expected, _ = decode(model_structures(model, tokenizer, [words]), saved)
    assert Tree.fromstring(str(tree)).leaves()[:-1] == expected[0].leaves()
    without_period = Tree(tree.label(), [child for child in tree if child != Tree("X", ["."])])
    assert without_period == with_preterminals(expected[0])
    # ... as syntaxformer.parse and as the command line on raw text
    assert syntaxformer.parse("The old man sat on the bench.") == tree
    monkeypatch.setattr(sys, "stdin", io.StringIO("The old man sat on the bench.\n"))
    assert main(["parse", "--input", "-", "--tokenize", "treebank", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    cli = parse_bracketed((tmp_path / "trees.txt").read_text(), "trees.txt")
    assert cli == [tree]


def test_punctuation_joins_the_smallest_constituent_around_it(tiny_model):
    """The tree over the tokens is the tree of the words with each punctuation token inside the
    smallest constituent containing its two neighbours (at the root at the edges)."""
    parser = load_parser(tiny_model("tree-transformer"), DecoderOptions(min_layer=0))
    tokens = tokenize(SENTENCE)
    tree = parser.parse(tokens)
    assert tree.leaves() == tokens
    kept = [i for i, t in enumerate(tokens) if not is_punctuation(t)]
    words = [tokens[i] for i in kept]
    word_spans = parser.structures([words])[0].spans(parser.options)
    expected = {(kept[i], kept[j - 1] + 1) for i, j in word_spans if (i, j) != (0, len(words))}
    assert tree == with_preterminals(spans_to_tree(tokens, expected))
    # the sentence-final quote and period are children of the root, the comma is not at the edge
    assert tree[-1] == Tree("X", ['"']) and tree[-2] == Tree("X", ["."])
    assert parser.parse_sents([SENTENCE, "Yes"]) == [parser.parse(SENTENCE), Tree("S", ["Yes"])]


def test_structformer_gives_dependencies_as_conllu(tiny_model):
    folder = tiny_model("structformer")
    parser = load_parser(folder)
    assert parser.gives_dependencies
    (rows,) = parser.parse_dependencies(["The cat sat ."])
    model, tokenizer, _ = load_model(folder)
    heads = model_structures(model, tokenizer, [["The", "cat", "sat"]])[0].heads(DecoderOptions())
    assert [r["form"] for r in rows] == ["The", "cat", "sat", "."]
    assert [r["head"] for r in rows[:3]] == heads
    root = heads.index(0) + 1
    assert rows[3]["head"] == root and rows[3]["deprel"] == "punct"
    assert rows.serialize().count("\n") == 5  # four rows, the blank line
    with pytest.raises(InputError, match="no dependency heads"):
        load_parser(tiny_model("tree-transformer")).parse_dependencies(["The cat sat"])


def test_saved_decoder_settings_are_the_parsers(tiny_model, tmp_path):
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(tiny_model("tree-transformer"), folder)
    save_decoder_options(folder, DecoderOptions(min_layer=1, threshold=0.7))
    assert load_parser(folder).options == DecoderOptions(min_layer=1, threshold=0.7)
    assert load_parser(folder, {"layer": 0}).options == DecoderOptions(layer=0, threshold=0.7)


@pytest.mark.parametrize(
    "bad, message",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("... !", "only punctuation"),
        (3, "got int"),
        (["a", None], "got list"),
    ],
)
def test_bad_input_is_a_value_error_naming_it(shipped, bad, message):
    with pytest.raises(ValueError, match=message):
        shipped.parse(bad)
    with pytest.raises(InputError, match="list of sentences"):
        shipped.parse_sents("a string")


def test_a_model_that_induces_nothing_is_refused_at_load(tmp_path):
    from syntaxformer.models import MODELS, make_config

    config = make_config("tree-transformer", "tiny", 10, prior="none")
    MODELS["tree-transformer"](config).save_pretrained(tmp_path)
    from syntaxformer.data.tokenization import build_word_tokenizer, save_tokenizer

    save_tokenizer(build_word_tokenizer([["the", "cat", "sat"]]), tmp_path)
    with pytest.raises(InputError, match="induces no structure"):
        load_parser(tmp_path)
