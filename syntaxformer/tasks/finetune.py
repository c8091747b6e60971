"""Fine-tuning a trained model, optionally with hard-concrete head gates (Voita et al. 2019, DESIGN.md §3.5).

``syntaxformer train --model DIR`` continues masked-LM training from a model folder (its weights,
configuration and tokenizer) instead of a fresh initialisation; with ``--head-gates --gate-l0 λ`` each
attention head gets a stochastic gate (:mod:`syntaxformer.blocks.hard_concrete`) and the objective
becomes ::

    MLM loss + λ · Σ_h (1 − P(g_h = 0))         # λ in nats per expected open head

The gates multiply each head's output through the models' ``head_mask`` (an ``(L, H)`` tensor that
carries gradients): a fresh sample per optimizer step (one for the whole batch) in training, the
deterministic gate at evaluation (the validation loss). At the end each gate becomes 0 or 1
(:func:`~syntaxformer.blocks.hard_concrete.binarise`: open when its deterministic value is above
0.5) and the closed heads are pruned for good (``prune_heads``): ``OUT`` holds the **pruned** model
(``config.pruned_heads``), ``OUT/gates.json`` and a ``head_gates`` section of ``training.json``. A
layer whose gates all close keeps one head (the largest ``log α``) with its value projection set to
zero — exactly "no head" (only the output projection's bias is left), since a layer cannot lose every
head; the report lists it as silenced, not kept.

Everything else is the :class:`~syntaxformer.tasks.language_model.Trainer`'s (batches, masking, Adam,
schedule, checkpoints and ``--resume``, data parallel): :class:`FineTuneTrainer` overrides
``make_model`` (load the folder, wrap it with the gates), ``parameter_groups`` (the gates' own
learning rate, no weight decay), ``training_loss`` (the penalty), ``log_training`` (the gates' log
lines) and ``report``.
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn
from transformers import AutoConfig

from syntaxformer.blocks.hard_concrete import GAMMA, OPEN_THRESHOLD, ZETA, HeadGates
from syntaxformer.errors import InputError
from syntaxformer.models import MODELS, REGISTRY, Capabilities, capabilities_of
from syntaxformer.models.encoder import head_layout
from syntaxformer.parsing import load_model, read_training_record
from syntaxformer.tasks.language_model import Trainer
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.callbacks import TrainerCallback

logger = logging.getLogger(__name__)

#: The gates' record, written beside the pruned model.
GATES_JSON = "gates.json"


# --------------------------------------------------------------------------------------------------
# the source model


def registry_name(config) -> str | None:
    """The ``--model`` name of a config (by its ``model_type``), or None for a model not in the registry."""
    return next(
        (
            name
            for name, arch in REGISTRY.items()
            if arch.language_model is not None
            and getattr(arch.config_class, "model_type", None) == getattr(config, "model_type", None)
        ),
        None,
    )


def check_gateable(config, folder) -> None:
    """Raise :class:`InputError` unless the model of ``config`` (read from ``folder``) has attention
    heads and takes a ``head_mask``."""
    layers = int(getattr(config, "num_hidden_layers", 0) or 0)
    heads = int(getattr(config, "num_attention_heads", 0) or 0)
    name = registry_name(config)
    if layers < 1 or heads < 1 or name is None:
        raise InputError(
            f"--head-gates: the {getattr(config, 'model_type', 'unknown')} model has no attention heads to gate",
            path=folder,
        )
    if not capabilities_of(MODELS[name]).head_mask:
        raise InputError(f"--head-gates: {name} takes no head_mask", path=folder)


def resolve_arguments(args: TrainArguments) -> tuple[TrainArguments, dict]:
    """``args`` with ``model``, ``preset`` and ``tokenizer`` taken from the ``init_from`` folder, and
    a description of the source for ``training.json``.

    Raises:
        InputError: as :meth:`TrainArguments.check_fine_tuning`; an unreadable folder; a model not in
            the registry; with ``head_gates``, a model without attention heads.
    """

    args.check_fine_tuning()
    folder = Path(args.init_from)
    try:
        config = AutoConfig.from_pretrained(folder)
    except (OSError, ValueError, KeyError) as e:
        raise InputError(f"--model: cannot read the model's config: {str(e).splitlines()[0]}", path=folder) from e
    if args.head_gates:
        check_gateable(config, folder)
    name = registry_name(config)
    if name is None:
        raise InputError(f"--model: {config.model_type} is not a model of syntaxformer.models", path=folder)
    info = read_training_record(folder)
    source = dict(
        folder=str(folder),
        model=name,
        preset=info.get("preset"),
        seed=info.get("seed"),
        steps=info.get("steps"),
        prior=getattr(config, "prior", None),
        pruned_heads=getattr(config, "pruned_heads", None) or {},
    )
    resolved = replace(args, model=name, preset=info.get("preset") or "unknown", tokenizer=str(folder))
    return resolved, source


# --------------------------------------------------------------------------------------------------
# the gated model


def silence_head(attention: nn.Module, head: int) -> None:
    """Zero the value projection's rows (weight and bias) of ``head`` (original number) in an
    attention module with ``head_ids``, ``head_dim`` and ``value``: the head's output is then 0
    for every input, as with ``head_mask`` = 0."""
    position = attention.head_ids.index(int(head))
    rows = slice(position * attention.head_dim, (position + 1) * attention.head_dim)
    with torch.no_grad():
        attention.value.weight[rows] = 0.0
        if attention.value.bias is not None:
            attention.value.bias[rows] = 0.0


class GatedMaskedLM(nn.Module):
    """A masked LM whose heads are multiplied by :class:`~syntaxformer.blocks.hard_concrete.HeadGates`.

    ``forward`` takes the masked LM's ``input_ids``, ``attention_mask``, ``labels``, ``masked_only``
    and ``masked_positions`` and calls it with ``head_mask = gates()`` (sampled in training mode,
    deterministic in evaluation mode). :meth:`save_pretrained` saves :meth:`finalise`'s pruned model.

    Args:
        model: a masked LM of the registry (``head_mask`` and ``prune_heads``).
        gates: its gates, ``(L, H)`` over the original head numbers.
    """

    #: what the wrapper's forward accepts (:func:`~syntaxformer.models.capabilities_of`): ``masked_only``
    #: (passed on where the masked LM takes it); it sets ``head_mask`` itself and takes no structure
    capabilities = Capabilities(masked_only=True)

    def __init__(self, model: nn.Module, gates: HeadGates):
        super().__init__()
        self.model = model
        self.gates = gates
        self._takes_masked_only = capabilities_of(model).masked_only

    @property
    def config(self):
        """The masked LM's config."""
        return self.model.config

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        masked_only: bool = False,
        masked_positions: torch.Tensor | None = None,
    ):
        """input_ids, attention_mask, labels ``(B, N)`` (masked_positions ``(M,)``, with
        ``masked_only``) -> the masked LM's output with the gates as ``head_mask`` ``(L, H)``."""
        kwargs = {}
        if masked_only and self._takes_masked_only:
            kwargs = dict(masked_only=True, masked_positions=masked_positions)
        return self.model(
            input_ids=input_ids, attention_mask=attention_mask, labels=labels, head_mask=self.gates(), **kwargs
        )

    def finalise(self) -> tuple[nn.Module, dict]:
        """The binarised model: a deep copy of the masked LM with every closed head pruned (a layer
        with no open head keeps its largest-``log α`` head silenced, :func:`silence_head`), in
        evaluation mode; and the record (``gates.json``).

        Returns:
            ``(model, record)``: record has per head (``[L][H]``, None at heads pruned before)
            ``log_alpha``, ``p_closed`` (0-1), ``deterministic`` (the test-time gate, 0-1) and
            ``open``; ``kept_per_layer``, ``n_kept``, ``n_heads``, ``closed`` and ``silenced``
            (``{layer: heads}``), ``max_binarisation_change`` (the largest ``|ĝ − binarised ĝ|``
            over the heads present), ``expected_open`` (``Σ (1 − P(g = 0))``).
        """
        gates = self.gates
        with torch.no_grad():
            log_alpha, p_closed = gates.log_alpha.detach().cpu(), gates.probability_closed().detach().cpu()
            deterministic, is_open = gates.deterministic().detach().cpu(), gates.open_heads().cpu()
        present = gates.present.cpu()
        layers, heads = present.shape
        closed, silenced = {}, {}
        for layer in range(layers):
            shut = [h for h in range(heads) if present[layer, h] and not is_open[layer, h]]
            if shut and len(shut) == int(present[layer].sum()):
                loudest = max(shut, key=lambda h: float(log_alpha[layer, h]))
                silenced[layer] = [loudest]
                shut.remove(loudest)
            if shut:
                closed[layer] = shut
        pruned = copy.deepcopy(self.model).eval()
        for layer, (head,) in silenced.items():
            silence_head(pruned.attention_modules()[layer], head)
        if closed:
            pruned.prune_heads(closed)

        def grid(t, digits):
            return [
                [round(float(t[l, h]), digits) if present[l, h] else None for h in range(heads)] for l in range(layers)
            ]

        change = (deterministic - is_open.to(deterministic.dtype)).abs()[present]
        record = dict(
            log_alpha=grid(log_alpha, 4),
            p_closed=grid(p_closed, 6),
            deterministic=grid(deterministic, 6),
            open=[[bool(is_open[l, h]) if present[l, h] else None for h in range(heads)] for l in range(layers)],
            kept_per_layer=[int(is_open[l].sum()) for l in range(layers)],
            n_kept=int(is_open.sum()),
            n_heads=int(present.sum()),
            closed={str(k): v for k, v in closed.items()},
            silenced={str(k): v for k, v in silenced.items()},
            max_binarisation_change=round(float(change.max()), 6) if change.numel() else 0.0,
            expected_open=round(float((1.0 - p_closed)[present].sum()), 4),
            temperature=gates.temperature,
            gamma=gates.gamma,
            zeta=gates.zeta,
            open_threshold=OPEN_THRESHOLD,
        )
        return pruned, record

    def save_pretrained(self, folder, **kwargs) -> None:
        """Save the binarised, pruned model (:meth:`finalise`) with ``save_pretrained(**kwargs)`` and
        its record as ``folder/gates.json``."""
        pruned, record = self.finalise()
        pruned.save_pretrained(folder, **kwargs)
        Path(folder, GATES_JSON).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------------------------------
# the trainer


class FineTuneTrainer(Trainer):
    """The :class:`~syntaxformer.tasks.language_model.Trainer` starting from ``args.init_from``, with
    hard-concrete head gates when ``args.head_gates`` (module docstring).

    Attributes (besides the Trainer's): source: the source folder's description (``training.json``
    ``init_from``); last_mlm_loss: the MLM loss of the last step, without the penalty (a detached 0-dim
        tensor on the run's device, read only when the gates are logged; None before the first step).

    Raises:
        InputError: from the constructor, bad options (:func:`resolve_arguments`).
    """

    def __init__(self, args: TrainArguments, callbacks: list[TrainerCallback] | tuple = ()):
        resolved, self.source = resolve_arguments(args)
        super().__init__(resolved, list(callbacks))
        self.last_mlm_loss: torch.Tensor | None = None

    def make_model(self) -> nn.Module:
        """The source folder's model (float32, CPU), wrapped in :class:`GatedMaskedLM` with head gates."""

        model, _, _ = load_model(self.args.init_from, device="cpu")
        if not self.args.head_gates:
            return model
        gates = HeadGates(head_layout(model).kept(), temperature=self.args.gate_temperature, init=self.args.gate_init)
        return GatedMaskedLM(model, gates)

    def parameter_groups(self) -> list:
        """The model's parameters at ``lr``; the gates' ``log α`` at ``gate_lr`` without weight decay."""
        if not isinstance(self.model, GatedMaskedLM):
            return super().parameter_groups()
        gate_lr = self.args.gate_lr if self.args.gate_lr is not None else self.args.lr
        return [
            dict(params=list(self.model.model.parameters())),
            dict(params=list(self.model.gates.parameters()), lr=gate_lr, weight_decay=0.0),
        ]

    def training_loss(self, model: nn.Module, batch) -> torch.Tensor:
        """The loop's training loss plus, with head gates, ``gate_l0`` · the expected number of open heads
        (Voita et al. 2019, §4; the validation loss stays the MLM loss); keeps the MLM loss of the step in
        :attr:`last_mlm_loss`."""
        loss = super().training_loss(model, batch)
        if not isinstance(self.model, GatedMaskedLM):
            return loss
        self.last_mlm_loss = loss.detach()  # read at the next log: no host synchronisation in the step
        return loss + self.args.gate_l0 * self.model.gates.penalty()

    def log_training(self, lr: float) -> None:
        """With head gates, first the gates (``gates/expected_open``: ``Σ (1 − P(g = 0))``, ``gates/open``:
        heads whose binarised test-time gate is 1, ``gates/mlm_loss``: the loss without the penalty), then
        the loop's training loss."""
        if isinstance(self.model, GatedMaskedLM):
            gates = self.model.gates
            with torch.no_grad():
                scalars = {"gates/expected_open": float(gates.penalty()), "gates/open": float(gates.open_heads().sum())}
            if self.last_mlm_loss is not None:
                scalars["gates/mlm_loss"] = float(self.last_mlm_loss)
            self.log(scalars)
        super().log_training(lr)

    def pruned_validation_loss(self, pruned: nn.Module) -> float | None:
        """Mean MLM cross-entropy (nats) of ``pruned`` over this process's masked validation tokens
        (the same masks as the validation loss, :meth:`~syntaxformer.tasks.language_model.Trainer.validation_sums`),
        or None without validation data."""
        if not self.valid_batches:
            return None
        weighted, targets = self.validation_sums(pruned)
        return float(weighted) / targets

    def report(self) -> dict:
        """The Trainer's ``training.json`` with ``init_from`` (the source) and, with gates,
        ``head_gates``: λ, β, the gates' learning rate and initial ``log α``, the record of
        :meth:`GatedMaskedLM.finalise`, and the validation loss of the pruned model
        (``pruned_valid_loss``, this process's share of the validation batches)."""
        record = super().report()
        record["init_from"] = self.source
        if isinstance(self.model, GatedMaskedLM):
            pruned, gates = self.model.finalise()
            record["head_gates"] = dict(
                gate_l0=self.args.gate_l0,
                gate_lr=self.args.gate_lr or self.args.lr,
                gate_init=self.args.gate_init,
                penalty="lambda * sum_h (1 - P(g_h = 0)), P(g = 0) = sigmoid(beta * log(-gamma / zeta) - log alpha)",
                parameters_after_pruning=sum(p.numel() for p in pruned.parameters()),
                pruned_valid_loss=self.pruned_validation_loss(pruned.to(self.device)),
                **gates,
            )
            logger.info(
                "head gates: %d of %d heads kept (per layer %s)%s",
                gates["n_kept"],
                gates["n_heads"],
                gates["kept_per_layer"],
                f"; silenced {gates['silenced']}" if gates["silenced"] else "",
            )
        return record


__all__ = [
    "FineTuneTrainer",
    "GatedMaskedLM",
    "GATES_JSON",
    "registry_name",
    "check_gateable",
    "resolve_arguments",
    "silence_head",
    "GAMMA",
    "ZETA",
]
