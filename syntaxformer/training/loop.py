"""The training loop every trainer of the package shares; it knows nothing of the task it trains.

:meth:`TrainingLoop.train` reads top to bottom as one run: build, evaluate at step 0, then for each
step the batch, the loss, backward, clipping, the optimizer and schedule step, then logging, evaluation
and the checkpoint when they are due, until a stop condition; then the final checkpoint, evaluation,
model, tokenizer and ``training.json``. The step's work on the device is a step runner chosen once
(:mod:`syntaxformer.training.step`: eager, compiled or a CUDA graph); the next batch may be prepared
during the step (:class:`~syntaxformer.training.prefetch.BatchPrefetcher`, ``prefetch``). Callbacks
(:mod:`syntaxformer.training.callbacks`) are the stop conditions (steps, epochs, minutes, early
stopping, SIGTERM/SIGINT) and the writers (TensorBoard, the progress bar and log lines, the learning
curve). The loop owns, the same for every task: the process group and ``DistributedDataParallel`` under
``torchrun`` (:meth:`TrainingLoop.wrap_for_data_parallel`), dropout seeded by ``(seed, step, rank)``,
the epochs of length-bucketed batches, the periods of logging, evaluation and checkpoints
(:meth:`TrainingLoop.periods`, and the end of an epoch: :meth:`TrainingLoop.epoch_batches`), the
checkpoint (``OUT/checkpoint.pt``: model, optimizer, scheduler, :class:`TrainerState`; exact resume, as
every random draw of a step comes from ``(seed, step, rank)`` and an epoch's batches from ``(seed,
epoch)``), the best model (``OUT/best/``, :mod:`syntaxformer.training.best`), the plateau schedule's
scores, and the end of a run.

A task is a subclass that fills in the task interface:

* :meth:`~TrainingLoop.build`: seed, data, tokenizer, model, optimizer and schedule
  (:meth:`~TrainingLoop.make_scheduler`), ``sampler`` (a
  :class:`~syntaxformer.data.batching.LengthBucketSampler` over the training examples); a checkpoint
  goes to :meth:`~TrainingLoop.resume` (the task's state class carries its extra resume state);
* :meth:`~TrainingLoop.make_batch`: the :class:`~syntaxformer.training.batch.Batch` of training
  examples (a task whose batch is a pure function of the examples and the step says so with
  :meth:`~TrainingLoop.batch_at` and :attr:`~TrainingLoop.prefetchable`); :meth:`~TrainingLoop.compute_loss`:
  its loss (a penalty term: :meth:`~TrainingLoop.training_loss`);
* :meth:`~TrainingLoop.validation_metrics` (``{"valid/loss": ..., ...}`` on the validation data) with
  the class attributes naming what its history keeps (:attr:`~TrainingLoop.validation_keys`) and which
  metric selects the best model, lower or higher (:attr:`~TrainingLoop.selection_metric`,
  :attr:`~TrainingLoop.selection_mode`); :meth:`~TrainingLoop.report` (``training.json``).

Evaluation is the loop's, the same for every task (:meth:`TrainingLoop.evaluate`): at most once per
step, the metrics into ``state.valid_history`` and the log, an evaluation replayed after a resume (a
step already in the history) read back instead of recomputed, then the plateau schedule, the best
model (``keeps_best_model``) and every callback's ``on_evaluate`` (a run stopped between evaluation
points is evaluated for its report only, after its last checkpoint, and neither the schedule nor the
best model sees it: a resume continues the uninterrupted run). ``final_model="best"`` leaves the best
model in OUT at the end (:meth:`TrainingLoop.final_model`). With ``bf16`` the training loss and the
validation run under bfloat16 autocast (:meth:`TrainingLoop.autocast`).

The masked / causal LM (:class:`~syntaxformer.tasks.language_model.Trainer`), NLI
(:class:`~syntaxformer.tasks.nli.NliTrainer`) and the logic task
(:class:`~syntaxformer.tasks.logic.LogicTrainer`) are such tasks.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import traceback
from collections import deque
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
import torch.distributed as dist

from syntaxformer.data.tokenization import save_tokenizer
from syntaxformer.training.arguments import checkpoint_period
from syntaxformer.training.batch import Batch
from syntaxformer.training.best import BEST, BEST_RECORD, keep_if_best, resumed_best
from syntaxformer.training.callbacks import (
    EarlyStopping,
    MaxEpochs,
    MaxMinutes,
    MaxSteps,
    ProgressCallback,
    StepOutput,
    StopCondition,
    StopOnSignal,
    TensorBoardCallback,
    TrainerCallback,
)
from syntaxformer.training.checkpoint import CHECKPOINT, write_checkpoint
from syntaxformer.training.plateau import PlateauSchedule
from syntaxformer.training.prefetch import BatchPrefetcher, pin_for
from syntaxformer.training.step import EagerStep, make_step_runner, use_tf32

#: devices whose Adam the trainers run as torch's single fused kernel (``fused=True``)
FUSED_ADAM_DEVICES = ("cpu", "cuda")

logger = logging.getLogger(__name__)

TRAINING_JSON = "training.json"


def _derived_seed(seed: int, *parts: int) -> int:
    """A 63-bit seed from ``seed`` and integers (step, rank, stream), distinct for distinct tuples."""
    value = seed & (2**63 - 1)
    for p in parts:
        value = (value * 1_000_003 + p + 1) % (2**61 - 1)
    return value


def lr_factor(step: int, warmup_steps: int, schedule: str, max_steps: int | None, final_fraction: float = 0.0) -> float:
    """Multiplier of the peak learning rate for optimizer step ``step`` (0-based).

    Linear warm-up ``(step+1)/warmup_steps`` for the first ``warmup_steps`` steps, then ``constant``
    1, ``inverse-sqrt`` ``sqrt(warmup_steps / (step+1))`` (Vaswani et al. 2017, eq. 3; fairseq's
    ``inverse_sqrt``), or a ``linear`` / ``cosine`` decay from 1 to ``final_fraction`` at ``max_steps``.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    if schedule == "inverse-sqrt":
        return math.sqrt(max(1, warmup_steps) / (step + 1))
    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))
    if schedule == "linear":
        shape = 1.0 - progress
    else:
        shape = 0.5 * (1.0 + math.cos(math.pi * progress))
    return final_fraction + (1.0 - final_fraction) * shape


def _jsonable(d: dict) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


def _choose_device(name: str | None, world: int) -> torch.device:
    """``--device`` (None: CUDA if available, else CPU); under torchrun with CUDA, this process's
    GPU (``LOCAL_RANK``)."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if name is not None:
        device = torch.device(name)
    else:
        device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", local_rank)
    return device


@dataclass
class TrainerState:
    """The progress of a run, carried by the checkpoint (as a dict) across a resume.

    Attributes:
        step: optimizer steps taken (all runs of a resumed training).
        epoch: the current epoch (0-based); batch_in_epoch: batches of it already taken.
        tokens_seen: real tokens trained on (all processes).
        train_seconds: wall time of the optimizer steps (evaluations and saving excluded).
        valid_history: ``[step, validation loss, ...]`` rows, one per evaluation (the values of the
            task's :attr:`TrainingLoop.validation_keys`); initial_valid_loss: the step-0 loss.
        resumed_from: the step of every resume.
        parse_curve: the learning-curve points (:class:`~syntaxformer.training.callbacks.ParseCurveCallback`).
        best_step, best_value: the step and the selection metric's value of the model kept in
            ``OUT/best/`` (:mod:`~syntaxformer.training.best`), or None.
    """

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    tokens_seen: int = 0
    train_seconds: float = 0.0
    valid_history: list = field(default_factory=list)
    initial_valid_loss: float | None = None
    resumed_from: list = field(default_factory=list)
    parse_curve: list = field(default_factory=list)
    best_step: int | None = None
    best_value: float | None = None

    #: fields that checkpoints of earlier versions saved under another name: ``{old name: field}``
    RENAMED = {"best_accuracy": "best_value", "best_valid_accuracy": "best_value"}

    @classmethod
    def resumed(cls, saved: dict) -> TrainerState:
        """The state of a checkpoint (a field it lacks keeps its default; one saved under an old name,
        :attr:`RENAMED`, is read from it), with this resume's step appended to ``resumed_from``."""
        saved = {**{new: saved[old] for old, new in cls.RENAMED.items() if old in saved}, **saved}
        state = cls()
        for f in fields(cls):
            setattr(state, f.name, saved.get(f.name, getattr(state, f.name)))
        if state.best_step is None:  # nothing kept (an old logic checkpoint saved -1.0)
            state.best_value = None
        state.resumed_from = state.resumed_from + [state.step]
        return state


class TrainingLoop:
    """A training run of some task: build it, take optimizer steps, evaluate, log and save around them
    (module docstring). ``Loop(args, callbacks).train()`` returns the output folder; call :meth:`train`
    once per object.

    Attributes (the task's :meth:`build` sets those marked *):
        args, out: the options and the output folder (from the constructor).
        device, rank, world, is_main: this process's device, rank, number of processes, rank == 0.
        state: a :class:`TrainerState` (or the task's subclass).
        model*: the model (unwrapped); ddp_model*: the module the training step calls.
        tokenizer*, optimizer*, scheduler*, sampler*: the run's tokenizer, optimizer, schedule, batches.
        callbacks: the callbacks, in calling order (:meth:`default_callbacks`, then those given).
        step_runner: the step's work on the device (:func:`~syntaxformer.training.step.make_step_runner`).
        t_start: ``time.monotonic()`` when :meth:`train` started; stop_reason: why it stopped.
        tokens_per_second: the throughput of the last logged window (all processes), or None.

    Raises:
        InputError: from the constructor, options that ``args.check`` refuses.
    """

    #: the class of :attr:`state`: :class:`TrainerState` or a task's subclass with its extra resume state
    state_class: type[TrainerState] = TrainerState
    #: whether the task's examples are counted in ``state.pairs_seen`` (its state class has that field)
    counts_examples = False
    #: the metrics of :meth:`validation_metrics` that a ``state.valid_history`` row keeps after the step, in order
    validation_keys: tuple[str, ...] = ("valid/loss",)
    #: the validation metric that selects the best model (``OUT/best/``, a plateau schedule), and whether
    #: lower (``"min"``) or higher (``"max"``) is better
    selection_metric: str = "valid/loss"
    selection_mode: str = "min"
    #: bf16 autocast's cache of cast weights (:meth:`autocast`); a CUDA-graph step turns it off
    autocast_cache: bool = True

    def __init__(self, args, callbacks: list[TrainerCallback] | tuple = ()):
        args.check()
        self.args = args
        self.out = Path(args.out)
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.is_main = self.rank == 0
        self.device = _choose_device(args.device, self.world)
        self.state = self.state_class()
        self.extra_callbacks = list(callbacks)
        self.callbacks: list[TrainerCallback] = []
        self.step_runner = EagerStep(self)  # the run's, from step_graph, when it begins
        self.stop_reason: str | None = None
        self.tokens_per_second: float | None = None
        self.t_start = time.monotonic()
        self._evaluated_at: int | None = None
        self._saved_at: int | None = None
        self._prefetcher: BatchPrefetcher | None = None
        self._epoch_batches: tuple[tuple, list] | None = None  # ((epoch, sampler id), its batches)

    # ---------------------------------------------------------------------------------- the run

    def train(self) -> Path:
        """Build, evaluate at step 0, take optimizer steps until a stop condition, then save the
        checkpoint, evaluate (for the report, when the stop is between evaluation points), save the model,
        the tokenizer and ``training.json``; return the output folder.

        Raises:
            InputError: bad input found while building (before any training step).
        """
        with self._process_group():
            self.t_start = time.monotonic()
            if use_tf32(self.device, getattr(self.args, "tf32", False)):
                logger.info("TF32 matrix products and convolutions on %s", self.device)
            self.build()
            self.callbacks = self.default_callbacks() + self.extra_callbacks
            try:
                self._begin()  # OUT, the step runner, the prefetcher, the callbacks, the step-0 evaluation
                state, periods = self.state, self.periods()
                self.stop_reason = self.reached_stop()
                while self.stop_reason is None:
                    batches = self._batches_of(state.epoch)
                    if state.batch_in_epoch >= len(batches):  # the epoch is over
                        state.epoch, state.batch_in_epoch = state.epoch + 1, 0
                        self.stop_reason = self.reached_stop()
                        continue
                    # the batch, loss, backward, clip, optimizer and schedule step; state.step += 1
                    output = self.training_step(batches[state.batch_in_epoch])
                    self._add_to_window(output)
                    for callback in self.callbacks:
                        callback.on_step_end(self, output)
                    epoch_end = self._epoch_ended()
                    if _every(state.step, periods["log"]):
                        self.log_training(output.lr)
                    if _every(state.step, periods["evaluate"]) or epoch_end:
                        self.evaluate()
                    if _every(state.step, periods["save"]) or epoch_end:
                        self.save()
                    self.stop_reason = self.reached_stop()
                self._finish()  # the last checkpoint, evaluation, model, tokenizer, training.json
            finally:
                if self._prefetcher is not None:
                    self._prefetcher.close()
                for callback in self.callbacks:
                    callback.close(self)
            return self.out

    @contextmanager
    def _process_group(self):
        """The process group of a ``torchrun`` run (gloo on the CPU, NCCL on CUDA), started here unless
        one is; on leaving, a barrier and the group torn down. Nothing with one process."""
        if self.device.type == "cuda" and self.world > 1:
            torch.cuda.set_device(self.device)
        started = self.world > 1 and not dist.is_initialized()
        if started:
            dist.init_process_group("nccl" if self.device.type == "cuda" else "gloo")
        try:
            yield
            if self.world > 1:
                dist.barrier()
                _let_communication_threads_settle()
        finally:
            if started:
                dist.destroy_process_group()

    def _begin(self) -> None:
        if self.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
            save_tokenizer(self.tokenizer, self.out)
        self._start_step = self.state.step
        self._recent = deque(maxlen=self.args.log_every)  # the last steps' losses (device tensors)
        self._window = torch.zeros(2, dtype=torch.float64)  # steps, tokens since the last log
        self._window_loss = torch.zeros((), dtype=torch.float64, device=self.device)  # their loss sum
        self._window_seconds = 0.0
        if getattr(self.args, "prefetch", False) and self.prefetchable:
            self._prefetcher = BatchPrefetcher(self.batch_at, pin=pin_for(self.device))
        self.step_runner = make_step_runner(self, getattr(self.args, "step_graph", "none"))
        if self.keeps_best:
            resumed_best(self.state, self.out, self.selection_metric)
        for callback in self.callbacks:
            callback.on_train_begin(self)
        if self.state.step == 0:
            self.evaluate()
        self.model.train()

    def _finish(self) -> None:
        if self._saved_at != self.state.step:  # else the checkpoint is current
            self.save()
        if self._evaluated_at != self.state.step:  # a stop between evaluation points
            self.evaluate(for_report=True)
        if self.is_main:
            record = self.report()
            self.final_model().save_pretrained(self.out, safe_serialization=True)
            save_tokenizer(self.tokenizer, self.out)
            (self.out / TRAINING_JSON).write_text(json.dumps(record, indent=2) + "\n")
        for callback in self.callbacks:
            callback.on_train_end(self)

    def _batches_of(self, epoch: int) -> list:
        """This process's batches of ``epoch`` (the sampler's; the last epoch's kept)."""
        key = (epoch, id(self.sampler))
        if self._epoch_batches is None or self._epoch_batches[0] != key:
            self._epoch_batches = (key, self.sampler.batches(epoch))
        return self._epoch_batches[1]

    def reached_stop(self) -> str | None:
        """The reason of the first stop condition reached (in callback order), or None. Conditions that
        may differ between processes are combined over all of them (one all-reduce), so all stop together."""
        conditions = [c for c in self.callbacks if isinstance(c, StopCondition)]
        for condition in conditions:
            if not condition.per_process and condition.reached(self):
                return condition.reason
        shared = [c for c in conditions if c.per_process]
        if not shared:
            return None
        flags = self._all_reduce(torch.tensor([float(c.reached(self)) for c in shared]), dist.ReduceOp.MAX)
        return next((c.reason for c, flag in zip(shared, flags) if flag), None)

    # ---------------------------------------------------------------------------------- what the run does when

    def periods(self) -> dict[str, int]:
        """Optimizer steps between training-loss logs, evaluations and checkpoints (0: never):
        ``{"log": log_every, "evaluate": eval_every, "save": checkpoint_period(args)}``
        (:func:`~syntaxformer.training.arguments.checkpoint_period`). A task may change them."""
        args = self.args
        return {"log": args.log_every, "evaluate": args.eval_every, "save": checkpoint_period(args)}

    def epoch_batches(self) -> int | None:
        """The batches after which an epoch ends with an evaluation and a checkpoint: with the options'
        ``eval_each_epoch``, the sampler's batches of the current epoch; else None (no evaluation at an
        epoch's end). A task may count an epoch otherwise."""
        if not getattr(self.args, "eval_each_epoch", False):
            return None
        return len(self._batches_of(self.state.epoch))

    def _epoch_ended(self) -> bool:
        """Whether the step just taken ended an epoch that is evaluated and saved (:meth:`epoch_batches`)."""
        batches = self.epoch_batches()
        return batches is not None and self.state.batch_in_epoch >= batches

    @property
    def keeps_best(self) -> bool:
        """Whether this process keeps the best model in ``OUT/best/``: rank 0 of a run whose options say
        ``keeps_best_model``."""
        return self.is_main and getattr(self.args, "keeps_best_model", False)

    def default_callbacks(self) -> list[TrainerCallback]:
        """The stop conditions (:meth:`stop_conditions`) and, on rank 0, TensorBoard and the progress bar
        and log lines. A task may add its own (e.g. the learning curve)."""
        writers = [TensorBoardCallback(), ProgressCallback(quiet=self.args.quiet)] if self.is_main else []
        return self.stop_conditions() + writers

    def stop_conditions(self) -> list[StopCondition]:
        """The stop conditions the options give, in the order they are asked: ``max_steps``, ``epochs``,
        ``max_minutes``, ``early_stopping`` (those given), then SIGTERM/SIGINT."""
        args = self.args
        conditions: list[StopCondition] = [MaxSteps(args.max_steps)] if args.max_steps is not None else []
        conditions += [MaxEpochs(args.epochs)] if args.epochs is not None else []
        conditions += [MaxMinutes(args.max_minutes)] if args.max_minutes is not None else []
        conditions += [EarlyStopping(args.early_stopping)] if getattr(args, "early_stopping", None) else []
        return conditions + [StopOnSignal()]

    # ---------------------------------------------------------------------------------- the task

    def build(self) -> None:
        """Build the run: seed, data, tokenizer, model, optimizer, schedule, sampler (class docstring).
        The task's."""
        raise NotImplementedError

    def make_batch(self, indices: list[int]) -> Batch:
        """The batch of training examples ``indices`` at the current step (any randomness from
        generators seeded by ``(seed, step, rank)``). The task's."""
        raise NotImplementedError

    #: whether a step may run as a graph (``step_graph``): its loss reads and writes no state of the loop
    #: (e.g. no carried recurrent state), so a captured or compiled step is the eager one
    step_graphable: bool = False

    #: whether :meth:`batch_at` is the task's batch, a pure function of the examples and the step, so the
    #: next one may be prepared ahead in another thread (a task may make it a property)
    prefetchable: bool = False

    def batch_at(self, indices: list[int], step: int) -> Batch:
        """The batch of training examples ``indices`` at optimizer step ``step``, reading and writing no
        other state (what :meth:`make_batch` gives at that step), for a task that is :attr:`prefetchable`."""
        raise NotImplementedError

    def next_batch(self, indices: list[int]) -> Batch:
        """The batch of the step about to be taken: :meth:`make_batch`, or with a prefetcher the batch
        prepared during the last step (the same), the one after it then started."""
        if self._prefetcher is None:
            return self.make_batch(indices)
        batch = self._prefetcher.get(indices, self.state.step)
        epoch, position = self.state.epoch, self.state.batch_in_epoch + 1
        batches = self._batches_of(epoch)  # the next step's: the epoch's next batch, or the next epoch's first
        upcoming = batches[position] if position < len(batches) else next(iter(self.sampler.batches(epoch + 1)), None)
        if upcoming is not None:
            self._prefetcher.ahead(upcoming, self.state.step + 1)
        return batch

    def compute_loss(self, model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        """The scalar training loss of ``batch`` through ``model`` (``ddp_model``). The task's."""
        raise NotImplementedError

    def validation_metrics(self) -> dict[str, float]:
        """The metrics of the model as it is on the validation data (all processes), e.g.
        ``{"valid/loss": mean cross-entropy}``: at least the keys of :attr:`validation_keys` and
        :attr:`selection_metric`; ``{}`` without validation data. Evaluation mode, no gradients; leaves the
        model in training mode. Called by :meth:`evaluate` (under :meth:`autocast`). The task's."""
        raise NotImplementedError

    def report(self) -> dict:
        """The contents of ``training.json``. The task's."""
        raise NotImplementedError

    # ---------------------------------------------------------------------------------- evaluation

    def evaluate(self, for_report: bool = False) -> dict[str, float]:
        """Validation at the current step, at most once per step (a second call at the same step does
        nothing): the task's :meth:`validation_metrics` under :meth:`autocast`, kept by
        :meth:`record_validation`, or, for a step already in ``state.valid_history`` (evaluated before a
        resume), the metrics read back from it; then the plateau schedule's score, the best model
        (:func:`~syntaxformer.training.best.keep_if_best`, :attr:`keeps_best`) and every callback's
        ``on_evaluate``.

        Args:
            for_report: the evaluation of a run stopped between evaluation points (a signal,
                ``max_minutes``, a step budget off the evaluation period), made after the last checkpoint
                was written: it goes into ``training.json``, the log and the callbacks, but not to the
                plateau schedule or the best model, and the checkpoint does not hold it, so ``--resume``
                continues as the uninterrupted run would, which did not evaluate there.
        Returns:
            The metrics (``{}`` without validation data, or when this step was already evaluated).
        """
        state = self.state
        if self._evaluated_at == state.step:
            return {}
        self._evaluated_at = state.step
        if state.valid_history and state.valid_history[-1][0] == state.step:  # before a resume
            metrics = dict(zip(self.validation_keys, state.valid_history[-1][1:]))
        else:
            with self.autocast():
                metrics = self.validation_metrics()
            if metrics:
                self.record_validation(metrics)
        if not for_report and isinstance(self.scheduler, PlateauSchedule) and self.selection_metric in metrics:
            self.scheduler.observe(state.step, metrics[self.selection_metric])
        if not for_report and self.keeps_best:
            keep_if_best(self, metrics)
        for callback in self.callbacks:
            callback.on_evaluate(self, metrics)
        return metrics

    def record_validation(self, metrics: dict[str, float]) -> None:
        """Keep a new evaluation's ``metrics``: a ``state.valid_history`` row (the step and the values of
        :attr:`validation_keys`), ``state.initial_valid_loss`` at step 0, and the log
        (:meth:`validation_scalars`). A task with more to record extends it."""
        state = self.state
        state.valid_history.append([state.step, *(metrics[key] for key in self.validation_keys)])
        if state.step == 0:
            state.initial_valid_loss = metrics.get("valid/loss")
        self.log(self.validation_scalars(metrics))

    def validation_scalars(self, metrics: dict[str, float]) -> dict[str, float]:
        """The scalars an evaluation logs (TensorBoard): its ``metrics``; a task may add derived ones."""
        return dict(metrics)

    def final_model(self) -> torch.nn.Module:
        """The model a finished run saves in OUT: :attr:`model` as it is after the last step, or, with
        the options' ``final_model="best"``, the kept best one (``OUT/best/``; the last when the best
        was step 0's or none was kept). Options without ``final_model`` keep the last."""
        best = self.out / BEST
        record = best / BEST_RECORD
        if getattr(self.args, "final_model", "last") != "best" or not record.is_file():
            return self.model
        if json.loads(record.read_text())["step"] == 0:
            return self.model
        return type(self.model).from_pretrained(best)

    def autocast(self):
        """The context of the run's precision: ``torch.autocast`` to bfloat16 on this device with the
        options' ``bf16`` (parameters, optimizer and gradients stay float32), else none (also for
        options without ``bf16``). Its cache of cast weights is on unless :attr:`autocast_cache` is
        False (a captured CUDA graph's step, :class:`~syntaxformer.training.step.CudaGraphStep`)."""
        if getattr(self.args, "bf16", False):
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, cache_enabled=self.autocast_cache)
        return nullcontext()

    # ---------------------------------------------------------------------------------- shared parts

    def make_optimizer(self, parameters, decoupled_weight_decay: bool = True) -> torch.optim.Optimizer:
        """Adam over ``parameters`` (tensors or parameter groups) with the run's ``lr``, ``betas``,
        ``eps`` and ``weight_decay``: AdamW (decoupled decay) when ``weight_decay > 0`` and
        ``decoupled_weight_decay``, else Adam (a decay is then an L2 term in the gradient, as the logic
        task's public code). Torch's fused implementation (``fused=True``: each tensor's whole update in
        one pass) on the devices of :data:`FUSED_ADAM_DEVICES`: on the CPU a step of the default recipe is
        4-6% faster than with the multi-tensor form (``foreach``) or torch's default per-tensor loop
        (benchmarks/speed/train_step.py); the same update, float rounding differs (tests/training/test_optimizer.py).
        Elsewhere the multi-tensor form. A checkpoint keeps its optimiser's settings: ``--resume`` of a
        run saved with another form goes on with that form.

        Args:
            parameters: an iterable of tensors or of parameter-group dicts (torch.optim's form).
            decoupled_weight_decay: AdamW (Loshchilov & Hutter 2019) for a decay > 0; False (or the run's
                ``optimizer`` "adam-l2") = Adam with the decay as an L2 term.
        Returns:
            the optimiser (``torch.optim.Adam`` or ``torch.optim.AdamW``).
        """
        args = self.args
        decoupled_weight_decay = decoupled_weight_decay and getattr(args, "optimizer", "adam") != "adam-l2"
        optimizer = torch.optim.AdamW if args.weight_decay > 0 and decoupled_weight_decay else torch.optim.Adam
        fused = self.device.type in FUSED_ADAM_DEVICES
        return optimizer(
            parameters,
            lr=args.lr,
            betas=tuple(args.betas),
            eps=args.eps,
            weight_decay=args.weight_decay,
            fused=fused,
            foreach=not fused,
        )

    def make_scheduler(self):
        """The ``LambdaLR`` of :attr:`optimizer` with :func:`lr_factor` (warm-up, then ``schedule``
        until ``schedule_steps`` or ``max_steps``, down to ``final_lr_fraction``); with ``schedule``
        "plateau", a :class:`~syntaxformer.training.plateau.PlateauSchedule` on :attr:`selection_metric`
        (in :attr:`selection_mode`), which :meth:`evaluate` feeds."""
        args = self.args
        if args.schedule == "plateau":
            return PlateauSchedule(self.optimizer, args.plateau_factor, args.plateau_patience, mode=self.selection_mode)
        return torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            lambda s: lr_factor(
                s, args.warmup_steps, args.schedule, args.schedule_steps or args.max_steps, args.final_lr_fraction
            ),
        )

    def wrap_for_data_parallel(self) -> torch.nn.Module:
        """:attr:`model` in ``DistributedDataParallel`` with several processes, else itself."""
        if self.world == 1:
            return self.model
        return torch.nn.parallel.DistributedDataParallel(
            self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None
        )

    def resume(self, checkpoint: dict) -> None:
        """Load a checkpoint (:mod:`~syntaxformer.training.checkpoint`) into the model, optimizer,
        scheduler and :attr:`state`; the next step is the one after the checkpoint's."""
        self.model.load_state_dict(checkpoint["model"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        self.scheduler.load_state_dict(checkpoint["scheduler"])
        self.state = self.state_class.resumed(checkpoint["state"])

    # ---------------------------------------------------------------------------------- a step

    def training_step(self, indices: list[int]) -> StepOutput:
        """One optimizer step on the training examples ``indices``: the task's batch (:meth:`next_batch`)
        and its counts on the host, then :meth:`device_step`; advances :attr:`state`."""
        t0 = time.perf_counter()
        batch = self.next_batch(indices)
        n_tokens = batch.n_tokens  # counted on the host, from the batch as built
        loss, lr = self.device_step(batch)
        pairs = len(indices) if self.counts_examples else None
        return self.record_step(loss, lr, n_tokens, t0, pairs=pairs)

    def device_step(self, batch: Batch) -> tuple[torch.Tensor, float]:
        """The step's work on the device: dropout seeded by ``(seed, step, rank)``, then the step runner
        (the loss, backward, clip, optimizer step: :attr:`step_runner`), then the schedule. Returns
        ``(detached loss, learning rate the step used)``. It waits for no value from the device (no host
        synchronisation; ``tests/kernels/test_host_sync.py`` checks it for the models of the registry). A
        compiled or captured step that fails: one log line, the eager step from then on."""
        self.seed_dropout()
        lr = self.optimizer.param_groups[0]["lr"]
        try:
            loss = self.step_runner(batch)
        except Exception as error:  # a capture or compilation that fails: the eager step instead
            if isinstance(self.step_runner, EagerStep):
                raise
            first = (str(error).strip().splitlines() or [""])[0][:300]
            name = self.step_runner.name
            logger.warning("--step-graph %s failed, the eager step instead: %s: %s", name, type(error).__name__, first)
            logger.debug("--step-graph failure in full: %s", "".join(traceback.format_exception(error)))
            self.step_runner = EagerStep(self)
            self.seed_dropout()
            loss = self.step_runner(batch)
        self.scheduler.step()
        return loss, lr

    def training_loss_of(self, batch: Batch) -> torch.Tensor:
        """:meth:`training_loss` of ``batch`` through ``ddp_model`` (what a step runner calls, compiles or captures)."""
        return self.training_loss(self.ddp_model, batch)

    def training_loss(self, model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        """The loss a training step minimises: the task's (:meth:`compute_loss`) under :meth:`autocast`. A
        task adds a penalty term here, outside the autocast (the validation loss stays the task's)."""
        with self.autocast():
            return self.compute_loss(model, batch)

    def backward_and_update(self, loss: torch.Tensor) -> None:
        """Backward of the scalar ``loss``, clipping (``args.clip`` > 0: global L2 norm) and one optimizer
        step: the part of a step that a step runner runs after the forward (the gradients zeroed before
        it and the schedule stepped after it)."""
        loss.backward()
        if self.args.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.clip)
        self.optimizer.step()

    def seed_dropout(self) -> None:
        """Seed torch's generators for the dropout of the current step: ``(seed, step, rank)``."""
        torch.manual_seed(_derived_seed(self.args.seed, self.state.step, self.rank, 2))

    def record_step(
        self, loss: torch.Tensor, lr: float, n_tokens: int, t0: float, pairs: int | None = None
    ) -> StepOutput:
        """Advance :attr:`state` by one optimizer step of loss ``loss`` (a detached scalar tensor, not
        read here) that saw ``n_tokens`` tokens (and ``pairs`` examples, for the sentence-pair
        trainers) in this process, started at ``time.perf_counter()`` ``t0``; the counts in
        :attr:`state` are summed over all processes (one all-reduce of two integers a step when there
        are several). Returns the step's output."""
        self.state.step += 1
        self.state.batch_in_epoch += 1
        tokens, examples = self._all_reduce(torch.tensor([n_tokens, pairs or 0])).tolist()
        self.state.tokens_seen += tokens
        if pairs is not None:
            self.state.pairs_seen += examples
        seconds = time.perf_counter() - t0
        self.state.train_seconds += seconds
        return StepOutput(loss=loss, lr=lr, tokens=n_tokens, seconds=seconds)

    # ---------------------------------------------------------------------------------- around the steps

    def log(self, scalars: dict[str, float]) -> None:
        """Hand ``{tag: value}`` at the current step to every callback's ``on_log`` (TensorBoard)."""
        for callback in self.callbacks:
            callback.on_log(self, scalars)

    def _add_to_window(self, output: StepOutput) -> None:
        """Count the step in the window of the next training-loss log (its loss stays on the device)."""
        self._window += torch.tensor([1.0, output.tokens], dtype=torch.float64)
        self._window_loss += output.loss.double()  # on the device: read at the next log
        self._window_seconds += output.seconds
        self._recent.append(output.loss)

    def log_training(self, lr: float) -> None:
        """Read the window's losses (the one host synchronisation of the steps since the last log; its
        wait counts as training time), log the mean loss, learning rate and throughput, warn on a
        non-finite loss."""
        t0 = time.perf_counter()
        window = torch.cat([self._window_loss.reshape(1).cpu(), self._window])
        waited = time.perf_counter() - t0
        self._window_seconds += waited
        self.state.train_seconds += waited
        totals = self._all_reduce(window)
        mean_loss = float(totals[0] / totals[1])
        if not math.isfinite(mean_loss):
            logger.warning("steps up to %d: the training loss is %s", self.state.step, mean_loss)
        self.tokens_per_second = float(totals[2]) / max(self._window_seconds, 1e-9)
        self.log({"train/loss": mean_loss, "train/lr": lr, "train/tokens_per_second": self.tokens_per_second})
        self._window.zero_()
        self._window_loss.zero_()
        self._window_seconds = 0.0

    def save(self) -> None:
        """Replace ``OUT/checkpoint.pt`` (rank 0; atomically) with the model, optimizer, scheduler,
        :attr:`state`, the options and the number of processes; then every ``on_save``."""
        if self.is_main:
            blob = dict(
                model=self.model.state_dict(),
                optimizer=self.optimizer.state_dict(),
                scheduler=self.scheduler.state_dict(),
                state=asdict(self.state),
                args=asdict(self.args),
                world_size=self.world,
            )
            write_checkpoint(self.out / CHECKPOINT, blob)
        self._saved_at = self.state.step
        for callback in self.callbacks:
            callback.on_save(self)

    @property
    def steps_this_run(self) -> int:
        """Optimizer steps made by this process's run (the total minus the steps it resumed from)."""
        return self.state.step - self._start_step

    @property
    def recent_train_loss(self) -> float | None:
        """Mean training loss of the last ``log_every`` steps (None before the first step)."""
        return sum(float(loss) for loss in self._recent) / len(self._recent) if self._recent else None

    def _all_reduce(self, tensor: torch.Tensor, op=dist.ReduceOp.SUM) -> torch.Tensor:
        """``tensor`` combined over all processes (a copy on the CPU); itself with one process."""
        if self.world == 1:
            return tensor
        tensor = tensor.to(self.device)
        dist.all_reduce(tensor, op=op)
        return tensor.cpu()


def _every(step: int, period: int) -> bool:
    """Whether ``step`` is a multiple of ``period`` (0: never)."""
    return bool(period) and step % period == 0


def _let_communication_threads_settle(seconds: float = 0.2) -> None:
    """Wait ``seconds`` with the GIL released after a run's last collective, before the process group
    and the model are torn down.

    A gloo worker thread frees the last collectives' work objects after the caller has already been
    told they are done, and freeing a tensor that Python has seen takes the GIL. If the interpreter
    is already finalizing, the worker thread is ended inside a destructor and the process aborts
    (``terminate called without an active exception``); a process tearing its trainer down at that
    moment was also seen to hang. Measured with torch 2.13 under torchrun on 2 loaded CPU cores: a
    few runs in a hundred without this wait, none in 48 with it.
    """
    time.sleep(seconds)


__all__ = [
    "TrainingLoop",
    "TrainerState",
    "lr_factor",
    "TRAINING_JSON",
]
