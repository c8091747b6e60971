"""``syntaxformer train --tokenizer wordpiece`` and ``--tokenizer RUN_DIR`` through the trainer:
the first run learns and saves a WordPiece vocabulary; the second, on other text, reuses that
tokenizer exactly (the same vocabulary file contents, the same ids for the same text), as retraining
WordPiece is not reproducible between processes (huggingface/tokenizers#1794)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from syntaxformer.cli import main
from syntaxformer.data.corpus import load_corpus

VOCAB = 300


def _train(corpus: Path, out: Path, tokenizer: str) -> None:
    argv = ["train", "--corpus", str(corpus), "--out", str(out), "--tokenizer", tokenizer, "--preset", "tiny"]
    argv += ["--wordpiece-vocab-size", str(VOCAB), "--max-steps", "2", "--batch-size", "8", "--save-every", "2"]
    assert main([*argv, "--eval-every", "0", "--seed", "3", "--threads", "1", "--quiet"]) == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run A: wordpiece on sentences 0-149 of ptb-sample:dev; run B: ``--tokenizer A`` on 150-299."""
    folder = tmp_path_factory.mktemp("tokenizer-runs")
    sentences = load_corpus("ptb-sample:dev")
    first, second = folder / "first.txt", folder / "second.txt"
    first.write_text("\n".join(" ".join(s) for s in sentences[:150]) + "\n")
    second.write_text("\n".join(" ".join(s) for s in sentences[150:300]) + "\n")
    _train(first, folder / "a", "wordpiece")
    _train(second, folder / "b", str(folder / "a"))
    return folder, sentences[:300]


def _vocab(run: Path) -> dict:
    return json.loads((run / "tokenizer.json").read_text())["model"]["vocab"]


def test_wordpiece_run_learns_pieces_within_words(runs):
    folder, sentences = runs
    vocab = _vocab(folder / "a")
    assert json.loads((folder / "a" / "tokenizer.json").read_text())["model"]["type"] == "WordPiece"
    assert len(vocab) <= VOCAB and any(piece.startswith("##") for piece in vocab)
    config = json.loads((folder / "a" / "config.json").read_text())
    assert config["vocab_size"] == len(vocab)
    tokenizer = AutoTokenizer.from_pretrained(folder / "a")
    for words in sentences[:150]:
        for word in words:
            pieces = tokenizer.tokenize(word)
            if tokenizer.unk_token in pieces:
                continue
            # WordPiece: a word is its first piece plus '##'-continuations, concatenated back to the word
            assert not pieces[0].startswith("##") and all(p.startswith("##") for p in pieces[1:])
            assert pieces[0] + "".join(p[2:] for p in pieces[1:]) == word


def test_run_dir_tokenizer_is_reused_exactly(runs):
    folder, sentences = runs
    assert _vocab(folder / "b") == _vocab(folder / "a")
    assert (folder / "b" / "tokenizer.json").read_text() == (folder / "a" / "tokenizer.json").read_text()
    a = AutoTokenizer.from_pretrained(folder / "a")
    b = AutoTokenizer.from_pretrained(folder / "b")
    text = [" ".join(words) for words in sentences[150:300]]
    assert a(text)["input_ids"] == b(text)["input_ids"]
    config = json.loads((folder / "b" / "config.json").read_text())
    assert config["vocab_size"] == len(_vocab(folder / "a"))
    record = json.loads((folder / "b" / "training.json").read_text())
    assert record["steps"] == 2
    assert record["tokenizer"]["kind"] == str(folder / "a")  # the tokenizer's source is recorded
    assert record["tokenizer"]["vocab_size"] == len(_vocab(folder / "a"))
    assert json.loads((folder / "a" / "training.json").read_text())["tokenizer"]["kind"] == "wordpiece"
