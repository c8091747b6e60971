"""Training: the task-agnostic loop every trainer shares (:class:`TrainingLoop`, :mod:`~syntaxformer.training.loop`:
one readable ``train()``; the step's work on the device chosen once, :mod:`~syntaxformer.training.step`; the
next batch prepared ahead, :mod:`~syntaxformer.training.prefetch`; checkpoints and exact resume,
:mod:`~syntaxformer.training.checkpoint`; the best model, :mod:`~syntaxformer.training.best`; the plateau
schedule, :mod:`~syntaxformer.training.plateau`; :class:`TrainerCallback` for stop conditions and writers)
with explicit batches (:class:`Batch`), the options by concern (:class:`TrainArguments`,
:class:`ModelArguments`, :class:`DataArguments`, :class:`OptimisationArguments`, :class:`RunArguments`,
:class:`RunningTextArguments`, :class:`FineTuneArguments`), the language models' objectives (BERT masking,
:func:`mask_tokens`; :mod:`~syntaxformer.training.objectives`) and one model-config resolver
(:func:`resolve_model_config`). The tasks the loop trains (the masked / causal LM and ``train(args)``, running
text, fine-tuning with head gates, NLI, logic, distillation) are in :mod:`syntaxformer.tasks`."""

from syntaxformer.data.batching import LengthBucketSampler, pad_batch
from syntaxformer.training.arguments import (
    DataArguments,
    FineTuneArguments,
    ModelArguments,
    OptimisationArguments,
    OutputArguments,
    RunArguments,
    RunningTextArguments,
    TrainArguments,
)
from syntaxformer.training.batch import Batch, PairBatch, TokenBatch
from syntaxformer.training.callbacks import StopCondition, TrainerCallback
from syntaxformer.training.loop import TrainingLoop, lr_factor
from syntaxformer.training.mlm import IGNORE_INDEX, mask_tokens
from syntaxformer.training.model_config import resolve_model_config

__all__ = [
    "mask_tokens",
    "IGNORE_INDEX",
    "LengthBucketSampler",
    "pad_batch",
    "TrainArguments",
    "OutputArguments",
    "ModelArguments",
    "DataArguments",
    "OptimisationArguments",
    "RunArguments",
    "FineTuneArguments",
    "RunningTextArguments",
    "lr_factor",
    "TrainingLoop",
    "Batch",
    "TokenBatch",
    "PairBatch",
    "resolve_model_config",
    "TrainerCallback",
    "StopCondition",
]
