"""The logical-inference task (``syntaxformer logic train | evaluate``; DESIGN.md §6).

:func:`run_logic_train` trains a pair classifier over a chosen encoder on the pairs with at most 6
operators (:class:`~syntaxformer.tasks.logic.LogicTrainer`), takes the best-validation model and
tests it on ``test1 .. test12``; :func:`run_logic_evaluate` tests a saved model folder. Both write
``OUT/logic.json`` (the report), ``OUT/logic.md`` (the table) and ``OUT/accuracy.{png,svg}``
(accuracy against operators), and return the report. The protocol is in :mod:`syntaxformer.tasks.logic`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from syntaxformer.data.logic import read_logic_split
from syntaxformer.errors import InputError
from syntaxformer.figures import save_figure
from syntaxformer.figures.logic import plot_accuracy_by_operators
from syntaxformer.runtime import resolve_device
from syntaxformer.tasks.language_model import TRAINING_JSON
from syntaxformer.tasks.logic import (
    TEST_OPERATORS,
    LogicTrainer,
    accuracy_by_operators,
    group_means,
    logic_tokenizer,
)
from syntaxformer.tasks.pair import PairClassifier
from syntaxformer.training.best import BEST

logger = logging.getLogger(__name__)

REPORT_JSON = "logic.json"
REPORT_TABLE = "logic.md"
FIGURE = "accuracy"

PROTOCOL = (
    "train on train0-train6 (<= 6 operators) less every 10th pair in file order (validation, "
    "the public ON-LSTM code's split); the model of the best validation accuracy; accuracy (%) on "
    "each of test1-test12 (test12: 12 or more operators); groups = mean of the per-N accuracies"
)


def score_test_files(
    model_dir: str | Path, data: str | Path, device=None, batch_size: int = 256, max_test_pairs: int | None = None
) -> dict:
    """Accuracy of a saved pair classifier on every ``testN``, N = 1..12.

    Args:
        model_dir: a folder written by ``PairClassifier.save_pretrained`` (``syntaxformer logic train``'s
            ``OUT/best`` or ``OUT``).
        data: the propositional-logic folder.
        device: torch device name (None: CUDA if available).
        batch_size: pairs per forward pass.
        max_test_pairs: only the first this-many pairs of each file (quick checks), or None (all).
    Returns:
        ``{"model", "test": {N: {"pairs", "correct", "accuracy"}}, "groups": {"1-6", "7-9", "10-12"},
        "max_test_pairs", "device"}``; accuracies in percent (0-100).
    Raises:
        InputError: not a model folder, a missing data folder or file, a malformed line.
    """

    device = resolve_device(device)
    model = PairClassifier.from_pretrained(model_dir, device=device)
    tokenizer = logic_tokenizer()
    vocab = model.config.encoder_config.get("vocab_size")
    if vocab != len(tokenizer):
        raise InputError(
            f"the model's vocabulary has {vocab} entries, the logic symbols {len(tokenizer)}: not a logic model",
            model_dir,
        )
    files = read_logic_split(data, "test", TEST_OPERATORS)
    if max_test_pairs is not None:
        files = {n: pairs[:max_test_pairs] for n, pairs in files.items()}
    per_n = accuracy_by_operators(model, tokenizer, files, device, batch_size)
    return dict(
        model=str(model_dir),
        encoder=model.config.encoder,
        preset=model.config.preset,
        pooling=model.config.pooling,
        test=per_n,
        groups=group_means(per_n),
        max_test_pairs=max_test_pairs,
        device=str(device),
    )


def accuracy_markdown(report: dict) -> str:
    """A markdown table: per operator count the test pairs, the accuracy (%) and the majority-class
    baseline's (%), then the group means of the accuracy."""
    test = {int(n): v for n, v in report["test"].items()}
    ns = sorted(test)
    groups = report["groups"]
    head = "| operators | " + " | ".join(str(n) for n in ns) + " | " + " | ".join(groups) + " |"
    rule = "|---|" + "--:|" * (len(ns) + len(groups))
    pairs = "| test pairs | " + " | ".join(str(test[n]["pairs"]) for n in ns) + " |" + " |" * len(groups)
    accuracy = (
        "| accuracy % | "
        + " | ".join(f"{test[n]['accuracy']:.2f}" for n in ns)
        + " | "
        + " | ".join(f"{v:.2f}" for v in groups.values())
        + " |"
    )
    majority = (
        "| majority class (#) % | " + " | ".join(f"{test[n]['majority']:.2f}" for n in ns) + " |" + " |" * len(groups)
    )
    return "\n".join([head, rule, pairs, accuracy, majority])


def summary_line(report: dict) -> str:
    """One line naming the model, data, protocol's selection, preset and seed."""
    training = report.get("training")
    line = (
        f"{report['encoder']} (preset {report['preset']}, pooling {report['pooling']}"
        + (f", seed {report['seed']}" if "seed" in report else "")
        + f") on {report['data']}"
    )
    if training:
        recipe = training.get("arguments", {}).get("recipe", "default")
        line += (
            f": recipe {recipe}, {training['steps']} steps ({training['stopped']}), {training['train_minutes_total']:.1f} "
            f"training minutes on {training['device']} ({training['threads']} threads); best validation "
            f"accuracy {training['best_valid_accuracy']:.2f}% at step {training['best_step']}"
        )
    return line


def write_outputs(report: dict, out: str | Path) -> list[str]:
    """Write ``logic.json``, ``logic.md`` and ``accuracy.{png,svg}`` into ``out``; returns the paths."""

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    test = {int(n): v for n, v in report["test"].items()}
    ns = sorted(test)
    label = f"{report['encoder']} ({report['preset']}" + (f", seed {report['seed']})" if "seed" in report else ")")
    trained = report.get("training", {}).get("arguments", {}).get("max_train_operators", 6)
    fig = plot_accuracy_by_operators(
        {label: dict(operators=ns, accuracy=[test[n]["accuracy"] for n in ns])},
        trained,
        baseline={n: test[n]["majority"] for n in ns},
        title=f"propositional logic, {label}",
    )
    paths = [str(p) for p in save_figure(fig, out / FIGURE)]
    table = f"{summary_line(report)}\n\nProtocol: {PROTOCOL}.\n\n{accuracy_markdown(report)}\n"
    (out / REPORT_TABLE).write_text(table)
    files = [str(out / REPORT_JSON), str(out / REPORT_TABLE)] + paths
    report["files"] = files
    (out / REPORT_JSON).write_text(json.dumps(report, indent=2) + "\n")
    return files


def run_logic_train(args, callbacks=(), batch_size: int = 256, max_test_pairs: int | None = None) -> dict:
    """Train (:class:`~syntaxformer.tasks.logic.LogicTrainer`), then test the best-validation model.

    Args:
        args: a :class:`~syntaxformer.tasks.logic.LogicArguments`.
        callbacks: further trainer callbacks.
        batch_size: pairs per forward pass when testing.
        max_test_pairs: test on only the first this-many pairs of each file (quick checks).
    Returns:
        The report (also ``OUT/logic.json``): data, protocol, encoder, preset, pooling, seed, the
        training record (``training``: ``OUT/training.json``), the model tested, accuracy per N and per
        group, the files written.
    Raises:
        InputError: as :class:`~syntaxformer.tasks.logic.LogicTrainer` and :func:`score_test_files`.
    """

    out = LogicTrainer(args, callbacks).train()
    training = json.loads((out / TRAINING_JSON).read_text())
    model_dir = out / BEST if (out / BEST).is_dir() else out
    tested = score_test_files(model_dir, args.data, args.device, batch_size, max_test_pairs)
    report = dict(
        data=str(args.data),
        protocol=PROTOCOL,
        encoder=args.encoder,
        preset=args.preset,
        pooling=tested["pooling"],
        seed=args.seed,
        parameters=training["parameters"],
        encoder_parameters=training["encoder_parameters"],
        training=training,
        **{k: tested[k] for k in ("model", "test", "groups", "max_test_pairs", "device")},
    )
    write_outputs(report, out)
    return report


def run_logic_evaluate(
    model: str | Path,
    data: str | Path,
    out: str | Path,
    device=None,
    batch_size: int = 256,
    max_test_pairs: int | None = None,
) -> dict:
    """Test a saved model folder on ``test1 .. test12`` and write the outputs into ``out``.

    Returns:
        The report (:func:`score_test_files` plus data and protocol; the training record when the folder,
        or its parent for ``OUT/best``, holds ``training.json``).
    Raises:
        InputError: as :func:`score_test_files`.
    """
    tested = score_test_files(model, data, device, batch_size, max_test_pairs)
    report = dict(data=str(data), protocol=PROTOCOL, **tested)
    for folder in (Path(model), Path(model).parent):
        if (folder / "training.json").is_file():
            training = json.loads((folder / "training.json").read_text())
            report.update(seed=training["seed"], training=training)
            break
    write_outputs(report, out)
    return report


__all__ = [
    "run_logic_train",
    "run_logic_evaluate",
    "score_test_files",
    "accuracy_markdown",
    "summary_line",
    "write_outputs",
    "PROTOCOL",
    "REPORT_JSON",
    "REPORT_TABLE",
    "FIGURE",
]
