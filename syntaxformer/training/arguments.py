"""The options of a training run: :class:`TrainArguments` (one field per ``syntaxformer train``
option) and the masking rules :data:`MASK_REPLACE`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from syntaxformer.data.structure_source import StructureSource
from syntaxformer.errors import InputError
from syntaxformer.models import MODELS, default_architecture
from syntaxformer.priors import PRIORS, structure_readers
from syntaxformer.runtime import resolve_device
from syntaxformer.training.mlm import MASK_REPLACE
from syntaxformer.training.model_config import requested_fields
from syntaxformer.training.objectives import objective_class


@dataclass
class OutputArguments:
    """Where a run writes (the first field of :class:`TrainArguments`).

    Attributes (defaults in brackets):
        out: output folder (created).
    """

    out: str


@dataclass
class ModelArguments:
    """The model a run trains: the registry's architecture, its size and its config (:mod:`syntaxformer.models`;
    one config from them: :func:`syntaxformer.training.model_config.resolve_model_config`).

    Attributes (defaults in brackets):
        model [the registry's default language model, "tree-transformer"], preset ["small"]: keys of ``syntaxformer.models``.
        prior [None]: the config's ``prior`` (a name in ``syntaxformer.priors.PRIORS``); None
            leaves the model's default ("constituent" for the Tree Transformer).
        overrides [{}]: further config fields, e.g. ``{"hidden_size": 128}``.
    """

    model: str = default_architecture("language_model")
    preset: str = "small"
    prior: str | None = None
    overrides: dict = field(default_factory=dict)


@dataclass
class DataArguments:
    """The training text, its structure sources, tokenisation, batches and masking.

    Attributes (defaults in brackets):
        corpus ["ptb-sample"]: a ``load_corpus`` spec (ptb-sample's words, or text files).
        valid [None]: a ``load_corpus`` spec for validation; None holds out ``valid_fraction``.
        trees [None]: a dependency tree per sentence, for a prior that reads one (its ``structure_input``
            is ``"trees"``, :mod:`syntaxformer.priors.base`; :mod:`syntaxformer.data.trees`): "gold"
            (sentences and trees from the dependency source ``corpus`` names: ptb-sample, a CoNLL-U or
            ``.dp`` file) or "induced:MODEL_DIR" (the maximum-spanning-tree heads of a trained
            StructFormer for the ``corpus`` sentences). A string or a
            :class:`~syntaxformer.data.structure_source.StructureSource`; :meth:`check` parses it.
        phrases [None]: a constituency tree per sentence, cut at the reading prior's ``tree_level`` into
            the phrases it reads (its ``structure_input`` is ``"phrases"``; :mod:`syntaxformer.data.phrases`):
            "gold" (the gold trees of the treebank ``corpus`` names: ptb-sample, a ``.mrg`` / bracketed
            file) or "induced:MODEL_DIR" (the trees a trained Tree Transformer or StructFormer
            induces for the sentences). May be given with ``trees``; parsed as ``trees``.
        induced_from ["masked"]: where an ``induced:`` tree or phrase partition comes from: "masked"
            (each training batch parsed as the model reads it, masks included, so no structure carries
            information about a masked word; :class:`~syntaxformer.sources.induced.MaskedInputInducer`;
            needs a word-level tokenizer; the source models run at every step) or "sentence" (each
            sentence parsed once, unmasked, before training). Gold structures are the sentence's.
        valid_fraction [0.05]: fraction of the corpus held out when ``valid`` is None (0: none).
        tokenizer ["word"]: "word", "wordpiece", or a folder holding a saved tokenizer.
        min_freq [2]: word tokenizer: keep words seen at least this often (public code: > 1);
            WordPiece: minimum piece frequency.
        max_vocab [None]: word tokenizer: vocabulary cap (special tokens included).
        wordpiece_vocab_size [16000]: WordPiece vocabulary size (the paper: 16k).
        add_cls [False]: prepend ``[CLS]`` to every sentence (the public code does).
        max_length [128]: tokens per sentence; longer ones are handled by ``overflow``.
        overflow ["split"]: "split", "skip" or "cut" (keep the first ``max_length`` tokens: the public
            Tree Transformer code's inputs of 60 positions); logged and counted in ``training.json``.
        max_sentence_length [None]: sentences of more tokens (special tokens included) are dropped before
            ``overflow`` applies (the public Tree Transformer code: 70); None: none.
        batch_size [64]: sentences per batch (per process); or None with ``max_tokens`` or
            ``min_batch_tokens``.
        shuffle [True]: shuffled, length-bucketed batches
            (:class:`~syntaxformer.data.batching.LengthBucketSampler`); False: consecutive sentences in
            corpus order, the same batches every epoch (the public Tree Transformer code).
        max_tokens [None]: a padded-token budget per batch instead of ``batch_size``.
        min_batch_tokens [None]: instead of ``batch_size``: batches of consecutive sentences of the
            corpus sorted by length, each filled until it holds at least this many tokens, the same
            batches every epoch in a shuffled order (the public StructFormer code: 4,096;
            :func:`~syntaxformer.data.batching.filled_batches`).
        bucket_batches [50]: batches' worth of sentences sorted by length together.
        pad_to_multiple [None]: pad each batch to its longest sequence rounded up to a multiple of this
            (e.g. 8 or 16), so batches take a few shapes (an accelerator then compiles or captures one
            graph per shape); padding changes no loss or gradient (tests/test_padding.py). None: to the
            longest.
        mask_rate [0.15]: BERT selection rate (public code: 1/7 = 0.142857); masked-LM models only
            (the objective is the model's, :mod:`syntaxformer.training.objectives`).
        mask_replace ["bert"]: masked-LM models only; what a selected token becomes: "bert" = 80% ``[MASK]``, 10% a random
            token, 10% kept (BERT; the Tree Transformer); "mask" = always ``[MASK]`` (the public
            StructFormer code, with ``mask_rate`` 0.3).
        mask_unknown [True]: masked-LM models only; False: ``[UNK]`` is never selected (the public
            StructFormer code masks neither padding nor unknown words).
        mask_cls [False]: masked-LM models only; a leading ``[CLS]`` may be selected like any word (the
            public Tree Transformer code selects every position); it may then also be drawn as a random
            replacement.
    """

    corpus: str = "ptb-sample"
    valid: str | None = None
    trees: str | None = None
    phrases: str | None = None
    induced_from: str = "masked"
    valid_fraction: float = 0.05
    tokenizer: str = "word"
    min_freq: int = 2
    max_vocab: int | None = None
    wordpiece_vocab_size: int = 16000
    add_cls: bool = False
    max_length: int = 128
    overflow: str = "split"
    max_sentence_length: int | None = None
    batch_size: int | None = 64
    max_tokens: int | None = None
    min_batch_tokens: int | None = None
    bucket_batches: int = 50
    pad_to_multiple: int | None = None
    shuffle: bool = True
    mask_rate: float = 0.15
    mask_replace: str = "bert"
    mask_unknown: bool = True
    mask_cls: bool = False
    fixed_shapes: bool = field(
        default=False,
        metadata={
            "help": "few batch shapes for an accelerator's graphs: columns padded to --pad-to-multiple (8 when "
            "not given), a short batch filled to --batch-size with empty rows, the masked positions a list of "
            "fixed size per shape; the same masks, loss and gradients (needs --batch-size; not with --trees / "
            "--phrases)"
        },
    )


@dataclass
class OptimisationArguments:
    """The optimiser, the learning-rate schedule and clipping.

    Attributes (defaults in brackets):
        optimizer ["adam"]: "adam" (AdamW when ``weight_decay`` > 0), "adam-l2" (Adam with the decay an
            L2 term of the gradient, as the public StructFormer and ON-LSTM code), or "sgd": SGD (decay
            an L2 term), then averaged SGD by the non-monotone trigger (running text only, ``bptt``;
            :mod:`syntaxformer.training.running_text`).
        lr [1e-4], betas [(0.9, 0.98)], eps [1e-9], weight_decay [0.0]: the optimiser's.
        warmup_steps [0]: linear warm-up from lr/warmup_steps to lr.
        schedule ["constant"]: after warm-up: "constant", "linear" or "cosine" decay to
            ``final_lr_fraction × lr`` at ``schedule_steps`` (default ``max_steps``; one is needed);
            or "plateau": the rate times ``plateau_factor`` whenever the validation loss has not
            improved for more than ``plateau_patience`` evaluations (torch's ``ReduceLROnPlateau``,
            threshold 0; the public StructFormer code, evaluating once an epoch).
        final_lr_fraction [0.0]: see ``schedule``.
        schedule_steps [None]: the step where linear/cosine decay ends, if not ``max_steps`` (e.g.
            an estimate of the steps a ``max_minutes`` run will make; later steps keep the final lr).
        clip [1.5]: gradient-norm clipping (public code 1.5); 0 disables.
        plateau_factor [0.5], plateau_patience [2]: see ``schedule``.
    """

    optimizer: str = "adam"
    lr: float = 1e-4
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    warmup_steps: int = 0
    schedule: str = "constant"
    final_lr_fraction: float = 0.0
    schedule_steps: int | None = None
    clip: float = 1.5
    plateau_factor: float = 0.5
    plateau_patience: int = 2


@dataclass
class RunArguments:
    """How long a run goes, what it evaluates and saves, and where it runs.

    Attributes (defaults in brackets):
        max_steps [None], epochs [None], max_minutes [None]: stop conditions (at least one).
        save_every [500]: checkpoint period in steps (0: only at the end).
        eval_every [200]: validation period in steps (0: only at the start and the end); also the
            period of the learning curve when ``eval_treebank`` is given.
        eval_each_epoch [False]: validate (and save a checkpoint) at the end of every epoch too.
        eval_treebank [None]: a gold treebank (e.g. ``"ptb-sample:dev"``) parsed at step 0, every
            ``eval_every`` steps and at the end: sentence/corpus F1 of every decoder
            (:class:`~syntaxformer.evaluation.curve.ParseCurve`) with step, tokens seen, training
            minutes (optimizer steps only, all runs of a resumed training) and wall minutes (this
            process, evaluations included), into ``training.json`` (``parse_curve``) and
            TensorBoard (``parse/...``).
        keep_best [False]: also write the model of the lowest validation loss (evaluated every
            ``eval_every`` steps) to ``OUT/best/`` with ``best.json`` (step, loss)
            (:class:`~syntaxformer.training.callbacks.KeepBestModel`); needs validation data; not with
            ``head_gates``.
        final_model ["last"]: the model a finished run leaves in OUT: "last" (the last step's) or
            "best" (the lowest validation loss of the evaluations after step 0; needs ``keep_best``;
            the last when none was better than step 0's).
        early_stopping [0]: stop when this many evaluations in a row have not lowered the validation
            loss below the lowest before them (0: never;
            :class:`~syntaxformer.training.callbacks.EarlyStopping`); needs validation data.
        log_every [20]: TensorBoard / progress-bar period in steps.
        seed [0]: every random choice derives from it.
        device [None]: "cpu", "cuda", "cuda:1"...; None: CUDA if available, else CPU.
        bf16 [False]: bfloat16 autocast.
        threads [None]: ``torch.set_num_threads``.
        resume [False]: continue from ``OUT/checkpoint.pt`` if there is one.
        quiet [False]: no progress bar.
    """

    max_steps: int | None = None
    epochs: int | None = None
    max_minutes: float | None = None
    save_every: int = 500
    eval_every: int = 200
    eval_treebank: str | None = None
    eval_each_epoch: bool = False
    keep_best: bool = False
    final_model: str = "last"
    early_stopping: int = 0
    log_every: int = 20
    seed: int = 0
    device: str | None = None
    bf16: bool = False
    threads: int | None = None
    resume: bool = False
    quiet: bool = False
    prefetch: bool = field(
        default=False,
        metadata={
            "help": "prepare the next batch (gather, pad, mask; pinned for CUDA) in a background thread while "
            "the current step runs; the same batches"
        },
    )


@dataclass
class FineTuneArguments:
    """Fine-tuning a trained model and hard-concrete head gates (:mod:`syntaxformer.training.finetune`, :mod:`syntaxformer.training.hard_concrete`; Voita et al. 2019, DESIGN.md §3.5):

    Attributes (defaults in brackets):
        init_from [None]: a trained model folder to start from (its weights, configuration and
            tokenizer; ``model``, ``preset`` and ``tokenizer`` are then the folder's, and ``prior``
            and ``overrides`` must not be given).
        head_gates [False]: one hard-concrete gate per attention head (needs ``init_from``); at the
            end each gate becomes 0 or 1 and the closed heads are pruned from the saved model.
        gate_l0 [0.0]: λ of the loss ``MLM + λ · Σ_h (1 − P(g_h = 0))`` (nats per expected open head).
        gate_temperature [0.33]: β (the authors' code; Louizos et al. 2018 use 2/3).
        gate_lr [None]: Adam learning rate of the gates' ``log α`` (None: ``lr``); never weight-decayed.
        gate_init [3.0]: initial ``log α`` (every gate open at the start).
    """

    init_from: str | None = None
    head_gates: bool = False
    gate_l0: float = 0.0
    gate_temperature: float = 0.33
    gate_lr: float | None = None
    gate_init: float = 3.0


#: ``optimizer`` values: Adam(W) and Adam with an L2 decay
#: (:meth:`~syntaxformer.training.loop.TrainingLoop.make_optimizer`), or SGD then NT-ASGD (running text only:
#: :mod:`syntaxformer.training.running_text`)
OPTIMIZERS = ("adam", "adam-l2", "sgd")


@dataclass
class RunningTextArguments:
    """Running-text language modelling with the AWD-LSTM procedure (Merity, Keskar & Socher, ICLR 2018;
    the public ON-LSTM code, yikangshen/Ordered-Neurons ``main.py``; :mod:`syntaxformer.training.running_text`,
    DESIGN.md §3.4). Causal-LM models only; one process.

    Attributes (defaults in brackets):
        bptt [None]: train on running text: the sentences one after the other with ``<eos>`` (``[CLS]``)
            after each, cut into ``batch_size`` rows, in windows of mean length ``bptt`` (the public 70;
            :class:`~syntaxformer.data.running_text.BpttWindows`) with the recurrent state carried from
            window to window; the learning rate of a window of n tokens is ``lr · n / bptt``; validation
            on the ``valid`` text as running text at the end of every epoch. None: sentence batches
            (the :class:`~syntaxformer.training.trainer.Trainer`).
        nonmono [5]: with ``optimizer="sgd"``, NT-ASGD: SGD until an end-of-epoch validation loss is
            worse than the best of all before the last ``nonmono``, then averaged SGD
            (:class:`torch.optim.ASGD`, t0 = 0, λ = 0; the averaged weights are validated and kept);
            0: SGD throughout.
        asgd_restart_epoch [None]: at the end of this epoch, under averaged SGD, the averaging starts
            again (the public ``--finetuning``, 500 of 1,000 epochs); None: never.
        ar_alpha [0.0]: activation regularisation, ``α · mean(h²)`` of the last layer's outputs after the
            output dropout (public 2).
        tar_beta [0.0]: temporal activation regularisation, ``β · mean((h_{t+1} − h_t)²)`` of the last
            layer's outputs before dropout (public 1).
        eval_batch_size [10]: rows of the validation stream (public 10).
    """

    bptt: int | None = None
    nonmono: int = 5
    asgd_restart_epoch: int | None = None
    ar_alpha: float = 0.0
    tar_beta: float = 0.0
    eval_batch_size: int = 10

    def check_running_text(self) -> None:
        """Raise :class:`InputError` (one line) for inconsistent running-text or optimiser options."""
        if self.optimizer not in OPTIMIZERS:
            raise InputError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
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
    """Everything :func:`~syntaxformer.training.run.train` needs, by concern: :class:`OutputArguments`,
    :class:`ModelArguments`, :class:`DataArguments`, :class:`OptimisationArguments`,
    :class:`RunArguments`, :class:`FineTuneArguments`, :class:`RunningTextArguments` (their fields, in that
    order, are this class's;
    the names are the ``syntaxformer train`` options, and ``training.json`` records them flat). A
    function that needs one concern takes that class.
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

        if self.max_steps is None and self.epochs is None and self.max_minutes is None:
            bad("give at least one stop condition: --max-steps, --epochs or --max-minutes")
        if self.model in MODELS:
            objective_class(MODELS[self.model])  # an objective the trainer knows (InputError if not)
        if sum(x is not None for x in (self.batch_size, self.max_tokens, self.min_batch_tokens)) != 1:
            bad("give exactly one of --batch-size, --max-tokens and --min-batch-tokens")
        names = ("batch_size", "max_tokens", "min_batch_tokens", "max_steps", "epochs", "max_length", "pad_to_multiple")
        for name in (*names, "max_sentence_length"):
            value = getattr(self, name)
            if value is not None and value < 1:
                bad(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            bad(f"--max-minutes must be positive, got {self.max_minutes}")
        if self.mask_replace not in MASK_REPLACE:
            bad(f"--mask-replace must be one of {sorted(MASK_REPLACE)}, got {self.mask_replace!r}")
        if not 0.0 < self.mask_rate <= 1.0:
            bad(f"--mask-rate must be in (0, 1], got {self.mask_rate}")
        if not 0.0 <= self.valid_fraction < 1.0:
            bad(f"--valid-fraction must be in [0, 1), got {self.valid_fraction}")
        for name in ("keep_best", "early_stopping"):
            if getattr(self, name) and self.valid is None and self.valid_fraction == 0:
                bad(f"--{name.replace('_', '-')} needs validation data (--valid or --valid-fraction > 0)")
        if self.lr <= 0:
            bad(f"--lr must be positive, got {self.lr}")
        for name in (
            "warmup_steps",
            "save_every",
            "eval_every",
            "clip",
            "weight_decay",
            "min_freq",
            "early_stopping",
            "plateau_patience",
        ):
            if getattr(self, name) < 0:
                bad(f"--{name.replace('_', '-')} must not be negative, got {getattr(self, name)}")
        if self.log_every < 1:
            bad(f"--log-every must be at least 1, got {self.log_every}")
        if self.schedule not in ("constant", "linear", "cosine", "plateau"):
            bad(f"--schedule must be constant, linear, cosine or plateau, got {self.schedule!r}")
        if self.schedule == "plateau" and (self.warmup_steps or not 0.0 < self.plateau_factor < 1.0):
            bad("--schedule plateau takes no --warmup-steps and a --plateau-factor in (0, 1)")
        if self.final_model not in ("last", "best"):
            bad(f"--final-model must be last or best, got {self.final_model!r}")
        if self.final_model == "best" and not self.keeps_best_model:
            bad("--final-model best needs --keep-best (the best model is kept in OUT/best/)")
        if self.schedule in ("linear", "cosine") and self.max_steps is None and self.schedule_steps is None:
            bad(f"--schedule {self.schedule} decays until --schedule-steps (default --max-steps): give one")
        if self.schedule_steps is not None and self.schedule_steps < 1:
            bad(f"--schedule-steps must be at least 1, got {self.schedule_steps}")
        if self.overflow not in ("split", "skip", "cut"):
            bad(f"--overflow must be split, skip or cut, got {self.overflow!r}")
        if self.tokenizer not in ("word", "wordpiece") and not Path(self.tokenizer, "tokenizer.json").is_file():
            bad(f"--tokenizer must be word, wordpiece or a folder with tokenizer.json, got {self.tokenizer!r}")
        if self.device is not None:
            resolve_device(self.device)  # "gpu", or CUDA on a machine without it: InputError
        self.check_trees()
        self.check_phrases()
        if self.induced_from not in ("masked", "sentence"):
            bad(f"--induced-from must be masked or sentence, got {self.induced_from!r}")
        self.check_fine_tuning()
        self.check_running_text()

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
            bad("--head-gates fine-tunes a trained model: give --init-from DIR")
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
            raise InputError("--init-from: not a model folder (no config.json)", path=self.init_from)
        if self.prior is not None or self.overrides:
            bad("--init-from: the model is the folder's; --prior and --set cannot change it")
        if self.tokenizer not in ("word", str(self.init_from)):
            bad("--init-from: the tokenizer is the folder's; do not give --tokenizer")
        if self.head_gates and self.eval_treebank:
            bad(
                "--eval-treebank with --head-gates: the learning curve parses without the gates; "
                "parse the saved (pruned) model instead"
            )


__all__ = ["TrainArguments", "RunningTextArguments", "OPTIMIZERS", "MASK_REPLACE"]
