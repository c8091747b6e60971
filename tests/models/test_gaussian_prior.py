"""The Gaussian distance prior (DESIGN.md §3.1): the literal formula, the plain Transformer as its
limit, padding invariance, the fused and eager kernels, gradients of w and b, training."""

import math

import pytest
import torch

from syntaxformer.models import MODELS, make_config
from syntaxformer.priors import PRIORS, GaussianPrior
from syntaxformer.priors.attention import eager_attention, sdpa_attention
from syntaxformer.priors.gaussian import inverse_softplus


def test_bias_is_the_literal_formula_and_the_constraints_hold():
    prior = GaussianPrior(3, w_init=0.2, b_init=-0.7).double()
    with torch.no_grad():
        prior.w_raw.copy_(torch.tensor([-2.0, 0.0, 1.5], dtype=torch.float64))
        prior.b_raw.copy_(torch.tensor([3.0, -4.0, 0.1], dtype=torch.float64))
    w, b = prior.w.detach(), prior.b.detach()
    assert (w > 0).all() and (b < 0).all()
    bias = prior(torch.zeros(2, 6, 8, dtype=torch.float64), torch.ones(2, 6, dtype=torch.bool)).score_bias.detach()
    assert bias.shape == (1, 3, 6, 6)
    for h in range(3):
        for i in range(6):
            for j in range(6):
                expected = -abs(float(w[h]) * (i - j) ** 2 + float(b[h]))
                assert math.isclose(float(bias[0, h, i, j]), expected, rel_tol=0, abs_tol=1e-12)
    # initial values are represented exactly (softplus inverse)
    fresh = GaussianPrior(2, w_init=0.2, b_init=-0.7)
    assert torch.allclose(fresh.w, torch.tensor([0.2, 0.2])) and torch.allclose(fresh.b, torch.tensor([-0.7, -0.7]))
    assert math.isclose(
        torch.nn.functional.softplus(torch.tensor(inverse_softplus(1e-12), dtype=torch.float64)).item(),
        1e-12,
        rel_tol=1e-6,
    )
    with pytest.raises(ValueError):
        GaussianPrior(2, w_init=0.0)
    with pytest.raises(ValueError):
        GaussianPrior(2, b_init=0.5)
    assert PRIORS["gaussian"] is GaussianPrior


def test_kernels_equal_the_literal_attention_with_gradients():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 7, 4, dtype=torch.float64) for _ in range(3))
    key_mask = torch.tensor([[True] * 7, [True] * 5 + [False] * 2])
    results = []
    for kernel in (eager_attention, sdpa_attention, "literal"):
        prior = GaussianPrior(3, w_init=0.05, b_init=-0.3).double()
        bias = prior(torch.zeros(2, 7, 1, dtype=torch.float64), key_mask).score_bias
        if kernel == "literal":
            scores = q @ k.transpose(-2, -1) / 2.0 + bias  # √d_k = 2
            scores = scores.masked_fill(~key_mask[:, None, None, :], float("-inf"))
            out = torch.softmax(scores, -1) @ v
        else:
            out, _ = kernel(q, k, v, key_mask, None, bias=bias)
        real = key_mask[:, None, :].expand(2, 3, 7)  # real queries (padding rows are garbage)
        out[real].pow(2).sum().backward()
        results.append((out[real].detach(), prior.w_raw.grad.clone(), prior.b_raw.grad.clone()))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert torch.allclose(a, b, atol=1e-10), (a - b).abs().max()
    assert (results[0][1] != 0).all() and (results[0][2] != 0).all()


def _pair(**gaussian):
    torch.manual_seed(0)
    plain = MODELS["tree-transformer"](make_config("tree-transformer", "tiny", 40, prior="none")).eval()
    torch.manual_seed(0)
    model = MODELS["tree-transformer"](make_config("tree-transformer", "tiny", 40, prior="gaussian", **gaussian)).eval()
    state = {k: v for k, v in model.state_dict().items() if "gaussian" not in k}
    model.load_state_dict({**plain.state_dict(), **{k: v for k, v in model.state_dict().items() if "gaussian" in k}})
    assert set(state) == set(plain.state_dict())
    return plain, model


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_w_to_zero_and_b_zero_is_the_plain_transformer(impl):
    plain, model = _pair(gaussian_w_init=1e-12, gaussian_b_init=0.0)
    ids = torch.randint(5, 40, (2, 9))
    for m in (plain, model):
        m.config._attn_implementation = impl
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, plain(ids).logits, atol=1e-6)
    # a real prior changes the output
    _, wide = _pair(gaussian_w_init=0.5, gaussian_b_init=-1.0)
    with torch.no_grad():
        assert not torch.allclose(wide(ids).logits, plain(ids).logits, atol=1e-3)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_padding_does_not_change_real_tokens(impl):
    _, model = _pair(gaussian_w_init=0.2, gaussian_b_init=-0.5)
    model.config._attn_implementation = impl
    ids = torch.randint(5, 40, (1, 6))
    padded = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], 1)
    mask = torch.tensor([[1] * 6 + [0] * 3])
    with torch.no_grad():
        alone = model(ids).logits
        with_pad = model(padded, mask).logits[:, :6]
    assert torch.allclose(alone, with_pad, atol=1e-5)


def test_trains_as_a_masked_lm_encoder_and_induces_no_trees(tmp_path):
    from syntaxformer.errors import InputError
    from syntaxformer.parsing import check_induces_structure, load_model
    from syntaxformer.tasks.run import train

    out = train(
        out=str(tmp_path / "g"),
        model="tree-transformer",
        preset="tiny",
        prior="gaussian",
        corpus="ptb-sample:dev",
        max_steps=3,
        batch_size=8,
        seed=0,
        quiet=True,
        threads=1,
    )
    model, _, info = load_model(out)
    assert model.config.prior == "gaussian" and info["steps"] == 3
    assert model.tree_transformer.layers[0].gaussian.w.shape == (2,)
    with pytest.raises(InputError, match="induces no structure"):
        check_induces_structure(model)
