"""The language-model task of the training loop: every model of the registry, on CPU, one GPU, or data-parallel under ``torchrun``.

:func:`train` takes a :class:`TrainArguments` (the ``syntaxformer train`` options, one field each)
and returns the output folder, which then holds everything ``AutoModelForMaskedLM`` /
``AutoTokenizer.from_pretrained`` need, plus ``training.json`` and ``tensorboard/``. It is
``Trainer(args).train()``: the :class:`Trainer` is the masked / causal LM task of the
:class:`~syntaxformer.training.loop.TrainingLoop`; it builds the run (:meth:`Trainer.build`) and the
batches (:meth:`Trainer.make_batch`), the loop takes optimizer steps
(:meth:`~syntaxformer.training.loop.TrainingLoop.train`), evaluates, logs and saves around them; the
stop conditions and the writers (TensorBoard, progress bar, log lines, the learning curve) are
callbacks (:mod:`syntaxformer.training.callbacks`). A new stop condition or writer is a
:class:`~syntaxformer.training.callbacks.TrainerCallback` given to ``Trainer(args, callbacks=[...])``;
a new loss overrides :meth:`Trainer.compute_loss`
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
   (:func:`~syntaxformer.runtime.prepare_cpu_loop`, DESIGN.md §5);
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

**Checkpoints and resume.** Every ``save_every`` steps (default: 500, or a twentieth of a longer
schedule: :func:`~syntaxformer.training.arguments.checkpoint_period`) and at the end ``OUT/checkpoint.pt`` is
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

import logging
import math
import random
import time
from dataclasses import asdict

import torch

from syntaxformer.data.batching import LengthBucketSampler
from syntaxformer.data.preprocess import PRPN
from syntaxformer.errors import InputError
from syntaxformer.models import MODELS, capabilities_of
from syntaxformer.priors import PRIORS, structure_readers
from syntaxformer.runtime import code_version, prepare_cpu_loop
from syntaxformer.sources.checks import model_reads_trees
from syntaxformer.sources.induced import MaskedInputInducer
from syntaxformer.tasks.language_model_data import TrainingData, prepare_data
from syntaxformer.training.arguments import MASK_REPLACE, TrainArguments
from syntaxformer.training.batch import TokenBatch
from syntaxformer.training.callbacks import ParseCurveCallback, TrainerCallback
from syntaxformer.training.checkpoint import CHECKPOINT, RESUMABLE_CHANGES, read_checkpoint
from syntaxformer.training.loop import (
    TRAINING_JSON,
    TrainerState,
    TrainingLoop,
    _derived_seed,
    _jsonable,
    lr_factor,
)
from syntaxformer.training.mlm import unmasked_ids
from syntaxformer.training.model_config import resolve_model_config
from syntaxformer.training.objectives import Objective, build_objective

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# small helpers


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


class Trainer(TrainingLoop):
    """A training run: build it, take optimizer steps, and call the callbacks around them.

    ``Trainer(args, callbacks).train()`` does what the module docstring describes and returns the
    output folder. The default callbacks (:meth:`default_callbacks`) come from ``args``; the
    ``callbacks`` given are called after them. Call :meth:`train` once per trainer.

    Attributes (set by :meth:`build` unless said otherwise):
        args, out: the options and the output folder (from the constructor).
        device, rank, world, is_main: this process's device, rank, number of processes, rank == 0
            (from the constructor).
        state: a :class:`TrainerState`.
        data: the :class:`~syntaxformer.tasks.language_model_data.TrainingData`; tokenizer: its tokenizer.
        objective: the model's :class:`~syntaxformer.training.objectives.Objective` (batches).
        model: the model (unwrapped); ddp_model: the module the training step calls
            (``DistributedDataParallel`` under torchrun, else ``model``).
        optimizer, scheduler, sampler: Adam(W), its ``LambdaLR`` (:func:`lr_factor`), the batches.
        callbacks: the callbacks, in calling order.
        t_start: ``time.monotonic()`` when :meth:`train` started; stop_reason: why it stopped.
        tokens_per_second: the throughput of the last logged window (all processes), or None.
        valid_batches: this process's validation batches (:class:`~syntaxformer.training.batch.TokenBatch`,
            with their ``structure_inputs``), built once and kept on the device; valid_targets: their
            numbers of targets (host integers).

    Raises:
        InputError: from the constructor, options that ``TrainArguments.check`` refuses.
    """

    # ---------------------------------------------------------------------------------- building

    def build(self) -> None:
        """Seed; read the checkpoint (when resuming), the data, the tokenizer; build the model,
        optimizer and schedule (and load the checkpoint into them); wrap the model for data
        parallelism; prepare the batches.

        Raises:
            InputError: as :func:`~syntaxformer.training.checkpoint.read_checkpoint`,
                :func:`~syntaxformer.tasks.language_model_data.prepare_data` and :func:`initial_model`.
        """
        args = self.args
        if args.threads:
            torch.set_num_threads(args.threads)
        prepare_cpu_loop(self.device)
        random.seed(args.seed)
        torch.manual_seed(args.seed)
        checkpoint = read_checkpoint(args, self.world)
        self.data: TrainingData = prepare_data(args, self.out if checkpoint is not None else None)
        self.tokenizer = self.data.tokenizer
        self._build_model()
        self.objective: Objective = build_objective(type(self.model), args, self.tokenizer, self._unmasked_ids())
        self.inducer = self._masked_input_inducer()
        if checkpoint is not None:
            self.resume(checkpoint)
            checkpoint = None
        self.ddp_model = self.wrap_for_data_parallel()
        self.sampler = LengthBucketSampler(
            [len(x) for x in self.data.train_ids],
            batch_size=args.batch_size,
            max_tokens=args.max_tokens,
            seed=args.seed,
            bucket_batches=args.bucket_batches,
            shuffle=args.shuffle,
            min_tokens=args.min_batch_tokens,
            num_replicas=self.world,
            rank=self.rank,
        )
        if self.objective.fixed_shapes and args.batch_size is None:  # token budgets: one row count per length
            lengths = self.sampler.lengths.tolist()
            self.objective.fix_rows([[lengths[i] for i in batch] for batch in self.sampler.all_batches(0)])
        batches = self._validation_batches()
        self.valid_targets = [self.objective.n_targets(batch.labels) for batch in batches]  # once, on the host
        self.valid_batches = [batch.to(self.device) for batch in batches]  # kept on the device between evaluations

    def _build_model(self) -> None:
        self.model = self.make_model().to(self.device)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        declared = capabilities_of(self.model)  # the registry entry's (a wrapper's own)
        self._takes_masked_only = declared.masked_only
        if self.data.has_structure and not declared.structure_inputs:
            option = "--trees" if self.data.train_heads is not None else "--phrases"
            raise InputError(
                f"{option}: {type(self.model).__name__} takes no structure_inputs (a Tree Transformer "
                f"family model with a prior that reads trees, e.g. --prior {next(iter(structure_readers('trees')))}, does)"
            )
        if self.data.has_structure and getattr(self.args, "fixed_shapes", False):
            raise InputError("--fixed-shapes pads only token batches: not with --trees or --phrases")
        if self.data.train_heads is not None and not model_reads_trees(self.model):
            message = next(iter(structure_readers("trees").values())).structure_messages["train-unread"]
            raise InputError(message.format(prior=getattr(self.model.config, "prior", None)))
        self.optimizer = self.make_optimizer(self.parameter_groups())
        self.scheduler = self.make_scheduler()

    def _unmasked_ids(self) -> list[int]:
        """Token ids masking never selects (:func:`~syntaxformer.training.mlm.unmasked_ids`): padding,
        ``[MASK]``, ``[CLS]`` unless ``mask_cls``, ``[UNK]`` unless ``mask_unknown``."""
        return unmasked_ids(self.tokenizer, self.args.mask_cls, self.args.mask_unknown)

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
        :class:`~syntaxformer.tasks.finetune.FineTuneTrainer`)."""
        model = initial_model(self.data.model_overrides(self.args), len(self.tokenizer))
        if self.data.phrase_label_names:  # saved with the config, as the prior keeps them
            PRIORS[model.config.prior].save_phrase_labels(model.config, self.data.phrase_label_names)
        return model

    def parameter_groups(self) -> list:
        """The optimizer's parameters (or parameter groups with their own options): all of
        :attr:`model`'s. Override it in a subclass to give some parameters another learning rate."""
        return list(self.model.parameters())

    def default_callbacks(self) -> list[TrainerCallback]:
        """The loop's (the stop conditions, with ``early_stopping``; on rank 0 TensorBoard, the progress
        bar and log lines) and, on rank 0 with ``eval_treebank``, the learning curve.

        Raises:
            InputError: an unreadable ``eval_treebank`` (:class:`~syntaxformer.training.callbacks.ParseCurveCallback`).
        """
        curve = [ParseCurveCallback(self.args.eval_treebank)] if self.is_main and self.args.eval_treebank else []
        return super().default_callbacks() + curve

    def _validation_batches(self) -> list[TokenBatch]:
        """The validation sentences in corpus order as the objective's batches with their structure
        (:meth:`batch_structure`), built once (masks from a generator seeded by ``seed``); this
        process's share (every ``world``-th batch)."""
        valid_ids = self.data.valid_ids
        if not valid_ids:
            return []
        sampler = LengthBucketSampler(
            [len(x) for x in valid_ids],
            batch_size=self.args.batch_size,
            max_tokens=self.args.max_tokens,
            min_tokens=self.args.min_batch_tokens,
            shuffle=False,
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

    def make_batch(self, indices: list[int]) -> TokenBatch:
        """The objective's batch of the training sequences ``indices`` (into ``data.train_ids``; masks
        from a generator seeded by ``(seed, step, rank)``) with their structure (:meth:`batch_structure`):
        :meth:`batch_at` the current step."""
        return self.batch_at(indices, self.state.step)

    #: the language model's step may run as a graph (``step_graph``; the loss reads no loop state)
    step_graphable = True

    @property
    def prefetchable(self) -> bool:
        """Whether a batch may be prepared ahead (:meth:`batch_at`): unless the run parses its masked
        inputs with a model on the device (:attr:`inducer`)."""
        return self.inducer is None

    def batch_at(self, indices: list[int], step: int) -> TokenBatch:
        """:meth:`make_batch` at optimizer step ``step``: a function of ``indices`` and ``step`` (and the
        run's seed and rank) alone.

        Returns:
            a :class:`~syntaxformer.training.batch.TokenBatch` on the CPU: ``input_ids``,
            ``attention_mask``, ``labels`` ``(B, N)``, ``masked_positions`` ``(M,)`` (masked LM) and the
            ``structure_inputs``.
        """
        generator = torch.Generator().manual_seed(_derived_seed(self.args.seed, step, self.rank, 1))
        batch = self.objective.batch([self.data.train_ids[i] for i in indices], generator)
        batch.structure_inputs = self.batch_structure("train", indices, batch.input_ids, batch.attention_mask)
        return batch

    def compute_loss(self, model: torch.nn.Module, batch: TokenBatch) -> torch.Tensor:
        """The training loss of one batch, a scalar to minimise: the model's own loss for the
        objective's labels (:meth:`model_loss`). Override it in a subclass for another loss (e.g.
        add a penalty); the validation loss stays :meth:`model_loss`. A model with a length
        curriculum (``set_epoch``: the PCFGs, :mod:`syntaxformer.models.pcfg`) is told the epoch first.

        Args:
            model: the module to call (``ddp_model``).
            batch: on the CPU, from the objective
                (:meth:`~syntaxformer.training.objectives.Objective.batch`): ``input_ids``,
                ``attention_mask``, ``labels`` ``(B, N)`` (-100 = not a target) and the
                ``structure_inputs`` (or None).
        """
        if hasattr(self.model, "set_epoch"):
            self.model.set_epoch(self.state.epoch)
        return self.model_loss(model, batch)

    def model_loss(self, model: torch.nn.Module, batch: TokenBatch) -> torch.Tensor:
        """Mean cross-entropy (nats) over the targets of ``batch``: ``model(...).loss`` (masked LM: the
        logits of masked positions only where the model offers ``masked_only``, gathered by the
        batch's ``masked_positions`` when it has them; causal LM: the model shifts the labels). The
        batch's ``structure_inputs`` (``--trees``: ``{"heads": (B, N)}``; ``--phrases``: ``"phrase_ids"``,
        ``"phrase_labels"``) go to the model as ``structure_inputs``. In a training step and in
        validation the loop runs it under its :meth:`~syntaxformer.training.loop.TrainingLoop.autocast`
        (bfloat16 with ``bf16``)."""
        batch = batch.to(self.device)
        kw = batch.model_inputs()
        if self._takes_masked_only_of(model):
            kw["masked_only"] = True
            if batch.masked_positions is not None:
                kw["masked_positions"] = batch.masked_positions
        return model(**kw).loss

    # ---------------------------------------------------------------------------------- around the steps

    def validation_metrics(self) -> dict[str, float]:
        """The loop's validation (:meth:`~syntaxformer.training.loop.TrainingLoop.evaluate`) of the
        language model.

        Returns:
            ``{"valid/loss": mean cross-entropy over the validation targets (nats)}``
            (:meth:`validation_loss`), or ``{}`` without validation data.
        """
        loss = self.validation_loss()
        return {} if loss is None else {"valid/loss": loss}

    def validation_scalars(self, metrics: dict[str, float]) -> dict[str, float]:
        """The validation loss and its perplexity (``valid/perplexity``), as an evaluation logs them."""
        return {**metrics, "valid/perplexity": _perplexity(metrics["valid/loss"])}

    def validation_loss(self) -> float | None:
        """Mean cross-entropy (nats) over all validation targets of the objective (all processes),
        or None without validation data. Evaluation mode, no gradients; leaves the model in training
        mode. The loop's evaluation calls it under its autocast (:meth:`validation_metrics`)."""
        if not self.data.valid_ids:
            return None
        self.model.eval()
        weighted, targets = self.validation_sums(self.model)
        total = self._all_reduce(torch.stack([weighted, weighted.new_tensor(float(targets))]))
        self.model.train()
        return float(total[0] / total[1])  # the evaluation's one read

    def validation_sums(self, model: torch.nn.Module) -> tuple[torch.Tensor, int]:
        """The validation sums of ``model`` (the trained model, or another masked LM of the same
        vocabulary, e.g. a pruned copy) over this process's validation batches, with no gradients, in
        the model's current mode: ``Σ loss × targets`` (nats; a float64 0-dim tensor, summed on the
        device: no read per batch) and the number of targets (a host integer)."""
        weighted = torch.zeros((), dtype=torch.float64, device=self.device)
        with torch.no_grad():
            for batch, n in zip(self.valid_batches, self.valid_targets):
                weighted += self.model_loss(model, batch).double() * n
        return weighted, sum(self.valid_targets)

    def _takes_masked_only_of(self, model: torch.nn.Module) -> bool:
        """Whether ``model`` takes ``masked_only``: the trained model's declared capability (read once,
        also for its data-parallel wrapper), else ``model``'s own declaration."""
        if model is self.model or model is getattr(self, "ddp_model", None):
            return self._takes_masked_only
        return capabilities_of(model).masked_only

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
            code=code_version(),
        )


__all__ = [
    "TrainArguments",
    "Trainer",
    "TrainerState",
    "TrainingLoop",
    "initial_model",
    "lr_factor",
    "MASK_REPLACE",
    "CHECKPOINT",
    "TRAINING_JSON",
    "RESUMABLE_CHANGES",
]
