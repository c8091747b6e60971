"""Training: BERT masking (:func:`mask_tokens`), shuffled length-bucketed batches
(:class:`LengthBucketSampler`), the task-agnostic loop (:class:`TrainingLoop`) with explicit batches (:class:`Batch`), one model-config
resolver (:func:`resolve_model_config`), and the language-model trainer (:func:`train`, :class:`TrainArguments`: its
fields by concern, :class:`ModelArguments`, :class:`DataArguments`, :class:`OptimisationArguments`, :class:`RunArguments`,
:class:`RunningTextArguments`; :class:`Trainer`; :class:`TrainerCallback` for stop conditions and writers) with checkpoints, resume after a kill,
TensorBoard logs and data parallelism under ``torchrun``."""

from syntaxformer.data.batching import LengthBucketSampler, pad_batch
from syntaxformer.training.arguments import (
    DataArguments,
    FineTuneArguments,
    ModelArguments,
    OptimisationArguments,
    OutputArguments,
    RunArguments,
    RunningTextArguments,
)
from syntaxformer.training.batch import Batch, PairBatch, TokenBatch
from syntaxformer.training.callbacks import StopCondition, TrainerCallback
from syntaxformer.training.loop import TrainingLoop
from syntaxformer.training.mlm import IGNORE_INDEX, mask_tokens
from syntaxformer.training.model_config import resolve_model_config
from syntaxformer.training.run import train
from syntaxformer.training.trainer import TrainArguments, Trainer, lr_factor

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
    "train",
    "lr_factor",
    "Trainer",
    "TrainingLoop",
    "Batch",
    "TokenBatch",
    "PairBatch",
    "resolve_model_config",
    "TrainerCallback",
    "StopCondition",
]
