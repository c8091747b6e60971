"""The translation model shipped in the package (``multi30k-en-de``): it translates raw text from standard
input with no --model, the command and the Python call agree, and its float16 weights give the test BLEU
its card states."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import torch

from syntaxformer.cli import main
from syntaxformer.tasks.translator import load_translator, translation_folder

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[2]

SENTENCES = ["A man in a blue shirt is riding a bike.", "Two dogs are playing in the snow."]


@pytest.fixture(scope="module")
def shipped():
    return load_translator(device="cpu", beam=5)


def test_translate_two_sentences_with_the_shipped_model(shipped, capsys, monkeypatch):
    """``syntaxformer translate`` without --model reads raw English, one sentence a line, and prints one
    German translation a line: the Python call's, word for word."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(SENTENCES) + "\n"))
    assert main(["translate", "--input", "-", "--threads", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == shipped.translate(SENTENCES)
    assert len(lines) == 2 and all(lines)
    assert "mann" in lines[0].split() and "hunde" in lines[1].split()  # the model writes lower case


def test_the_shipped_card_names_its_data_licence_and_scores():
    """The card states the licence and exactly the test scores of the shipping record the results page
    reads (records/translation/shipped.json)."""
    card = json.loads((translation_folder("multi30k-en-de") / "card.json").read_text())
    record = json.loads((ROOT / "records" / "translation" / "shipped.json").read_text())
    assert "non-commercial" in card["licence"]
    assert set(card["scores"]) == {"test_2016_flickr", "test_2017_flickr"} == set(record["tests"])
    for test, scores in card["scores"].items():
        assert scores["bleu_tokenized"] == record["tests"][test]["bleu_tokenized"]["bleu"]
        assert scores["sacrebleu"] == record["tests"][test]["sacrebleu"]["bleu"]
    assert not str(card["reproduce"]["out"]).startswith("/"), "the card's paths are the repository's, not a machine's"


@pytest.mark.slow
def test_the_shipped_model_reproduces_its_test_bleu(shipped, shared_data):
    """The float16 weights, read back as float32, give test_2016_flickr's tokenised BLEU of the float32
    run's card to 0.3 (rounding the weights may change a few beam choices)."""
    from syntaxformer.workflows.translation import score_translations

    tok = shared_data / "multi30k" / "tok"
    card = json.loads((translation_folder("multi30k-en-de") / "card.json").read_text())
    report = score_translations(
        shipped, tok / "test_2016_flickr.lc.norm.tok.en", tok / "test_2016_flickr.lc.norm.tok.de"
    )
    assert report["bleu_tokenized"]["bleu"] == pytest.approx(
        card["scores"]["test_2016_flickr"]["bleu_tokenized"], abs=0.3
    )
