"""Run a training: :func:`train` picks the trainer for the options (:class:`~syntaxformer.tasks.language_model.Trainer`;
:class:`~syntaxformer.tasks.finetune.FineTuneTrainer` with ``init_from``;
:class:`~syntaxformer.tasks.running_text.RunningTextTrainer` with ``bptt``) and runs it."""

from __future__ import annotations

from pathlib import Path

from syntaxformer.tasks.finetune import FineTuneTrainer
from syntaxformer.tasks.language_model import Trainer
from syntaxformer.tasks.running_text import RunningTextTrainer
from syntaxformer.training.arguments import TrainArguments


def train(args: TrainArguments | None = None, **kwargs) -> Path:
    """Train a model (its own objective) as described in the module docstring; return the output folder.

    ``Trainer(args).train()`` (with ``init_from``:
    :class:`~syntaxformer.tasks.finetune.FineTuneTrainer`; with ``bptt``:
    :class:`~syntaxformer.tasks.running_text.RunningTextTrainer`); use a trainer directly to add callbacks.

    Args:
        args: the options; or give them as keyword arguments (``train(out=..., max_steps=...)``).

    Raises:
        InputError: bad options, an unreadable corpus, an OUT holding a checkpoint without
            ``resume``, a checkpoint that does not match the options.
        TypeError: both ``args`` and keyword arguments.
    """
    if args is None:
        args = TrainArguments(**kwargs)
    elif kwargs:
        raise TypeError("give TrainArguments or keyword arguments, not both")
    if args.bptt is not None:  # running text, the AWD-LSTM procedure: tasks/running_text.py
        return RunningTextTrainer(args).train()
    if args.init_from is not None:  # fine-tuning a trained model (with head gates): tasks/finetune.py
        return FineTuneTrainer(args).train()
    return Trainer(args).train()


__all__ = ["train"]
