"""The batches the trainers pass to their loss: explicit values, one dataclass per kind of input.

A task builds its batches on the CPU (the masked / causal LM objective
(:meth:`~syntaxformer.training.objectives.Objective.batch`), the logic task's
:func:`~syntaxformer.tasks.logic.collate`, NLI's :class:`~syntaxformer.data.nli.PairEncoder`) and the
trainer hands each one to ``compute_loss(model, batch)``; :meth:`Batch.to` moves it to the run's
device. Everything the loss reads travels in the batch (no per-batch attribute on the trainer):

* :class:`TokenBatch`: ``input_ids``, ``attention_mask`` ``(B, N)``, ``labels`` (``(B, N)`` for a
  language model, -100 = not a target; ``(B',)`` class indices for the logic task, whose B = 2 B'
  rows are the left formulas then the right ones) and the per-sentence ``structure_inputs`` a
  structural prior reads (``--trees``: ``{"heads": (B, N)}``; ``--phrases``: ``"phrase_ids"``
  ``(B, N)`` and maybe ``"phrase_labels"`` ``(B, P)``), or None; for the masked LM, the labelled
  positions as an index list ``masked_positions`` ``(M,)`` (flat into ``B·N``, row-major;
  :func:`~syntaxformer.blocks.mlm_head.labelled_positions`), which the model's ``masked_only`` path
  gathers without a boolean mask;
* :class:`PairBatch`: the sentence-pair classifier's keyword inputs (``premise_ids``, ... and
  ``labels`` ``(B,)``), as :meth:`~syntaxformer.data.nli.PairEncoder.batch` makes them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch


def _moved(value, device: torch.device):
    """``value`` on ``device``: a tensor, the tensors of a dict, or None. A host tensor bound for CUDA is
    copied from pinned memory without waiting (``non_blocking``): the copy is queued on the stream
    before the step's kernels, and the host goes on (no synchronisation)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {k: _moved(v, device) for k, v in value.items()}
    if device.type == "cuda" and value.device.type == "cpu":
        return value.pin_memory().to(device, non_blocking=True)
    return value.to(device)


def _pinned(value):
    """``value`` (a tensor, the tensors of a dict, or None) with its host tensors pinned."""
    if isinstance(value, dict):
        return {k: _pinned(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor) and value.device.type == "cpu":
        return value.pin_memory()
    return value


@dataclass
class Batch:
    """The common base of the batches: moving to a device and the counts a training step records."""

    def values(self) -> dict[str, object]:
        """The fields by name (their values: tensors, dicts of tensors, or None). Read through
        ``dataclasses.fields``, which ``torch.compile`` traces (``vars`` of an instance it does not,
        in PyTorch 2.11: "Unsupported method call")."""
        return {field.name: getattr(self, field.name) for field in fields(self)}

    def to(self, device: torch.device | str) -> Batch:
        """A copy with every tensor (and every tensor of a dict field) on ``device``."""
        device = torch.device(device)
        return replace(self, **{name: _moved(value, device) for name, value in self.values().items()})

    def pinned(self) -> Batch:
        """A copy with every host tensor in page-locked memory (for a non-blocking copy to CUDA;
        :meth:`to` then pins nothing more). Only where CUDA is available."""
        return replace(self, **{name: _pinned(value) for name, value in self.values().items()})

    @property
    def n_tokens(self) -> int:
        """Real (not padding) tokens of the batch."""
        raise NotImplementedError


@dataclass
class TokenBatch(Batch):
    """Token sequences with their targets (module docstring).

    Attributes:
        input_ids, attention_mask: ``(B, N)`` long; attention_mask 1 = real token.
        labels: ``(B, N)`` token targets (-100 = none) or ``(B',)`` class indices.
        structure_inputs: the sequences' structure for the model, or None.
        masked_positions: ``(M,)`` long, the flat indices into ``B·N`` of ``labels != -100`` in
            row-major order (masked LM), or None.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor
    structure_inputs: dict[str, torch.Tensor] | None = None
    masked_positions: torch.Tensor | None = None

    @property
    def n_tokens(self) -> int:
        return int(self.attention_mask.sum())

    def model_inputs(self) -> dict[str, torch.Tensor | dict]:
        """The keyword arguments of a language model's ``forward``: ``input_ids``, ``attention_mask``,
        ``labels`` and, when present, ``structure_inputs``."""
        kw = dict(input_ids=self.input_ids, attention_mask=self.attention_mask, labels=self.labels)
        if self.structure_inputs is not None:
            kw["structure_inputs"] = self.structure_inputs
        return kw


@dataclass
class PairBatch(Batch):
    """Sentence pairs for a pair classifier.

    Attributes:
        features: ``premise_ids`` / ``hypothesis_ids`` / ``premise_mask`` / ``hypothesis_mask``
            ``(B, N)``, ``premise_char_ids`` / ``hypothesis_char_ids`` ``(B, N, K)`` and ``labels``
            ``(B,)`` (:meth:`~syntaxformer.data.nli.PairEncoder.batch`).
    """

    features: dict[str, torch.Tensor]

    @property
    def labels(self) -> torch.Tensor:
        """``(B,)`` the pairs' label indices."""
        return self.features["labels"]

    @property
    def n_tokens(self) -> int:
        return int(self.features["premise_mask"].sum() + self.features["hypothesis_mask"].sum())


__all__ = ["Batch", "TokenBatch", "PairBatch"]
