"""Callbacks of the :class:`~syntaxformer.training.trainer.Trainer`: what happens around the loop.

The loop itself only takes optimizer steps; everything else is a :class:`TrainerCallback` (in the
style of Hugging Face ``TrainerCallback``) that the trainer calls at fixed points:

============================  ===================================================================
hook                          called
============================  ===================================================================
``on_train_begin(t)``         once, after the model, data and output folder are ready, before the
                              step-0 evaluation
``on_loss(t, loss)``          on every training step's loss, before backward: returns the loss to
                              minimise (default: unchanged; e.g. plus a penalty); validation
                              losses are the task's own
``on_step_end(t, output)``    after every optimizer step (``t.state.step`` already counts it);
                              may set ``t.control`` flags (log / evaluate / save)
``on_log(t, scalars)``        for every :meth:`Trainer.log` (``{tag: value}`` at ``t.state.step``)
``on_evaluate(t, metrics)``   after each evaluation (step 0, the requested steps, the end);
                              ``metrics``: the task's validation metrics (``"valid/loss"``, and
                              ``"valid/accuracy"`` for NLI and logic), empty without validation data;
                              a stop between evaluation points is evaluated for the report only,
                              after the last checkpoint, and not handed to ``steers`` callbacks
``on_save(t)``                after each checkpoint
``on_train_end(t)``           once, after the final evaluation, checkpoint and ``training.json``
``close(t)``                  once at the very end, also after an error: release resources
============================  ===================================================================

After every step the trainer runs, in this order: the ``on_step_end`` hooks, then the actions they
requested (log the training loss, evaluate, save a checkpoint), then the stop conditions
(:class:`StopCondition`; the first one reached names the stop in ``training.json``).

Under ``torchrun`` every process has the same callbacks, except the writers (TensorBoard, progress
and log lines, the learning curve), which only rank 0 has. Flags set in ``on_step_end`` must be the
same on every process (they trigger collective operations); a :class:`StopCondition` whose answer
may differ between processes sets ``per_process = True`` and the trainer stops all of them when any
reaches it.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from syntaxformer.data.tokenization import save_tokenizer
from syntaxformer.evaluation.curve import ParseCurve

logger = logging.getLogger(__name__)


@dataclass
class StepOutput:
    """What one optimizer step did: ``loss`` (mean over this process's targets: a detached 0-dim tensor
    on the run's device, not yet read — ``float(loss)`` waits for the device), ``lr`` (the learning
    rate the step used), ``tokens`` (real tokens in this process's batch), ``seconds`` (wall time of the
    step as the host saw it)."""

    loss: torch.Tensor
    lr: float
    tokens: int
    seconds: float


@dataclass
class TrainerControl:
    """Actions requested for the end of the current step (reset after each step)."""

    should_log: bool = False
    should_evaluate: bool = False
    should_save: bool = False

    def reset(self) -> None:
        self.should_log = self.should_evaluate = self.should_save = False


class TrainerCallback:
    """Base class: every hook does nothing (module docstring for when each is called)."""

    #: whether ``on_evaluate`` changes how the run goes on or what it keeps (the plateau schedule, the kept
    #: best model): such a callback is not handed the report-only evaluation of a run stopped between
    #: evaluation points (:meth:`~syntaxformer.training.loop.TrainingLoop.evaluate`), which an
    #: uninterrupted run would not have made
    steers: bool = False

    def on_train_begin(self, trainer) -> None:
        pass

    def on_loss(self, trainer, loss):
        """The training loss to minimise, given the task's (a scalar tensor); default: unchanged."""
        return loss

    def on_step_end(self, trainer, output: StepOutput) -> None:
        pass

    def on_log(self, trainer, scalars: dict[str, float]) -> None:
        pass

    def on_evaluate(self, trainer, metrics: dict[str, float]) -> None:
        pass

    def on_save(self, trainer) -> None:
        pass

    def on_train_end(self, trainer) -> None:
        pass

    def close(self, trainer) -> None:
        pass


class Periodic(TrainerCallback):
    """Requests ``action`` ("log", "evaluate" or "save") every ``every`` optimizer steps (0: never).

    Raises:
        ValueError: an unknown action.
    """

    def __init__(self, every: int, action: str):
        if action not in ("log", "evaluate", "save"):
            raise ValueError(f"unknown action {action!r}")
        self.every, self.action = every, action

    def on_step_end(self, trainer, output: StepOutput) -> None:
        if self.every and trainer.state.step % self.every == 0:
            setattr(trainer.control, f"should_{self.action}", True)


class EvaluateEachEpoch(TrainerCallback):
    """Requests an evaluation and a checkpoint at the end of every epoch: after ``batches`` batches of
    it, or, with ``batches`` None, after as many as the trainer's sampler gives the epoch (epochs of
    different lengths, e.g. running text's windows of drawn lengths)."""

    def __init__(self, batches: int | None = None):
        self.batches = batches
        self._counted: tuple[int, int] | None = None  # (epoch, its batches) asked of the sampler

    def on_step_end(self, trainer, output: StepOutput) -> None:
        batches = self.batches
        if batches is None:
            epoch = trainer.state.epoch
            if self._counted is None or self._counted[0] != epoch:
                self._counted = (epoch, len(trainer.sampler.batches(epoch)))
            batches = self._counted[1]
        if trainer.state.batch_in_epoch >= batches:
            trainer.control.should_evaluate = trainer.control.should_save = True


# ------------------------------------------------------------------------------------ stop conditions


class StopCondition(TrainerCallback):
    """A reason to stop: :meth:`reached` is asked before the first step, after every step and at
    every epoch end; the first condition reached (in callback order) stops the run cleanly (final
    evaluation, checkpoint, model) and its ``reason`` is ``training.json``'s ``stopped``.

    ``per_process`` is True for a condition whose answer may differ between data-parallel
    processes (time, signals): the trainer then combines the answers of all processes.
    """

    reason: str = "stopped"
    per_process: bool = False

    def reached(self, trainer) -> bool:
        raise NotImplementedError


class MaxSteps(StopCondition):
    """Stop at ``max_steps`` optimizer steps (all runs of a resumed training together)."""

    reason = "max_steps"

    def __init__(self, max_steps: int):
        self.max_steps = max_steps

    def reached(self, trainer) -> bool:
        return trainer.state.step >= self.max_steps


class MaxEpochs(StopCondition):
    """Stop after ``epochs`` passes over the training batches."""

    reason = "epochs"

    def __init__(self, epochs: int):
        self.epochs = epochs

    def reached(self, trainer) -> bool:
        return trainer.state.epoch >= self.epochs


class EarlyStopping(StopCondition):
    """Stop when the last ``patience`` evaluations have all failed to lower the validation loss below
    the lowest before them (``state.valid_history``; the same on every process, as the loss is
    all-reduced). With ``keep_best`` the model of that lowest loss is in ``OUT/best/``."""

    reason = "early_stopping"

    def __init__(self, patience: int):
        self.patience = patience

    def reached(self, trainer) -> bool:
        losses = [row[1] for row in trainer.state.valid_history]
        if len(losses) <= self.patience:
            return False
        return min(losses[-self.patience :]) >= min(losses[: -self.patience])


class MaxMinutes(StopCondition):
    """Stop after ``minutes`` of this process's wall time (since :meth:`Trainer.train` started)."""

    reason = "max_minutes"
    per_process = True

    def __init__(self, minutes: float):
        self.minutes = minutes

    def reached(self, trainer) -> bool:
        return time.monotonic() - trainer.t_start >= 60 * self.minutes


class StopOnSignal(StopCondition):
    """Turns SIGTERM / SIGINT into a clean stop after the current step (a second signal raises
    ``KeyboardInterrupt`` at once). Handlers are installed only from the main thread, and the
    previous ones restored at :meth:`close`."""

    reason = "signal"
    per_process = True

    def __init__(self):
        self.received: str | None = None
        self._old = {}

    def on_train_begin(self, trainer) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._old[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum, frame):
        if self.received is not None:  # a second signal: stop now
            raise KeyboardInterrupt
        self.received = signal.Signals(signum).name
        logger.warning("%s received: stopping after this step and saving", self.received)

    def reached(self, trainer) -> bool:
        return self.received is not None

    def close(self, trainer) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}


# ------------------------------------------------------------------------------------ writers (rank 0)


class TensorBoardCallback(TrainerCallback):
    """Writes every logged scalar to ``OUT/tensorboard`` at the current step; a resumed run purges
    the events after its checkpoint's step (those of the killed run). Where the ``tensorboard``
    package cannot be imported (a bare machine running the package from its tree), it warns once and
    writes nothing; ``training.json`` keeps the losses either way."""

    def __init__(self):
        self.writer = None

    def on_train_begin(self, trainer) -> None:
        try:  # a heavy dependency, imported on use (start-up time)
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as error:
            logger.warning("no TensorBoard events (%s); training.json keeps the losses", error)
            return
        step = trainer.state.step
        self.writer = SummaryWriter(str(trainer.out / "tensorboard"), purge_step=step + 1 if step else None)

    def on_log(self, trainer, scalars: dict[str, float]) -> None:
        if self.writer is None:
            return
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, trainer.state.step)

    def close(self, trainer) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class ProgressCallback(TrainerCallback):
    """What a run shows while it trains: on a terminal one progress bar (steps, elapsed, remaining,
    tokens/s, loss, the last dev F1 of the learning curve), else (a log) one line a minute with the
    same; before training, the planned steps, and after the first :data:`ESTIMATE_AFTER_SECONDS` of
    optimizer steps an estimate of the time the rest takes at that speed; the validation loss and the stop.

    Args:
        quiet: no bar and no minute lines (the other log lines stay).
    """

    #: the first steps' time from which the remaining time is estimated, in seconds
    ESTIMATE_AFTER_SECONDS = 20.0
    #: seconds between two progress lines in a log
    LINE_EVERY_SECONDS = 60.0

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.bar = None
        self.rate: float | None = None  # tokens per second, as last logged
        self.started = self.last_line = 0.0
        self.first_step, self.first_seconds = 0, 0.0
        self.estimated = False

    def on_train_begin(self, trainer) -> None:
        total, step = trainer.args.max_steps, trainer.state.step
        self.bar = tqdm(
            total=total,
            initial=step,
            unit="step",
            dynamic_ncols=True,
            disable=self.quiet or not sys.stderr.isatty(),
        )
        self.started = self.last_line = time.monotonic()
        self.first_step, self.first_seconds, self.estimated = step, trainer.state.train_seconds, False
        if total is not None:
            logger.info("planned: %d steps (from step %d)", total, step)

    def on_step_end(self, trainer, output: StepOutput) -> None:
        self.bar.update(1)
        now, step, total = time.monotonic(), trainer.state.step, trainer.args.max_steps
        elapsed = now - self.started
        trained = trainer.state.train_seconds - self.first_seconds  # optimizer steps only
        if not self.estimated and trained >= self.ESTIMATE_AFTER_SECONDS and total is not None:
            self.estimated = True
            per_step = trained / max(step - self.first_step, 1)
            logger.info(
                "estimate: %.1f minutes of training steps for the remaining %d (%.2f s a step over the first %d; "
                "evaluations extra)",
                per_step * (total - step) / 60, total - step, per_step, step - self.first_step,
            )  # fmt: skip
        if self.bar.disable and not self.quiet and now - self.last_line >= self.LINE_EVERY_SECONDS:
            self.last_line = now
            logger.info("progress: %s", self.progress_line(trainer, elapsed))

    def progress_line(self, trainer, elapsed: float) -> str:
        """``step S of N, T tokens/s, elapsed E min, remaining R min, dev F1 F`` (what is known)."""
        step, total = trainer.state.step, trainer.args.max_steps
        parts = [f"step {step:,}" + (f" of {total:,}" if total is not None else "")]
        if self.rate is not None:
            parts.append(f"{self.rate:,.0f} tokens/s")
        parts.append(f"elapsed {elapsed / 60:.1f} min")
        if total is not None and step > self.first_step:
            parts.append(f"remaining {elapsed / (step - self.first_step) * (total - step) / 60:.1f} min")
        f1 = last_dev_f1(trainer)
        if f1 is not None:
            parts.append(f"dev F1 {f1:.2f}")
        return ", ".join(parts)

    def on_log(self, trainer, scalars: dict[str, float]) -> None:
        if "train/loss" not in scalars:
            return
        loss, lr, rate = scalars["train/loss"], scalars["train/lr"], scalars["train/tokens_per_second"]
        self.rate = rate
        f1 = last_dev_f1(trainer)
        self.bar.set_postfix(
            loss=f"{loss:.3f}", tok_s=f"{rate:.0f}", **({"dev_f1": f"{f1:.2f}"} if f1 is not None else {})
        )
        logger.debug("step %d loss %.4f lr %.3g %.0f tokens/s", trainer.state.step, loss, lr, rate)

    def on_evaluate(self, trainer, metrics: dict[str, float]) -> None:
        if metrics:
            values = ", ".join(f"{key.replace('valid/', '')} {value:.4f}" for key, value in metrics.items())
            logger.info("step %d: validation %s", trainer.state.step, values)

    def on_train_end(self, trainer) -> None:
        logger.info(
            "stopped (%s) at step %d after %.1f minutes; saved to %s",
            trainer.stop_reason,
            trainer.state.step,
            (time.monotonic() - trainer.t_start) / 60,
            trainer.out,
        )

    def close(self, trainer) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def last_dev_f1(trainer) -> float | None:
    """The best decoder's sentence F1 at the learning curve's last point (``trainer.state.parse_curve``),
    or None before the first point or without a curve."""
    curve = getattr(trainer.state, "parse_curve", None)
    if not curve:
        return None
    scores = curve[-1]["scores"]
    return max((v["sentence_f1"] for v in scores.values() if "sentence_f1" in v), default=None)


#: where a run keeps its best model (the best validation score of its task's selection metric), inside OUT
BEST = "best"
#: the record of the kept model inside ``OUT/best/``: ``{"step": ..., <the metric>: ...}``
BEST_RECORD = "best.json"


def record_key(metric: str) -> str:
    """The key of a validation metric in :data:`BEST_RECORD`: ``"valid/loss"`` -> ``"valid_loss"``."""
    return metric.replace("/", "_")


class KeepBestModel(TrainerCallback):
    """Keeps the best model of a run: after every evaluation whose value of the task's selection metric
    (``trainer.selection_metric``) is better than the best so far (lower in ``trainer.selection_mode``
    ``"min"``, higher in ``"max"``; the earliest on ties), writes the model and its tokenizer to
    ``OUT/best/`` with :data:`BEST_RECORD` (``step`` and the value, e.g. ``{"step": 40, "valid_loss":
    4.2}``) and records both in ``trainer.state`` (``best_step``, ``best_value``), so a resumed run goes
    on from its checkpoint's best. ``OUT/`` holds the last model unless the run's ``final_model`` is
    ``"best"`` (:meth:`~syntaxformer.training.loop.TrainingLoop.final_model`). The loop adds it on rank 0
    (:meth:`~syntaxformer.training.loop.TrainingLoop.keep_best_callbacks`): the masked / causal LM with
    ``keep_best`` (the lowest validation loss; the model selection of early stopping, :class:`EarlyStopping`),
    NLI and the logic task always (the highest validation accuracy).

    A run resumed from a checkpoint whose state has no best (one written before the state kept it)
    reads it back from ``OUT/best/best.json``. It :attr:`~TrainerCallback.steers`: the report-only
    evaluation of a run stopped between evaluation points is no candidate.
    """

    steers = True

    def on_train_begin(self, trainer) -> None:
        state, record = trainer.state, trainer.out / BEST / BEST_RECORD
        if state.resumed_from and state.best_step is None and record.is_file():
            saved = json.loads(record.read_text())
            state.best_step, state.best_value = saved["step"], saved[record_key(trainer.selection_metric)]

    def on_evaluate(self, trainer, metrics: dict[str, float]) -> None:
        metric, state = trainer.selection_metric, trainer.state
        value = metrics.get(metric)
        if value is None or not self.better(value, state.best_value, trainer.selection_mode):
            return
        state.best_step, state.best_value = state.step, value
        folder = trainer.out / BEST
        folder.mkdir(parents=True, exist_ok=True)
        trainer.model.save_pretrained(folder, safe_serialization=True)
        save_tokenizer(trainer.tokenizer, folder)
        (folder / BEST_RECORD).write_text(json.dumps({"step": state.step, record_key(metric): value}) + "\n")
        logger.info(
            "step %d: %s %s so far (%.4f): model written to %s",
            state.step,
            "lowest" if trainer.selection_mode == "min" else "highest",
            metric.replace("valid/", "validation "),
            value,
            folder,
        )

    @staticmethod
    def better(value: float, best: float | None, mode: str) -> bool:
        """Whether ``value`` beats ``best`` (None: nothing kept yet) in ``mode`` ``"min"`` or ``"max"``."""
        return best is None or (value < best if mode == "min" else value > best)


class ParseCurveCallback(TrainerCallback):
    """The learning curve: at every evaluation, parse a gold treebank with the model as it is and
    record every decoder's F1 (:class:`~syntaxformer.evaluation.curve.ParseCurve`).

    Each point ``{step, tokens_seen, train_minutes, wall_minutes, scores}`` is appended to
    ``trainer.state.parse_curve`` (so it is in the checkpoint and ``training.json``; at most one per
    step) and logged as ``parse/<decoder>/<sentence_f1|corpus_f1>``. ``train_minutes`` counts
    optimizer steps only (all runs of a resumed training), ``wall_minutes`` this process's time.

    Raises:
        InputError: an unreadable treebank (at construction, before any training).
    """

    def __init__(self, treebank: str):
        self.curve = ParseCurve(treebank)

    def on_evaluate(self, trainer, metrics: dict[str, float]) -> None:
        state = trainer.state
        if state.parse_curve and state.parse_curve[-1]["step"] == state.step:
            return
        t0 = time.perf_counter()
        scores = self.curve(trainer.model, trainer.tokenizer)
        state.parse_curve.append(
            dict(
                step=state.step,
                tokens_seen=state.tokens_seen,
                train_minutes=round(state.train_seconds / 60, 4),
                wall_minutes=round((time.monotonic() - trainer.t_start) / 60, 4),
                scores=scores,
            )
        )
        trainer.log({f"parse/{name}/{key}": value for name, values in scores.items() for key, value in values.items()})
        best = max(scores, key=lambda k: scores[k]["sentence_f1"])
        logger.info(
            "step %d: %s parsed in %.1f s; best decoder %s, sentence F1 %.2f",
            state.step,
            self.curve.treebank,
            time.perf_counter() - t0,
            best,
            scores[best]["sentence_f1"],
        )


__all__ = [
    "TrainerCallback",
    "TrainerControl",
    "StepOutput",
    "Periodic",
    "EvaluateEachEpoch",
    "StopCondition",
    "MaxSteps",
    "MaxEpochs",
    "MaxMinutes",
    "StopOnSignal",
    "TensorBoardCallback",
    "ProgressCallback",
    "ParseCurveCallback",
    "KeepBestModel",
    "BEST",
    "BEST_RECORD",
    "record_key",
]
