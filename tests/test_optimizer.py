"""Adam as every task builds it (:meth:`syntaxformer.training.loop.TrainingLoop.make_optimizer`): the
multi-tensor (``foreach``) form, which trains the same weights bit for bit as torch's CPU default
per-tensor loop (the speed difference is measured in benchmarks/train_step.py, not here)."""

from __future__ import annotations

import tempfile
from types import SimpleNamespace

import pytest
import torch

from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.loop import TrainingLoop
from syntaxformer.training.trainer import Trainer


def _trained_weights(foreach: bool, weight_decay: float) -> tuple[dict, Trainer]:
    args = TrainArguments(
        out=tempfile.mkdtemp(),
        model="tree-transformer",
        preset="tiny",
        max_steps=4,
        batch_size=16,
        lr=1e-3,
        seed=0,
        threads=1,
        quiet=True,
        weight_decay=weight_decay,
    )
    trainer = Trainer(args)
    trainer.build()
    trainer.model.train()
    if not foreach:
        for group in trainer.optimizer.param_groups:
            group["foreach"] = False  # torch's CPU default: a loop over the tensors
    batches = trainer.sampler.batches(0)
    for i in range(4):
        trainer.training_step(batches[i])
    return {k: v.clone() for k, v in trainer.model.state_dict().items()}, trainer


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_foreach_adam_trains_the_same_weights_bit_for_bit(weight_decay):
    multi, trainer = _trained_weights(True, weight_decay)
    loop, _ = _trained_weights(False, weight_decay)
    assert all(group["foreach"] for group in trainer.optimizer.param_groups)
    assert type(trainer.optimizer) is (torch.optim.AdamW if weight_decay else torch.optim.Adam)
    start = Trainer(trainer.args)
    start.build()
    assert any(not torch.equal(multi[k], v) for k, v in start.model.state_dict().items())  # it trained
    assert all(torch.equal(multi[k], loop[k]) for k in multi)


def test_an_l2_decay_is_adam_not_adamw():
    """The logic task's public code decays with an L2 term in the gradient (``Adam(weight_decay=...)``)."""
    loop = TrainingLoop.__new__(TrainingLoop)
    loop.args = SimpleNamespace(lr=1e-3, betas=(0.9, 0.98), eps=1e-9, weight_decay=1e-6)
    parameters = [torch.nn.Parameter(torch.ones(2))]
    assert type(loop.make_optimizer(parameters, decoupled_weight_decay=False)) is torch.optim.Adam
    assert type(loop.make_optimizer(parameters)) is torch.optim.AdamW
    assert loop.make_optimizer(parameters).param_groups[0]["foreach"] is True
