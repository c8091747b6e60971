"""Score prediction files against gold (``syntaxformer evaluate``).

Constituency: bracketed trees, one per line, leaves = words (punctuation-free, as the preprocessed
gold), aligned with the gold sentences by order. Dependency: a ``.conllu`` prediction, scored against
``ptb-sample``'s dependency trees, a ``.conllu`` file or ``.dp`` files. Protocols:
:mod:`syntaxformer.evaluation.constituency`, :mod:`syntaxformer.evaluation.dependency`.
"""
from __future__ import annotations

import time
from pathlib import Path

from syntaxformer.errors import InputError


def _with_path(error: InputError, path: str) -> InputError:
    """``error`` with the prediction file named, when it does not name a file already."""
    return error if error.path is not None else InputError(str(error), path=path)


def run_constituency(pred_path: str, gold: str) -> dict:
    """Read, preprocess and score predicted trees.

    Args:
        pred_path: bracketed trees, one per line.
        gold: ``'ptb-sample'`` (or a half) or a treebank path.

    Returns:
        :func:`~syntaxformer.evaluation.constituency.evaluate_constituency`'s dict plus ``task``
        (``"constituency"``) and ``gold_skipped`` (gold sentences the preprocessing left out).

    Raises:
        InputError: unreadable files, or predictions that do not align with the gold sentences
            (naming the prediction file).
    """
    from syntaxformer.data import load_gold_trees, read_treebank
    from syntaxformer.evaluation.constituency import evaluate_constituency

    pred_trees = read_treebank(pred_path)  # first: a bad prediction file fails fast
    gold_trees = load_gold_trees(gold)
    try:
        result = evaluate_constituency(pred_trees, gold_trees)
    except InputError as e:
        raise _with_path(e, pred_path) from None
    skipped = list(getattr(gold_trees, "skipped", ()))
    return {"task": "constituency", **result, "gold_skipped": skipped}


def run_dependency(pred_path: str, gold: str) -> dict:
    """Read and score a ``.conllu`` prediction.

    Args:
        pred_path: the predicted heads, CoNLL-U.
        gold: ``'ptb-sample'``, a ``.conllu`` file or ``.dp`` file(s).

    Returns:
        :func:`~syntaxformer.evaluation.dependency.evaluate_dependency`'s dict plus ``task``
        (``"dependency"``).

    Raises:
        InputError: unreadable files, or sentences that do not align (naming the prediction file).
    """
    from syntaxformer.data.dependency import read_conllu, read_dependencies
    from syntaxformer.evaluation.dependency import evaluate_dependency

    pred_sentences = read_conllu(pred_path)
    gold_sentences = read_dependencies(gold)
    try:
        result = evaluate_dependency(pred_sentences, gold_sentences)
    except InputError as e:
        raise _with_path(e, pred_path) from None
    return {"task": "dependency", **result}


def evaluate_predictions(pred: str, gold: str, seed: int = 0) -> dict:
    """Score a prediction file: a ``.conllu`` one by UAS/UUAS, any other as bracketed trees.

    Args:
        pred: the prediction file.
        gold: the gold data (see :func:`run_constituency`, :func:`run_dependency`).
        seed: recorded in the report (evaluation is deterministic).

    Returns:
        :func:`run_constituency`'s or :func:`run_dependency`'s dict plus ``pred``, ``gold``, ``seed``
        and ``seconds``.

    Raises:
        InputError: no such prediction file, or the errors of the two.
    """
    start = time.perf_counter()
    if not Path(pred).is_file():
        raise InputError("no such prediction file", path=pred)
    dependency = str(pred).endswith(".conllu")
    result = (run_dependency if dependency else run_constituency)(pred, gold)
    result.update(pred=str(pred), gold=str(gold), seed=seed, seconds=round(time.perf_counter() - start, 3))
    return result
