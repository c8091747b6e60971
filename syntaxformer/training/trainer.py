"""The masked-LM trainer: one loop for CPU, one GPU, or data-parallel under ``torchrun``.

:func:`train` takes a :class:`TrainArguments` (the ``syntaxformer train`` options, one field each)
and returns the output folder, which then holds everything ``AutoModelForMaskedLM`` /
``AutoTokenizer.from_pretrained`` need, plus ``training.json`` and ``tensorboard/``.

What a run does, in order:

1. seeds ``random``, ``torch`` (and CUDA) from ``seed``; on CPU flushes denormals
   (``torch.set_flush_denormal(True)``, DESIGN.md §5);
2. reads the corpus (:func:`~syntaxformer.data.corpus.load_corpus`) and holds out a validation slice:
   the ``valid`` corpus if given, else ``valid_fraction`` of the sentences chosen by a permutation
   with the fixed seed 0 (the same slice for every ``--seed``; excluded from training);
3. builds the tokenizer from the training sentences (``word``: one token per word, or ``wordpiece``)
   or loads one from a folder, and encodes; sentences over ``max_length`` tokens are split
   (``overflow="split"``) or skipped (``"skip"``), counted in the log and in ``training.json``;
4. builds the model from ``make_config(model, preset, vocab_size, prior=prior, **overrides)``;
5. trains: length-bucketed shuffled batches
   (:class:`~syntaxformer.training.batching.LengthBucketSampler`), BERT masking
   (:func:`~syntaxformer.training.mlm.mask_tokens`), Adam (lr 1e-4, β (0.9, 0.98), eps 1e-9 as
   the public code), warm-up then a constant / linear / cosine schedule, gradient clipping
   (max norm 1.5 as the public code; 0 turns it off), the loss only at masked positions;
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
mean over its own masked tokens and DDP averages the gradients; a step consumes R batches, so
``max_steps`` counts optimizer steps. A resumed run must use the same number of processes.
"""
from __future__ import annotations

import inspect
import json
import logging
import math
import os
import random
import signal
import sys
import time
from collections import deque
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist

from syntaxformer.data.corpus import load_corpus
from syntaxformer.data.preprocess import PRPN
from syntaxformer.data.tokenization import build_word_tokenizer, build_wordpiece_tokenizer, encode
from syntaxformer.errors import InputError
from syntaxformer.training.batching import LengthBucketSampler, pad_batch
from syntaxformer.training.mlm import mask_tokens

#: ``--mask-replace``: the (mask_prob, random_prob) of :func:`mask_tokens` for each rule.
MASK_REPLACE = {"bert": dict(mask_prob=0.8, random_prob=0.1), "mask": dict(mask_prob=1.0, random_prob=0.0)}

logger = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"
TRAINING_JSON = "training.json"

#: Options that may differ between a checkpoint and the run resuming it.
RESUMABLE_CHANGES = frozenset({"out", "resume", "max_steps", "max_minutes", "epochs", "save_every",
                               "eval_every", "log_every", "quiet", "threads", "device", "eval_treebank"})


@dataclass
class TrainArguments:
    """Everything :func:`train` needs; field names are the ``syntaxformer train`` options.

    Attributes (defaults in brackets):
        out: output folder (created).
        model ["tree-transformer"], preset ["small"]: keys of ``syntaxformer.models``.
        prior [None]: the config's ``prior`` (Tree Transformer: "constituent" or "none"); None
            leaves the model's default ("constituent" for the Tree Transformer).
        overrides [{}]: further config fields, e.g. ``{"hidden_size": 128}``.
        corpus ["ptb-sample"]: a ``load_corpus`` spec (ptb-sample's words, or text files).
        valid [None]: a ``load_corpus`` spec for validation; None holds out ``valid_fraction``.
        valid_fraction [0.05]: fraction of the corpus held out when ``valid`` is None (0: none).
        tokenizer ["word"]: "word", "wordpiece", or a folder holding a saved tokenizer.
        min_freq [2]: word tokenizer: keep words seen at least this often (public code: > 1);
            WordPiece: minimum piece frequency.
        max_vocab [None]: word tokenizer: vocabulary cap (special tokens included).
        wordpiece_vocab_size [16000]: WordPiece vocabulary size (the paper: 16k).
        add_cls [False]: prepend ``[CLS]`` to every sentence (the public code does).
        max_length [128]: tokens per sentence; longer ones are handled by ``overflow``.
        overflow ["split"]: "split" or "skip" (logged and counted in ``training.json``).
        batch_size [64]: sentences per batch (per process); or None with ``max_tokens``.
        max_tokens [None]: a padded-token budget per batch instead of ``batch_size``.
        bucket_batches [50]: batches' worth of sentences sorted by length together.
        mask_rate [0.15]: BERT selection rate (public code: 1/7 = 0.142857).
        mask_replace ["bert"]: what a selected token becomes: "bert" = 80% ``[MASK]``, 10% a random
            token, 10% kept (BERT; the Tree Transformer); "mask" = always ``[MASK]`` (the public
            StructFormer code, with ``mask_rate`` 0.3).
        lr [1e-4], betas [(0.9, 0.98)], eps [1e-9], weight_decay [0.0]: Adam (AdamW if decay > 0).
        warmup_steps [0]: linear warm-up from lr/warmup_steps to lr.
        schedule ["constant"]: after warm-up: "constant", "linear" or "cosine" decay to
            ``final_lr_fraction × lr`` at ``schedule_steps`` (default ``max_steps``; one is needed).
        final_lr_fraction [0.0]: see ``schedule``.
        schedule_steps [None]: the step where linear/cosine decay ends, if not ``max_steps`` (e.g.
            an estimate of the steps a ``max_minutes`` run will make; later steps keep the final lr).
        clip [1.5]: gradient-norm clipping (public code 1.5); 0 disables.
        max_steps [None], epochs [None], max_minutes [None]: stop conditions (at least one).
        save_every [500]: checkpoint period in steps (0: only at the end).
        eval_every [200]: validation period in steps (0: only at the start and the end); also the
            period of the learning curve when ``eval_treebank`` is given.
        eval_treebank [None]: a gold treebank (e.g. ``"ptb-sample:dev"``) parsed at step 0, every
            ``eval_every`` steps and at the end: sentence/corpus F1 of every decoder
            (:class:`~syntaxformer.evaluation.curve.ParseCurve`) with step, tokens seen, training
            minutes (optimizer steps only, all runs of a resumed training) and wall minutes (this
            process, evaluations included), into ``training.json`` (``parse_curve``) and
            TensorBoard (``parse/...``).
        log_every [20]: TensorBoard / progress-bar period in steps.
        seed [0]: every random choice derives from it.
        device [None]: "cpu", "cuda", "cuda:1"...; None: CUDA if available, else CPU.
        bf16 [False]: bfloat16 autocast.
        threads [None]: ``torch.set_num_threads``.
        resume [False]: continue from ``OUT/checkpoint.pt`` if there is one.
        quiet [False]: no progress bar.
    """
    out: str
    model: str = "tree-transformer"
    preset: str = "small"
    prior: str | None = None
    overrides: dict = field(default_factory=dict)
    corpus: str = "ptb-sample"
    valid: str | None = None
    valid_fraction: float = 0.05
    tokenizer: str = "word"
    min_freq: int = 2
    max_vocab: int | None = None
    wordpiece_vocab_size: int = 16000
    add_cls: bool = False
    max_length: int = 128
    overflow: str = "split"
    batch_size: int | None = 64
    max_tokens: int | None = None
    bucket_batches: int = 50
    mask_rate: float = 0.15
    mask_replace: str = "bert"
    lr: float = 1e-4
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    warmup_steps: int = 0
    schedule: str = "constant"
    final_lr_fraction: float = 0.0
    schedule_steps: int | None = None
    clip: float = 1.5
    max_steps: int | None = None
    epochs: int | None = None
    max_minutes: float | None = None
    save_every: int = 500
    eval_every: int = 200
    eval_treebank: str | None = None
    log_every: int = 20
    seed: int = 0
    device: str | None = None
    bf16: bool = False
    threads: int | None = None
    resume: bool = False
    quiet: bool = False

    def check(self) -> None:
        """Raise :class:`InputError` (one line) for an inconsistent or out-of-range option."""
        def bad(msg):
            raise InputError(msg)
        if self.max_steps is None and self.epochs is None and self.max_minutes is None:
            bad("give at least one stop condition: --max-steps, --epochs or --max-minutes")
        if (self.batch_size is None) == (self.max_tokens is None):
            bad("give exactly one of --batch-size and --max-tokens")
        for name in ("batch_size", "max_tokens", "max_steps", "epochs", "max_length"):
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
        if self.lr <= 0:
            bad(f"--lr must be positive, got {self.lr}")
        for name in ("warmup_steps", "save_every", "eval_every", "clip", "weight_decay", "min_freq"):
            if getattr(self, name) < 0:
                bad(f"--{name.replace('_', '-')} must not be negative, got {getattr(self, name)}")
        if self.log_every < 1:
            bad(f"--log-every must be at least 1, got {self.log_every}")
        if self.schedule not in ("constant", "linear", "cosine"):
            bad(f"--schedule must be constant, linear or cosine, got {self.schedule!r}")
        if self.schedule != "constant" and self.max_steps is None and self.schedule_steps is None:
            bad(f"--schedule {self.schedule} decays until --schedule-steps (default --max-steps): give one")
        if self.schedule_steps is not None and self.schedule_steps < 1:
            bad(f"--schedule-steps must be at least 1, got {self.schedule_steps}")
        if self.overflow not in ("split", "skip"):
            bad(f"--overflow must be split or skip, got {self.overflow!r}")
        if self.tokenizer not in ("word", "wordpiece") and not Path(self.tokenizer, "tokenizer.json").is_file():
            bad(f"--tokenizer must be word, wordpiece or a folder with tokenizer.json, got {self.tokenizer!r}")
        if self.device is not None:
            from syntaxformer.parsing import resolve_device
            resolve_device(self.device)  # "gpu", or CUDA on a machine without it: InputError


# --------------------------------------------------------------------------------------------------
# small helpers


def _derived_seed(seed: int, *parts: int) -> int:
    """A 63-bit seed from ``seed`` and integers (step, rank, stream), distinct for distinct tuples."""
    value = seed & (2 ** 63 - 1)
    for p in parts:
        value = (value * 1_000_003 + p + 1) % (2 ** 61 - 1)
    return value


def lr_factor(step: int, warmup_steps: int, schedule: str, max_steps: int | None,
              final_fraction: float = 0.0) -> float:
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


def _held_out(n: int, fraction: float) -> set[int]:
    """The indices of the validation slice: the first ``round(fraction·n)`` of a seed-0 permutation."""
    k = round(fraction * n)
    if fraction > 0 and n > 1:
        k = max(1, min(k, n - 1))
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    return set(perm[:k].tolist())


def _encode_counted(tokenizer, sentences, max_length: int, overflow: str):
    """:func:`encode` for training: returns ``(ids, number of sentences over max_length)``; those
    are split (``overflow="split"``; their pieces go after the other sentences) or dropped
    (``"skip"``); :func:`encode` logs the count."""
    ids, _ = encode(tokenizer, sentences)
    over = [i for i, x in enumerate(ids) if len(x) > max_length]
    if not over:
        return ids, 0
    long = set(over)
    kept = [x for i, x in enumerate(ids) if i not in long]
    extra, _ = encode(tokenizer, [sentences[i] for i in over], max_length, overflow)
    return kept + extra, len(over)


def _build_tokenizer(args: TrainArguments, sentences):
    if args.tokenizer == "word":
        return build_word_tokenizer(sentences, min_freq=max(1, args.min_freq), max_vocab=args.max_vocab,
                                    add_cls=args.add_cls)
    if args.tokenizer == "wordpiece":
        return build_wordpiece_tokenizer(sentences, vocab_size=args.wordpiece_vocab_size,
                                         min_freq=max(1, args.min_freq), add_cls=args.add_cls)
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(args.tokenizer)


def _build_model(args: TrainArguments, vocab_size: int):
    from syntaxformer.models import MODELS, make_config
    overrides = dict(args.overrides)
    if args.prior is not None:
        overrides.setdefault("prior", args.prior)
    try:
        known = make_config(args.model, args.preset, vocab_size).to_dict()
        if args.prior is not None and "prior" not in known:
            raise ValueError(f"--prior {args.prior}: this model has no structural-prior option")
        unknown = sorted(set(args.overrides) - set(known))
        if unknown:
            raise ValueError(f"no config field {', '.join(unknown)}")
        config = make_config(args.model, args.preset, vocab_size, **overrides)
    except (ValueError, TypeError) as e:
        raise InputError(f"cannot build {args.model} / {args.preset}: {e}") from e
    return MODELS[args.model](config)


def initial_model(args: TrainArguments, vocab_size: int):
    """The model a run with ``args`` starts from: step 0, the same initialisation (seeded by
    ``args.seed``) as :func:`train` uses — the untrained control of a learning curve.

    Args:
        args: the run's options (model, preset, prior, overrides, seed).
        vocab_size: the tokenizer's size.
    Returns:
        The masked-LM module (on the CPU, training mode). Re-seeds torch's global generator with
        ``args.seed``, as :func:`train` does before building its model.
    Raises:
        InputError: a model/preset/override that cannot be built.
    """
    torch.manual_seed(args.seed)
    return _build_model(args, vocab_size)


class _StopSignal:
    """Turns SIGTERM / SIGINT into a flag the loop checks after each step (then saves and stops)."""

    def __init__(self):
        self.received = None
        self._old = {}

    def __enter__(self):
        import threading
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.received is not None:  # a second signal: stop now
            raise KeyboardInterrupt
        self.received = signal.Signals(signum).name
        logger.warning("%s received: stopping after this step and saving", self.received)

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        return False


# --------------------------------------------------------------------------------------------------
# the run


def train(args: TrainArguments | None = None, **kwargs) -> Path:
    """Train a masked LM as described in the module docstring; return the output folder.

    Args:
        args: the options; or give them as keyword arguments (``train(out=..., max_steps=...)``).

    Raises:
        InputError: bad options, an unreadable corpus, an OUT holding a checkpoint without
            ``resume``, a checkpoint that does not match the options.
    """
    if args is None:
        args = TrainArguments(**kwargs)
    elif kwargs:
        raise TypeError("give TrainArguments or keyword arguments, not both")
    args.check()
    out = Path(args.out)

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.device is not None:
        device = torch.device(args.device)
    else:
        device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    started_group = False
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        started_group = True
    try:
        return _run(args, out, device, rank, world)
    finally:
        if started_group:
            dist.destroy_process_group()


def _run(args: TrainArguments, out: Path, device: torch.device, rank: int, world: int) -> Path:
    t_start = time.monotonic()
    main = rank == 0
    if args.threads:
        torch.set_num_threads(args.threads)
    if device.type == "cpu":
        torch.set_flush_denormal(True)
    random.seed(args.seed)
    torch.manual_seed(args.seed)

    # ---- checkpoint / resume decision
    ckpt_path = out / CHECKPOINT
    checkpoint = None
    if ckpt_path.exists():
        if not args.resume:
            raise InputError(f"{ckpt_path} exists: pass --resume to continue that run, or choose another --out")
        checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        _check_resume(args, checkpoint, world, ckpt_path)
        logger.info("resuming from %s at step %d", ckpt_path, checkpoint["state"]["step"])
    elif args.resume:
        logger.info("no checkpoint in %s: starting a new run", out)

    # ---- data
    sentences = load_corpus(args.corpus)
    if not sentences:
        raise InputError("the training corpus has no sentence", path=args.corpus)
    if args.valid is not None:
        train_sents, valid_sents = sentences, load_corpus(args.valid)
        valid_desc = args.valid
    else:
        held = _held_out(len(sentences), args.valid_fraction)
        train_sents = [s for i, s in enumerate(sentences) if i not in held]
        valid_sents = [s for i, s in enumerate(sentences) if i in held]
        valid_desc = f"{args.valid_fraction} of {args.corpus} (seed-0 permutation)"
    if checkpoint is not None and (out / "tokenizer.json").is_file():
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(out)
    else:
        tokenizer = _build_tokenizer(args, train_sents)
    train_ids, train_over = _encode_counted(tokenizer, train_sents, args.max_length, args.overflow)
    valid_ids, valid_over = _encode_counted(tokenizer, valid_sents, args.max_length, args.overflow)
    if not train_ids:
        raise InputError("no training sentence left after encoding", path=args.corpus)
    n_train_tokens = sum(map(len, train_ids))
    logger.info("training: %d sentences (%d tokens), validation: %d sentences, vocabulary %d",
                len(train_ids), n_train_tokens, len(valid_ids), len(tokenizer))
    pad_id, mask_id = tokenizer.pad_token_id, tokenizer.mask_token_id
    special_ids = sorted({i for i in (pad_id, tokenizer.cls_token_id, mask_id) if i is not None})

    # ---- model, optimizer, schedule
    model = initial_model(args, len(tokenizer)).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    takes_masked_only = "masked_only" in inspect.signature(model.forward).parameters
    Optimizer = torch.optim.AdamW if args.weight_decay > 0 else torch.optim.Adam
    optimizer = Optimizer(model.parameters(), lr=args.lr, betas=tuple(args.betas), eps=args.eps,
                          weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, args.warmup_steps, args.schedule,
                                       args.schedule_steps or args.max_steps, args.final_lr_fraction))
    state = dict(step=0, epoch=0, batch_in_epoch=0, tokens_seen=0, train_seconds=0.0,
                 valid_history=[], initial_valid_loss=None, resumed_from=[], parse_curve=[])
    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        scheduler.load_state_dict(checkpoint["scheduler"])
        for key in state:
            state[key] = checkpoint["state"].get(key, state[key])
        state["resumed_from"] = state["resumed_from"] + [state["step"]]
        del checkpoint
    ddp_model = model
    if world > 1:
        ddp_model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)

    sampler = LengthBucketSampler([len(x) for x in train_ids], batch_size=args.batch_size,
                                  max_tokens=args.max_tokens, seed=args.seed,
                                  bucket_batches=args.bucket_batches, num_replicas=world, rank=rank)
    autocast = (torch.autocast(device_type=device.type, dtype=torch.bfloat16) if args.bf16
                else nullcontext())

    # validation batches: fixed masks (seeded by ``seed``), this rank's share
    valid_batches = []
    if valid_ids:
        vs = LengthBucketSampler([len(x) for x in valid_ids], batch_size=args.batch_size,
                                 max_tokens=args.max_tokens, shuffle=False)
        g = torch.Generator().manual_seed(_derived_seed(args.seed, 0, 0, 7))
        for b, idx in enumerate(vs.all_batches(0)):
            ids, am = pad_batch([valid_ids[i] for i in idx], pad_id)
            inputs, labels = mask_tokens(ids, am, mask_id, len(tokenizer), args.mask_rate, g, special_ids,
                                         **MASK_REPLACE[args.mask_replace])
            if b % world == rank:
                valid_batches.append((inputs, am, labels))

    def forward(inputs, am, labels, m):
        kw = dict(input_ids=inputs.to(device), attention_mask=am.to(device), labels=labels.to(device))
        if takes_masked_only:
            kw["masked_only"] = True
        with autocast:
            return m(**kw).loss

    def validate() -> float | None:
        if not valid_ids:
            return None
        model.eval()
        total = torch.zeros(2, dtype=torch.float64)
        with torch.no_grad():
            for inputs, am, labels in valid_batches:
                n = int((labels != -100).sum())
                total += torch.tensor([float(forward(inputs, am, labels, model)) * n, n], dtype=torch.float64)
        if world > 1:
            total = total.to(device)
            dist.all_reduce(total)
            total = total.cpu()
        model.train()
        return float(total[0] / total[1])

    # ---- learning curve (rank 0 parses the treebank; read now so a bad treebank fails before training)
    curve = None
    if main and args.eval_treebank:
        from syntaxformer.evaluation.curve import ParseCurve
        curve = ParseCurve(args.eval_treebank)

    # ---- output folder, logs
    writer = None
    if main:
        out.mkdir(parents=True, exist_ok=True)
        tokenizer.save_pretrained(out)
        from torch.utils.tensorboard import SummaryWriter
        writer = SummaryWriter(str(out / "tensorboard"), purge_step=state["step"] + 1 if state["step"] else None)

    def save_checkpoint():
        if not main:
            return
        blob = dict(model=model.state_dict(), optimizer=optimizer.state_dict(),
                    scheduler=scheduler.state_dict(), state=state, args=asdict(args), world_size=world)
        tmp = ckpt_path.with_suffix(".pt.tmp")
        torch.save(blob, tmp)
        os.replace(tmp, ckpt_path)

    def record_curve():
        if curve is None or (state["parse_curve"] and state["parse_curve"][-1]["step"] == state["step"]):
            return
        t0 = time.perf_counter()
        scores = curve(model, tokenizer)
        state["parse_curve"].append(dict(step=state["step"], tokens_seen=state["tokens_seen"],
                                         train_minutes=round(state["train_seconds"] / 60, 4),
                                         wall_minutes=round((time.monotonic() - t_start) / 60, 4),
                                         scores=scores))
        for name, values in scores.items():
            for key, value in values.items():
                writer.add_scalar(f"parse/{name}/{key}", value, state["step"])
        best = max(scores, key=lambda k: scores[k]["sentence_f1"])
        logger.info("step %d: %s parsed in %.1f s; best decoder %s, sentence F1 %.2f", state["step"],
                    curve.treebank, time.perf_counter() - t0, best, scores[best]["sentence_f1"])

    if state["step"] == 0:
        record_curve()
    if state["step"] == 0 and state["initial_valid_loss"] is None:
        state["initial_valid_loss"] = validate()
        if state["initial_valid_loss"] is not None:
            state["valid_history"].append([0, state["initial_valid_loss"]])
            if writer:
                writer.add_scalar("valid/loss", state["initial_valid_loss"], 0)

    # ---- the loop
    from tqdm.auto import tqdm
    bar = tqdm(total=args.max_steps, initial=state["step"], unit="step", dynamic_ncols=True,
               disable=args.quiet or not main or not sys.stderr.isatty())
    window = torch.zeros(3, dtype=torch.float64)  # loss sum, steps, tokens (since the last log)
    window_seconds = 0.0
    recent = deque(maxlen=args.log_every)
    last_rate = None
    start_step = state["step"]
    stop_reason = None
    model.train()

    def limit_reached(signal_flag) -> str | None:
        if args.max_steps is not None and state["step"] >= args.max_steps:
            return "max_steps"
        if args.epochs is not None and state["epoch"] >= args.epochs:
            return "epochs"
        flags = torch.zeros(2)
        if args.max_minutes is not None and time.monotonic() - t_start >= 60 * args.max_minutes:
            flags[0] = 1
        if signal_flag.received is not None:
            flags[1] = 1
        if world > 1:  # every rank must stop at the same step
            flags = flags.to(device)
            dist.all_reduce(flags, op=dist.ReduceOp.MAX)
            flags = flags.cpu()
        return "max_minutes" if flags[0] else "signal" if flags[1] else None

    with _StopSignal() as signal_flag:
        stop_reason = limit_reached(signal_flag)
        while stop_reason is None:
            batches = sampler.batches(state["epoch"])
            while state["batch_in_epoch"] < len(batches) and stop_reason is None:
                t0 = time.perf_counter()
                step = state["step"]
                idx = batches[state["batch_in_epoch"]]
                ids, am = pad_batch([train_ids[i] for i in idx], pad_id)
                g = torch.Generator().manual_seed(_derived_seed(args.seed, step, rank, 1))
                inputs, labels = mask_tokens(ids, am, mask_id, len(tokenizer), args.mask_rate, g, special_ids,
                                         **MASK_REPLACE[args.mask_replace])
                torch.manual_seed(_derived_seed(args.seed, step, rank, 2))  # dropout
                loss = forward(inputs, am, labels, ddp_model)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if args.clip > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
                lr = optimizer.param_groups[0]["lr"]
                optimizer.step()
                scheduler.step()
                loss_value = loss.detach().item()
                if not math.isfinite(loss_value):
                    logger.warning("step %d: loss is %s", step + 1, loss_value)
                n_tokens = int(am.sum())
                state["step"] += 1
                state["batch_in_epoch"] += 1
                state["tokens_seen"] += n_tokens * world
                seconds = time.perf_counter() - t0
                state["train_seconds"] += seconds
                window += torch.tensor([loss_value, 1.0, n_tokens], dtype=torch.float64)
                window_seconds += seconds
                recent.append(loss_value)
                bar.update(1)

                if state["step"] % args.log_every == 0:
                    totals = window.clone()
                    if world > 1:
                        totals = totals.to(device)
                        dist.all_reduce(totals)
                        totals = totals.cpu()
                    mean_loss = float(totals[0] / totals[1])
                    last_rate = float(totals[2]) / max(window_seconds, 1e-9)
                    if writer:
                        writer.add_scalar("train/loss", mean_loss, state["step"])
                        writer.add_scalar("train/lr", lr, state["step"])
                        writer.add_scalar("train/tokens_per_second", last_rate, state["step"])
                    bar.set_postfix(loss=f"{mean_loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{last_rate:.0f}")
                    logger.debug("step %d loss %.4f lr %.3g %.0f tokens/s", state["step"], mean_loss, lr, last_rate)
                    window.zero_()
                    window_seconds = 0.0
                if args.eval_every and state["step"] % args.eval_every == 0:
                    v = validate()
                    if v is not None:
                        state["valid_history"].append([state["step"], v])
                        if writer:
                            writer.add_scalar("valid/loss", v, state["step"])
                        logger.info("step %d: validation loss %.4f", state["step"], v)
                    record_curve()
                if args.save_every and state["step"] % args.save_every == 0:
                    save_checkpoint()
                stop_reason = limit_reached(signal_flag)
            if stop_reason is None:
                state["epoch"] += 1
                state["batch_in_epoch"] = 0
                stop_reason = limit_reached(signal_flag)
        bar.close()

        # ---- final validation and save
        if valid_ids and (not state["valid_history"] or state["valid_history"][-1][0] != state["step"]):
            v = validate()
            state["valid_history"].append([state["step"], v])
            if writer:
                writer.add_scalar("valid/loss", v, state["step"])
        record_curve()
        save_checkpoint()
        minutes = (time.monotonic() - t_start) / 60
        if main:
            model.save_pretrained(out, safe_serialization=True)
            tokenizer.save_pretrained(out)
            steps_run = state["step"] - start_step
            record = dict(
                arguments=_jsonable(asdict(args)),
                model=args.model, preset=args.preset, prior=getattr(model.config, "prior", args.prior),
                seed=args.seed,
                preprocessing=asdict(PRPN),  # what load_corpus applied to the words
                data=dict(corpus=args.corpus, valid=valid_desc,
                          train_sentences=len(train_sents), train_sequences=len(train_ids),
                          train_tokens=n_train_tokens, valid_sentences=len(valid_sents),
                          valid_sequences=len(valid_ids), max_length=args.max_length,
                          overflow=args.overflow, train_over_max_length=train_over,
                          valid_over_max_length=valid_over),
                tokenizer=dict(kind=args.tokenizer, vocab_size=len(tokenizer), add_cls=args.add_cls,
                               min_freq=args.min_freq),
                parameters=n_params,
                steps=state["step"], steps_this_run=steps_run,
                epochs=state["epoch"] + state["batch_in_epoch"] / max(1, len(sampler.batches(state["epoch"]))),
                tokens_seen=state["tokens_seen"],
                minutes=round(minutes, 3), train_minutes_total=round(state["train_seconds"] / 60, 3),
                tokens_per_second=(round(last_rate, 1) if last_rate is not None else None),
                final_train_loss=(sum(recent) / len(recent) if recent else None),
                initial_valid_loss=state["initial_valid_loss"],
                final_valid_loss=(state["valid_history"][-1][1] if state["valid_history"] else None),
                valid_history=state["valid_history"],
                **({"parse_curve": dict(treebank=args.eval_treebank, every=args.eval_every,
                                        points=state["parse_curve"])} if args.eval_treebank else {}),
                resumed_from_steps=state["resumed_from"],
                stopped=stop_reason,
                device=str(device), world_size=world, bf16=args.bf16,
                torch=torch.__version__,
            )
            (out / TRAINING_JSON).write_text(json.dumps(record, indent=2) + "\n")
            writer.close()
            logger.info("stopped (%s) at step %d after %.1f minutes; saved to %s", stop_reason,
                        state["step"], minutes, out)
    if world > 1:
        dist.barrier()
    return out


def _jsonable(d: dict) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


def _check_resume(args: TrainArguments, checkpoint: dict, world: int, path: Path) -> None:
    # an option added after the checkpoint was written counts as its default
    saved = {**asdict(TrainArguments(out=args.out)), **checkpoint["args"]}
    current = asdict(args)
    diffs = [f"{k}: {saved[k]!r} -> {current[k]!r}" for k in current
             if k not in RESUMABLE_CHANGES and _norm(saved[k]) != _norm(current[k])]
    if diffs:
        raise InputError(f"{path} was trained with other options ({'; '.join(diffs)})")
    if checkpoint["world_size"] != world:
        raise InputError(f"{path} was trained with {checkpoint['world_size']} processes, this run has {world}")


def _norm(v):
    return list(v) if isinstance(v, tuple) else v


__all__ = ["TrainArguments", "train", "initial_model", "lr_factor", "RESUMABLE_CHANGES"]
