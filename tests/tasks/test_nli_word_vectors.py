"""``syntaxformer nli vectors`` then ``nli train --word-vectors``, on a fresh clone.

word2vec vectors are trained on the project's own text (the words of the embedded ptb-sample's dev
trees, written to a file), then a tiny Gaussian Transformer is trained on a JSON-lines file of pairs
the test writes (the format :mod:`syntaxformer.data.pairs` reads). The saved model's embedding row of
every vocabulary word with a vector equals that word's row of the vectors file (read with gensim
directly) when frozen (the default); with ``--set freeze_word_embeddings=false`` the rows move."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file
from transformers import AutoTokenizer

from syntaxformer.cli import main
from syntaxformer.data.preprocess import load_gold_trees

#: (premise, hypothesis, label) built from ptb-sample words, 36 pairs (12 per label)
SUBJECTS = ["the company", "the market", "the president", "the bank", "the government", "the group"]
PAIRS = (
    [(f"{s} said it would sell shares", f"{s} said it would sell", "entailment") for s in SUBJECTS]
    + [(f"{s} rose in the year", f"{s} rose", "entailment") for s in SUBJECTS]
    + [(f"{s} said it would sell shares", f"{s} said it would not sell shares", "contradiction") for s in SUBJECTS]
    + [(f"{s} rose in the year", f"{s} fell in the year", "contradiction") for s in SUBJECTS]
    + [(f"{s} said it would sell shares", f"{s} sold shares last year", "neutral") for s in SUBJECTS]
    + [(f"{s} rose in the year", f"{s} rose because of the market", "neutral") for s in SUBJECTS]
)


def write_pairs(path: Path, pairs) -> Path:
    path.write_text("".join(json.dumps(dict(premise=p, hypothesis=h, label=lab)) + "\n" for p, h, lab in pairs))
    return path


@pytest.fixture(scope="module")
def vectors(tmp_path_factory):
    """``nli vectors`` on 300 sentences of ptb-sample:dev (dim 16, min count 3, 2 epochs)."""
    folder = tmp_path_factory.mktemp("vectors")
    text = folder / "ptb-sample-dev.txt"
    text.write_text("".join(" ".join(tree.leaves()) + "\n" for tree in load_gold_trees("ptb-sample:dev")[:300]))
    out = folder / "w2v.kv"
    argv = ["nli", "vectors", "--corpus", str(text), "--out", str(out), "--dim", "16", "--min-count", "3"]
    assert main([*argv, "--epochs", "2", "--seed", "5", "--json"]) == 0
    return text, out


def _train(data: Path, out: Path, vectors: Path, *extra: str) -> int:
    argv = ["nli", "train", "--corpus", str(data), "--recipe", "tiny", "--word-vectors", str(vectors)]
    argv += ["--max-steps", "4", "--batch-size", "4", "--lr", "0.01", "--out", str(out), "--seed", "2"]
    return main([*argv, "--device", "cpu", "--threads", "1", "--quiet", "--json", *extra])


def _embedding_rows(folder: Path) -> np.ndarray:
    (key,) = [k for k in load_file(folder / "model.safetensors") if k.endswith("word_embeddings.weight")]
    return load_file(folder / "model.safetensors")[key].float().numpy()


def test_vectors_command_trains_word2vec_on_the_text(vectors, capsys):
    from gensim.models import KeyedVectors

    text, out = vectors
    kv = KeyedVectors.load(str(out))
    words = text.read_text().lower().split()  # the text is lower-cased (word2vec_sentences)
    counts = {w: words.count(w) for w in set(words)}
    # min count 3: exactly the words seen at least 3 times (ptb-sample's number token N becomes n)
    assert set(kv.index_to_key) == {w for w, c in counts.items() if c >= 3}
    assert kv.vectors.shape == (len(kv.index_to_key), 16)


def test_frozen_vectors_are_the_models_embedding_rows(vectors, tmp_path, capsys):
    from gensim.models import KeyedVectors

    _, path = vectors
    kv = KeyedVectors.load(str(path))
    data = write_pairs(tmp_path / "pairs.jsonl", PAIRS)
    capsys.readouterr()
    assert _train(data, tmp_path / "run", path) == 0
    report = json.loads(capsys.readouterr().out)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "run")
    vocab = tokenizer.get_vocab()
    with_vector = [w for w in vocab if w in kv.key_to_index]
    # every vector word is in the vocabulary (the run adds them), and the training words too
    assert set(kv.index_to_key) <= set(vocab)
    assert {"company", "shares", "said", "market"} <= set(with_vector)
    recorded = report["word_vectors"]
    assert recorded["frozen"] is True and recorded["path"] == str(path)
    assert recorded["with_vector"] == len(with_vector) and recorded["vocabulary"] == len(vocab)
    assert report["steps"] == 4
    for folder in (tmp_path / "run", tmp_path / "run" / "best"):
        rows = _embedding_rows(folder)
        ids = [vocab[w] for w in with_vector]
        np.testing.assert_array_equal(rows[ids], np.stack([kv[w] for w in with_vector]))


def test_unfrozen_vectors_start_there_and_move(vectors, tmp_path, capsys):
    from gensim.models import KeyedVectors

    _, path = vectors
    kv = KeyedVectors.load(str(path))
    data = write_pairs(tmp_path / "pairs.jsonl", PAIRS)
    capsys.readouterr()
    assert _train(data, tmp_path / "run", path, "--set", "freeze_word_embeddings=false") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["word_vectors"]["frozen"] is False
    vocab = AutoTokenizer.from_pretrained(tmp_path / "run").get_vocab()
    rows = _embedding_rows(tmp_path / "run")
    seen = ["company", "shares", "said", "market"]  # in the training pairs: their rows get gradients
    unseen = [w for w in kv.index_to_key if w in vocab and w not in " ".join(p + " " + h for p, h, _ in PAIRS).split()]
    assert all(not np.array_equal(rows[vocab[w]], kv[w]) for w in seen)
    # words in no training pair get no gradient; Adam without weight decay leaves them where they started
    assert unseen and all(np.array_equal(rows[vocab[w]], kv[w]) for w in unseen[:50])
