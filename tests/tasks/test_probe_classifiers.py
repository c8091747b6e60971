"""``syntaxformer probe --classifier mlp`` and its bag-of-words control.

A probe of the shipped parser on SentLen over 100 ptb-sample sentences with the MLP only: the report
holds the MLP's accuracies (and no logistic regression's) for every layer of the trained and untrained
encoder and for the bag-of-words control. The control's accuracies are recomputed here from the task
file the command writes (``OUT/tasks/SentLen.tsv``: index, split, label, sentence) with scikit-learn
directly (word counts over the train split's vocabulary, standardised, a 50-unit MLP for each L2
strength, the dev-best one scored on test; SentEval's protocol as the module documents it)."""

from __future__ import annotations

import json
import warnings
from collections import Counter

import numpy as np
import pytest

from syntaxformer.cli import main
from syntaxformer.parsing import load_model
from syntaxformer.pretrained import pretrained_folder
from syntaxformer.probing.features import sentence_vectors


@pytest.fixture(scope="module")
def mlp_probe(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe-mlp")
    argv = ["probe", "--task", "SentLen", "--classifier", "mlp", "--max-sentences", "100", "--out", str(out)]
    assert main([*argv, "--seed", "2", "--json"]) == 0
    return out, json.loads((out / "report.json").read_text())


def _read_task(path):
    rows = [line.split("\t") for line in path.read_text().splitlines()]
    return [r[1] for r in rows], [r[2] for r in rows], [r[3].split(" ") for r in rows]


def test_report_holds_only_the_mlp_probes(mlp_probe):
    out, report = mlp_probe
    assert report["classifiers"] == ["mlp"]
    task = report["tasks"]["SentLen"]
    layers = json.loads((pretrained_folder() / "config.json").read_text())["num_hidden_layers"]
    for encoder in ("trained", "untrained"):
        assert len(task["layers"][encoder]) == layers + 1  # the embeddings, then every layer
        for row in task["layers"][encoder]:
            assert set(row) == {"mlp"}
            assert 0 <= row["mlp"]["test"] <= 100 and row["mlp"]["strength"] in (1e-4, 1e-1)
    assert set(task["bag_of_words"]) == {"mlp"}


def sklearn_mlp_probe(features: np.ndarray, labels: np.ndarray, split: np.ndarray, seed: int) -> dict:
    """scikit-learn directly: standardise, a 50-unit MLP per L2 strength (1e-4, 0.1) on train, the
    dev-best one's test accuracy (0-100)."""
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    best = None
    for alpha in (1e-4, 1e-1):
        model = make_pipeline(
            StandardScaler(),
            MLPClassifier(hidden_layer_sizes=(50,), alpha=alpha, max_iter=200, early_stopping=True, random_state=seed),
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(features[split == "train"], labels[split == "train"])
        dev = 100 * float((model.predict(features[split == "dev"]) == labels[split == "dev"]).mean())
        if best is None or dev > best[0]:
            best = (dev, alpha, model)
    dev, alpha, model = best
    test = 100 * float((model.predict(features[split == "test"]) == labels[split == "test"]).mean())
    return {"dev": dev, "test": test, "strength": alpha}


def _expect(reported: dict, expected: dict) -> None:
    assert reported["dev"] == pytest.approx(expected["dev"]) and reported["test"] == pytest.approx(expected["test"])
    assert reported["strength"] == expected["strength"]


def test_bag_of_words_control_matches_scikit_learn_directly(mlp_probe):
    from sklearn.feature_extraction.text import CountVectorizer

    out, report = mlp_probe
    split, labels, sentences = _read_task(out / "tasks" / "SentLen.tsv")
    split, labels = np.asarray(split), np.asarray(labels)
    assert set(split) == {"train", "dev", "test"}
    vectorizer = CountVectorizer(analyzer=lambda words: words, lowercase=False)
    vectorizer.fit([s for s, part in zip(sentences, split) if part == "train"])
    counts = vectorizer.transform(sentences).toarray().astype(np.float32)
    _expect(report["tasks"]["SentLen"]["bag_of_words"]["mlp"], sklearn_mlp_probe(counts, labels, split, 2))


def test_last_layer_mlp_probe_matches_scikit_learn_on_the_same_features(mlp_probe):
    out, report = mlp_probe
    split, labels, sentences = _read_task(out / "tasks" / "SentLen.tsv")
    model, tokenizer, _ = load_model(pretrained_folder(), "cpu")
    layers, _ = sentence_vectors(model, tokenizer, sentences, 64)
    expected = sklearn_mlp_probe(layers[-1], np.asarray(labels), np.asarray(split), 2)
    _expect(report["tasks"]["SentLen"]["layers"]["trained"][-1]["mlp"], expected)


def test_majority_control_from_the_task_file(mlp_probe):
    out, report = mlp_probe
    split, labels, _ = _read_task(out / "tasks" / "SentLen.tsv")
    top = Counter(lab for lab, part in zip(labels, split) if part == "train").most_common(1)[0][0]
    for part in ("dev", "test"):
        part_labels = [lab for lab, s in zip(labels, split) if s == part]
        expected = 100 * sum(lab == top for lab in part_labels) / len(part_labels)
        assert report["tasks"]["SentLen"]["majority"][part] == pytest.approx(expected)
