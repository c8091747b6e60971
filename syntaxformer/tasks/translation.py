"""Training a translation model: a task of the training loop (``syntaxformer translation train``).

:class:`TranslationTrainer` is the task of the :class:`~syntaxformer.training.loop.TrainingLoop` whose
objective is the label-smoothed cross-entropy of the target pieces
(:class:`~syntaxformer.models.translation.TranslationModel`); it reuses the loop's progress bar and
time estimate, stop conditions, Adam, warm-up and schedule (``inverse-sqrt``), atomic checkpoints
and ``resume``. What is its own:

* data: two aligned files (:func:`~syntaxformer.data.parallel.read_aligned`), already tokenised
  (the Multi30k ``tok/`` files) and the validation pair likewise; the joint BPE vocabulary learnt on
  the training pairs (``--vocab-size``), saved as ``tokenizer.json``; the source trees of a
  structured encoder from ``--parser`` (:mod:`~syntaxformer.tasks.translation_data`), cached in
  ``--tree-cache`` (default OUT);
* batches: :class:`~syntaxformer.data.batching.LengthBucketSampler` with ``--max-tokens`` padded
  tokens (length: the longer side of a pair), as fairseq's ``--max-tokens``;
* validation: the label-smoothed loss per target piece on the validation pairs;
* **checkpoint averaging**: the model at the end of every epoch is kept in ``OUT/snapshots/``
  (the last ``--average-last``), and the model a finished run leaves in OUT is their average (with
  the last step's when the run stopped mid-epoch; fairseq's ``average_checkpoints.py`` over the last
  epoch checkpoints).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer

from syntaxformer.data.batching import LengthBucketSampler
from syntaxformer.data.parallel import build_subwords, read_aligned
from syntaxformer.errors import InputError
from syntaxformer.models.translation import PRESETS, VARIANTS, TranslationModel, translation_config
from syntaxformer.parser import parser_fingerprint
from syntaxformer.runtime import code_version, prepare_cpu_loop, resolve_device
from syntaxformer.tasks.translation_data import (
    DEFAULT_PARSERS,
    EncodedPairs,
    TranslationBatch,
    encode_pairs,
    make_batch,
    source_structures,
    wrap_subwords,
)
from syntaxformer.training.arguments import (
    ModelArguments,
    OptimisationArguments,
    OutputArguments,
    RunArguments,
    check_bounds,
    check_choices,
    option,
    same_option,
)
from syntaxformer.training.checkpoint import read_checkpoint
from syntaxformer.training.loop import TrainingLoop, _jsonable

logger = logging.getLogger(__name__)

#: the folder of the epoch-end models averaged at the end
SNAPSHOTS = "snapshots"


@dataclass
class TranslationModelArguments:
    """The encoder structure and the size."""

    option_group = "model"

    variant: str = option("baseline", choices=tuple(VARIANTS), help="the encoder's structure: " + ", ".join(VARIANTS))
    preset: str = option(
        "anchor", choices=tuple(PRESETS), help="size: anchor (4+4 layers, d 128, FFN 256, 4 heads, dropout 0.3), tiny"
    )
    overrides: dict = same_option(
        ModelArguments,
        "overrides",
        help="override a config field (JSON value), e.g. --set label_smoothing=0.2; repeatable",
    )
    parser: str | None = option(
        None,
        help="the parser of the source trees (a folder or shipped name; default: structformer-ptb-lm for "
        "structural positions, ensemble-ptb-lm for syntactic phrases)",
    )
    tree_level: int = option(1, help="mgsa-syntactic: the level at which the source tree is cut into phrases")


@dataclass
class TranslationDataArguments:
    """The aligned files, the vocabulary and the batches."""

    option_group = "data and batches"

    source: str | None = option(None, help="training source sentences, tokenised, one a line (plain or .gz); required")
    target: str | None = option(None, help="training target sentences, aligned with --source; required")
    valid_source: str | None = option(None, help="validation source sentences; required")
    valid_target: str | None = option(None, help="validation target sentences; required")
    source_language: str = option("en", help="the source language's code (Moses tokenisation of raw input)")
    target_language: str = option("de", help="the target language's code (Moses detokenisation of the output)")
    lowercase: bool = option(True, help="the files are lower-cased (raw input is lower-cased too)")
    vocab_size: int = option(10000, help="pieces of the joint BPE vocabulary")
    max_tokens: int = option(4096, help="padded tokens per batch (the longer side of each pair)")
    bucket_batches: int = option(50, help="batches' worth of pairs sorted by length together")
    tree_cache: str | None = option(None, metavar="DIR", help="where the source trees are cached (default: OUT)")


@dataclass
class TranslationRunArguments:
    """How long a run goes, what it averages, and where it runs."""

    option_group = "run"

    max_steps: int | None = same_option(RunArguments, "max_steps", default=8000)
    epochs: int | None = same_option(RunArguments, "epochs")
    max_minutes: float | None = same_option(RunArguments, "max_minutes")
    save_every: int | None = same_option(RunArguments, "save_every")
    eval_every: int = same_option(
        RunArguments,
        "eval_every",
        default=0,
        help="validation period in steps, besides every epoch end (0: epoch ends only)",
    )
    average_last: int = option(
        10, help="the model left in OUT averages the last this many epoch-end models (1: the last)"
    )
    log_every: int = same_option(RunArguments, "log_every")
    seed: int = same_option(RunArguments, "seed")
    device: str | None = same_option(RunArguments, "device")
    bf16: bool = same_option(RunArguments, "bf16")
    threads: int | None = same_option(RunArguments, "threads")
    resume: bool = same_option(RunArguments, "resume")
    quiet: bool = same_option(RunArguments, "quiet")


@dataclass
class TranslationOptimisation(OptimisationArguments):
    """The anchor's optimisation (fairseq ``transformer_tiny`` of Wu et al. 2021): Adam (0.9, 0.98),
    peak 0.005 after 2,000 warm-up steps, inverse square root, no clipping."""

    lr: float = same_option(OptimisationArguments, "lr", default=0.005)
    eps: float = same_option(OptimisationArguments, "eps", default=1e-8)
    warmup_steps: int = same_option(OptimisationArguments, "warmup_steps", default=2000)
    schedule: str = same_option(OptimisationArguments, "schedule", default="inverse-sqrt")
    clip: float = same_option(OptimisationArguments, "clip", default=0.0)


@dataclass
class TranslationArguments(
    TranslationRunArguments,
    TranslationOptimisation,
    TranslationDataArguments,
    TranslationModelArguments,
    OutputArguments,
):
    """Everything :class:`TranslationTrainer` needs; each field is a ``translation train`` option."""

    def check(self) -> None:
        """Raise :class:`InputError` (one line) for an inconsistent or out-of-range option."""
        check_bounds(
            self,
            ("max_tokens", "max_steps", "epochs", "log_every", "vocab_size", "average_last", "tree_level"),
            ("warmup_steps", "save_every", "eval_every", "clip", "weight_decay"),
        )
        missing = [name for name in ("source", "target", "valid_source", "valid_target") if not getattr(self, name)]
        if missing:
            raise InputError("give " + ", ".join("--" + name.replace("_", "-") for name in missing))
        if self.max_steps is None and self.epochs is None and self.max_minutes is None:
            raise InputError("give at least one stop condition: --max-steps, --epochs or --max-minutes")
        if self.optimizer not in ("adam", "adam-l2"):
            raise InputError(f"--optimizer must be adam or adam-l2, got {self.optimizer!r}")
        check_choices(self)
        resolve_device(self.device)


@dataclass
class TranslationData:
    """The encoded training and validation pairs, and where they came from."""

    train: EncodedPairs
    valid: EncodedPairs
    record: dict = field(default_factory=dict)


def _words(lines) -> list[list[str]]:
    return [line.split() for line in lines]


def average_snapshots(paths: list[Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean of the state dicts in ``paths`` (safetensors files; fairseq's
    ``average_checkpoints.py``).

    Raises:
        InputError: no file to average.
    """
    if not paths:
        raise InputError("no snapshot to average (a run keeps them in OUT/snapshots/)")
    total = None
    for path in paths:
        state = load_file(str(path))
        total = state if total is None else {k: total[k] + state[k] for k in total}
    return {k: v / len(paths) for k, v in total.items()}


def snapshot_files(out: str | Path) -> list[Path]:
    """The epoch-end snapshots a run kept in ``OUT/snapshots/``, oldest first."""
    return sorted((Path(out) / SNAPSHOTS).glob("step-*.safetensors"))


class TranslationTrainer(TrainingLoop):
    """The translation task of the training loop (module docstring)."""

    validation_keys = ("valid/loss",)
    prefetchable = True

    def build(self) -> None:
        """Seed; the checkpoint; the pairs, vocabulary and source trees; model, optimizer, schedule; batches."""
        args = self.args
        if args.threads:
            torch.set_num_threads(args.threads)
        prepare_cpu_loop(self.device)
        torch.manual_seed(args.seed)
        checkpoint = read_checkpoint(args, self.world)
        train_pairs = read_aligned(args.source, args.target)
        valid_pairs = read_aligned(args.valid_source, args.valid_target)
        if checkpoint is not None and (self.out / "tokenizer.json").is_file():
            self.tokenizer = AutoTokenizer.from_pretrained(self.out)
        else:
            self.tokenizer = wrap_subwords(build_subwords([s for pair in train_pairs for s in pair], args.vocab_size))
        self.data = self._encode(train_pairs, valid_pairs)
        self._build_model()
        if checkpoint is not None:
            self.resume(checkpoint)
        self.ddp_model = self.model
        lengths = [max(len(s), len(t) + 1) for s, t in zip(self.data.train.source, self.data.train.target)]
        self.sampler = LengthBucketSampler(
            lengths, max_tokens=args.max_tokens, seed=args.seed, bucket_batches=args.bucket_batches
        )
        self.batches_per_epoch = len(self.sampler.batches(0))
        valid = self.data.valid
        order = sorted(range(len(valid)), key=lambda i: len(valid.source[i]))
        self.valid_batches = [make_batch(valid, order[i : i + 100]).to(self.device) for i in range(0, len(order), 100)]

    def _encode(self, train_pairs, valid_pairs) -> TranslationData:
        args = self.args
        kind = VARIANTS[args.variant].structure
        sides = {"train": train_pairs, "valid": valid_pairs}
        encoded, record = {}, {}
        for name, pairs in sides.items():
            source, target = _words(s for s, _ in pairs), _words(t for _, t in pairs)
            structures = None
            if kind:
                cache = Path(args.tree_cache or args.out)
                structures = source_structures(source, kind, args.parser, cache, args.tree_level)
            encoded[name] = encode_pairs(self.tokenizer, source, target, kind, structures)
            record[name] = dict(
                pairs=len(pairs), source_words=sum(map(len, source)), target_words=sum(map(len, target))
            )
        record.update(
            source=args.source,
            target=args.target,
            valid_source=args.valid_source,
            valid_target=args.valid_target,
            vocabulary=len(self.tokenizer),
            source_structure=kind,
            parser=(args.parser or DEFAULT_PARSERS[kind]) if kind else None,
        )
        # what the parser's name stood for: a shipped ensemble re-weighted later gives other trees
        record["parser_fingerprint"] = parser_fingerprint(record["parser"]) if kind else None
        return TranslationData(encoded["train"], encoded["valid"], record)

    def _build_model(self) -> None:
        args = self.args
        try:
            config = translation_config(
                args.variant,
                args.preset,
                len(self.tokenizer),
                source_language=args.source_language,
                target_language=args.target_language,
                lowercase=args.lowercase,
                **args.overrides,
            )
        except (ValueError, TypeError) as e:
            raise InputError(f"cannot build the {args.variant} / {args.preset} model: {e}") from e
        config.source_parser = self.data.record["parser"]
        config.source_parser_fingerprint = self.data.record["parser_fingerprint"]
        config.source_tree_level = args.tree_level
        torch.manual_seed(args.seed)
        self.model = TranslationModel(config).to(self.device)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.optimizer = self.make_optimizer(self.model.parameters())
        self.scheduler = self.make_scheduler()

    def epoch_batches(self) -> int:
        """The batches of an epoch: validation, a checkpoint and a snapshot at the end of every epoch."""
        return self.batches_per_epoch

    # ---------------------------------------------------------------------------------- a step

    def make_batch(self, indices: list[int]) -> TranslationBatch:
        """The padded batch of training pairs ``indices`` (no randomness)."""
        return make_batch(self.data.train, indices)

    def batch_at(self, indices: list[int], step: int) -> TranslationBatch:
        """:meth:`make_batch` (the batch depends on the pairs only)."""
        return make_batch(self.data.train, indices)

    def compute_loss(self, model, batch: TranslationBatch) -> torch.Tensor:
        """The label-smoothed cross-entropy per target piece of one batch."""
        return model(**batch.to(self.device).features).loss

    def validation_metrics(self) -> dict[str, float]:
        """``{"valid/loss": label-smoothed cross-entropy per target piece}`` on the validation pairs."""
        self.model.eval()
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        tokens = 0
        with torch.no_grad():
            for batch in self.valid_batches:
                n = batch.n_tokens
                total += self.model(**batch.features).loss.double() * n
                tokens += n
        self.model.train()
        return {"valid/loss": float(total) / max(tokens, 1)}

    # ---------------------------------------------------------------------------------- averaging

    def save(self) -> None:
        """The loop's checkpoint; at the end of an epoch also a snapshot of the model (the last
        ``average_last`` kept)."""
        super().save()
        if self.is_main and self._epoch_ended():
            self._snapshot()

    def _snapshot(self) -> None:
        folder = self.out / SNAPSHOTS
        folder.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().to("cpu").contiguous() for k, v in self.model.state_dict().items()}
        save_file(state, str(folder / f"step-{self.state.step:08d}.safetensors"))
        for old in sorted(folder.glob("step-*.safetensors"))[: -self.args.average_last]:
            old.unlink()

    def snapshots(self) -> list[Path]:
        """The kept epoch-end snapshots, oldest first."""
        return snapshot_files(self.out)

    def final_model(self) -> torch.nn.Module:
        """The average of the last ``average_last`` epoch-end models (with the last step's when the run
        stopped mid-epoch); the model as it is when there is no snapshot or ``average_last`` is 1."""
        if self.args.average_last == 1:
            return self.model
        averaged = TranslationModel(self.model.config)
        averaged.load_state_dict(average_snapshots(self.averaged_snapshots()))
        return averaged.to(self.device)

    def averaged_snapshots(self) -> list[Path]:
        """The snapshots the final model averages: the last ``average_last``, the current step's among
        them (written now when the run stopped mid-epoch)."""
        paths = self.snapshots()
        if self.is_main and (not paths or paths[-1].name != f"step-{self.state.step:08d}.safetensors"):
            self._snapshot()
            paths = self.snapshots()
        return paths[-self.args.average_last :]

    # ---------------------------------------------------------------------------------- report

    def report(self) -> dict:
        """The contents of ``training.json``."""
        args, state = self.args, self.state
        seconds = max(state.train_seconds, 1e-9)
        return dict(
            arguments=_jsonable(asdict(args)),
            task="translation",
            variant=args.variant,
            about=VARIANTS[args.variant].about,
            preset=args.preset,
            seed=args.seed,
            data=self.data.record,
            parameters=self.n_params,
            steps=state.step,
            steps_this_run=self.steps_this_run,
            epochs=state.epoch + state.batch_in_epoch / max(1, self.batches_per_epoch),
            batches_per_epoch=self.batches_per_epoch,
            target_tokens_seen=state.tokens_seen,
            train_minutes_total=round(state.train_seconds / 60, 3),
            minutes=round((time.monotonic() - self.t_start) / 60, 3),
            train_tokens_per_second=round(state.tokens_seen / seconds, 1),
            final_train_loss=self.recent_train_loss,
            valid_history=state.valid_history,
            averaged=dict(
                last=args.average_last,
                steps=[int(p.stem.split("-")[1]) for p in self.averaged_snapshots()]
                if args.average_last > 1
                else [state.step],
            ),
            resumed_from_steps=state.resumed_from,
            stopped=self.stop_reason,
            device=str(self.device),
            threads=torch.get_num_threads(),
            torch=torch.__version__,
            code=code_version(),
        )


__all__ = [
    "TranslationArguments",
    "TranslationModelArguments",
    "TranslationDataArguments",
    "TranslationRunArguments",
    "TranslationOptimisation",
    "TranslationData",
    "TranslationTrainer",
    "SNAPSHOTS",
    "average_snapshots",
    "snapshot_files",
]
