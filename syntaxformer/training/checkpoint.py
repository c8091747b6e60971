"""The trainer's checkpoint file: whether a run resumes, the consistency check, the atomic write.

``OUT/checkpoint.pt`` is a :func:`torch.save` dict with ``model``, ``optimizer`` and ``scheduler``
(their ``state_dict()``), ``state`` (the :class:`~syntaxformer.training.trainer.TrainerState` as a
dict), ``args`` (the run's :class:`~syntaxformer.training.arguments.TrainArguments` as a dict) and
``world_size`` (the number of data-parallel processes).
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict
from pathlib import Path

import torch

from syntaxformer.errors import InputError
from syntaxformer.training.arguments import TrainArguments

logger = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"

#: Options that may differ between a checkpoint and the run resuming it (stop conditions, periods, where and
#: how it runs, what it writes besides the model: none changes the steps taken).
RESUMABLE_CHANGES = frozenset(
    {
        "out",
        "resume",
        "max_steps",
        "max_minutes",
        "epochs",
        "save_every",
        "eval_every",
        "log_every",
        "quiet",
        "threads",
        "device",
        "eval_treebank",
        "keep_best",
        "early_stopping",
    }
)


def read_checkpoint(args: TrainArguments, world: int) -> dict | None:
    """The checkpoint a run with ``args`` continues from, or None for a fresh start.

    ``OUT/checkpoint.pt`` is read (on the CPU) when it exists and ``args.resume`` is set; ``resume``
    without a checkpoint starts afresh.

    Raises:
        InputError: a checkpoint exists but ``args.resume`` is not set; the checkpoint was written
            with options other than ``args`` (beyond :data:`RESUMABLE_CHANGES`) or with another
            number of processes than ``world``.
    """
    path = Path(args.out) / CHECKPOINT
    if not path.exists():
        if args.resume:
            logger.info("no checkpoint in %s: starting a new run", args.out)
        return None
    if not args.resume:
        raise InputError(f"{path} exists: pass --resume to continue that run, or choose another --out")
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    check_resume(args, checkpoint, world, path)
    logger.info("resuming from %s at step %d", path, checkpoint["state"]["step"])
    return checkpoint


def write_checkpoint(path: Path, blob: dict) -> None:
    """``torch.save(blob)`` to ``path`` atomically (a temporary file, then a rename): a kill at any
    moment leaves the previous checkpoint or the new one, never a partial file."""
    tmp = path.with_suffix(".pt.tmp")
    torch.save(blob, tmp)
    os.replace(tmp, path)


def check_resume(args: TrainArguments, checkpoint: dict, world: int, path: Path) -> None:
    """Raise :class:`InputError` when ``checkpoint`` cannot be continued by a run with ``args`` on
    ``world`` processes: an option outside :data:`RESUMABLE_CHANGES` differs (an option added after
    the checkpoint was written counts as its default), or the number of processes differs."""
    saved = {**asdict(type(args)(out=args.out)), **checkpoint["args"]}  # the run's own options class
    current = asdict(args)
    diffs = [
        f"{k}: {saved[k]!r} -> {current[k]!r}"
        for k in current
        if k not in RESUMABLE_CHANGES and _norm(saved[k]) != _norm(current[k])
    ]
    if diffs:
        raise InputError(f"{path} was trained with other options ({'; '.join(diffs)})")
    if checkpoint["world_size"] != world:
        raise InputError(f"{path} was trained with {checkpoint['world_size']} processes, this run has {world}")


def _norm(v):
    return list(v) if isinstance(v, tuple) else v


__all__ = ["CHECKPOINT", "RESUMABLE_CHANGES", "read_checkpoint", "write_checkpoint", "check_resume"]
