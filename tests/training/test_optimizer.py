"""Adam as every task builds it (:meth:`syntaxformer.training.loop.TrainingLoop.make_optimizer`): torch's
fused kernel on the CPU, which trains the same weights as torch's CPU default per-tensor loop up to
float rounding (the speed difference is measured in benchmarks/speed/train_step.py, not here)."""

from __future__ import annotations

import tempfile
from types import SimpleNamespace

import pytest
import torch

from syntaxformer.tasks.language_model import Trainer
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.loop import TrainingLoop


def _trained_weights(fused: bool, weight_decay: float) -> tuple[dict, Trainer]:
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
    if not fused:
        for group in trainer.optimizer.param_groups:
            group["fused"] = group["foreach"] = False  # torch's CPU default: a loop over the tensors
    batches = trainer.sampler.batches(0)
    for i in range(4):
        trainer.training_step(batches[i])
    return {k: v.clone() for k, v in trainer.model.state_dict().items()}, trainer


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_fused_adam_trains_the_loops_weights_up_to_rounding(weight_decay):
    fused, trainer = _trained_weights(True, weight_decay)
    loop, _ = _trained_weights(False, weight_decay)
    assert all(group["fused"] and not group["foreach"] for group in trainer.optimizer.param_groups)
    assert type(trainer.optimizer) is (torch.optim.AdamW if weight_decay else torch.optim.Adam)
    start = Trainer(trainer.args)
    start.build()
    initial = start.model.state_dict()
    # it trained: four steps of lr 1e-3 move weights by ~4e-3; the two implementations by float rounding
    assert max((fused[k] - initial[k]).abs().max().item() for k in fused) > 1e-3
    # the attention key biases' gradient is 0 in exact arithmetic (softmax ignores q·b_k, the same for
    # every key): float noise, which Adam normalises into steps of up to lr each, differently rounded
    noise = [k for k in fused if k.endswith("attention.key.bias")]
    assert len(noise) == 3
    assert all(torch.allclose(fused[k], loop[k], rtol=0, atol=2e-6) for k in fused if k not in noise)
    assert all(torch.allclose(fused[k], loop[k], rtol=0, atol=4 * 1e-3) for k in noise)


def test_an_l2_decay_is_adam_not_adamw():
    """The logic task's public code decays with an L2 term in the gradient (``Adam(weight_decay=...)``)."""
    loop = TrainingLoop.__new__(TrainingLoop)
    loop.args = SimpleNamespace(lr=1e-3, betas=(0.9, 0.98), eps=1e-9, weight_decay=1e-6)
    loop.device = torch.device("cpu")
    parameters = [torch.nn.Parameter(torch.ones(2))]
    assert type(loop.make_optimizer(parameters, decoupled_weight_decay=False)) is torch.optim.Adam
    assert type(loop.make_optimizer(parameters)) is torch.optim.AdamW
    assert loop.make_optimizer(parameters).param_groups[0]["fused"] is True
    loop.device = torch.device("meta")  # no fused kernel there: the multi-tensor form
    assert loop.make_optimizer(parameters).param_groups[0]["foreach"] is True
