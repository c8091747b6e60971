"""Classification scores (natural-language inference, DESIGN.md §6): accuracy, per-class precision
and recall, the confusion matrix. Percentages (0-100), as every report of the project."""

from __future__ import annotations

from collections.abc import Sequence

from syntaxformer.evaluation.constituency import harmonic_f1


def confusion_matrix(gold: Sequence[int], predicted: Sequence[int], n_classes: int) -> list[list[int]]:
    """``m[g][p]`` = pairs of gold class ``g`` predicted as ``p`` (rows gold, columns predicted).

    Raises:
        ValueError: sequences of different lengths, or a class id outside ``0 .. n_classes-1``.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    m = [[0] * n_classes for _ in range(n_classes)]
    for g, p in zip(gold, predicted):
        if not (0 <= g < n_classes and 0 <= p < n_classes):
            raise ValueError(f"class id out of range: gold {g}, predicted {p}")
        m[g][p] += 1
    return m


def classification_scores(gold: Sequence[int], predicted: Sequence[int], labels: Sequence[str]) -> dict:
    """Accuracy, per-class precision / recall / F1 and the confusion matrix.

    Args:
        gold, predicted: class ids (indices into ``labels``), one per item.
        labels: class names.
    Returns:
        ``{"n", "accuracy", "per_class": {label: {"precision", "recall", "f1", "support",
        "predicted"}}, "macro_f1", "confusion": {"labels", "matrix"}}``; scores in 0-100, None where
        undefined (precision of a class never predicted, recall of a class absent from gold).
    Raises:
        ValueError: as :func:`confusion_matrix`, or no item.
    """
    if not gold:
        raise ValueError("no item to score")
    k = len(labels)
    m = confusion_matrix(gold, predicted, k)
    per_class = {}
    for c, name in enumerate(labels):
        tp, support, n_pred = m[c][c], sum(m[c]), sum(m[g][c] for g in range(k))
        precision = 100.0 * tp / n_pred if n_pred else None
        recall = 100.0 * tp / support if support else None
        f1 = harmonic_f1(precision, recall) if precision is not None and recall is not None else None
        per_class[name] = dict(precision=precision, recall=recall, f1=f1, support=support, predicted=n_pred)
    f1s = [v["f1"] for v in per_class.values() if v["f1"] is not None]
    return dict(
        n=len(gold),
        accuracy=100.0 * sum(m[c][c] for c in range(k)) / len(gold),
        per_class=per_class,
        macro_f1=sum(f1s) / len(f1s) if f1s else None,
        confusion=dict(labels=list(labels), matrix=m),
    )


def majority_class_scores(train_labels: Sequence[int], gold: Sequence[int], labels: Sequence[str]) -> dict:
    """:func:`classification_scores` of always predicting the most frequent training class (ties:
    the lowest id), with ``"class"`` naming it."""
    counts = [list(train_labels).count(c) for c in range(len(labels))]
    majority = counts.index(max(counts))
    return dict(classification_scores(gold, [majority] * len(gold), labels), **{"class": labels[majority]})


__all__ = ["confusion_matrix", "classification_scores", "majority_class_scores"]
