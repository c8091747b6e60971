"""Training a sentence-pair classifier (natural-language inference): a task of the training loop.

:class:`NliTrainer` is the task of the :class:`~syntaxformer.training.loop.TrainingLoop` whose
objective is the cross-entropy of the 3-way label (DESIGN.md §6): it reuses the loop's callbacks
(progress bar, TensorBoard, stop conditions: steps, epochs, minutes, signals), Adam and the
learning-rate schedule, evaluation, best-model keeping, bfloat16 autocast (``bf16``), atomic checkpoints
and ``resume`` (the same rules: every random draw of a step comes from ``(seed, step)`` and an epoch's
batches from ``(seed, epoch)``, so a resumed run equals an uninterrupted one). What differs:

* data: :class:`~syntaxformer.data.nli.NliData` (train / selection / report pairs) instead of a
  corpus; a word tokenizer built from the training pairs (plus, with pre-trained vectors, every
  word that has a vector) -- the vocabulary never depends on the selection or report pairs;
* batches: length-bucketed batches of pairs (length = the longer sentence), encoded by
  :class:`~syntaxformer.data.nli.PairEncoder`; no masking;
* evaluation (step 0, every ``eval_every`` steps, the end of every epoch, the end): loss and
  accuracy on the selection pairs; **model selection**: the model of the best selection accuracy
  (earliest on ties) is written to ``OUT/best/`` (model + tokenizer + ``best.json``,
  :mod:`~syntaxformer.training.best`) -- the one reports score on the report
  split; with ``final_model="best"`` it is also the model left in OUT;
* ``training.json``: the options, model, data, steps, epochs, pairs/s, minutes, the selection
  history and the selected step.

The model: :data:`syntaxformer.models.PAIR_MODELS` ``[model]`` at ``preset`` with ``prior`` and
``overrides``; ``word_vectors`` (a file :func:`~syntaxformer.data.word_vectors.read_word_vectors`
reads) sets the word embeddings' size and values, frozen unless ``overrides`` says
``freeze_word_embeddings=False``.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

import torch
from transformers import AutoTokenizer

from syntaxformer.data.batching import LengthBucketSampler
from syntaxformer.data.nli import LABELS, NliData, PairEncoder, load_nli
from syntaxformer.data.tokenization import build_word_tokenizer
from syntaxformer.data.word_vectors import read_word_vectors
from syntaxformer.errors import InputError
from syntaxformer.models import PAIR_MODELS, default_architecture
from syntaxformer.runtime import code_version, prepare_cpu_loop, resolve_device
from syntaxformer.training.arguments import (
    DataArguments,
    ModelArguments,
    OptimisationArguments,
    OutputArguments,
    RunArguments,
    check_bounds,
    check_choices,
    option,
    same_option,
)
from syntaxformer.training.batch import PairBatch
from syntaxformer.training.best import BEST
from syntaxformer.training.checkpoint import read_checkpoint
from syntaxformer.training.loop import TrainerState, TrainingLoop, _jsonable

logger = logging.getLogger(__name__)


@dataclass
class NliModelArguments:
    """The sentence-pair classifier (:data:`syntaxformer.models.PAIR_MODELS`) and its word vectors."""

    #: the title of its options in ``--help``
    option_group = "model"

    model: str = same_option(
        ModelArguments,
        "model",
        default=default_architecture("pair_classifier"),
        help="the sentence-pair classifier to train, a name in syntaxformer.models.PAIR_MODELS",
    )
    preset: str = same_option(ModelArguments, "preset", help="size preset: paper, small, tiny")
    prior: str | None = same_option(
        ModelArguments,
        "prior",
        help="encoding block's prior: gaussian, none, constituent (default: the model's, gaussian)",
    )
    overrides: dict = same_option(
        ModelArguments,
        "overrides",
        help='override a config field (JSON value), e.g. --set classifier_features="match"; repeatable',
    )
    word_vectors: str | None = option(
        None,
        metavar="PATH",
        help="pre-trained word vectors (gensim KeyedVectors or word2vec text; `nli vectors` makes them), frozen "
        "unless --set freeze_word_embeddings=false (default: learned word vectors)",
    )


@dataclass
class NliDataArguments:
    """The pairs (:func:`~syntaxformer.data.nli.load_nli`), the vocabulary and the batches."""

    #: the title of its options in ``--help``
    option_group = "data and batches"

    data: str = option(
        "sick",
        flag="--corpus",
        help="sick (../shared/data/sick/SICK.txt, official split), a file in SICK's format, or a JSON-lines / "
        "TSV file of training pairs (premise/hypothesis/label or sentence1/sentence2/gold_label)",
    )
    valid_file: str | None = option(
        None, flag="--valid", help="generic data: selection pairs (default: 5% of --corpus held out)"
    )
    test_file: str | None = option(None, flag="--test", help="generic data: report pairs (default: none)")
    min_freq: int = option(1, help="words of the training pairs seen at least this often enter the vocabulary")
    batch_size: int | None = same_option(DataArguments, "batch_size", help="pairs per batch (default: 64)")
    max_tokens: int | None = same_option(DataArguments, "max_tokens")
    bucket_batches: int = same_option(
        DataArguments, "bucket_batches", help="batches' worth of pairs sorted by length together"
    )


@dataclass
class NliRunArguments:
    """How long a run goes, how often it evaluates and saves, and where it runs."""

    #: the title of its options in ``--help``
    option_group = "run"

    max_steps: int | None = same_option(RunArguments, "max_steps")
    epochs: int | None = same_option(RunArguments, "epochs", help="passes over the training pairs (default: no limit)")
    max_minutes: float | None = same_option(RunArguments, "max_minutes")
    save_every: int = same_option(RunArguments, "save_every")
    eval_every: int = same_option(
        RunArguments, "eval_every", help="selection period in steps, besides every epoch end (0: epoch ends only)"
    )
    final_model: str = same_option(
        RunArguments,
        "final_model",
        help="the model left in OUT: the last step's, or the best selection accuracy's (also in OUT/best/)",
    )
    log_every: int = same_option(RunArguments, "log_every")
    seed: int = same_option(RunArguments, "seed")
    device: str | None = same_option(RunArguments, "device")
    bf16: bool = same_option(RunArguments, "bf16", help="train and select under bfloat16 autocast")
    threads: int | None = same_option(RunArguments, "threads")
    resume: bool = same_option(RunArguments, "resume")
    quiet: bool = same_option(RunArguments, "quiet")


@dataclass
class NliTrainArguments(NliRunArguments, OptimisationArguments, NliDataArguments, NliModelArguments, OutputArguments):
    """Everything :class:`NliTrainer` needs, by concern: :class:`~syntaxformer.training.arguments.OutputArguments`,
    :class:`NliModelArguments`, :class:`NliDataArguments`,
    :class:`~syntaxformer.training.arguments.OptimisationArguments`, :class:`NliRunArguments`; each field is
    a ``syntaxformer nli train`` option (its ``help`` metadata; ``data``: ``--corpus``, ``valid_file``:
    ``--valid``, ``test_file``: ``--test``, ``model``: ``--architecture``)."""

    @property
    def keeps_best_model(self) -> bool:
        """Always: NLI training keeps the model of the best selection accuracy in ``OUT/best/``."""
        return True

    def check(self) -> None:
        """Raise :class:`InputError` (one line) for an inconsistent or out-of-range option."""

        def bad(msg):
            raise InputError(msg)

        if self.model not in PAIR_MODELS:
            bad(f"--architecture {self.model}: expected one of {', '.join(PAIR_MODELS)}")
        if self.max_steps is None and self.epochs is None and self.max_minutes is None:
            bad("give at least one stop condition: --max-steps, --epochs or --max-minutes")
        if (self.batch_size is None) == (self.max_tokens is None):
            bad("give exactly one of --batch-size and --max-tokens")
        check_bounds(
            self,
            ("batch_size", "max_tokens", "max_steps", "epochs", "schedule_steps", "log_every"),
            ("warmup_steps", "save_every", "eval_every", "clip", "weight_decay", "min_freq", "plateau_patience"),
        )
        self._check_choices()
        resolve_device(self.device)  # "gpu", or CUDA on a machine without it: InputError

    def _check_choices(self) -> None:
        """Raise :class:`InputError` for an optimiser this trainer lacks, or any other option out of its
        choices (:func:`~syntaxformer.training.arguments.check_choices`)."""
        if self.optimizer not in ("adam", "adam-l2"):
            raise InputError(
                f"--optimizer must be adam or adam-l2 (sgd trains on running text), got {self.optimizer!r}"
            )
        check_choices(self)
        if self.schedule == "plateau" and (self.warmup_steps or not 0.0 < self.plateau_factor < 1.0):
            raise InputError("--schedule plateau takes no --warmup-steps and a --plateau-factor in (0, 1)")
        if self.schedule in ("linear", "cosine") and self.max_steps is None and self.schedule_steps is None:
            raise InputError(
                f"--schedule {self.schedule} decays until --schedule-steps (default --max-steps): give one"
            )


@dataclass
class NliTrainerState(TrainerState):
    """:class:`~syntaxformer.training.loop.TrainerState` plus ``pairs_seen`` and the selection history
    ``selection`` (``[step, epoch, loss, accuracy]`` per evaluation; accuracy 0-100); ``valid_history``
    holds ``[step, loss, accuracy]``, ``best_step`` and ``best_value`` the selected model's step and
    accuracy."""

    pairs_seen: int = 0
    selection: list = field(default_factory=list)

    @classmethod
    def resumed(cls, saved: dict) -> NliTrainerState:
        """:meth:`TrainerState.resumed`; a checkpoint whose ``valid_history`` rows hold the loss only (an
        earlier version's) gets them from its ``selection`` rows."""
        state = super().resumed(saved)
        if any(len(row) < 3 for row in state.valid_history):
            state.valid_history = [[step, loss, accuracy] for step, _, loss, accuracy in state.selection]
        return state


def build_vocabulary(data: NliData, min_freq: int, vector_words=()) -> object:
    """The word tokenizer of a run: words of the training pairs seen at least ``min_freq`` times,
    then the words of ``vector_words`` not among them (specials first; see
    :func:`~syntaxformer.data.tokenization.build_word_tokenizer`)."""
    sentences = [list(p.premise) + list(p.hypothesis) for p in data.train]
    if not vector_words:
        return build_word_tokenizer(sentences, min_freq=max(1, min_freq))
    counts = Counter(w for s in sentences for w in s)
    kept = {w for w, c in counts.items() if c >= min_freq}
    extra = [w for w in vector_words if w not in kept and w.strip() and not any(ch.isspace() for ch in w)]
    return build_word_tokenizer(sentences + [[w] * min_freq for w in extra], min_freq=max(1, min_freq))


class NliTrainer(TrainingLoop):
    """The trainer for sentence-pair classification (module docstring): the sentence-pair task of the
    :class:`~syntaxformer.training.loop.TrainingLoop`.

    Args:
        args: the options.
        data: the pairs (read by the caller, e.g. to derive ``max_steps`` from epochs); None reads
            ``args.data`` / ``args.valid_file`` / ``args.test_file``.
        callbacks: extra callbacks.
    """

    state_class = NliTrainerState
    counts_examples = True
    validation_keys = ("valid/loss", "valid/accuracy")
    selection_metric = "valid/accuracy"
    selection_mode = "max"

    def __init__(self, args: NliTrainArguments, data: NliData | None = None, callbacks=()):
        super().__init__(args, callbacks)
        self.nli_data = data

    # ---------------------------------------------------------------------------------- building

    def build(self) -> None:
        """Seed; read the checkpoint, the pairs and the word vectors; build the vocabulary (or load
        a resumed run's), the model, optimizer and schedule; the batches."""
        args = self.args
        if args.threads:
            torch.set_num_threads(args.threads)
        prepare_cpu_loop(self.device)
        torch.manual_seed(args.seed)
        checkpoint = read_checkpoint(args, self.world)
        if self.nli_data is None:
            self.nli_data = load_nli(args.data, args.valid_file, args.test_file)
        vectors = None
        if args.word_vectors:
            vectors = read_word_vectors(args.word_vectors)
        if checkpoint is not None and (self.out / "tokenizer.json").is_file():
            self.tokenizer = AutoTokenizer.from_pretrained(self.out)
        else:
            self.tokenizer = build_vocabulary(self.nli_data, args.min_freq, vectors[0] if vectors else ())
        self._build_model(vectors)
        self.encoder = PairEncoder(self.tokenizer, self.model.config)
        if checkpoint is not None:
            self.resume(checkpoint)
        self.ddp_model = self.model
        self.sampler = LengthBucketSampler(
            [max(len(p.premise), len(p.hypothesis)) for p in self.nli_data.train],
            batch_size=args.batch_size,
            max_tokens=args.max_tokens,
            seed=args.seed,
            bucket_batches=args.bucket_batches,
        )
        self.batches_per_epoch = len(self.sampler.batches(0))
        self.valid_batches = [  # kept on the device between evaluations
            PairBatch(self.encoder.batch(self.nli_data.valid[i : i + 256])).to(self.device)
            for i in range(0, len(self.nli_data.valid), 256)
        ]

    def _build_model(self, vectors=None) -> None:
        args = self.args
        entry = PAIR_MODELS[args.model]
        presets = entry.pair_classifier.presets
        fields = dict(presets.get(args.preset) or {})
        if args.preset not in presets:
            raise InputError(f"unknown preset {args.preset!r} for {args.model}; expected one of {sorted(presets)}")
        if args.prior is not None:
            fields["prior"] = args.prior
        if vectors is not None:
            fields.update(word_embedding_dim=vectors[1].shape[1], freeze_word_embeddings=True)
        fields.update(args.overrides)
        known = set(entry.config_class().to_dict())
        unknown = sorted(set(args.overrides) - known) + (["prior"] if args.prior and "prior" not in known else [])
        if unknown:
            raise InputError(f"{args.model} has no config field {', '.join(unknown)}")
        try:
            config = entry.config_class(vocab_size=len(self.tokenizer), **fields)
        except (ValueError, TypeError) as e:
            raise InputError(f"cannot build {args.model} / {args.preset}: {e}") from e
        torch.manual_seed(args.seed)
        self.model = entry.pair_classifier.model_class(config)
        if vectors is not None:
            self.model.set_word_vectors(*self._vector_rows(vectors))
        self.model.to(self.device)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.n_trainable = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = self.make_optimizer(trainable)
        self.scheduler = self.make_scheduler()

    def _vector_rows(self, vectors) -> tuple[torch.Tensor, torch.Tensor]:
        """(V, dim) rows of the pre-trained vectors by token id, and (V,) found."""
        words, matrix = vectors
        index = {w: i for i, w in enumerate(words)}
        vocab = self.tokenizer.get_vocab()
        rows = torch.zeros(len(vocab), matrix.shape[1])
        found = torch.zeros(len(vocab), dtype=torch.bool)
        for word, token_id in vocab.items():
            if word in index:
                rows[token_id] = torch.as_tensor(matrix[index[word]])
                found[token_id] = True
        self.vector_coverage = dict(vocabulary=len(vocab), with_vector=int(found.sum()))
        return rows, found

    def epoch_batches(self) -> int:
        """The batches of an epoch (epoch 0's count): validation and a checkpoint at the end of every epoch."""
        return self.batches_per_epoch

    # ---------------------------------------------------------------------------------- a step

    def make_batch(self, indices: list[int]) -> PairBatch:
        """The encoded training pairs ``indices`` (:class:`~syntaxformer.data.nli.PairEncoder`; no randomness)."""
        return PairBatch(self.encoder.batch([self.nli_data.train[i] for i in indices]))

    def compute_loss(self, model, batch: PairBatch) -> torch.Tensor:
        """Mean cross-entropy of the labels of one batch (its ``features`` as
        :meth:`~syntaxformer.data.nli.PairEncoder.batch` makes them). (The loop runs it under its
        autocast: bfloat16 with ``bf16``.)"""
        return model(**batch.to(self.device).features).loss

    # ---------------------------------------------------------------------------------- evaluation

    def validation_scores(self) -> tuple[float, float]:
        """(mean cross-entropy, accuracy 0-100) on the selection pairs; evaluation mode, no gradients."""
        self.model.eval()
        totals = torch.zeros(2, dtype=torch.float64, device=self.device)  # loss x pairs, correct: on the device
        n = 0
        with torch.no_grad():
            for batch in self.valid_batches:
                out = self.compute_loss_and_logits(batch)
                k = len(batch.labels)
                totals += torch.stack([out.loss.double() * k, (out.logits.argmax(-1) == batch.labels).sum().double()])
                n += k
        self.model.train()
        loss_sum, correct = totals.tolist()  # the evaluation's one read
        return loss_sum / n, 100.0 * correct / n

    def compute_loss_and_logits(self, batch: PairBatch):
        """The model's output (``.loss``, ``.logits``) on one batch, on the run's device."""
        return self.model(**batch.to(self.device).features)

    def validation_loss(self) -> float | None:
        """Mean cross-entropy on the selection pairs (:meth:`validation_scores`)."""
        return self.validation_scores()[0]

    def validation_metrics(self) -> dict[str, float]:
        """The loop's validation (under its autocast): ``{"valid/loss": mean cross-entropy,
        "valid/accuracy": percent}`` on the selection pairs (:meth:`validation_scores`)."""
        loss, accuracy = self.validation_scores()
        return {"valid/loss": loss, "valid/accuracy": accuracy}

    def record_validation(self, metrics: dict[str, float]) -> None:
        """The loop's record of a new evaluation, and its ``[step, epoch, loss, accuracy]`` row of
        ``state.selection``."""
        super().record_validation(metrics)
        state = self.state
        epoch = state.epoch + state.batch_in_epoch / max(1, self.batches_per_epoch)
        state.selection.append([state.step, round(epoch, 4), metrics["valid/loss"], metrics["valid/accuracy"]])

    def report(self) -> dict:
        """The contents of ``training.json`` (module docstring)."""
        args, state = self.args, self.state
        seconds = max(state.train_seconds, 1e-9)
        return dict(
            arguments=_jsonable(asdict(args)),
            task="nli",
            model=args.model,
            preset=args.preset,
            prior=getattr(self.model.config, "prior", None),
            seed=args.seed,
            labels=list(LABELS),
            data=self.nli_data.record(),
            vocabulary=len(self.tokenizer),
            word_vectors=(
                dict(
                    path=args.word_vectors,
                    **self.vector_coverage,
                    frozen=bool(self.model.config.freeze_word_embeddings),
                )
                if args.word_vectors
                else "learned"
            ),
            parameters=self.n_params,
            trainable_parameters=self.n_trainable,
            steps=state.step,
            steps_this_run=self.steps_this_run,
            epochs=state.epoch + state.batch_in_epoch / max(1, self.batches_per_epoch),
            batches_per_epoch=self.batches_per_epoch,
            pairs_seen=state.pairs_seen,
            train_minutes_total=round(state.train_seconds / 60, 3),
            minutes=round((time.monotonic() - self.t_start) / 60, 3),
            train_pairs_per_second=round(state.pairs_seen / seconds, 1),
            final_train_loss=self.recent_train_loss,
            selection=dict(
                split=self.nli_data.valid_desc,
                history=state.selection,
                best_step=state.best_step,
                best_valid_accuracy=state.best_value,
                folder=str(self.out / BEST),
            ),
            resumed_from_steps=state.resumed_from,
            stopped=self.stop_reason,
            device=str(self.device),
            threads=torch.get_num_threads(),
            torch=torch.__version__,
            code=code_version(),
        )


def steps_for_epochs(n_pairs: int, batch_size: int, epochs: int) -> int:
    """Optimizer steps of ``epochs`` passes over ``n_pairs`` in batches of ``batch_size``."""
    return epochs * math.ceil(n_pairs / batch_size)


__all__ = [
    "NliTrainArguments",
    "NliModelArguments",
    "NliDataArguments",
    "NliRunArguments",
    "NliTrainer",
    "NliTrainerState",
    "build_vocabulary",
    "steps_for_epochs",
]
