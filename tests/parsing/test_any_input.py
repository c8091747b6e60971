"""Every shipped parser takes a sentence of any length (a PCFG: up to its longest, then a one-line error),
and no text input or decoder option reaches the user as a traceback: from the command line a one-line
error and status 1, from Python an InputError."""

from __future__ import annotations

import random

import pytest

from syntaxformer.cli import main
from syntaxformer.decoding.spans import brackets
from syntaxformer.errors import InputError
from syntaxformer.parser import load_parser
from syntaxformer.pretrained import ENSEMBLES, SHIPPED

WORDS = "the old man sat on the bench and the dog barked at a cat while it rained in new york".split()


def long_sentence(n: int = 2000) -> list[str]:
    rng = random.Random(0)
    return [rng.choice(WORDS) for _ in range(n)]


@pytest.mark.slow  # ~60 s on 2 CPU cores: the parsers and the ensemble on 2,000 words
@pytest.mark.parametrize("name", [*SHIPPED, *ENSEMBLES])
def test_every_shipped_parser_parses_2000_words(name):
    """The ensemble too: its PCFG member abstains (DESIGN.md §9), the others vote."""
    parser = load_parser(name)
    tokens = long_sentence()
    if parser.max_words is not None:  # a PCFG: its chart's time is cubic in the length
        with pytest.raises(InputError, match=f"a sentence of 2000 words; this parser takes at most {parser.max_words}"):
            parser.parse_tokens([tokens])
        tokens = tokens[: parser.max_words // 3]
    (tree,), heads, _ = parser.parse_tokens([tokens])
    assert tree.leaves() == tokens
    assert 1 <= len(brackets(tree)) <= len(tokens) - 2  # constituents inside the sentence, at most a binary tree's
    if heads is not None:  # the StructFormer: one head per word, one root
        assert len(heads[0]) == 2000 and heads[0].count(0) >= 1


def test_the_structformer_parse_does_not_read_positions():
    """The StructFormer's structure comes from its parse stage, before the Transformer layers and their
    500 learned positions: the first words of a 600-word sentence get the distances they get alone
    when the window of its convolutions does not reach past them, up to the one constant that the
    calibration (appendix A.2) subtracts from a sentence's distances."""
    parser = load_parser("structformer-ptb-lm")
    tokens = long_sentence(600)
    whole = parser.structures([tokens])[0].distances
    assert whole.shape == (599,)
    head = parser.structures([tokens[:100]])[0].distances
    # the parse network's two convolutions of window 9 and the gap's window 2: 9 words to the right
    assert whole[:80] - whole[0] == pytest.approx(head[:80] - head[0], abs=1e-5)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"abc \xff\xfe def\n", "in.txt:1: not UTF-8 text"),
        (b"\n\n   \n", "no sentences found"),
        (b"the cat\n(( ))\n", "in.txt:2: nothing to parse: the sentence is only punctuation"),
    ],
)
def test_bad_text_is_a_one_line_error(tmp_path, capsys, content, message):
    path = tmp_path / "in.txt"
    path.write_bytes(content)
    assert main(["parse", "--input", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_blank_lines_keep_their_place(tmp_path, capsys):
    path = tmp_path / "in.txt"
    path.write_bytes(b"the cat sat\n\n\xef\xbb\xbfdogs bark\r\n")
    assert main(["parse", "--input", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "()"


@pytest.mark.parametrize(
    "options, message",
    [
        (["--threshold", "7"], "--threshold 7.0 is out of range (a probability in [0, 1])"),
        (["--threshold", "-3"], "--threshold -3.0 is out of range"),
        (["--threshold", "nan"], "--threshold nan is out of range"),
        (["--layer", "-1"], "--layer -1 is out of range"),
        (["--min-layer", "-2"], "--min-layer -2 is out of range"),
        (["--layer", "6"], "--layer 6 out of range: the model has 6 layers"),
        (["--min-layer", "6"], "--min-layer 6 out of range"),
    ],
)
def test_decoder_options_are_checked_where_they_enter(tmp_path, capsys, options, message):
    path = tmp_path / "in.txt"
    path.write_text("the old man sat\n", encoding="utf-8")
    assert main(["parse", "--input", str(path), "--model", "tree-transformer-ptb-lm", *options]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_python_inputs_are_input_errors():
    parser = load_parser("structformer-ptb-lm")
    for sentence, message in [
        ("\ud800x", "lone surrogate"),
        (["a", "\udcffb"], "lone surrogate"),
        (b"abc", "got bytes"),
        ("  ", "the sentence is empty"),
    ]:
        with pytest.raises(InputError, match=message):
            parser.parse(sentence)
    with pytest.raises(InputError, match="out of range"):
        load_parser("structformer-ptb-lm", {"threshold": 1.5})
