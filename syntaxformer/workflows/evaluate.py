"""Score prediction files against gold (``syntaxformer evaluate``).

Constituency: bracketed trees, one per line, leaves = words (punctuation-free, as the preprocessed
gold), with or without a preterminal over each word (the two forms of
:mod:`syntaxformer.decoding.spans`, read and scored the same), aligned with the gold sentences by order. Dependency: a ``.conllu`` prediction, scored against
``ptb-sample``'s dependency trees, a ``.conllu`` file or ``.dp`` files. Protocols:
:mod:`syntaxformer.evaluation.protocols` (constituency: ``prpn``, the default, is
:mod:`syntaxformer.evaluation.constituency`), :mod:`syntaxformer.evaluation.dependency`.
"""

from __future__ import annotations

import time
from pathlib import Path

from syntaxformer.data import load_gold_trees, read_treebank
from syntaxformer.data.dependency import read_conllu, read_dependencies
from syntaxformer.errors import InputError
from syntaxformer.evaluation.baselines import left_branching, right_branching
from syntaxformer.evaluation.constituency import check_aligned
from syntaxformer.evaluation.dependency import evaluate_dependency
from syntaxformer.evaluation.protocols import PROTOCOLS, constituents_from_spans, get_protocol, tree_constituents


def _with_path(error: InputError, path: str) -> InputError:
    """``error`` with the prediction file named, when it does not name a file already."""
    return error if error.path is not None else InputError(str(error), path=path)


def protocol_fields(protocol) -> dict:
    """What a report says of its protocol: ``protocol`` (its rules; for ``prpn`` the long-standing
    :data:`~syntaxformer.evaluation.constituency.PROTOCOL` string), ``protocol_name``,
    ``protocol_source``."""
    return {"protocol": protocol.rules, "protocol_name": protocol.name, "protocol_source": protocol.source}


def _read_aligned(pred_path: str, gold: str):
    """The predicted trees and the preprocessed gold trees, checked to be the same sentences.

    Raises:
        InputError: unreadable files, or sentences that do not align (naming the prediction file).
    """

    pred_trees = read_treebank(pred_path)  # first: a bad prediction file fails fast
    gold_trees = load_gold_trees(gold)
    try:
        check_aligned(pred_trees, gold_trees)
    except InputError as e:
        raise _with_path(e, pred_path) from None
    return pred_trees, gold_trees


def run_constituency(pred_path: str, gold: str, protocol: str = "prpn") -> dict:
    """Read, preprocess and score predicted trees under one protocol.

    Args:
        pred_path: bracketed trees, one per line.
        gold: ``'ptb-sample'`` (or a half) or a treebank path.
        protocol: a key of :data:`~syntaxformer.evaluation.protocols.PROTOCOLS` (default ``prpn``:
            :func:`~syntaxformer.evaluation.constituency.evaluate_constituency`'s numbers).

    Returns:
        the protocol's scores (percent) plus ``task`` (``"constituency"``), :func:`protocol_fields`
        and ``gold_skipped`` (gold sentences the preprocessing left out).

    Raises:
        InputError: unknown protocol, unreadable files, or predictions that do not align with the
            gold sentences (naming the prediction file).
    """

    chosen = get_protocol(protocol)
    pred_trees, gold_trees = _read_aligned(pred_path, gold)
    result = chosen.score_constituents(
        [tree_constituents(t) for t in pred_trees], [tree_constituents(t) for t in gold_trees], gold_trees
    )
    skipped = list(getattr(gold_trees, "skipped", ()))
    return {"task": "constituency", **result, **protocol_fields(chosen), "gold_skipped": skipped}


#: The trees ``--all-protocols`` scores, in table order: the prediction and two baselines.
COMPARED_TREES = {"prediction": "prediction", "right_branching": "right-branching", "left_branching": "left-branching"}


def run_all_protocols(pred_path: str, gold: str) -> dict:
    """Score the prediction, right-branching and left-branching trees under every protocol.

    The trees are read once; each protocol scores the same three tree sets against the same gold.

    Args:
        pred_path: bracketed trees, one per line.
        gold: ``'ptb-sample'`` (or a half) or a treebank path.

    Returns:
        ``{"task": "protocols", "n_sentences", "gold_skipped", "protocols": {name: {"source",
        "rules", "papers", "columns", "scores": {"prediction" | "right_branching" |
        "left_branching": the protocol's scores}}}}``.

    Raises:
        InputError: as :func:`run_constituency`.
    """

    pred_trees, gold_trees = _read_aligned(pred_path, gold)
    gold_read = [tree_constituents(t) for t in gold_trees]
    lengths = [tree.n_words for tree in gold_read]
    trees = {
        "prediction": [tree_constituents(t) for t in pred_trees],
        "right_branching": [constituents_from_spans(n, right_branching(n)) for n in lengths],
        "left_branching": [constituents_from_spans(n, left_branching(n)) for n in lengths],
    }
    protocols = {}
    for name, protocol in PROTOCOLS.items():
        protocols[name] = {
            "source": protocol.source,
            "rules": protocol.rules,
            "papers": protocol.papers,
            "columns": [list(column) for column in protocol.columns],
            "scores": {k: protocol.score_constituents(v, gold_read, gold_trees) for k, v in trees.items()},
        }
    return {
        "task": "protocols",
        "n_sentences": len(gold_trees),
        "gold_skipped": list(getattr(gold_trees, "skipped", ())),
        "protocols": protocols,
    }


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

    pred_sentences = read_conllu(pred_path)
    gold_sentences = read_dependencies(gold)
    try:
        result = evaluate_dependency(pred_sentences, gold_sentences)
    except InputError as e:
        raise _with_path(e, pred_path) from None
    return {"task": "dependency", **result}


def evaluate_predictions(
    pred: str, gold: str, seed: int = 0, protocol: str = "prpn", all_protocols: bool = False
) -> dict:
    """Score a prediction file: a ``.conllu`` one by UAS/UUAS, any other as bracketed trees.

    Args:
        pred: the prediction file.
        gold: the gold data (see :func:`run_constituency`, :func:`run_dependency`).
        seed: recorded in the report (evaluation is deterministic).
        protocol: the constituency protocol (:func:`run_constituency`).
        all_protocols: score bracketed trees under every protocol instead (:func:`run_all_protocols`).

    Returns:
        :func:`run_constituency`'s, :func:`run_all_protocols`' or :func:`run_dependency`'s dict plus
        ``pred``, ``gold``, ``seed`` and ``seconds``.

    Raises:
        InputError: no such prediction file, a constituency protocol asked of a ``.conllu``
            prediction, or the errors of the three.
    """
    start = time.perf_counter()
    if not Path(pred).is_file():
        raise InputError("no such prediction file", path=pred)
    if str(pred).endswith(".conllu"):
        if all_protocols or protocol != "prpn":
            raise InputError(
                "--protocol / --all-protocols choose a constituency protocol; a .conllu "
                "prediction is scored by UAS/UUAS",
                path=pred,
            )
        result = run_dependency(pred, gold)
    elif all_protocols:
        result = run_all_protocols(pred, gold)
    else:
        result = run_constituency(pred, gold, protocol)
    result.update(pred=str(pred), gold=str(gold), seed=seed, seconds=round(time.perf_counter() - start, 3))
    return result
