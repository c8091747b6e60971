"""Structure-free baselines: branching trees, random and balanced binary trees, dependency chains.

Every binary tree here is decoded by the one top-down decoder,
:func:`syntaxformer.decoding.spans.split_by_distance`, from syntactic distances that encode the
baseline (larger distance = split earlier):

- **right-branching** ``((w1 (w2 (w3 ...))))``: distances decrease left to right, ``d[k] = n - 1 - k``;
- **left-branching** ``((((w1 w2) w3) ...))``: distances increase, ``d[k] = k``;
- **balanced**: every span ``[i, j)`` splits at ``m = i + (j - i) // 2`` (for an odd length the extra
  word goes to the right half), encoded as ``d[m - 1] = -level``;
- **random binary tree**: ``n - 1`` i.i.d. uniform distances, split top-down at the largest. The split
  point of each span is then uniform over its gaps, and the two halves are independent random trees
  (the "random split" / random-BST distribution — *not* uniform over all binary trees).

A binary-tree baseline returns the span set of :func:`split_by_distance`: every internal node, the
whole sentence ``(0, n)`` included, single words not listed; ``set()`` for ``n < 2``.

Dependency chains (heads 1-based, 0 = root, as CoNLL-U):

- **right chain**: every word is headed by the word on its left, the first word is the root
  (``heads = [0, 1, 2, ..., n - 1]``; the dependency analogue of right-branching);
- **left chain**: every word is headed by the word on its right, the last word is the root
  (``heads = [2, 3, ..., n, 0]``).

Chains are built over the punctuation-free words (what the models see) and scored by
:func:`syntaxformer.evaluation.dependency.evaluate_dependency`.
"""

from __future__ import annotations

import logging
import random
import statistics
from collections.abc import Callable, Sequence

from nltk import Tree

from syntaxformer.data.dependency import DependencySentence
from syntaxformer.decoding.spans import Span, left_branching, right_branching, spans_to_tree, split_by_distance
from syntaxformer.evaluation.constituency import GoldBrackets, read_gold_brackets, score_brackets
from syntaxformer.evaluation.dependency import evaluate_dependency
from syntaxformer.evaluation.protocols import constituents_from_spans, tree_constituents

logger = logging.getLogger(__name__)

#: The seeds of the random-tree baseline (mean and standard deviation are reported over them).
DEFAULT_SEEDS = (0, 1, 2, 3, 4)

#: Scalar constituency scores averaged over the random baseline's seeds.
_SCORES = ("sentence_f1", "corpus_f1", "wsj10_sentence_f1", "wsj10_corpus_f1", "mean_depth")


def balanced_distances(n: int) -> list[float]:
    """Distances whose top-down split is the balanced binary tree (split ``[i, j)`` at
    ``i + (j - i) // 2``): the gap before the split point gets ``-level`` of its span."""
    distances = [0.0] * max(n - 1, 0)
    stack = [(0, n, 0)]
    while stack:
        i, j, level = stack.pop()
        if j - i < 2:
            continue
        m = i + (j - i) // 2
        distances[m - 1] = -level
        stack.append((i, m, level + 1))
        stack.append((m, j, level + 1))
    return distances


def balanced(n: int) -> set[Span]:
    """Spans of the balanced binary tree over ``n`` words (see :func:`balanced_distances`)."""
    return split_by_distance(balanced_distances(n)) if n >= 2 else set()


def random_binary(n: int, rng: random.Random) -> set[Span]:
    """Spans of a random binary tree over ``n`` words: top-down split at the largest of ``n - 1``
    i.i.d. uniform distances drawn from ``rng`` (anything with ``.random()``), i.e. a uniform split
    point in every span. Draws ``n - 1`` numbers (none for ``n < 2``)."""
    return split_by_distance([rng.random() for _ in range(n - 1)]) if n >= 2 else set()


def right_chain(n: int) -> list[int]:
    """Heads (1-based, 0 = root) of the right chain: word ``i`` headed by word ``i - 1``, the first
    word is the root."""
    return list(range(n))


def left_chain(n: int) -> list[int]:
    """Heads (1-based, 0 = root) of the left chain: word ``i`` headed by word ``i + 1``, the last word
    is the root."""
    return [i + 2 for i in range(n - 1)] + [0] if n else []


def baseline_trees(gold_trees: Sequence[Tree], make_spans: Callable[[int], set[Span]]) -> list[Tree]:
    """Trees over the words of ``gold_trees`` whose constituents are ``make_spans(n)``."""
    return [spans_to_tree(tree.leaves(), make_spans(len(tree.leaves()))) for tree in gold_trees]


def _mean_std(results: list[dict], keys: Sequence[str] | None = _SCORES) -> dict:
    """Mean of every score of ``results`` (label recall per label too, when present) plus their
    sample standard deviations under ``"std"`` (ddof = 1). ``keys``: the scalar scores averaged
    (None: every int or float value of ``results[0]``)."""
    out = dict(results[0])
    std = {}
    if keys is None:
        keys = [k for k, v in results[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    for key in keys:
        values = [r[key] for r in results]
        out[key] = statistics.fmean(values)
        std[key] = statistics.stdev(values) if len(values) > 1 else 0.0
    if "label_recall" not in results[0]:
        out["std"] = std
        return out
    recall, recall_std = {}, {}
    for label, first in results[0]["label_recall"].items():
        values = [r["label_recall"][label] for r in results]
        if first is None:
            recall[label] = recall_std[label] = None
        else:
            recall[label] = statistics.fmean(values)
            recall_std[label] = statistics.stdev(values) if len(values) > 1 else 0.0
    out["label_recall"] = recall
    std["label_recall"] = recall_std
    out["std"] = std
    return out


def run_baselines(
    gold_trees: Sequence[Tree],
    seeds: Sequence[int] = DEFAULT_SEEDS,
    gold_dependencies: Sequence | None = None,
    protocol=None,
    read: Sequence[GoldBrackets] | None = None,
) -> dict:
    """Score every baseline against preprocessed gold trees (and gold dependencies, if given).

    Args:
        gold_trees: gold trees after the field's preprocessing.
        seeds: seeds of the random baseline; seed ``s`` drives one ``random.Random(s)`` over the
            sentences in order.
        gold_dependencies: gold ``DependencySentence`` objects (punctuation marked), or ``None``.
        protocol: a :class:`~syntaxformer.evaluation.protocols.Protocol` to score the trees with;
            ``None`` (default): the ``prpn`` numbers of
            :func:`~syntaxformer.evaluation.constituency.evaluate_constituency`.
        read: the gold trees' :func:`~syntaxformer.evaluation.constituency.read_gold_brackets`, where
            the caller has them (``prpn`` only; default: read here).

    Returns:
        ``{"left_branching", "right_branching", "balanced"}``: each the dict of
        :func:`~syntaxformer.evaluation.constituency.evaluate_constituency` (or of the protocol);
        ``"random"``: the same keys holding the means over seeds, plus ``"std"`` (sample standard
        deviations, ddof 1, of the same scores: the scalar scores of ``evaluate_constituency``, or
        every number of the protocol's dict), ``"per_seed"`` (one such dict per seed) and
        ``"seeds"``; and, when ``gold_dependencies`` is given,
        ``"dependency": {"left_chain", "right_chain"}``, each the dict of
        :func:`syntaxformer.evaluation.dependency.evaluate_dependency`.
    """
    lengths = [len(tree.leaves()) for tree in gold_trees]
    if protocol is None:
        read = read_gold_brackets(gold_trees) if read is None else read  # once for every baseline and seed

        def score(make_spans):  # the spans are over the gold words: no word check needed
            return score_brackets([make_spans(n) for n in lengths], read)
    else:
        gold_read = [tree_constituents(tree) for tree in gold_trees]

        def score(make_spans):
            pred = [constituents_from_spans(n, make_spans(n)) for n in lengths]
            return protocol.score_constituents(pred, gold_read, gold_trees)

    results = {
        "left_branching": score(left_branching),
        "right_branching": score(right_branching),
    }
    per_seed = []
    for seed in seeds:
        rng = random.Random(seed)
        per_seed.append(score(lambda n: random_binary(n, rng)))
    keys = _SCORES if protocol is None else None
    results["random"] = {**_mean_std(per_seed, keys), "per_seed": per_seed, "seeds": list(seeds)}
    results["balanced"] = score(balanced)
    if gold_dependencies is not None:
        results["dependency"] = {
            "left_chain": _score_chain(gold_dependencies, left_chain),
            "right_chain": _score_chain(gold_dependencies, right_chain),
        }
    return results


def _score_chain(gold_dependencies: Sequence, make_heads: Callable[[int], list[int]]) -> dict:
    """Score a chain built over each gold sentence's non-punctuation words."""

    predictions = []
    for gold in gold_dependencies:
        keep = [i for i, is_punct in enumerate(gold.punct) if not is_punct]
        words = tuple(gold.words[i] for i in keep)
        tags = tuple(gold.tags[i] for i in keep)
        predictions.append(DependencySentence(words, tags, tuple(make_heads(len(words))), (False,) * len(words)))
    return evaluate_dependency(predictions, gold_dependencies)
