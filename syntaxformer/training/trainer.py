"""The trainer of every model of the registry: one loop for CPU, one GPU, or data-parallel under ``torchrun``.

:func:`train` takes a :class:`TrainArguments` (the ``syntaxformer train`` options, one field each)
and returns the output folder, which then holds everything ``AutoModelForMaskedLM`` /
``AutoTokenizer.from_pretrained`` need, plus ``training.json`` and ``tensorboard/``. It is
``Trainer(args).train()``: the :class:`Trainer` builds the run (:meth:`Trainer.build`), takes
optimizer steps (:meth:`Trainer.training_step`), and leaves everything around the steps to
callbacks (:mod:`syntaxformer.training.callbacks`): logging (TensorBoard, progress bar, log lines),
the periods of logging, evaluation and checkpoints, the stop conditions, and the learning curve.
A new evaluation or stop condition is a :class:`~syntaxformer.training.callbacks.TrainerCallback`
given to ``Trainer(args, callbacks=[...])``; a new loss overrides :meth:`Trainer.compute_loss`
(``compute_loss(model, batch)``, the batch a :class:`~syntaxformer.training.batch.TokenBatch`) in a
subclass.

**The objective is the model's** (its class attribute ``objective``; :mod:`syntaxformer.training.objectives`):
``masked-lm`` (BERT masking, the default; Tree Transformer, StructFormer, ON-LSTM + self-attention) or
``causal-lm`` (next-word prediction of ``[CLS] w_1 .. w_n [CLS]``, no masking; ON-LSTM). The objective
builds the batches (:class:`~syntaxformer.training.batch.TokenBatch`: inputs, attention mask, labels, and
the sentences' structure with ``--trees`` / ``--phrases``); the loss is the model's own
(``model(...).loss``, :meth:`Trainer.model_loss`). Everything else below is the same for both.

What a run does, in order:

1. seeds ``random``, ``torch`` (and CUDA) from ``seed``; on CPU flushes denormals
   (:func:`~syntaxformer.runtime.flush_denormals_on_cpu`, DESIGN.md §5);
2. reads the corpus (:func:`~syntaxformer.data.corpus.load_corpus`) and holds out a validation slice:
   the ``valid`` corpus if given, else ``valid_fraction`` of the sentences chosen by a permutation
   with the fixed seed 0 (the same slice for every ``--seed``; excluded from training);
3. builds the tokenizer from the training sentences (``word``: one token per word, or ``wordpiece``)
   or loads one from a folder, and encodes; sentences over ``max_length`` tokens are split
   (``overflow="split"``) or skipped (``"skip"``), counted in the log and in ``training.json``;
4. builds the model from :func:`~syntaxformer.training.model_config.resolve_model_config` (preset,
   objective and prior fields, ``prior``, overrides);
5. trains: length-bucketed shuffled batches
   (:class:`~syntaxformer.data.batching.LengthBucketSampler`), the objective's inputs and labels
   (masked LM: BERT masking, :func:`~syntaxformer.training.mlm.mask_tokens`, the loss only at masked
   positions; causal LM: every next token), Adam (lr 1e-4, β (0.9, 0.98), eps 1e-9 as the public
   Tree Transformer code), warm-up then a constant / linear / cosine schedule, gradient clipping
   (max norm 1.5 as the public code; 0 turns it off); validation loss and perplexity (masked LM:
   fixed masks) and the learning curve at step 0, every ``eval_every`` steps and at the end;
6. stops at ``max_steps``, after ``epochs``, at ``max_minutes`` of this process's wall time, or at
   SIGTERM/SIGINT — each a clean stop that saves everything;
7. saves ``model.safetensors`` + ``config.json`` (``save_pretrained``), the tokenizer, ``training.json``
   and the last checkpoint.

**Checkpoints and resume.** Every ``save_every`` steps (and at the end) ``OUT/checkpoint.pt`` is
replaced atomically: model, optimizer and scheduler states, the step, the epoch and the position in
the epoch's batch list. All randomness of a step (masking, dropout) comes from generators seeded by
``(seed, step, rank)``, and an epoch's batches from ``(seed, epoch)``, so no RNG state has to be
carried: a run killed at any moment and restarted with ``resume=True`` continues at the step after
the last checkpoint with exactly the batches, masks and dropout it would have had — the parameters
equal those of an uninterrupted run. ``resume=True`` with no checkpoint in OUT starts afresh (the same
command serves the first start and every restart); without ``resume``, an OUT that already holds a
checkpoint is an error (nothing is overwritten or resumed by accident). On resume, only the run
length and bookkeeping options may change (:data:`RESUMABLE_CHANGES`); ``max_minutes`` counts the
time of this process, while ``training.json`` reports the total.

**Data parallel.** Under ``torchrun --nproc_per_node=R`` (``WORLD_SIZE`` > 1) the process group is
initialised (NCCL on GPU, gloo on CPU), the model is wrapped in ``DistributedDataParallel``, rank r
takes every R-th batch, and only rank 0 writes logs, checkpoints and the model. Each rank's loss is the
mean over its own target tokens and DDP averages the gradients; a step consumes R batches, so
``max_steps`` counts optimizer steps. A resumed run must use the same number of processes.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import os
import random
import time
from collections import deque
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
import torch.distributed as dist

from syntaxformer.data.batching import LengthBucketSampler
from syntaxformer.data.preprocess import PRPN
from syntaxformer.data.tokenization import save_tokenizer
from syntaxformer.errors import InputError
from syntaxformer.models import MODELS
from syntaxformer.priors import PRIORS, structure_readers
from syntaxformer.runtime import flush_denormals_on_cpu
from syntaxformer.sources.checks import model_reads_trees
from syntaxformer.sources.induced import MaskedInputInducer
from syntaxformer.training.arguments import MASK_REPLACE, TrainArguments
from syntaxformer.training.batch import TokenBatch
from syntaxformer.training.callbacks import (
    EarlyStopping,
    KeepBestModel,
    MaxEpochs,
    MaxMinutes,
    MaxSteps,
    ParseCurveCallback,
    Periodic,
    ProgressCallback,
    StepOutput,
    StopCondition,
    StopOnSignal,
    TensorBoardCallback,
    TrainerCallback,
    TrainerControl,
)
from syntaxformer.training.checkpoint import CHECKPOINT, RESUMABLE_CHANGES, read_checkpoint, write_checkpoint
from syntaxformer.training.dataset import TrainingData, prepare_data
from syntaxformer.training.model_config import resolve_model_config
from syntaxformer.training.objectives import Objective, build_objective

logger = logging.getLogger(__name__)

TRAINING_JSON = "training.json"


# --------------------------------------------------------------------------------------------------
# small helpers


def _derived_seed(seed: int, *parts: int) -> int:
    """A 63-bit seed from ``seed`` and integers (step, rank, stream), distinct for distinct tuples."""
    value = seed & (2**63 - 1)
    for p in parts:
        value = (value * 1_000_003 + p + 1) % (2**61 - 1)
    return value


def lr_factor(step: int, warmup_steps: int, schedule: str, max_steps: int | None, final_fraction: float = 0.0) -> float:
    """Multiplier of the peak learning rate for optimizer step ``step`` (0-based).

    Linear warm-up ``(step+1)/warmup_steps`` for the first ``warmup_steps`` steps, then ``constant``
    1, or a ``linear`` / ``cosine`` decay from 1 to ``final_fraction`` at ``max_steps``.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))
    if schedule == "linear":
        shape = 1.0 - progress
    else:
        shape = 0.5 * (1.0 + math.cos(math.pi * progress))
    return final_fraction + (1.0 - final_fraction) * shape


def _build_model(args: TrainArguments, vocab_size: int):
    """The model of ``args``: its config from :func:`~syntaxformer.training.model_config.resolve_model_config`
    (preset, the objective's config fields, the prior's, ``prior`` and the overrides).

    Raises:
        InputError: a config that cannot be resolved, or one the model (its prior) refuses when built.
    """
    config = resolve_model_config(args.model, args.preset, vocab_size, args.prior, args.overrides)
    try:
        return MODELS[args.model](config)  # a prior checks its config fields when built
    except (ValueError, TypeError) as e:
        raise InputError(f"cannot build {args.model} / {args.preset}: {e}") from e


def initial_model(args: TrainArguments, vocab_size: int):
    """The model a run with ``args`` starts from: step 0, the same initialisation (seeded by
    ``args.seed``) as :func:`train` uses — the untrained control of a learning curve.

    Args:
        args: the run's options (model, preset, prior, overrides, seed).
        vocab_size: the tokenizer's size.
    Returns:
        The model (on the CPU, training mode). Re-seeds torch's global generator with
        ``args.seed``, as :func:`train` does before building its model.
    Raises:
        InputError: a model/preset/override that cannot be built.
    """
    torch.manual_seed(args.seed)
    return _build_model(args, vocab_size)


def _perplexity(loss: float) -> float:
    """exp(mean cross-entropy in nats); inf where it overflows."""
    return math.exp(loss) if loss < 700 else math.inf


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
        valid_history: ``[step, validation loss]`` pairs; initial_valid_loss: the step-0 one.
        resumed_from: the step of every resume.
        parse_curve: the learning-curve points (:class:`~syntaxformer.training.callbacks.ParseCurveCallback`).
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

    @classmethod
    def resumed(cls, saved: dict) -> TrainerState:
        """The state of a checkpoint (a field it lacks keeps its default), with this resume's step
        appended to ``resumed_from``."""
        state = cls()
        for f in fields(cls):
            setattr(state, f.name, saved.get(f.name, getattr(state, f.name)))
        state.resumed_from = state.resumed_from + [state.step]
        return state


class Trainer:
    """A training run: build it, take optimizer steps, and call the callbacks around them.

    ``Trainer(args, callbacks).train()`` does what the module docstring describes and returns the
    output folder. The default callbacks (:meth:`default_callbacks`) come from ``args``; the
    ``callbacks`` given are called after them. Call :meth:`train` once per trainer.

    Attributes (set by :meth:`build` unless said otherwise):
        args, out: the options and the output folder (from the constructor).
        device, rank, world, is_main: this process's device, rank, number of processes, rank == 0
            (from the constructor).
        state: a :class:`TrainerState`; control: the :class:`TrainerControl` of the current step.
        data: the :class:`~syntaxformer.training.dataset.TrainingData`; tokenizer: its tokenizer.
        objective: the model's :class:`~syntaxformer.training.objectives.Objective` (batches).
        model: the model (unwrapped); ddp_model: the module the training step calls
            (``DistributedDataParallel`` under torchrun, else ``model``).
        optimizer, scheduler, sampler: Adam(W), its ``LambdaLR`` (:func:`lr_factor`), the batches.
        callbacks: the callbacks, in calling order.
        t_start: ``time.monotonic()`` when :meth:`train` started; stop_reason: why it stopped.
        tokens_per_second: the throughput of the last logged window (all processes), or None.
        valid_batches: this process's validation batches (:class:`~syntaxformer.training.batch.TokenBatch`,
            with their ``structure_inputs``).

    Raises:
        InputError: from the constructor, options that ``TrainArguments.check`` refuses.
    """

    def __init__(self, args: TrainArguments, callbacks: list[TrainerCallback] | tuple = ()):
        args.check()
        self.args = args
        self.out = Path(args.out)
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.is_main = self.rank == 0
        self.device = _choose_device(args.device, self.world)
        self.state = TrainerState()
        self.control = TrainerControl()
        self.extra_callbacks = list(callbacks)
        self.callbacks: list[TrainerCallback] = []
        self.stop_reason: str | None = None
        self.tokens_per_second: float | None = None
        self.t_start = time.monotonic()
        self._evaluated_at: int | None = None
        self._saved_at: int | None = None

    # ---------------------------------------------------------------------------------- the run

    def train(self) -> Path:
        """Build, evaluate at step 0, train until a stop condition, then evaluate, save the
        checkpoint, the model, the tokenizer and ``training.json``; return the output folder.

        Raises:
            InputError: bad input found while building (before any training step).
        """
        started_group = self._init_process_group()
        try:
            self.t_start = time.monotonic()
            self.build()
            try:
                self._begin()
                self.stop_reason = self._loop()
                self._finish()
            finally:
                for callback in self.callbacks:
                    callback.close(self)
            if self.world > 1:
                dist.barrier()
                _let_communication_threads_settle()
            return self.out
        finally:
            if started_group:
                dist.destroy_process_group()

    def _init_process_group(self) -> bool:
        if self.device.type == "cuda" and self.world > 1:
            torch.cuda.set_device(self.device)
        if self.world > 1 and not dist.is_initialized():
            dist.init_process_group("nccl" if self.device.type == "cuda" else "gloo")
            return True
        return False

    def _begin(self) -> None:
        if self.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
            save_tokenizer(self.tokenizer, self.out)
        self._start_step = self.state.step
        self._recent = deque(maxlen=self.args.log_every)  # the last steps' losses
        self._window = torch.zeros(3, dtype=torch.float64)  # loss sum, steps, tokens since the last log
        self._window_seconds = 0.0
        for callback in self.callbacks:
            callback.on_train_begin(self)
        if self.state.step == 0:
            self.evaluate()
        self.model.train()

    def _loop(self) -> str:
        """Optimizer steps until a stop condition is reached; returns its reason."""
        reason = self._stop_reason()
        while reason is None:
            batches = self.sampler.batches(self.state.epoch)
            while self.state.batch_in_epoch < len(batches) and reason is None:
                output = self.training_step(batches[self.state.batch_in_epoch])
                self._after_step(output)
                reason = self._stop_reason()
            if reason is None:
                self.state.epoch += 1
                self.state.batch_in_epoch = 0
                reason = self._stop_reason()
        return reason

    def _after_step(self, output: StepOutput) -> None:
        self._window += torch.tensor([output.loss, 1.0, output.tokens], dtype=torch.float64)
        self._window_seconds += output.seconds
        self._recent.append(output.loss)
        for callback in self.callbacks:
            callback.on_step_end(self, output)
        if self.control.should_log:
            self._log_training(output.lr)
        if self.control.should_evaluate:
            self.evaluate()
        if self.control.should_save:
            self.save()
        self.control.reset()

    def _finish(self) -> None:
        evaluated_before = self._evaluated_at == self.state.step
        self.evaluate()
        if not evaluated_before or self._saved_at != self.state.step:  # else the checkpoint is current
            self.save()
        if self.is_main:
            record = self.report()
            self.model.save_pretrained(self.out, safe_serialization=True)
            save_tokenizer(self.tokenizer, self.out)
            (self.out / TRAINING_JSON).write_text(json.dumps(record, indent=2) + "\n")
        for callback in self.callbacks:
            callback.on_train_end(self)

    def _stop_reason(self) -> str | None:
        """The reason of the first stop condition reached, or None. Conditions that may differ
        between processes are combined over all of them (one all-reduce), so all stop together."""
        conditions = [c for c in self.callbacks if isinstance(c, StopCondition)]
        for condition in conditions:
            if not condition.per_process and condition.reached(self):
                return condition.reason
        shared = [c for c in conditions if c.per_process]
        if not shared:
            return None
        flags = self._all_reduce(torch.tensor([float(c.reached(self)) for c in shared]), dist.ReduceOp.MAX)
        return next((c.reason for c, flag in zip(shared, flags) if flag), None)

    # ---------------------------------------------------------------------------------- building

    def build(self) -> None:
        """Seed; read the checkpoint (when resuming), the data, the tokenizer; build the model,
        optimizer and schedule (and load the checkpoint into them); wrap the model for data
        parallelism; prepare the batches and the callbacks.

        Raises:
            InputError: as :func:`~syntaxformer.training.checkpoint.read_checkpoint`,
                :func:`~syntaxformer.training.dataset.prepare_data`, :func:`initial_model` and
                :class:`~syntaxformer.training.callbacks.ParseCurveCallback`.
        """
        args = self.args
        if args.threads:
            torch.set_num_threads(args.threads)
        flush_denormals_on_cpu(self.device)
        random.seed(args.seed)
        torch.manual_seed(args.seed)
        checkpoint = read_checkpoint(args, self.world)
        self.data: TrainingData = prepare_data(args, self.out if checkpoint is not None else None)
        self.tokenizer = self.data.tokenizer
        self._build_model()
        self.objective: Objective = build_objective(type(self.model), args, self.tokenizer, self.data.special_ids)
        self.inducer = self._masked_input_inducer()
        if checkpoint is not None:
            self.resume(checkpoint)
            checkpoint = None
        self.ddp_model = self.model
        if self.world > 1:
            self.ddp_model = torch.nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None
            )
        self.sampler = LengthBucketSampler(
            [len(x) for x in self.data.train_ids],
            batch_size=args.batch_size,
            max_tokens=args.max_tokens,
            seed=args.seed,
            bucket_batches=args.bucket_batches,
            num_replicas=self.world,
            rank=self.rank,
        )
        self.valid_batches = self._validation_batches()
        self.callbacks = self.default_callbacks() + self.extra_callbacks

    def _build_model(self) -> None:
        args = self.args
        self.model = self.make_model().to(self.device)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self._takes_masked_only = "masked_only" in inspect.signature(self.model.forward).parameters
        if self.data.has_structure and "structure_inputs" not in inspect.signature(self.model.forward).parameters:
            option = "--trees" if self.data.train_heads is not None else "--phrases"
            raise InputError(
                f"{option}: {type(self.model).__name__} takes no structure_inputs (a Tree Transformer "
                f"family model with a prior that reads trees, e.g. --prior {next(iter(structure_readers('trees')))}, does)"
            )
        if self.data.train_heads is not None and not model_reads_trees(self.model):
            message = next(iter(structure_readers("trees").values())).structure_messages["train-unread"]
            raise InputError(message.format(prior=getattr(self.model.config, "prior", None)))
        optimizer = torch.optim.AdamW if args.weight_decay > 0 else torch.optim.Adam
        self.optimizer = optimizer(
            self.parameter_groups(), lr=args.lr, betas=tuple(args.betas), eps=args.eps, weight_decay=args.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            lambda s: lr_factor(
                s, args.warmup_steps, args.schedule, args.schedule_steps or args.max_steps, args.final_lr_fraction
            ),
        )

    def _masked_input_inducer(self):
        """The :class:`~syntaxformer.sources.induced.MaskedInputInducer` of a run that parses its
        masked inputs (``induced_from="masked"`` with an induced source), else None."""
        if not self.args.induces_from_masked_inputs:
            return None
        return MaskedInputInducer(
            self.tokenizer, self.args.trees, self.args.phrases, self.data.tree_level or 1, self.device
        )

    def batch_structure(
        self, split: str, indices: list[int], inputs: torch.Tensor, attention_mask: torch.Tensor
    ) -> dict | None:
        """The ``structure_inputs`` of one batch: the sequences' own (:meth:`TrainingData.structure_inputs`),
        the induced ones replaced by the structures of ``inputs`` (B, N) as the model reads them when the
        run parses its masked inputs (:attr:`inducer`)."""
        structure = self.data.structure_inputs(split, indices)
        if self.inducer is not None:
            structure = {**(structure or {}), **self.inducer(inputs, attention_mask)}
        return structure

    def make_model(self) -> torch.nn.Module:
        """The module to train, on the CPU (:meth:`build` moves it): :func:`initial_model`. Override
        it in a subclass to start from elsewhere (e.g. a trained model,
        :class:`~syntaxformer.training.finetune.FineTuneTrainer`)."""
        model = initial_model(self.data.model_overrides(self.args), len(self.tokenizer))
        if self.data.phrase_label_names:  # saved with the config, as the prior keeps them
            PRIORS[model.config.prior].save_phrase_labels(model.config, self.data.phrase_label_names)
        return model

    def parameter_groups(self) -> list:
        """The optimizer's parameters (or parameter groups with their own options): all of
        :attr:`model`'s. Override it in a subclass to give some parameters another learning rate."""
        return list(self.model.parameters())

    def resume(self, checkpoint: dict) -> None:
        """Load a checkpoint (:mod:`~syntaxformer.training.checkpoint`) into the model, optimizer,
        scheduler and :attr:`state`; the next step is the one after the checkpoint's."""
        self.model.load_state_dict(checkpoint["model"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        self.scheduler.load_state_dict(checkpoint["scheduler"])
        self.state = TrainerState.resumed(checkpoint["state"])

    def default_callbacks(self) -> list[TrainerCallback]:
        """The callbacks ``args`` asks for: the periods of logging, evaluation and checkpoints, the
        stop conditions (max_steps, epochs, max_minutes, early_stopping, signals), and on rank 0 TensorBoard, the
        progress bar and log lines, the best-model writer (``keep_best``) and the learning curve
        (``eval_treebank``)."""
        args = self.args
        curve = ParseCurveCallback(args.eval_treebank) if self.is_main and args.eval_treebank else None
        callbacks = [
            Periodic(args.log_every, "log"),
            Periodic(args.eval_every, "evaluate"),
            Periodic(args.save_every, "save"),
        ]
        callbacks += [MaxSteps(args.max_steps)] if args.max_steps is not None else []
        callbacks += [MaxEpochs(args.epochs)] if args.epochs is not None else []
        callbacks += [MaxMinutes(args.max_minutes)] if args.max_minutes is not None else []
        callbacks += [EarlyStopping(args.early_stopping)] if args.early_stopping else []
        callbacks.append(StopOnSignal())
        if self.is_main:
            callbacks += [TensorBoardCallback(), ProgressCallback(quiet=args.quiet)]
            callbacks += [KeepBestModel()] if args.keep_best else []
        return callbacks + ([curve] if curve is not None else [])

    def _validation_batches(self) -> list[TokenBatch]:
        """The validation sentences in corpus order as the objective's batches with their structure
        (:meth:`batch_structure`), built once (masks from a generator seeded by ``seed``); this
        process's share (every ``world``-th batch)."""
        valid_ids = self.data.valid_ids
        if not valid_ids:
            return []
        sampler = LengthBucketSampler(
            [len(x) for x in valid_ids], batch_size=self.args.batch_size, max_tokens=self.args.max_tokens, shuffle=False
        )
        generator = torch.Generator().manual_seed(_derived_seed(self.args.seed, 0, 0, 7))
        batches = []
        for b, idx in enumerate(sampler.all_batches(0)):
            batch = self.objective.batch([valid_ids[i] for i in idx], generator)
            if b % self.world == self.rank:
                batch.structure_inputs = self.batch_structure("valid", idx, batch.input_ids, batch.attention_mask)
                batches.append(batch)
        return batches

    # ---------------------------------------------------------------------------------- a step

    def apply_gradients(self, loss: torch.Tensor) -> tuple[float, float]:
        """Backward of ``loss``, gradient clipping (``args.clip`` > 0: global L2 norm), one optimizer
        and one schedule step; returns ``(loss value, the learning rate the step used)``. A non-finite
        loss is logged (the step is still taken, as in the reference code)."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.args.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.clip)
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        loss_value = loss.detach().item()
        if not math.isfinite(loss_value):
            logger.warning("step %d: loss is %s", self.state.step + 1, loss_value)
        return loss_value, lr

    def training_step(self, batch: list[int]) -> StepOutput:
        """One optimizer step on the training sequences ``batch`` (indices into ``data.train_ids``):
        the objective's batch (masks from a generator seeded by ``(seed, step, rank)``), seed dropout
        likewise, forward
        (:meth:`compute_loss`), backward, clip, Adam, schedule; advances :attr:`state`."""
        t0 = time.perf_counter()
        args, step = self.args, self.state.step
        generator = torch.Generator().manual_seed(_derived_seed(args.seed, step, self.rank, 1))
        tokens = self.objective.batch([self.data.train_ids[i] for i in batch], generator)
        tokens.structure_inputs = self.batch_structure("train", batch, tokens.input_ids, tokens.attention_mask)
        torch.manual_seed(_derived_seed(args.seed, step, self.rank, 2))  # dropout
        loss = self.compute_loss(self.ddp_model, tokens)
        loss_value, lr = self.apply_gradients(loss)
        return self.record_step(loss_value, lr, tokens.n_tokens, t0)

    def record_step(
        self, loss_value: float, lr: float, n_tokens: int, t0: float, pairs: int | None = None
    ) -> StepOutput:
        """Advance :attr:`state` by one optimizer step that saw ``n_tokens`` tokens (and ``pairs``
        examples, for the sentence-pair trainers) in this process, started at ``time.perf_counter()``
        ``t0``; the counts in :attr:`state` are summed over all processes (one all-reduce of two
        integers a step when there are several). Returns the step's output."""
        self.state.step += 1
        self.state.batch_in_epoch += 1
        tokens, examples = self._all_reduce(torch.tensor([n_tokens, pairs or 0])).tolist()
        self.state.tokens_seen += tokens
        if pairs is not None:
            self.state.pairs_seen += examples
        seconds = time.perf_counter() - t0
        self.state.train_seconds += seconds
        return StepOutput(loss=loss_value, lr=lr, tokens=n_tokens, seconds=seconds)

    def compute_loss(self, model: torch.nn.Module, batch: TokenBatch) -> torch.Tensor:
        """The training loss of one batch, a scalar to minimise: the model's own loss for the
        objective's labels (:meth:`model_loss`). Override it in a subclass for another loss (e.g.
        add a penalty); the validation loss stays :meth:`model_loss`.

        Args:
            model: the module to call (``ddp_model``).
            batch: on the CPU, from the objective
                (:meth:`~syntaxformer.training.objectives.Objective.batch`): ``input_ids``,
                ``attention_mask``, ``labels`` ``(B, N)`` (-100 = not a target) and the
                ``structure_inputs`` (or None).
        """
        return self.model_loss(model, batch)

    def model_loss(self, model: torch.nn.Module, batch: TokenBatch) -> torch.Tensor:
        """Mean cross-entropy (nats) over the targets of ``batch``: ``model(...).loss`` (masked LM: the
        logits of masked positions only where the model offers ``masked_only``; causal LM: the
        model shifts the labels), under bfloat16 autocast with ``bf16``. The batch's
        ``structure_inputs`` (``--trees``: ``{"heads": (B, N)}``; ``--phrases``: ``"phrase_ids"``,
        ``"phrase_labels"``) go to the model as ``structure_inputs``."""
        kw = batch.to(self.device).model_inputs()
        if self._takes_masked_only:
            kw["masked_only"] = True
        autocast = (
            torch.autocast(device_type=self.device.type, dtype=torch.bfloat16) if self.args.bf16 else nullcontext()
        )
        with autocast:
            return model(**kw).loss

    # ---------------------------------------------------------------------------------- around the steps

    def log(self, scalars: dict[str, float]) -> None:
        """Hand ``{tag: value}`` at the current step to every callback's ``on_log`` (TensorBoard)."""
        for callback in self.callbacks:
            callback.on_log(self, scalars)

    def _log_training(self, lr: float) -> None:
        totals = self._all_reduce(self._window.clone())
        mean_loss = float(totals[0] / totals[1])
        self.tokens_per_second = float(totals[2]) / max(self._window_seconds, 1e-9)
        self.log({"train/loss": mean_loss, "train/lr": lr, "train/tokens_per_second": self.tokens_per_second})
        self._window.zero_()
        self._window_seconds = 0.0

    def evaluate(self) -> dict[str, float]:
        """Validation loss at the current step (into ``state.valid_history`` and the log), then every
        callback's ``on_evaluate``; once per step (a second call at the same step does nothing).

        Returns:
            ``{"valid/loss": mean cross-entropy over the validation targets (nats)}``, or ``{}``
            without validation data (or when this step was already evaluated).
        """
        state = self.state
        if self._evaluated_at == state.step:
            return {}
        self._evaluated_at = state.step
        if state.valid_history and state.valid_history[-1][0] == state.step:  # before a resume
            loss = state.valid_history[-1][1]
        else:
            loss = self.validation_loss()
            if loss is not None:
                state.valid_history.append([state.step, loss])
                if state.step == 0:
                    state.initial_valid_loss = loss
                self.log({"valid/loss": loss, "valid/perplexity": _perplexity(loss)})
        metrics = {} if loss is None else {"valid/loss": loss}
        for callback in self.callbacks:
            callback.on_evaluate(self, metrics)
        return metrics

    def validation_loss(self) -> float | None:
        """Mean cross-entropy (nats) over all validation targets of the objective (all processes),
        or None without validation data. Evaluation mode, no gradients; leaves the model in training
        mode."""
        if not self.data.valid_ids:
            return None
        self.model.eval()
        total = torch.zeros(2, dtype=torch.float64)
        with torch.no_grad():
            for batch in self.valid_batches:
                n = self.objective.n_targets(batch.labels)
                loss = float(self.model_loss(self.model, batch))
                total += torch.tensor([loss * n, n], dtype=torch.float64)
        total = self._all_reduce(total)
        self.model.train()
        return float(total[0] / total[1])

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
        return sum(self._recent) / len(self._recent) if self._recent else None

    def report(self) -> dict:
        """The contents of ``training.json``: the options, model, data, tokenizer, steps, epochs,
        tokens, minutes (this process; ``train_minutes_total``: the optimizer steps of all runs),
        losses, the learning curve, resumes, the stop reason, device and processes."""
        args, state = self.args, self.state
        curve = (
            {"parse_curve": dict(treebank=args.eval_treebank, every=args.eval_every, points=state.parse_curve)}
            if args.eval_treebank
            else {}
        )
        rate = self.tokens_per_second
        return dict(
            arguments=_jsonable(asdict(args)),
            model=args.model,
            preset=args.preset,
            prior=getattr(self.model.config, "prior", args.prior),
            objective=self.objective.name,
            objective_description=self.objective.description,
            seed=args.seed,
            preprocessing=asdict(PRPN),  # what load_corpus applied to the words
            data=self.data.record(args),
            tokenizer=dict(
                kind=args.tokenizer, vocab_size=len(self.tokenizer), add_cls=args.add_cls, min_freq=args.min_freq
            ),
            parameters=self.n_params,
            steps=state.step,
            steps_this_run=self.steps_this_run,
            epochs=state.epoch + state.batch_in_epoch / max(1, len(self.sampler.batches(state.epoch))),
            tokens_seen=state.tokens_seen,
            minutes=round((time.monotonic() - self.t_start) / 60, 3),
            train_minutes_total=round(state.train_seconds / 60, 3),
            tokens_per_second=(round(rate, 1) if rate is not None else None),
            final_train_loss=self.recent_train_loss,
            initial_valid_loss=state.initial_valid_loss,
            final_valid_loss=(state.valid_history[-1][1] if state.valid_history else None),
            final_valid_perplexity=(_perplexity(state.valid_history[-1][1]) if state.valid_history else None),
            valid_history=state.valid_history,
            **curve,
            resumed_from_steps=state.resumed_from,
            stopped=self.stop_reason,
            device=str(self.device),
            world_size=self.world,
            bf16=args.bf16,
            torch=torch.__version__,
        )

    def _all_reduce(self, tensor: torch.Tensor, op=dist.ReduceOp.SUM) -> torch.Tensor:
        """``tensor`` combined over all processes (a copy on the CPU); itself with one process."""
        if self.world == 1:
            return tensor
        tensor = tensor.to(self.device)
        dist.all_reduce(tensor, op=op)
        return tensor.cpu()


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
    "TrainArguments",
    "Trainer",
    "TrainerState",
    "initial_model",
    "lr_factor",
    "MASK_REPLACE",
    "CHECKPOINT",
    "TRAINING_JSON",
    "RESUMABLE_CHANGES",
]
