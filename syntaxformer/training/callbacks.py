"""Callbacks of the training loop (:class:`~syntaxformer.training.loop.TrainingLoop`): the stop
conditions and the writers.

The loop itself decides when to log, evaluate and save (its periods and epochs) and keeps the best model;
a callback is either a :class:`StopCondition` or an observer that writes what the run does (TensorBoard,
the progress bar and log lines, the learning curve; in the style of Hugging Face ``TrainerCallback``).
The loop calls every callback at fixed points:

============================  ===================================================================
hook                          called
============================  ===================================================================
``on_train_begin(t)``         once, after the model, data and output folder are ready, before the
                              step-0 evaluation
``on_step_end(t, output)``    after every optimizer step (``t.state.step`` already counts it),
                              before the step's log, evaluation and checkpoint
``on_log(t, scalars)``        for every :meth:`~syntaxformer.training.loop.TrainingLoop.log`
                              (``{tag: value}`` at ``t.state.step``)
``on_evaluate(t, metrics)``   after each evaluation (step 0, the requested steps, the end);
                              ``metrics``: the task's validation metrics (``"valid/loss"``, and
                              ``"valid/accuracy"`` for NLI and logic), empty without validation data
``on_save(t)``                after each checkpoint
``on_train_end(t)``           once, after the final evaluation, checkpoint and ``training.json``
``close(t)``                  once at the very end, also after an error: release resources
============================  ===================================================================

After every step the loop runs, in this order: the ``on_step_end`` hooks, the log, evaluation and
checkpoint that are due, then the stop conditions (the first one reached names the stop in
``training.json``).

Under ``torchrun`` every process has the same stop conditions; the writers (TensorBoard, progress and
log lines, the learning curve) are on rank 0 only. A :class:`StopCondition` whose answer may differ
between processes sets ``per_process = True`` and the loop stops all of them when any reaches it.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

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


class TrainerCallback:
    """Base class: every hook does nothing (module docstring for when each is called)."""

    def on_train_begin(self, trainer) -> None:
        pass

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
    """Stop after ``minutes`` of this process's wall time (since :meth:`~syntaxformer.training.loop.TrainingLoop.train` started)."""

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
    "StepOutput",
    "StopCondition",
    "MaxSteps",
    "MaxEpochs",
    "MaxMinutes",
    "EarlyStopping",
    "StopOnSignal",
    "TensorBoardCallback",
    "ProgressCallback",
    "ParseCurveCallback",
]
