"""The dropout masks (:mod:`syntaxformer.kernels.dropout`, :mod:`syntaxformer.blocks.dropout`): the distribution nn.Dropout has (drop
probability within 1.6e-5 of p, kept values scaled to keep the expectation), drawn from the seeded
default generator, used by the Tree Transformer's and StructFormer's layers and by the attention kernels."""

from __future__ import annotations

import math

import pytest
import torch

from syntaxformer.blocks.dropout import Dropout, dropout
from syntaxformer.kernels.dropout import drop_mask, drop_probability, keep_mask, keep_scale
from syntaxformer.models import MODELS, make_config
from syntaxformer.priors.attention import eager_attention


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_the_drop_rate_is_the_realised_probability(p):
    torch.manual_seed(0)
    n = 4_000_000
    rate = 1.0 - keep_mask((n,), p).float().mean().item()
    assert abs(drop_probability(p) - p) <= 2**-16
    assert abs(rate - drop_probability(p)) < 5 * math.sqrt(p * (1 - p) / n)  # five standard errors


def test_the_four_lanes_of_a_draw_are_independent():
    """Every 64-bit draw gives four decisions; neighbours (same draw) keep together as often as chance."""
    torch.manual_seed(1)
    keep = keep_mask((1_000_000, 4), 0.5).float()
    both = (keep[:, :-1] * keep[:, 1:]).mean().item()  # P(two neighbours both kept) = 0.25
    assert abs(both - 0.25) < 5 * math.sqrt(0.25 * 0.75 / 3_000_000)


def test_kept_values_are_scaled_so_the_expectation_is_the_input():
    torch.manual_seed(2)
    x = torch.full((1000, 1000), 3.0)
    y = dropout(x, 0.1)
    kept = 3.0 / (1.0 - drop_probability(0.1))
    values = torch.unique(y).tolist()
    assert len(values) == 2 and values[0] == 0.0 and values[1] == pytest.approx(kept, rel=1e-6)
    assert y.mean().item() == pytest.approx(3.0, abs=5 * 3.0 * math.sqrt(0.1 / 0.9 / 1e6))


def test_the_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(3)
    x = torch.randn(64, 27, 128, requires_grad=True)
    y = dropout(x, 0.1)
    y.sum().backward()
    scale = 1.0 / (1.0 - drop_probability(0.1))
    expected = (y != 0).float() * scale
    assert torch.equal(x.grad, expected)
    assert torch.allclose(y, x.detach() * expected)


def test_seeded_draws_repeat_and_eval_is_the_identity():
    module = Dropout(0.1)
    x = torch.randn(8, 5, 16)
    torch.manual_seed(4)
    first = module(x)
    torch.manual_seed(4)
    assert torch.equal(module(x), first)
    assert not torch.equal(module(x), first)  # the next draw is another mask
    module.eval()
    assert module(x) is x
    assert dropout(x, 0.0) is x and dropout(x, 0.5, training=False) is x
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        Dropout(1.0)


def _operators(fn, *args) -> list[str]:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    seen: list[str] = []
    with Record():
        fn(*args)
    return seen


def test_off_the_cpu_it_is_pytorchs_dropout_and_on_it_the_lanes_mask():
    # another device (meta: shapes only) dispatches what F.dropout does there (on CUDA PyTorch's fused
    # native_dropout, one kernel each way); the CPU draws the lanes mask
    x = torch.ones(64, 27, 16, device="meta")
    ours = _operators(dropout, x, 0.1)
    assert ours == _operators(torch.nn.functional.dropout, x, 0.1) and "random_" not in ours
    cpu = _operators(dropout, torch.ones(64, 27, 16), 0.1)
    assert "random_" in cpu and "bernoulli_" not in cpu and "native_dropout" not in cpu
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        dropout(x, 1.0)


@pytest.mark.parametrize("model", ["tree-transformer", "structformer"])
def test_the_induction_models_use_it(model):
    net = MODELS[model](make_config(model, "tiny", 20))
    kinds = {type(m) for m in net.modules()}
    assert Dropout in kinds and torch.nn.Dropout not in kinds


def test_the_drop_mask_is_the_keep_masks_complement_and_the_scale_its_inverse_rate():
    torch.manual_seed(5)
    keep = keep_mask((3, 7, 11), 0.3)
    torch.manual_seed(5)
    assert torch.equal(drop_mask((3, 7, 11), 0.3), ~keep)
    assert keep_scale(0.1) == 1.0 / (1.0 - 3277 / 32768)  # round(0.1 * 2^15) = 3277
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        keep_scale(1.0)


def test_attention_dropout_draws_the_same_masks():
    """The eager attention kernel drops E with drop_mask and scales the kept values by keep_scale."""
    torch.manual_seed(6)
    q, k, v = (torch.randn(2, 3, 9, 4) for _ in range(3))
    key_mask = torch.ones(2, 9, dtype=torch.bool)
    _, attn = eager_attention(q, k, v, key_mask, output_attentions=True)
    v_eye = torch.eye(9).expand(2, 3, 9, 9)  # out = E' when V is the identity
    torch.manual_seed(7)
    out, _ = eager_attention(q, k, v_eye, key_mask, dropout_p=0.3)
    torch.manual_seed(7)
    keep = keep_mask((2, 3, 9, 9), 0.3)
    assert torch.allclose(out, attn * keep * keep_scale(0.3), atol=1e-6)
