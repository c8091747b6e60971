"""The logical-inference task (Bowman, Potts & Manning 2015): data, options, training, evaluation.

Each pair of propositional-logic formulas is classified into one of 7 relations
(:data:`~syntaxformer.data.logic.RELATIONS`) by a :class:`~syntaxformer.tasks.pair.PairClassifier`
over a chosen sentence encoder (the registry's ``encoder`` use, :data:`syntaxformer.models.ENCODERS`). The protocol (DESIGN.md §6; the
ON-LSTM paper, Shen et al. 2019, §6.4, and its public code ``proplog.py``, read, not copied):

* **train** on the pairs with at most 6 operators (``train0 .. train6``, 135,529 pairs), holding out
  every 10th of them in file order for **validation** (13,552 pairs; 121,977 left to train on): the
  public code's split, the same for every seed;
* **select** the model of the best validation accuracy among the evaluations (every ``eval_every``
  steps and at the end), as the public code keeps its best-validation model;
* **test** on every ``testN``, N = 1 .. 12 operators, reported separately (``test12`` = 12 or more):
  accuracy in percent (0-100) per N, and the mean over N of the groups 1-6 (seen lengths), 7-9 and
  10-12 (length generalisation).

Training goes through the project's :class:`~syntaxformer.tasks.language_model.Trainer` (its loop,
stop conditions, signals, checkpoints and resume, TensorBoard) with :class:`LogicTrainer` replacing
what is specific to masked LM: the data, the model and optimizer, the step (cross-entropy of a batch
of pairs), the validation (loss and accuracy) and the report. One process (no ``torchrun``).

Two recipes (:data:`RECIPES`), both with the public code's optimiser: Adam, eps 1e-9, L2
weight decay 1.2e-6 (``torch.optim.Adam``'s ``weight_decay``), gradient-norm clip 1.0, batch 128
pairs, MLP dropout 0.2.

* ``default`` (:data:`RECIPE`, the defaults of :class:`LogicArguments` and the study's): a fixed
  number of steps with a linear decay, so that a run's length does not depend on the machine
  (docs/results/logic/study.md); the peak learning rate, the steps and the precision are the encoder's
  (:attr:`~syntaxformer.models.registry.EncoderUse.lr`, ``max_steps``, ``precision``: 3e-3, 8,000
  and bf16 for the ON-LSTM, chosen on validation accuracy within a budget of 30 minutes on 2 CPU
  cores; 1e-3, the public code's, 4,000 and fp32 for the others);
* ``public``: the public code's schedule: lr 1e-3, float32, 50 epochs, validation at the end of
  every epoch, the learning rate halved when the validation accuracy has not improved for 3 epochs in a row
  (``schedule="plateau"``, :class:`~syntaxformer.training.plateau.PlateauSchedule`). About 48,000
  steps: a GPU's work.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import MISSING, asdict, dataclass

import torch

from syntaxformer.blocks.pooling import POOLINGS
from syntaxformer.data.batching import LengthBucketSampler, pad_batch
from syntaxformer.data.logic import RELATIONS, SYMBOLS, LogicPair, read_logic_split, split_train_valid
from syntaxformer.data.tokenization import build_word_tokenizer
from syntaxformer.errors import InputError
from syntaxformer.models import ENCODERS, default_architecture, encoder_use, make_encoder_config
from syntaxformer.models.kernel_choice import accepted_fields
from syntaxformer.runtime import code_version, prepare_cpu_loop, resolve_device
from syntaxformer.tasks.pair import PairClassifier, PairClassifierConfig
from syntaxformer.training.arguments import RunArguments, check_choices, option, same_option
from syntaxformer.training.batch import TokenBatch
from syntaxformer.training.checkpoint import read_checkpoint
from syntaxformer.training.loop import TrainerState, TrainingLoop

logger = logging.getLogger(__name__)

#: the operator counts reported (files ``test1 .. test12``; 12 = "12 or more")
TEST_OPERATORS = tuple(range(1, 13))
#: groups of operator counts summarised by the mean of their per-N accuracies
GROUPS = {"1-6": (1, 2, 3, 4, 5, 6), "7-9": (7, 8, 9), "10-12": (10, 11, 12)}
#: the study's recipe (benchmarks/studies/logic/logic_study.py, docs/results/logic/study.md): steps of 128 pairs, linear decay.
#: ``lr=None``, ``max_steps=None`` and ``precision=None``: the encoder's (:attr:`~syntaxformer.models.registry.EncoderUse.lr`,
#: :attr:`~syntaxformer.models.registry.EncoderUse.max_steps`; 4,000 steps = 4.2 epochs of the 121,977
#: training pairs unless the encoder says otherwise)
RECIPE = dict(
    max_steps=None,
    epochs=None,
    batch_size=128,
    lr=None,
    schedule="linear",
    final_lr_fraction=0.1,
    warmup_steps=0,
    eval_every=500,
    eval_each_epoch=False,
    save_every=500,
    precision=None,
)
#: ``syntaxformer logic train --recipe NAME``: the fields each recipe sets (module docstring); options
#: given on the command line win
RECIPES = {
    "default": RECIPE,
    "public": dict(
        RECIPE,
        max_steps=None,
        epochs=50,
        lr=1e-3,
        schedule="plateau",
        eval_every=0,
        eval_each_epoch=True,
        precision="fp32",
    ),
}
#: the schedules of ``--schedule``: :func:`~syntaxformer.training.loop.lr_factor`'s, and ``plateau``
SCHEDULES = ("constant", "linear", "cosine", "plateau")
#: the precisions (``logic train --bf16`` / ``--no-bf16``): float32 throughout, or the products under ``torch.autocast`` to bfloat16
PRECISIONS = ("fp32", "bf16")
#: the most frequent relation of train0-train6 (independence; 53% of train6): the majority-class baseline
MAJORITY = "#"


# ----------------------------------------------------------------------------------------------
# Options
# ----------------------------------------------------------------------------------------------


@dataclass
class LogicTaskArguments:
    """The output folder, the data and its split, the encoder and the pair classifier."""

    #: the title of its options in ``--help``
    option_group = "output, data and model"

    out: str = option(help="output folder (model, best/, logic.json, logic.md, accuracy.png)")
    data: str | None = option(
        None,
        flag="--corpus",
        help="the propositional-logic folder (train0..train12, test0..test12), e.g. ../shared/data/propositional-logic",
    )
    encoder: str = option(
        default_architecture("encoder"),
        flag="--architecture",
        help="the sentence encoder's architecture, a name in syntaxformer.models.ENCODERS",
    )
    preset: str = option("base", help="encoder size: base (the study's) or tiny")
    overrides: dict = option(
        default_factory=dict,
        flag="--set",
        metavar="KEY=VALUE",
        help="override an encoder config field (JSON value), e.g. --set hidden_sizes=[256]; repeatable",
    )
    pooling: str | None = option(
        None,
        choices=tuple(sorted(POOLINGS)),
        help="sentence vector (default: last for recurrent encoders, mean for attention encoders)",
    )
    mlp_hidden: int | None = option(None, help="pair MLP width (default: the sentence-vector width)")
    dropout: float = option(0.2, help="pair MLP dropout (the public code's)")
    max_train_operators: int = option(6, help="train on train0..trainK")
    valid_every: int = option(
        10, help="every this-many-th training pair in file order is validation (the public code's split)"
    )
    max_train_pairs: int | None = option(
        None, help="train on a fixed random subset (seed 0) of this many pairs (quick checks; default: all)"
    )


@dataclass
class LogicOptimisationArguments:
    """The batches, Adam, the learning-rate schedule, clipping and the precision (:data:`RECIPES`)."""

    #: the title of its options in ``--help``
    option_group = "optimisation (options marked 'recipe' default to --recipe's value)"

    batch_size: int = option(RECIPE["batch_size"], help="pairs per step")
    bucket_batches: int = option(50, help="batches' worth of pairs sorted by length together")
    lr: float | None = option(
        RECIPE["lr"],
        help="peak learning rate (default: the encoder's, syntaxformer.models.registry.EncoderUse.lr, set "
        "when the arguments are made)",
    )
    betas: tuple[float, float] = option((0.9, 0.999), help="Adam's beta1 and beta2 (the public code's)")
    eps: float = option(1e-9, help="Adam's epsilon (the public code's)")
    weight_decay: float = option(1.2e-6, help="Adam's L2 decay")
    recipe: str = option(
        "default",
        choices=tuple(sorted(RECIPES)),
        help="default: the study's fixed number of steps (the encoder's: ON-LSTM 8,000 in bf16, others "
        "4,000), linear decay (docs/results/logic/study.md); public: the public ON-LSTM code's 50 epochs, validation each "
        "epoch, lr halved after 3 epochs without a better validation accuracy. Recorded in the report",
    )
    warmup_steps: int = option(RECIPE["warmup_steps"], help="steps of linear warm-up from 0 to --lr")
    schedule: str = option(
        RECIPE["schedule"],
        choices=SCHEDULES,
        help="after warm-up: constant, linear or cosine decay to --final-lr-fraction at --schedule-steps, or "
        "plateau: times --plateau-factor after more than --plateau-patience validations without a better "
        "validation accuracy (no warm-up)",
    )
    plateau_factor: float = option(0.5, help="--schedule plateau: the learning rate's multiplier")
    plateau_patience: int = option(2, help="--schedule plateau: validations without improvement tolerated")
    final_lr_fraction: float = option(
        RECIPE["final_lr_fraction"], help="where linear / cosine decay ends, as a fraction of --lr"
    )
    schedule_steps: int | None = option(None, help="where the decay ends (default: --max-steps)")
    clip: float = option(1.0, help="gradient-norm clipping (the public code's); 0 disables")
    precision: str | None = option(
        None,
        flag="--bf16",
        help="training and validation under torch.autocast to bfloat16 (products in bfloat16; parameters, "
        "optimizer and the ON-LSTM's state in float32; test in float32); --no-bf16: float32 throughout "
        "(default: the recipe's, else the encoder's: on-lstm bf16, the others float32)",
    )


@dataclass
class LogicRunArguments:
    """How long a run goes, how often it validates and saves, and where it runs."""

    #: the title of its options in ``--help``
    option_group = "run"

    max_steps: int | None = option(
        RECIPE["max_steps"],
        help="stop after this many optimizer steps (default: with --epochs absent, the encoder's, "
        "syntaxformer.models.registry.EncoderUse.max_steps, whatever --max-minutes says)",
    )
    epochs: int | None = option(None, help="stop after this many passes over the training pairs (default: none)")
    max_minutes: float | None = same_option(RunArguments, "max_minutes")
    save_every: int = option(RECIPE["save_every"], help="checkpoint period in steps (0: only at the end)")
    eval_every: int = option(RECIPE["eval_every"], help="validation period in steps, 0 = none")
    eval_each_epoch: bool = option(
        RECIPE["eval_each_epoch"], help="also validate (and checkpoint) at the end of every epoch"
    )
    log_every: int = same_option(RunArguments, "log_every", default=50)
    seed: int = same_option(
        RunArguments, "seed", help="random seed: every random choice derives from it (initialisation, batches)"
    )
    device: str | None = same_option(RunArguments, "device")
    threads: int | None = same_option(RunArguments, "threads")
    resume: bool = same_option(RunArguments, "resume")
    quiet: bool = same_option(RunArguments, "quiet")


@dataclass
class LogicArguments(LogicRunArguments, LogicOptimisationArguments, LogicTaskArguments):
    """Everything :class:`LogicTrainer` needs, by concern: :class:`LogicTaskArguments`,
    :class:`LogicOptimisationArguments`, :class:`LogicRunArguments`; each field's ``help`` metadata says
    what it does, and the ``syntaxformer logic train`` options are the fields (``data``: ``--corpus``,
    ``encoder``: ``--architecture``, ``overrides``: ``--set``, ``precision``: ``--bf16`` / ``--no-bf16``)
    but ``valid_every``, ``bucket_batches``, ``betas`` and ``eps``, fixed by the protocol and the public
    code.

    ``lr``, ``max_steps`` (with ``epochs`` None) and ``precision`` (``"fp32"`` or ``"bf16"``) left None are
    the encoder's (:class:`~syntaxformer.models.registry.EncoderUse`), set when the arguments are made.
    ``recipe`` names the recipe the other fields came from (:data:`RECIPES`; recorded in the report, read
    by nothing else).
    """

    @property
    def keeps_best_model(self) -> bool:
        """Always: the logic task keeps the model of the best validation accuracy in ``OUT/best/`` (as the
        public code keeps its best-validation model)."""
        return True

    def __post_init__(self) -> None:
        if self.encoder not in ENCODERS:  # check()'s error
            return
        if self.lr is None:
            self.lr = encoder_use(self.encoder).lr
        if self.max_steps is None and self.epochs is None:
            self.max_steps = encoder_use(self.encoder).max_steps
        if self.precision is None:
            self.precision = encoder_use(self.encoder).precision

    def check(self) -> None:
        """Raise :class:`InputError` (one line) for a missing, inconsistent or out-of-range option."""

        def bad(msg):
            raise InputError(msg)

        if self.data is None:
            bad("give --corpus, the propositional-logic folder (e.g. ../shared/data/propositional-logic)")
        check_choices(self)
        if self.encoder not in ENCODERS:
            bad(f"unknown --architecture {self.encoder!r}; expected one of {', '.join(sorted(ENCODERS))}")
        if self.preset not in encoder_use(self.encoder).presets:
            bad(
                f"unknown --preset {self.preset!r} for {self.encoder}; expected one of "
                f"{', '.join(sorted(encoder_use(self.encoder).presets))}"
            )
        if self.pooling is not None and self.pooling not in POOLINGS:
            bad(f"unknown --pooling {self.pooling!r}; expected one of {', '.join(sorted(POOLINGS))}")
        for name in ("batch_size", "max_steps", "epochs", "max_train_pairs", "mlp_hidden", "log_every"):
            value = getattr(self, name)
            if value is not None and value < 1:
                bad(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        if not 0 <= self.max_train_operators <= 12:
            bad(f"--max-train-operators must be in 0..12, got {self.max_train_operators}")
        if not 0.0 <= self.dropout < 1.0:
            bad(f"--dropout must lie in [0, 1), got {self.dropout}")
        if self.lr is None or self.lr <= 0 or (self.max_minutes is not None and self.max_minutes <= 0):
            bad("--lr and --max-minutes must be positive")
        for name in ("warmup_steps", "save_every", "eval_every", "clip", "weight_decay", "valid_every"):
            if getattr(self, name) < 0:
                bad(f"--{name.replace('_', '-')} must not be negative, got {getattr(self, name)}")
        if self.precision not in PRECISIONS:
            bad(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.schedule == "plateau" and self.warmup_steps:
            bad("--schedule plateau has no warm-up: give --warmup-steps 0")
        if self.schedule == "plateau" and not (0.0 < self.plateau_factor < 1.0 and self.plateau_patience >= 0):
            bad(
                f"--plateau-factor must lie in (0, 1) and --plateau-patience be >= 0, got "
                f"{self.plateau_factor} and {self.plateau_patience}"
            )
        if self.schedule == "plateau" and not (self.eval_every or self.eval_each_epoch):
            bad("--schedule plateau needs validations: give --eval-every N or --eval-each-epoch")
        if self.schedule in ("linear", "cosine") and self.max_steps is None and self.schedule_steps is None:
            bad(f"--schedule {self.schedule} decays until --schedule-steps (default --max-steps): give one")
        if self.device is not None:
            resolve_device(self.device)

    @property
    def bf16(self) -> bool:
        """Whether the run is under bfloat16 autocast: ``precision`` is ``bf16`` (what the training loop reads)."""
        return self.precision == "bf16"


@dataclass
class LogicEvaluateArguments:
    """What ``syntaxformer logic evaluate`` needs (:func:`~syntaxformer.workflows.logic.run_logic_evaluate`);
    each field is one of its options (``data``: ``--corpus``)."""

    model: str = option(
        help="model folder (config.json and model.safetensors; an older pair_classifier.json folder loads too)"
    )
    data: str = same_option(LogicTaskArguments, "data", default=MISSING)
    out: str = option(help="output folder (logic.json, logic.md, accuracy.png/svg)")
    seed: int = option(0, help="unused by the (deterministic) evaluation; for uniformity")
    batch_size: int = option(256, help="pairs per forward pass")
    max_test_pairs: int | None = option(
        None, help="test on the first this-many pairs of each file (quick checks; default: all)"
    )
    device: str | None = same_option(RunArguments, "device")


# ----------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------

#: one encoded pair: (left token ids, right token ids, label index)
Item = tuple[list[int], list[int], int]


def logic_tokenizer():
    """The word tokenizer of the formulas' 11 symbols (:data:`~syntaxformer.data.logic.SYMBOLS`; ids
    4-14 after the special tokens, in a fixed order), saved beside every model."""
    return build_word_tokenizer([list(SYMBOLS)])


def encode_pairs(tokenizer, pairs: list[LogicPair]) -> list[Item]:
    """Token ids of both formulas and the label index of each pair."""
    vocab = tokenizer.get_vocab()
    return [([vocab[t] for t in p.left], [vocab[t] for t in p.right], p.label) for p in pairs]


def collate(items: list[Item], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """B pairs -> ``(input_ids (2B, N), attention_mask (2B, N), labels (B,))``: the left formulas in
    rows 0 .. B-1, the right ones in rows B .. 2B-1 (right padding)."""
    ids, mask = pad_batch([it[0] for it in items] + [it[1] for it in items], pad_id)
    return ids, mask, torch.tensor([it[2] for it in items], dtype=torch.long)


@dataclass
class LogicData:
    """The training and validation pairs of a run, encoded.

    Attributes:
        tokenizer: :func:`logic_tokenizer`.
        train, valid: the pairs; train_items, valid_items: encoded (:func:`encode_pairs`).
        folder: the data folder; held_out_every: the validation rule; subset: ``max_train_pairs``.
    """

    tokenizer: object
    train: list[LogicPair]
    valid: list[LogicPair]
    train_items: list[Item]
    valid_items: list[Item]
    folder: str
    held_out_every: int
    subset: int | None = None

    def record(self) -> dict:
        """What ``training.json`` says of the data: folder, files, pairs per operator count, split."""

        def per_n(pairs):
            counts: dict[int, int] = {}
            for p in pairs:
                counts[p.file_operators] = counts.get(p.file_operators, 0) + 1
            return dict(sorted(counts.items()))

        return dict(
            folder=self.folder,
            train_files=sorted({f"train{p.file_operators}" for p in self.train}),
            train_pairs=len(self.train),
            valid_pairs=len(self.valid),
            train_pairs_per_operators=per_n(self.train),
            valid_pairs_per_operators=per_n(self.valid),
            validation=f"every {self.held_out_every}th pair of the training files in file order "
            "(the public ON-LSTM code's split)",
            train_subset=self.subset,
        )


def prepare_logic_data(args: LogicArguments) -> LogicData:
    """Read ``train0 .. trainK`` (K = ``max_train_operators``), split off validation
    (:func:`~syntaxformer.data.logic.split_train_valid`), optionally keep a fixed random subset
    (permutation seeded 0, file order kept), and encode.

    Raises:
        InputError: a missing folder or file, or a malformed line (naming file and line).
    """
    files = read_logic_split(args.data, "train", range(args.max_train_operators + 1))
    train, valid = split_train_valid(files, args.valid_every)
    if args.max_train_pairs is not None and args.max_train_pairs < len(train):
        keep = torch.randperm(len(train), generator=torch.Generator().manual_seed(0))[: args.max_train_pairs]
        train = [train[i] for i in sorted(keep.tolist())]
    tokenizer = logic_tokenizer()
    logger.info("logic data %s: %d training pairs, %d validation pairs", args.data, len(train), len(valid))
    return LogicData(
        tokenizer,
        train,
        valid,
        encode_pairs(tokenizer, train),
        encode_pairs(tokenizer, valid),
        str(args.data),
        args.valid_every,
        args.max_train_pairs,
    )


# ----------------------------------------------------------------------------------------------
# Model and evaluation
# ----------------------------------------------------------------------------------------------


def build_classifier(args: LogicArguments, vocab_size: int, pad_token_id: int) -> PairClassifier:
    """A fresh :class:`~syntaxformer.tasks.pair.PairClassifier` for ``args`` (encoder, preset, pooling,
    MLP width and dropout), initialised from torch's global generator.

    Raises:
        InputError: an encoder / preset whose config cannot be built, or an override that is no field
            of its config.
    """
    entry = encoder_use(args.encoder)
    try:
        known = accepted_fields(make_encoder_config(args.encoder, args.preset, vocab_size, pad_token_id))
        unknown = sorted(set(args.overrides) - known)
        if unknown:
            raise ValueError(f"no config field {', '.join(unknown)}")
        config = make_encoder_config(args.encoder, args.preset, vocab_size, pad_token_id, **args.overrides)
    except (TypeError, ValueError) as e:
        raise InputError(f"cannot build encoder {args.encoder} / {args.preset}: {e}") from e
    width = entry.width(config)
    return PairClassifier(
        PairClassifierConfig(
            encoder=args.encoder,
            encoder_config=config.to_dict(),
            num_labels=len(RELATIONS),
            pooling=args.pooling or entry.pooling,
            mlp_hidden=args.mlp_hidden or width,
            dropout=args.dropout,
            preset=args.preset,
            labels=list(RELATIONS),
        )
    )


@torch.no_grad()
def predict(model: PairClassifier, items: list[Item], pad_id: int, device, batch_size: int = 256) -> list[int]:
    """The predicted class index of each pair, in ``items`` order (evaluation mode; batches of
    similar length; the model is left in the mode it was in)."""
    was_training = model.training
    model.eval()
    order = sorted(range(len(items)), key=lambda i: max(len(items[i][0]), len(items[i][1])))
    predictions = [0] * len(items)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        ids, mask, _ = collate([items[i] for i in chunk], pad_id)
        labels = model(ids.to(device), mask.to(device)).argmax(-1).tolist()
        for i, label in zip(chunk, labels):
            predictions[i] = label
    model.train(was_training)
    return predictions


def accuracy_by_operators(
    model: PairClassifier, tokenizer, files: dict[int, list[LogicPair]], device, batch_size: int = 256
) -> dict[int, dict]:
    """Accuracy on each file: ``{N: {"pairs", "correct", "accuracy", "majority"}}``: accuracy of the
    model and of always answering :data:`MAJORITY` (the majority-class baseline), in percent (0-100)."""
    result = {}
    for n, pairs in files.items():
        items = encode_pairs(tokenizer, pairs)
        predicted = predict(model, items, tokenizer.pad_token_id, device, batch_size)
        correct = sum(int(p == it[2]) for p, it in zip(predicted, items))
        majority = sum(p.relation == MAJORITY for p in pairs)
        result[n] = dict(
            pairs=len(items),
            correct=correct,
            accuracy=100.0 * correct / len(items) if items else float("nan"),
            majority=100.0 * majority / len(items) if items else float("nan"),
        )
    return result


def group_means(per_n: dict[int, dict]) -> dict[str, float]:
    """The mean of the per-N accuracies (percent) of each group of :data:`GROUPS` present."""
    return {
        name: sum(per_n[n]["accuracy"] for n in ns) / len(ns)
        for name, ns in GROUPS.items()
        if all(n in per_n for n in ns)
    }


# ----------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------


@dataclass
class LogicTrainerState(TrainerState):
    """:class:`~syntaxformer.training.loop.TrainerState` plus the pairs seen; ``valid_history`` holds
    ``[step, loss, accuracy]``, ``best_step`` and ``best_value`` the best validation accuracy (percent)
    and its step."""

    pairs_seen: int = 0


class LogicTrainer(TrainingLoop):
    """The project's :class:`~syntaxformer.training.loop.TrainingLoop` with the logic task: the same loop,
    callbacks, checkpoints and resume (``OUT/checkpoint.pt``; the batches of an epoch come from
    ``(seed, epoch)`` and a step's dropout from ``(seed, step)``, so a resumed run takes the same
    steps), with the data, model, step, validation and report of this task. One process only.

    Raises:
        InputError: bad options (:meth:`LogicArguments.check`), unreadable data, a checkpoint in OUT
            without ``resume`` or written with other options, or ``WORLD_SIZE`` > 1.
    """

    args: LogicArguments
    state_class = LogicTrainerState
    counts_examples = True
    validation_keys = ("valid/loss", "valid/accuracy")
    selection_metric = "valid/accuracy"
    selection_mode = "max"

    def build(self) -> None:
        """Seed; read the checkpoint (when resuming) and the data; build the classifier, Adam and the
        schedule (and load the checkpoint into them); prepare the batches."""
        args = self.args
        if self.world > 1:
            raise InputError("logic training runs in one process; start independent runs instead of torchrun")
        if args.threads:
            torch.set_num_threads(args.threads)
        prepare_cpu_loop(self.device)
        random.seed(args.seed)
        torch.manual_seed(args.seed)
        checkpoint = read_checkpoint(args, self.world)
        self.data = prepare_logic_data(args)
        self.tokenizer = self.data.tokenizer
        self._build_model()
        if checkpoint is not None:
            self.resume(checkpoint)
        self.ddp_model = self.model
        self.sampler = LengthBucketSampler(
            [max(len(a), len(b)) for a, b, _ in self.data.train_items],
            batch_size=args.batch_size,
            seed=args.seed,
            bucket_batches=args.bucket_batches,
        )
        self.batches_per_epoch = len(self.sampler.batches(0))

    def _build_model(self) -> None:
        args = self.args
        torch.manual_seed(args.seed)
        self.model = build_classifier(args, len(self.tokenizer), self.tokenizer.pad_token_id).to(self.device)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.n_encoder_params = sum(p.numel() for p in self.model.encoder.parameters())
        self.optimizer = self.make_optimizer(self.model.parameters(), decoupled_weight_decay=False)
        self.scheduler = self.make_scheduler()

    def epoch_batches(self) -> int | None:
        """With ``eval_each_epoch``, the batches of an epoch (epoch 0's count): validation and a checkpoint
        at the end of every epoch; else None."""
        return self.batches_per_epoch if self.args.eval_each_epoch else None

    def make_batch(self, indices: list[int]) -> TokenBatch:
        """The training pairs ``indices`` (into ``data.train_items``) as :func:`collate` pads them."""
        return TokenBatch(*collate([self.data.train_items[i] for i in indices], self.tokenizer.pad_token_id))

    def compute_loss(self, model, batch: TokenBatch) -> torch.Tensor:
        """Mean cross-entropy (nats) of the batch's relations: ``input_ids``, ``attention_mask``
        ``(2B, N)`` (left formulas, then right ones), ``labels`` ``(B,)``. (The loop runs it under its
        autocast: bfloat16 with ``precision="bf16"``.)"""
        batch = batch.to(self.device)
        return model.loss(batch.input_ids, batch.attention_mask, batch.labels)

    def validation_metrics(self) -> dict[str, float]:
        """The loop's validation (under its autocast) over the validation pairs.

        Returns:
            ``{"valid/loss": mean cross-entropy, "valid/accuracy": percent}``, or ``{}`` without
            validation pairs. Evaluation mode, no gradients; leaves the model in training mode.
        """
        items = self.data.valid_items
        if not items:
            return {}
        self.model.eval()
        loss_sum, correct = 0.0, 0
        with torch.no_grad():
            for start in range(0, len(items), 256):
                ids, mask, labels = collate(items[start : start + 256], self.tokenizer.pad_token_id)
                logits = self.model(ids.to(self.device), mask.to(self.device))
                labels = labels.to(self.device)
                loss_sum += float(torch.nn.functional.cross_entropy(logits, labels, reduction="sum"))
                correct += int((logits.argmax(-1) == labels).sum())
        self.model.train()
        return {"valid/loss": loss_sum / len(items), "valid/accuracy": 100.0 * correct / len(items)}

    def report(self) -> dict:
        """The contents of ``training.json``: options, encoder, data, parameters, steps, epochs, pairs,
        tokens, minutes (``train_minutes_total``: the optimizer steps of all runs), losses and
        accuracies, the best validation step, resumes, the stop reason, device."""
        args, state = self.args, self.state
        rate = self.tokens_per_second
        return dict(
            task="propositional-logic inference (Bowman et al. 2015), 7 relations",
            arguments={k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(args).items()},
            encoder=args.encoder,
            preset=args.preset,
            pooling=self.model.config.pooling,
            seed=args.seed,
            data=self.data.record(),
            parameters=self.n_params,
            encoder_parameters=self.n_encoder_params,
            steps=state.step,
            steps_this_run=self.steps_this_run,
            epochs=state.epoch + state.batch_in_epoch / max(1, len(self.sampler.batches(state.epoch))),
            pairs_seen=state.pairs_seen,
            tokens_seen=state.tokens_seen,
            minutes=round((time.monotonic() - self.t_start) / 60, 3),
            train_minutes_total=round(state.train_seconds / 60, 3),
            tokens_per_second=(round(rate, 1) if rate is not None else None),
            final_train_loss=self.recent_train_loss,
            initial_valid_loss=state.initial_valid_loss,
            final_valid_loss=(state.valid_history[-1][1] if state.valid_history else None),
            final_valid_accuracy=(state.valid_history[-1][2] if state.valid_history else None),
            best_valid_accuracy=state.best_value,
            best_step=state.best_step,
            valid_history=state.valid_history,
            resumed_from_steps=state.resumed_from,
            stopped=self.stop_reason,
            device=str(self.device),
            threads=torch.get_num_threads(),
            torch=torch.__version__,
            code=code_version(),
        )


__all__ = [
    "TEST_OPERATORS",
    "GROUPS",
    "RECIPE",
    "RECIPES",
    "SCHEDULES",
    "PRECISIONS",
    "MAJORITY",
    "LogicTaskArguments",
    "LogicOptimisationArguments",
    "LogicRunArguments",
    "LogicArguments",
    "LogicEvaluateArguments",
    "LogicData",
    "Item",
    "logic_tokenizer",
    "encode_pairs",
    "collate",
    "prepare_logic_data",
    "build_classifier",
    "predict",
    "accuracy_by_operators",
    "group_means",
    "LogicTrainerState",
    "LogicTrainer",
]
