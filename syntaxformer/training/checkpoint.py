"""The trainer's checkpoint file: whether a run resumes, the consistency check, the atomic write.

``OUT/checkpoint.pt`` is a :func:`torch.save` dict with ``model``, ``optimizer`` and ``scheduler``
(their ``state_dict()``), ``state`` (the :class:`~syntaxformer.training.loop.TrainerState` as a
dict), ``args`` (the run's :class:`~syntaxformer.training.arguments.TrainArguments` as a dict) and
``world_size`` (the number of data-parallel processes).

It holds tensors and plain values only (dicts, lists, tuples, strings, numbers, None), so it is read
with ``torch.load(weights_only=True)``, which runs no code from the file: :func:`write_checkpoint`
stores a path, a string subclass or a numpy scalar as the plain value it stands for, and
:func:`read_checkpoint` refuses a file holding any other pickled object.
"""

from __future__ import annotations

import copy
import logging
import os
import pickle
import re
from dataclasses import asdict
from pathlib import Path, PurePath

import numpy as np
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
        "prefetch",
        "tf32",
        "step_graph",
    }
)


def read_checkpoint(args: TrainArguments, world: int) -> dict | None:
    """The checkpoint a run with ``args`` continues from, or None for a fresh start.

    ``OUT/checkpoint.pt`` is read (on the CPU) when it exists and ``args.resume`` is set; ``resume``
    without a checkpoint starts afresh.

    Raises:
        InputError: a checkpoint exists but ``args.resume`` is not set; it cannot be loaded
            (:func:`load_checkpoint`); the checkpoint was written with options other than ``args``
            (beyond :data:`RESUMABLE_CHANGES`) or with another number of processes than ``world``.
    """
    path = Path(args.out) / CHECKPOINT
    if not path.exists():
        if args.resume:
            logger.info("no checkpoint in %s: starting a new run", args.out)
        return None
    if not args.resume:
        raise InputError(f"{path} exists: pass --resume to continue that run, or choose another --out")
    checkpoint = load_checkpoint(path)
    check_resume(args, checkpoint, world, path)
    logger.info("resuming from %s at step %d", path, checkpoint["state"]["step"])
    return checkpoint


#: The entries :func:`read_checkpoint` and :func:`check_resume` read from every checkpoint.
REQUIRED = ("state", "args", "world_size")


def load_checkpoint(path: Path) -> dict:
    """The checkpoint dict in ``path``, read on the CPU with ``torch.load(weights_only=True)``: tensors
    and plain values only, no code from the file runs.

    Raises:
        InputError: in one line naming the file: it holds another pickled object (naming its class,
            e.g. an instance of a class of the program that wrote it); it is truncated, damaged or not
            a PyTorch file; it is not a dict with the entries of :data:`REQUIRED`.
    """
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        unsafe = re.search(r"Unsupported global: GLOBAL (\S+)", str(e))
        if unsafe:
            raise InputError(
                f"refused: the checkpoint holds a pickled {unsafe.group(1)}, not a tensor or plain value; "
                "loading it would run code from the file",
                path=path,
            ) from None
        raise InputError("not a readable checkpoint (damaged, or not written by torch.save)", path=path) from None
    except (RuntimeError, EOFError, OSError, ValueError) as e:
        reason = " ".join(str(e).split()).split(". ")[0][:120]  # its first sentence, not a cut word
        raise InputError(f"not a readable checkpoint (truncated or damaged: {reason})", path=path) from None
    missing = [key for key in REQUIRED if not isinstance(checkpoint, dict) or key not in checkpoint]
    if missing:
        raise InputError(f"not a training checkpoint: no {', '.join(missing)}", path=path)
    return checkpoint


def plain(value):
    """``value`` with what ``torch.load(weights_only=True)`` refuses replaced by the plain value it
    stands for: a path or a ``str`` subclass (e.g. a structure source) by its string, a numpy scalar by
    the Python number, inside dicts, lists and tuples too. Tensors and other values are kept, and so is
    a container with nothing to replace (the same object: a state dict keeps its ``_metadata``); one
    with something to replace is a copy (a dict of its own type, a list or a tuple)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        items = {k: plain(v) for k, v in value.items()}
        if all(items[k] is v for k, v in value.items()):
            return value
        copied = copy.copy(value)
        copied.update(items)
        return copied
    if isinstance(value, (list, tuple)):
        items = [plain(v) for v in value]
        if type(value) in (list, tuple) and all(a is b for a, b in zip(items, value)):
            return value
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, str):
        return value if type(value) is str else str(value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def write_checkpoint(path: Path, blob: dict) -> None:
    """``torch.save(plain(blob))`` to ``path`` atomically (a temporary file, then a rename): a kill at
    any moment leaves the previous checkpoint or the new one, never a partial file. Stored as plain
    values (:func:`plain`), the file loads with ``weights_only=True`` (:func:`load_checkpoint`)."""
    tmp = path.with_suffix(".pt.tmp")
    torch.save(plain(blob), tmp)
    os.replace(tmp, path)


def check_resume(args: TrainArguments, checkpoint: dict, world: int, path: Path) -> None:
    """Raise :class:`InputError` when ``checkpoint`` cannot be continued by a run with ``args`` on
    ``world`` processes: an option outside :data:`RESUMABLE_CHANGES` differs (an option added after
    the checkpoint was written counts as its default; two paths naming the same existing file, such as
    ``../data/a.txt`` and its absolute form, count as equal), or the number of processes differs."""
    saved = {**asdict(type(args)(out=args.out)), **checkpoint["args"]}  # the run's own options class
    current = asdict(args)
    diffs = [
        f"{k}: {saved[k]!r} -> {current[k]!r}"
        for k in current
        if k not in RESUMABLE_CHANGES and not _same_option(saved[k], current[k])
    ]
    if diffs:
        raise InputError(f"{path} was trained with other options ({'; '.join(diffs)})")
    if checkpoint["world_size"] != world:
        raise InputError(f"{path} was trained with {checkpoint['world_size']} processes, this run has {world}")


def _same_option(saved, current) -> bool:
    """Whether an option's stored value and the resuming run's are the same: equal as stored, or two
    paths (the current one naming an existing file or folder) that resolve to the same place."""
    saved, current = _norm(saved), _norm(current)
    if saved == current:
        return True
    if isinstance(saved, str) and isinstance(current, str) and os.path.exists(current):
        return os.path.realpath(saved) == os.path.realpath(current)
    return False


def _norm(v):
    """An option's value as a checkpoint stores it (:func:`plain`), tuples as lists (JSON's)."""
    v = plain(v)
    return list(v) if isinstance(v, tuple) else v


__all__ = [
    "CHECKPOINT",
    "RESUMABLE_CHANGES",
    "REQUIRED",
    "read_checkpoint",
    "load_checkpoint",
    "write_checkpoint",
    "plain",
    "check_resume",
]
