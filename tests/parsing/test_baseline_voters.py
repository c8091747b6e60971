"""Baseline voters as ensemble members (syntaxformer/parser.py: BaselineVoter; decoding/ensemble.py:
BASELINE_VOTERS): the right-branching voter alone, exact votes beside a parser, the ensemble.json round
trip and the one-line error for an unknown voter."""

from __future__ import annotations

import json

import pytest

from syntaxformer.cli import main
from syntaxformer.decoding.ensemble import span_votes
from syntaxformer.errors import InputError
from syntaxformer.parser import BaselineVoter, EnsembleParser, TreeParser, load_parser, read_ensemble, save_ensemble

WORDS = [["the", "old", "man", "sat", "on", "the", "bench"], ["dogs", "bark"], ["hello"]]


class _Fixed(TreeParser):
    """A member that gives the same left-branching-within-a-phrase tree for every sentence of 7 words."""

    name = "fixed"
    TREE = {(0, 7), (0, 3), (1, 3), (3, 7), (4, 7), (5, 7)}

    def word_parses(self, words):
        return [set(self.TREE) for _ in words], [None] * len(words), [None] * len(words)


def test_the_right_branching_voter_alone_gives_the_right_branching_tree():
    voter = load_parser(["right-branching"])
    assert isinstance(voter, EnsembleParser) and isinstance(voter.members[0], BaselineVoter)
    spans, heads, structures = voter.word_parses(WORDS)
    assert spans == [{(0, 7), (1, 7), (2, 7), (3, 7), (4, 7), (5, 7)}, {(0, 2)}, set()]
    assert heads == [None, None, None] and structures == [[None], [None], [None]]
    assert str(voter.parse("Dogs bark loudly .")) == "(S (X Dogs) (X (X bark) (X loudly)) (X .))"
    left = load_parser(["left-branching"]).word_parses(WORDS[:1])[0][0]
    assert left == {(0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7)}


def test_the_votes_of_a_parser_and_the_right_branching_voter():
    fixed, voter = _Fixed(), BaselineVoter("right-branching")
    member_spans = [fixed.word_parses(WORDS[:1])[0][0], voter.word_parses(WORDS[:1])[0][0]]
    votes = span_votes(member_spans, 7, [1.0, 0.5])
    # both have (3, 7), (4, 7), (5, 7); only the parser (0, 3), (1, 3); only the voter (1, 7), (2, 7)
    expected = {(3, 7): 1.5, (4, 7): 1.5, (5, 7): 1.5, (0, 3): 1.0, (1, 3): 1.0, (1, 7): 0.5, (2, 7): 0.5}
    assert {(i, j): votes[i, j] for i, j in zip(*votes.nonzero())} == expected
    # the parser outweighs the voter: its tree; the voter outweighs the parser: (1, 7), (2, 7) win over
    # (0, 3), (1, 3) where they cross
    assert EnsembleParser([fixed, voter], [1.0, 0.5]).word_parses(WORDS[:1])[0][0] == _Fixed.TREE
    heavy = EnsembleParser([fixed, voter], [1.0, 2.0]).word_parses(WORDS[:1])[0][0]
    assert heavy == {(0, 7), (1, 7), (2, 7), (3, 7), (4, 7), (5, 7)}


def test_the_ensemble_json_round_trip(tmp_path):
    save_ensemble(tmp_path / "e", ["structformer-ptb-lm", "right-branching"], [1.0, 0.5], note="n")
    record = json.loads((tmp_path / "e" / "ensemble.json").read_text())
    assert record["members"] == ["structformer-ptb-lm", "right-branching"] and record["weights"] == [1.0, 0.5]
    assert read_ensemble(tmp_path / "e") == (["structformer-ptb-lm", "right-branching"], [1.0, 0.5])
    ensemble = load_parser(tmp_path / "e")
    assert [m.name for m in ensemble.members][1] == "right-branching"
    assert ensemble.options.to_dict()["members"][1] == "right-branching"


def test_an_unknown_voter_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(InputError, match="no baseline voter named 'up-branching'"):
        BaselineVoter("up-branching")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "ensemble.json").write_text('{"members": ["right-branching", "rigth-branching"]}')
    with pytest.raises(InputError, match="member 'rigth-branching' is no folder there") as error:
        load_parser(tmp_path / "e")
    assert "right-branching, left-branching" in str(error.value) and "ensemble.json" in str(error.value)
    text = tmp_path / "in.txt"
    text.write_text("a b c\n", encoding="utf-8")
    assert main(["parse", "--input", str(text), "--model", "right-branching,rigth-branching"]) == 1
    err = capsys.readouterr().err.strip()
    assert "ensemble member rigth-branching: not a model folder" in err and "left-branching" in err
    assert len(err.splitlines()) == 1
