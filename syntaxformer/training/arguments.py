"""The options of a training run: :class:`TrainArguments` (one field per ``syntaxformer train``
option, each documented by its :func:`option` metadata) and the masking rules :data:`MASK_REPLACE`."""

from __future__ import annotations

import json
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path

from syntaxformer.data.structure_source import StructureSource
from syntaxformer.errors import InputError
from syntaxformer.models import MODELS, default_architecture
from syntaxformer.pretrained import SHIPPED, model_folder
from syntaxformer.priors import PRIORS, structure_readers
from syntaxformer.runtime import resolve_device
from syntaxformer.training.mlm import MASK_REPLACE
from syntaxformer.training.model_config import requested_fields
from syntaxformer.training.objectives import objective_class

#: ``optimizer`` values: Adam(W) and Adam with an L2 decay
#: (:meth:`~syntaxformer.training.loop.TrainingLoop.make_optimizer`), or SGD then NT-ASGD (running text only:
#: :mod:`syntaxformer.tasks.running_text`)
OPTIMIZERS = ("adam", "adam-l2", "sgd")


def option(default=MISSING, *, help: str, default_factory=MISSING, **cli) -> Field:
    """A dataclass field with its command-line option: ``help`` (the field's one documentation, which
    ``--help`` prints; a None default is said in words, ``(default: ...)``) and, where they differ from
    what the field gives, ``flag`` (the option's name; default ``--`` + the field's name with dashes),
    ``choices`` and ``metavar`` (``syntaxformer.cli.arguments.add_dataclass_arguments`` reads them).

    Args:
        default, default_factory: as :func:`dataclasses.field`'s.
        help: what the option does, for people.
        **cli: ``flag``, ``choices``, ``metavar``.
    """
    unknown = set(cli) - {"flag", "choices", "metavar"}
    if unknown:
        raise TypeError(f"option() got unknown metadata {sorted(unknown)}")
    return field(default=default, default_factory=default_factory, metadata={"help": help, **cli})


def same_option(cls: type, name: str, **changes) -> Field:
    """The field ``name`` of the dataclass ``cls`` again, for another options class (one text for one
    option): its default and metadata, with ``changes`` (``default``, ``help``, ``flag``, ...) replacing
    theirs."""
    f = cls.__dataclass_fields__[name]
    metadata = {**f.metadata, **{key: value for key, value in changes.items() if key != "default"}}
    if "default" in changes:
        return option(changes["default"], **metadata)
    return option(f.default, default_factory=f.default_factory, **metadata)


def check_choices(args) -> None:
    """The one check of every option that declares its ``choices`` (:func:`option`): each such field of
    the arguments dataclass ``args`` holds one of them, or None.

    Raises:
        InputError: the first field that does not, named by its flag (``--schedule must be one of
            constant, linear, cosine, plateau, got 'steps'``).
    """
    for f in fields(args):
        choices, value = f.metadata.get("choices"), getattr(args, f.name)
        if choices is not None and value is not None and value not in choices:
            flag = f.metadata.get("flag", "--" + f.name.replace("_", "-"))
            raise InputError(f"{flag} must be one of {', '.join(map(str, choices))}, got {value!r}")


#: the checkpoint period without ``--save-every``, in steps, and how many checkpoints a longer schedule gets
SAVE_EVERY, SAVES_PER_SCHEDULE = 500, 20


def checkpoint_period(args) -> int:
    """Steps between checkpoints: ``args.save_every`` when given (0: only at the end), else
    :data:`SAVE_EVERY`, or 1/:data:`SAVES_PER_SCHEDULE` of ``args.max_steps`` when that is more: a
    checkpoint of the ``paper`` preset with Adam's state is about 0.5 GB, which a step at an accelerator's
    80 steps/s would write every 6 seconds (60,000 steps: every 3,000)."""
    if args.save_every is not None:
        return args.save_every
    return max(SAVE_EVERY, (getattr(args, "max_steps", None) or 0) // SAVES_PER_SCHEDULE)


def check_bounds(args, at_least_one: tuple[str, ...], non_negative: tuple[str, ...]) -> None:
    """The range checks every training task's arguments share, as one-line errors named by their flags.

    Args:
        args: an arguments dataclass with ``max_minutes`` and ``lr``, and the fields named below.
        at_least_one: integer fields that, when not None, must be at least 1 (sizes, steps, epochs).
        non_negative: fields that must not be negative (intervals, warm-up, clipping, decay).

    Raises:
        InputError: the first field out of range (``--max-steps must be at least 1, got 0``); a
            ``max_minutes`` that is not positive; an ``lr`` that is not positive.
    """
    for name in at_least_one:
        value = getattr(args, name)
        if value is not None and value < 1:
            raise InputError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.max_minutes is not None and args.max_minutes <= 0:
        raise InputError(f"--max-minutes must be positive, got {args.max_minutes}")
    if args.lr <= 0:
        raise InputError(f"--lr must be positive, got {args.lr}")
    for name in non_negative:
        if getattr(args, name) is not None and getattr(args, name) < 0:
            raise InputError(f"--{name.replace('_', '-')} must not be negative, got {getattr(args, name)}")


@dataclass
class OutputArguments:
    """Where a run writes (the first field of :class:`TrainArguments`)."""

    #: the title of its options in ``--help``
    option_group = "output"

    out: str = option(help="output folder")


@dataclass
class ModelArguments:
    """The model: its architecture, size and config (:mod:`syntaxformer.models`; one config from them:
    :func:`syntaxformer.training.model_config.resolve_model_config`)."""

    #: the title of its options in ``--help``
    option_group = "model"

    model: str = option(
        default_architecture("language_model"),
        flag="--architecture",
        help="the architecture to train, a name in syntaxformer.models.MODELS (tree-transformer, structformer, "
        "on-lstm, ...)",
    )
    preset: str = option("small", help="size preset: paper, small, mini, tiny (per architecture)")
    prior: str | None = option(
        None,
        help="structural prior, a name in syntaxformer.priors.PRIORS: constituent, gaussian, "
        "structural-position (needs --trees), multi-granularity ('tree' heads need --phrases), "
        "or none (plain Transformer) (default: the architecture's, constituent for the Tree Transformer)",
    )
    overrides: dict = option(
        default_factory=dict,
        flag="--set",
        metavar="KEY=VALUE",
        help="override a config field (JSON value), e.g. --set hidden_size=128; repeatable",
    )


_TREES_HELP = (
    "a dependency tree per sentence, for a prior that reads one (structural-position; required there, refused "
    "for other models). gold = the sentences and trees of the dependency source --corpus names (ptb-sample, a "
    "CoNLL-U or .dp file; punctuation removed); induced:MODEL_DIR = the maximum-spanning-tree heads of a trained "
    "StructFormer for each sentence (default: none)"
)
_PHRASES_HELP = (
    "a constituency tree per sentence, cut at the reading prior's tree level (mgsa_tree_level) into the phrases "
    "of the multi-granularity prior's 'tree' heads (required there, refused for other models). gold = the gold "
    "trees of the treebank --corpus names (ptb-sample, a .mrg / bracketed file); induced:MODEL_DIR = the trees a "
    "trained parser (Tree Transformer, StructFormer or ON-LSTM) induces for each sentence (as parse decodes them); "
    "may be given with --trees (default: none)"
)


@dataclass
class DataArguments:
    """The training text, its structure sources, tokenisation, batches and masking. ``trees`` and
    ``phrases`` are strings or :class:`~syntaxformer.data.structure_source.StructureSource` values
    (:meth:`TrainArguments.check` parses them; :mod:`syntaxformer.data.trees`,
    :mod:`syntaxformer.data.phrases`); an ``induced:`` source from masked inputs is
    :class:`~syntaxformer.sources.induced.MaskedInputInducer`."""

    #: the title of its options in ``--help``
    option_group = "data, batches and masking"

    corpus: str = option(
        "ptb-sample",
        help="the training text: ptb-sample (the embedded treebank's words), wikitext-2 (the embedded "
        "WikiText-2 training split) or text files, one sentence per line; comma-separated items, read in order "
        "(paths, globs, ptb-sample,wikitext-2)",
    )
    valid: str | None = option(
        None,
        help="validation text (same forms as --corpus) (default: --valid-fraction of --corpus held out)",
    )
    exclude_treebank: str | None = option(
        None,
        metavar="TREEBANK",
        help="drop from the training text every sentence of this treebank (ptb-sample, a half of it, or a "
        "treebank path), word for word after preprocessing (Mikolov's <unk> matches any word): the held-out "
        "setting, a model that never read the sentences it is scored on; counted in training.json "
        "(default: keep them, the transductive setting)",
    )
    trees: str | None = option(None, metavar="gold|induced:MODEL_DIR", help=_TREES_HELP)
    phrases: str | None = option(None, metavar="gold|induced:MODEL_DIR", help=_PHRASES_HELP)
    induced_from: str = option(
        "masked",
        choices=("masked", "sentence"),
        help="for --trees / --phrases induced:MODEL_DIR: 'masked' parses every training batch as the model "
        "reads it, masks included, so no structure carries information about a masked word (the source "
        "model runs at every step; needs --tokenizer word); 'sentence' parses each unmasked sentence once "
        "before training. Gold structures are the sentence's",
    )
    valid_fraction: float = option(
        0.05, help="without --valid: fraction of the corpus held out (a fixed seed-0 choice; 0: none)"
    )
    tokenizer: str = option("word", help="word (one token per word), wordpiece, or a folder with a saved tokenizer")
    min_freq: int = option(
        2,
        help="word tokenizer: keep words seen at least this often (public code: > 1); WordPiece: minimum "
        "piece frequency",
    )
    max_vocab: int | None = option(
        None, help="word tokenizer: vocabulary cap (special tokens included) (default: no cap)"
    )
    wordpiece_vocab_size: int = option(16000, help="vocabulary of --tokenizer wordpiece (the paper: 16k)")
    add_cls: bool = option(False, help="prepend [CLS] to every sentence (as the public code)")
    max_length: int = option(128, help="tokens per sentence; longer ones are handled by --overflow")
    overflow: str = option(
        "split",
        choices=("split", "skip", "cut"),
        help="what to do with longer sentences: split into pieces, skip, or cut to --max-length tokens (the "
        "public Tree Transformer code's inputs of 60 positions); counted in training.json",
    )
    max_sentence_length: int | None = option(
        None,
        help="drop sentences of more tokens (special tokens included) before --overflow applies (the public "
        "Tree Transformer code: 70) (default: none dropped)",
    )
    batch_size: int | None = option(
        64,
        help="sentences per batch and process (default: 64 unless --max-tokens or --min-batch-tokens)",
    )
    max_tokens: int | None = option(
        None, help="padded tokens per batch instead of --batch-size (default: --batch-size)"
    )
    min_batch_tokens: int | None = option(
        None,
        help="instead of --batch-size: batches of consecutive sentences of the length-sorted corpus, each "
        "filled to at least this many tokens, the same batches every epoch in a shuffled order (the public "
        "StructFormer code: 4096) (default: --batch-size)",
    )
    bucket_batches: int = option(50, help="batches' worth of sentences sorted by length together")
    pad_to_multiple: int | None = option(
        None,
        help="pad each batch to its longest sentence rounded up to a multiple of this, e.g. 8 or 16 (few "
        "shapes for an accelerator's graphs; padding changes no loss or gradient) (default: the longest)",
    )
    shuffle: bool = option(
        True,
        help="shuffled, length-bucketed batches; --no-shuffle: batches of consecutive sentences in corpus "
        "order, the same every epoch (the public Tree Transformer code)",
    )
    mask_rate: float = option(0.15, help="BERT selection rate (the public code: 0.142857); masked-LM models only")
    mask_replace: str = option(
        "bert",
        choices=tuple(MASK_REPLACE),
        help="masked-LM models: a selected token becomes 80% [MASK] / 10% random / 10% kept (bert: BERT, the "
        "Tree Transformer) or always [MASK] (mask: the public StructFormer code, with --mask-rate 0.3)",
    )
    mask_unknown: bool = option(
        True,
        help="masked-LM models: [UNK] may be selected for masking; --no-mask-unknown: never (the public "
        "StructFormer code)",
    )
    mask_cls: bool = option(
        False,
        help="masked-LM models: a leading [CLS] may be selected for masking like a word, and drawn as a "
        "random replacement (the public Tree Transformer code)",
    )
    fixed_shapes: bool = field(
        default=False,
        metadata={
            "help": "few batch shapes for an accelerator's graphs: columns padded to --pad-to-multiple (8 when "
            "not given), a short batch filled to --batch-size with empty rows, the masked positions a list of "
            "fixed size per shape; the same masks, loss and gradients (needs --batch-size, or --min-batch-tokens: "
            "rows filled to the most of a batch of that length; not with --trees / "
            "--phrases)"
        },
    )


@dataclass
class OptimisationArguments:
    """The optimiser, the learning-rate schedule and clipping."""

    #: the title of its options in ``--help``
    option_group = "optimisation"

    optimizer: str = option(
        "adam",
        choices=OPTIMIZERS,
        help="adam (AdamW with --weight-decay), adam-l2 (the decay an L2 term of the gradient, as the public "
        "StructFormer and ON-LSTM code), or sgd: SGD then averaged SGD by the non-monotone trigger (running "
        "text only: needs --bptt)",
    )
    lr: float = option(1e-4, help="peak learning rate (after warm-up)")
    betas: tuple[float, float] = option((0.9, 0.98), help="Adam's beta1 and beta2")
    eps: float = option(1e-9, help="Adam's epsilon")
    weight_decay: float = option(0.0, help="> 0: AdamW")
    warmup_steps: int = option(0, help="steps of linear warm-up from 0 to --lr")
    schedule: str = option(
        "constant",
        choices=("constant", "linear", "cosine", "plateau", "inverse-sqrt"),
        help="after warm-up; inverse-sqrt: times sqrt(warm-up / step) (translation); linear/cosine decay to --final-lr-fraction at --schedule-steps; plateau: times "
        "--plateau-factor whenever the validation loss has not improved for more than --plateau-patience "
        "evaluations (torch's ReduceLROnPlateau, threshold 0; the public StructFormer code)",
    )
    final_lr_fraction: float = option(
        0.0, help="the learning rate where linear/cosine decay ends, as a fraction of --lr"
    )
    schedule_steps: int | None = option(
        None,
        help="where linear/cosine decay ends, e.g. an estimate of the steps a --max-minutes run makes; later "
        "steps keep the final rate (default: --max-steps)",
    )
    clip: float = option(1.5, help="gradient-norm clipping (public code 1.5); 0 disables")
    plateau_factor: float = option(0.5, help="--schedule plateau: the learning rate's factor")
    plateau_patience: int = option(
        2, help="--schedule plateau: evaluations without a lower validation loss before the factor applies"
    )


@dataclass
class RunArguments:
    """How long a run goes, what it evaluates and saves, and where it runs."""

    #: the title of its options in ``--help``
    option_group = "run"

    max_steps: int | None = option(
        None,
        help="stop after this many optimizer steps. A run needs at least one stop condition: --max-steps, "
        "--epochs or --max-minutes (default: none of them, so one must be given)",
    )
    epochs: int | None = option(None, help="stop after this many passes over the training text (default: no limit)")
    max_minutes: float | None = option(
        None, help="stop cleanly (and save) after this many minutes of this process (default: no limit)"
    )
    save_every: int | None = option(
        None,
        help=f"checkpoint period in steps, 0: only at the end (default: {SAVE_EVERY}, or 1/{SAVES_PER_SCHEDULE} of "
        "a longer --max-steps schedule)",
    )
    eval_every: int = option(
        200,
        help="validation (and learning-curve) period in steps (0: only at the start and the end)",
    )
    eval_treebank: str | None = option(
        None,
        metavar="TREEBANK",
        help="learning curve: parse this gold treebank (e.g. ptb-sample:dev) at step 0, every --eval-every "
        "steps and at the end; sentence/corpus F1 of every decoder with step, tokens seen, training and wall "
        "minutes into training.json (parse_curve) and TensorBoard (default: no learning curve)",
    )
    eval_each_epoch: bool = option(False, help="also validate (and save a checkpoint) at the end of every epoch")
    keep_best: bool = option(
        False,
        help="also write the model of the lowest validation loss (every --eval-every steps) to OUT/best/ "
        "with best.json (step, loss); needs validation data; not with --head-gates",
    )
    final_model: str = option(
        "last",
        choices=("last", "best"),
        help="the model left in OUT: the last step's, or the lowest validation loss's of the evaluations "
        "after step 0 (needs --keep-best; the last when none was better than step 0's)",
    )
    early_stopping: int = option(
        0,
        metavar="PATIENCE",
        help="stop when this many evaluations in a row have not lowered the validation loss below the "
        "lowest before them (0: never); needs validation data",
    )
    log_every: int = option(20, help="TensorBoard / progress-bar period (steps)")
    seed: int = option(0, help="random seed: every random choice derives from it (initialisation, batches, masking)")
    device: str | None = option(None, help="cpu, cuda, cuda:N (default: cuda if available)")
    bf16: bool = option(False, help="bfloat16 autocast")
    threads: int | None = option(None, help="torch CPU threads (default: PyTorch's)")
    resume: bool = option(False, help="continue from OUT/checkpoint.pt if present (else start afresh)")
    quiet: bool = option(False, help="no progress bar")
    prefetch: bool = field(
        default=False,
        metadata={
            "help": "prepare the next batch (gather, pad, mask; pinned for CUDA) in a background thread while "
            "the current step runs; the same batches"
        },
    )
    tf32: bool = field(
        default=False,
        metadata={
            "help": "CUDA: float32 matrix products and convolutions in TensorFloat-32 (faster, 10-bit mantissa "
            "products; PyTorch's default keeps matrix products in full float32); no effect on the CPU"
        },
    )
    step_graph: str = field(
        default="none",
        metadata={
            "choices": ("none", "compile", "cuda-graph"),
            "help": "run each training step as a graph, one per batch shape (see --fixed-shapes): compile = "
            "the loss compiled by torch.compile (CUDA graphs on CUDA), cuda-graph = forward, backward, clipping "
            "and the Adam update captured by torch.cuda.graph (CUDA only); where it cannot, the eager step, "
            "with one log line saying why",
        },
    )


@dataclass
class FineTuneArguments:
    """Fine-tuning a trained model and hard-concrete head gates (:mod:`syntaxformer.tasks.finetune`,
    :mod:`syntaxformer.blocks.hard_concrete`; Voita et al. 2019, DESIGN.md §3.5)."""

    #: the title of its options in ``--help``
    option_group = "fine-tuning and head gates (Voita et al. 2019; DESIGN.md §3.5)"

    init_from: str | None = option(
        None,
        flag="--model",
        metavar="MODEL",
        help="fine-tune this trained model: a model folder or a shipped parser's name (its weights, "
        "configuration and tokenizer; --architecture, --preset and --tokenizer are then the model's, and "
        "--prior and --set must not be given) (default: a new model)",
    )
    head_gates: bool = option(
        False,
        help="one hard-concrete gate per attention head (needs --model); at the end each gate becomes 0 or 1, "
        "the closed heads are pruned and OUT holds the pruned model and gates.json",
    )
    gate_l0: float = option(
        0.0,
        metavar="LAMBDA",
        help="lambda of the penalty lambda * sum_h (1 - P(g_h = 0)) added to the MLM loss (nats per expected "
        "open head)",
    )
    gate_temperature: float = option(
        0.33, help="hard-concrete temperature beta (0.33: the authors' code; Louizos et al. 2018: 2/3)"
    )
    gate_lr: float | None = option(
        None, help="Adam learning rate of the gates' log alpha, never weight-decayed (default: --lr)"
    )
    gate_init: float = option(3.0, help="initial log alpha of every gate (every gate open at the start)")


@dataclass
class RunningTextArguments:
    """Running-text language modelling with the AWD-LSTM procedure (Merity, Keskar & Socher, ICLR 2018;
    the public ON-LSTM code, yikangshen/Ordered-Neurons ``main.py``; :mod:`syntaxformer.tasks.running_text`,
    :class:`~syntaxformer.data.running_text.BpttWindows`, DESIGN.md §3.4). Causal-LM models only; one process."""

    #: the title of its options in ``--help``
    option_group = "running text and NT-ASGD (the AWD-LSTM procedure of the public ON-LSTM code; causal-LM models)"

    bptt: int | None = option(
        None,
        help="train on running text: the sentences one after the other with <eos> after each, cut into "
        "--batch-size rows, in windows of this mean length (public 70) with the recurrent state carried; a "
        "window of n tokens has the learning rate lr * n / bptt; validation on --valid as running text at "
        "every epoch end (default: sentence batches)",
    )
    nonmono: int = option(
        5,
        help="with --optimizer sgd, NT-ASGD: SGD until an epoch's validation loss is worse than the best "
        "before the last this-many epochs, then averaged SGD (the averaged weights validated and kept); "
        "0: SGD throughout",
    )
    asgd_restart_epoch: int | None = option(
        None,
        help="at the end of this epoch, under averaged SGD, the averaging starts again (the public "
        "--finetuning, 500 of 1,000 epochs) (default: never)",
    )
    ar_alpha: float = option(
        0.0, help="activation regularisation alpha * mean(h^2) of the last layer's dropped outputs (public 2)"
    )
    tar_beta: float = option(
        0.0,
        help="temporal activation regularisation beta * mean((h_t+1 - h_t)^2) of the last layer's outputs "
        "before dropout (public 1)",
    )
    eval_batch_size: int = option(10, help="rows of the validation stream (public 10)")

    def check_running_text(self) -> None:
        """Raise :class:`InputError` (one line) for inconsistent running-text or optimiser options."""
        if self.bptt is not None and self.optimizer == "adam-l2":
            raise InputError("--bptt (running text) trains with --optimizer adam or sgd")
        if self.optimizer == "sgd" and self.bptt is None:
            raise InputError("--optimizer sgd (SGD then NT-ASGD) trains on running text: give --bptt")
        for name in ("bptt", "eval_batch_size", "asgd_restart_epoch"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InputError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        for name in ("nonmono", "ar_alpha", "tar_beta"):
            if getattr(self, name) < 0:
                raise InputError(f"--{name.replace('_', '-')} must not be negative, got {getattr(self, name)}")


@dataclass
class TrainArguments(
    RunningTextArguments,
    FineTuneArguments,
    RunArguments,
    OptimisationArguments,
    DataArguments,
    ModelArguments,
    OutputArguments,
):
    """Everything :func:`~syntaxformer.tasks.run.train` needs, by concern: :class:`OutputArguments`,
    :class:`ModelArguments`, :class:`DataArguments`, :class:`OptimisationArguments`,
    :class:`RunArguments`, :class:`FineTuneArguments`, :class:`RunningTextArguments` (their fields, in that
    order, are this class's, and ``training.json`` records them flat). Each field is a ``syntaxformer
    train`` option, documented by its ``help`` (:func:`option`); the option is named after the field
    unless its ``flag`` says otherwise (``model``: ``--architecture``, ``init_from``: ``--model``,
    ``overrides``: ``--set``). A function that needs one concern takes that class.
    """

    @property
    def keeps_best_model(self) -> bool:
        """Whether the run keeps its best model in ``OUT/best/`` (what ``final_model="best"`` needs):
        ``keep_best``. A task that always keeps it says True."""
        return self.keep_best

    def check(self) -> None:
        """Raise :class:`InputError` (one line) for an inconsistent or out-of-range option; ``trees`` and
        ``phrases`` become :class:`~syntaxformer.data.structure_source.StructureSource` values (the
        same strings)."""

        def bad(msg):
            raise InputError(msg)

        check_choices(self)
        self.resolve_init_from()
        if self.max_steps is None and self.epochs is None and self.max_minutes is None:
            bad("give at least one stop condition: --max-steps, --epochs or --max-minutes")
        if self.model in MODELS:
            objective_class(MODELS[self.model])  # an objective the trainer knows (InputError if not)
        if sum(x is not None for x in (self.batch_size, self.max_tokens, self.min_batch_tokens)) != 1:
            bad("give exactly one of --batch-size, --max-tokens and --min-batch-tokens")
        names = ("batch_size", "max_tokens", "min_batch_tokens", "max_steps", "epochs", "max_length", "pad_to_multiple")
        non_negative = ("warmup_steps", "save_every", "eval_every", "clip", "weight_decay", "min_freq")
        check_bounds(self, (*names, "max_sentence_length"), (*non_negative, "early_stopping", "plateau_patience"))
        if not 0.0 < self.mask_rate <= 1.0:
            bad(f"--mask-rate must be in (0, 1], got {self.mask_rate}")
        if not 0.0 <= self.valid_fraction < 1.0:
            bad(f"--valid-fraction must be in [0, 1), got {self.valid_fraction}")
        for name in ("keep_best", "early_stopping"):
            if getattr(self, name) and self.valid is None and self.valid_fraction == 0:
                bad(f"--{name.replace('_', '-')} needs validation data (--valid or --valid-fraction > 0)")
        if self.log_every < 1:
            bad(f"--log-every must be at least 1, got {self.log_every}")
        if self.schedule == "plateau" and (self.warmup_steps or not 0.0 < self.plateau_factor < 1.0):
            bad("--schedule plateau takes no --warmup-steps and a --plateau-factor in (0, 1)")
        if self.final_model == "best" and not self.keeps_best_model:
            bad("--final-model best needs --keep-best (the best model is kept in OUT/best/)")
        if self.schedule in ("linear", "cosine") and self.max_steps is None and self.schedule_steps is None:
            bad(f"--schedule {self.schedule} decays until --schedule-steps (default --max-steps): give one")
        if self.schedule_steps is not None and self.schedule_steps < 1:
            bad(f"--schedule-steps must be at least 1, got {self.schedule_steps}")
        if self.tokenizer not in ("word", "wordpiece") and not Path(self.tokenizer, "tokenizer.json").is_file():
            bad(f"--tokenizer must be word, wordpiece or a folder with tokenizer.json, got {self.tokenizer!r}")
        if self.device is not None:
            resolve_device(self.device)  # "gpu", or CUDA on a machine without it: InputError
        self.check_trees()
        self.check_phrases()
        self.check_fine_tuning()
        self.check_running_text()

    def resolve_init_from(self) -> None:
        """``init_from`` as a folder: a shipped parser's name (:data:`syntaxformer.pretrained.SHIPPED`)
        becomes its folder; a folder, or anything else, stays as it is (:meth:`check_fine_tuning` then
        names what is missing)."""
        if self.init_from is not None and str(self.init_from) in SHIPPED and not Path(self.init_from).exists():
            self.init_from = str(model_folder(self.init_from))

    def check_trees(self) -> None:
        """Parse ``trees``; raise :class:`InputError` (one line) for a bad value, or when the prior reads
        trees and none are given (the prior's ``structure_messages``)."""
        config = requested_fields(self.prior, self.overrides)
        self.trees = self._check_structure_input("trees", {**config, "prior": config.get("prior")}, refuse_unread=False)

    @property
    def induces_from_masked_inputs(self) -> bool:
        """Whether the run parses its masked inputs at every step (``induced_from="masked"`` with an
        ``induced:`` ``trees`` or ``phrases``)."""
        sources = (StructureSource.parse(self.trees, "--trees"), StructureSource.parse(self.phrases, "--phrases"))
        return self.induced_from == "masked" and any(s is not None and s.is_induced for s in sources)

    def _prior_config(self) -> dict:
        """The prior's config fields this run will have: ``prior`` and the overrides
        (:func:`~syntaxformer.training.model_config.requested_fields`), or, with ``init_from``, the
        folder's ``config.json`` ({} when unreadable: its own check reports it)."""
        if self.init_from is not None:
            try:
                return json.loads(Path(self.init_from, "config.json").read_text())
            except (OSError, ValueError):
                return {}
        return requested_fields(self.prior, self.overrides)

    def check_phrases(self) -> None:
        """Parse ``phrases``; raise :class:`InputError` (one line) for config fields the prior cannot
        read, a bad value, ``phrases`` without a prior that reads them, a prior that reads them without
        ``phrases``, or a source the prior cannot use (its ``check_structure_source``: e.g. phrase
        labels from induced trees, which have none)."""
        self.phrases = self._check_structure_input("phrases", self._prior_config(), refuse_unread=True)

    def _check_structure_input(self, kind: str, config: dict, refuse_unread: bool) -> StructureSource | None:
        """The field ``kind`` (``"trees"`` / ``"phrases"``) parsed, checked against the prior of
        ``config`` as the prior declares (``structure_input``, ``reads_structure``,
        ``check_structure_source``, ``structure_messages``); ``refuse_unread``: also refuse the
        structure when the prior reads none (for trees the trainer does, with the built model)."""
        name = config.get("prior")
        cls = PRIORS.get(name) if isinstance(name, str) else None
        reads = cls is not None and cls.structure_input == kind and cls.reads_structure(config)
        source = StructureSource.parse(getattr(self, kind), f"--{kind}")
        if reads and source is None:
            raise InputError(cls.structure_messages["train-missing"].format(prior=name))
        if refuse_unread and source is not None and not reads:
            reader = next(iter(structure_readers(kind).values()))
            raise InputError(reader.structure_messages["train-unread"].format(prior=name, value=source))
        if reads and source is not None:
            cls.check_structure_source(config, source)
        return source

    def check_fine_tuning(self) -> None:
        """Raise :class:`InputError` (one line) for inconsistent ``init_from`` / head-gate options."""

        def bad(msg):
            raise InputError(msg)

        if self.head_gates and self.init_from is None:
            bad("--head-gates fine-tunes a trained model: give --model DIR (or a shipped parser's name)")
        if self.head_gates and self.keep_best:
            bad("--keep-best with --head-gates: the gated model's validation loss is not its pruned model's")
        if not self.head_gates:
            given = [
                f"--{n.replace('_', '-')}"
                for n, default in (("gate_l0", 0.0), ("gate_lr", None))
                if getattr(self, n) != default
            ]
            if given:
                bad(f"{', '.join(given)} without --head-gates")
        if self.gate_l0 < 0:
            bad(f"--gate-l0 must not be negative, got {self.gate_l0}")
        if self.gate_temperature <= 0:
            bad(f"--gate-temperature must be positive, got {self.gate_temperature}")
        if self.gate_lr is not None and self.gate_lr <= 0:
            bad(f"--gate-lr must be positive, got {self.gate_lr}")
        if self.init_from is None:
            return
        if not Path(self.init_from, "config.json").is_file():
            hint = f"; to train a new {self.init_from}, give --architecture" if self.init_from in MODELS else ""
            raise InputError(f"--model: not a model folder (no config.json){hint}", path=self.init_from)
        if self.prior is not None or self.overrides:
            bad("--model: the model is the folder's; --prior and --set cannot change it")
        if self.tokenizer not in ("word", str(self.init_from)):
            bad("--model: the tokenizer is the folder's; do not give --tokenizer")
        if self.head_gates and self.eval_treebank:
            bad(
                "--eval-treebank with --head-gates: the learning curve parses without the gates; "
                "parse the saved (pruned) model instead"
            )


__all__ = [
    "TrainArguments",
    "RunningTextArguments",
    "OPTIMIZERS",
    "MASK_REPLACE",
    "check_choices",
    "option",
    "same_option",
]
