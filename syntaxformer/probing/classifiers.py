"""Probing classifiers (scikit-learn): logistic regression and a one-hidden-layer MLP on frozen,
standardised features, the regularisation chosen on dev (Conneau et al., ACL 2018, SentEval's
protocol: the classifier's L2 strength is tuned on the dev split, accuracy reported on test)."""

from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

#: The L2 strengths tried: logistic regression's C (inverse strength) and the MLP's alpha.
LOGREG_C = (0.01, 0.1, 1.0, 10.0)
MLP_ALPHA = (1e-4, 1e-1)
#: The MLP's hidden units (SentEval's default nhid = 50).
MLP_HIDDEN = 50
#: The classifier kinds.
CLASSIFIERS = ("logreg", "mlp")


def _model(kind: str, strength: float, seed: int):
    from sklearn.linear_model import LogisticRegression  # optional heavy dependency, imported on use (start-up time)
    from sklearn.neural_network import MLPClassifier  # optional heavy dependency, imported on use (start-up time)
    from sklearn.pipeline import make_pipeline  # optional heavy dependency, imported on use (start-up time)
    from sklearn.preprocessing import StandardScaler  # optional heavy dependency, imported on use (start-up time)

    if kind == "logreg":
        head = LogisticRegression(C=strength, max_iter=300)
    elif kind == "mlp":
        head = MLPClassifier(
            hidden_layer_sizes=(MLP_HIDDEN,), alpha=strength, max_iter=200, early_stopping=True, random_state=seed
        )  # stops on 10% of train
    else:
        raise ValueError(f"unknown classifier {kind!r}; choose from {CLASSIFIERS}")
    return make_pipeline(StandardScaler(), head)


def probe(
    features: np.ndarray, labels: Sequence[str], split: Sequence[str], kind: str = "logreg", seed: int = 0
) -> dict:
    """Train a probe on the ``train`` rows, choose its L2 strength on ``dev``, score ``test``.

    Args:
        features: ``(S, d)`` sentence vectors (or bag-of-words counts).
        labels: the S classes (strings).
        split: the S splits (``train`` / ``dev`` / ``test``).
        kind: ``logreg`` or ``mlp``.
        seed: the MLP's initialisation and batch order.

    Returns:
        ``{"dev": accuracy, "test": accuracy, "strength": chosen C or alpha}``, accuracies in 0-100.

    Raises:
        ValueError: an unknown ``kind``, or a split with no rows.
    """
    labels, split = np.asarray(labels), np.asarray(split)
    rows = {name: split == name for name in ("train", "dev", "test")}
    if not all(r.any() for r in rows.values()):
        raise ValueError("every split (train, dev, test) needs at least one sentence")
    best = None
    for strength in LOGREG_C if kind == "logreg" else MLP_ALPHA:
        model = _model(kind, strength, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence warnings: the dev score decides
            model.fit(features[rows["train"]], labels[rows["train"]])
        dev = 100.0 * float((model.predict(features[rows["dev"]]) == labels[rows["dev"]]).mean())
        if best is None or dev > best[0]:
            best = (dev, strength, model)
    dev, strength, model = best
    test = 100.0 * float((model.predict(features[rows["test"]]) == labels[rows["test"]]).mean())
    return {"dev": dev, "test": test, "strength": strength}


def majority(labels: Sequence[str], split: Sequence[str]) -> dict:
    """The majority-class control: the train split's most frequent class, its dev and test
    accuracies (0-100) and the class."""
    labels, split = np.asarray(labels), np.asarray(split)
    values, counts = np.unique(labels[split == "train"], return_counts=True)
    top = values[counts.argmax()]
    return {
        "dev": 100.0 * float((labels[split == "dev"] == top).mean()),
        "test": 100.0 * float((labels[split == "test"] == top).mean()),
        "class": str(top),
    }


def bag_of_words(sentences: Sequence[Sequence[str]], split: Sequence[str]) -> np.ndarray:
    """Word-count vectors ``(S, V)`` over the train split's vocabulary (the bag-of-words control;
    scikit-learn's CountVectorizer, words as given)."""
    from sklearn.feature_extraction.text import (
        CountVectorizer,  # optional heavy dependency, imported on use (start-up time)
    )

    vectorizer = CountVectorizer(analyzer=lambda words: list(words), lowercase=False)
    vectorizer.fit([s for s, part in zip(sentences, split) if part == "train"])
    return vectorizer.transform(list(sentences)).toarray().astype(np.float32)
