"""The best model of a run: ``OUT/best/`` with the model of the best validation score so far.

After every evaluation (not the report-only one of a run stopped between evaluation points) whose value
of the task's selection metric (``loop.selection_metric``) is better than the best so far (lower in
``loop.selection_mode`` ``"min"``, higher in ``"max"``; the earliest on ties), the loop writes the model and
its tokenizer to ``OUT/best/`` with :data:`BEST_RECORD` (``step`` and the value, e.g. ``{"step": 40,
"valid_loss": 4.2}``) and records both in its state (``best_step``, ``best_value``), so a resumed run goes
on from its checkpoint's best. ``OUT/`` holds the last model unless the run's ``final_model`` is
``"best"`` (:meth:`~syntaxformer.training.loop.TrainingLoop.final_model`). Which runs keep it: the masked /
causal LM with ``keep_best`` (the lowest validation loss; the model selection of early stopping), NLI and
the logic task always (the highest validation accuracy); rank 0 only.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from syntaxformer.data.tokenization import save_tokenizer

logger = logging.getLogger(__name__)

#: where a run keeps its best model (the best validation score of its task's selection metric), inside OUT
BEST = "best"
#: the record of the kept model inside ``OUT/best/``: ``{"step": ..., <the metric>: ...}``
BEST_RECORD = "best.json"


def record_key(metric: str) -> str:
    """The key of a validation metric in :data:`BEST_RECORD`: ``"valid/loss"`` -> ``"valid_loss"``."""
    return metric.replace("/", "_")


def better(value: float, best: float | None, mode: str) -> bool:
    """Whether ``value`` beats ``best`` (None: nothing kept yet) in ``mode`` ``"min"`` or ``"max"``."""
    return best is None or (value < best if mode == "min" else value > best)


def keep_if_best(loop, metrics: dict[str, float]) -> None:
    """Write ``loop.model`` and its tokenizer to ``OUT/best/`` with :data:`BEST_RECORD` and set
    ``loop.state.best_step`` / ``best_value`` when ``metrics`` (an evaluation's, at ``loop.state.step``)
    beat the best so far on ``loop.selection_metric``; nothing when they lack it or do not beat it."""
    metric, state = loop.selection_metric, loop.state
    value = metrics.get(metric)
    if value is None or not better(value, state.best_value, loop.selection_mode):
        return
    state.best_step, state.best_value = state.step, value
    folder = loop.out / BEST
    folder.mkdir(parents=True, exist_ok=True)
    loop.model.save_pretrained(folder, safe_serialization=True)
    save_tokenizer(loop.tokenizer, folder)
    (folder / BEST_RECORD).write_text(json.dumps({"step": state.step, record_key(metric): value}) + "\n")
    logger.info(
        "step %d: %s %s so far (%.4f): model written to %s",
        state.step,
        "lowest" if loop.selection_mode == "min" else "highest",
        metric.replace("valid/", "validation "),
        value,
        folder,
    )


def resumed_best(state, out: Path, metric: str) -> None:
    """Set ``state.best_step`` / ``best_value`` from ``out/best/best.json`` for a run resumed
    (``state.resumed_from``) from a checkpoint whose state has no best (one written before the state kept
    it), when the file exists; nothing otherwise."""
    record = Path(out) / BEST / BEST_RECORD
    if state.resumed_from and state.best_step is None and record.is_file():
        saved = json.loads(record.read_text())
        state.best_step, state.best_value = saved["step"], saved[record_key(metric)]


__all__ = ["BEST", "BEST_RECORD", "record_key", "better", "keep_if_best", "resumed_best"]
