"""The fused constituent-prior kernels (``constituent_fused=True``) equal the literal reference.

Values and gradients within 1e-5 in float32 on random inputs with padding; a torch.compile'd model and
its eager fallback give the same loss on a fixed batch.
"""

import shutil

import pytest
import torch
from helpers import tiny_tree_transformer

from syntaxformer.kernels.constituent import fused_link_chain, log_constituent_prior_vjp
from syntaxformer.priors.attention import sdpa_attention
from syntaxformer.priors.constituent import (
    ConstituentAttention,
    ConstituentPrior,
    cumulative_log_links,
    hierarchical_constraint,
    link_probability,
    log_constituent_prior,
    neighbour_log_probabilities,
    official_log_diagonal,
)

LENGTHS = [9, 6, 1, 9, 4]  # padding, a one-word sentence, full rows


def _mask(lengths, n):
    return torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]


def _reference_chain(s_right, s_left, gap_mask, prior, variant):
    log_p_right, log_p_left = neighbour_log_probabilities(s_right, s_left, gap_mask)
    a = hierarchical_constraint(prior, link_probability(log_p_right, log_p_left, gap_mask, variant))
    return a, cumulative_log_links(a, gap_mask, variant)


@pytest.mark.parametrize("variant", ["paper", "official"])
@pytest.mark.parametrize("with_prior", [False, True])
def test_fused_link_chain_equals_reference(variant, with_prior):
    torch.manual_seed(0)
    n = 9
    gap_mask = _mask(LENGTHS, n)[:, :-1] & _mask(LENGTHS, n)[:, 1:]
    s_right, s_left = (torch.randn(len(LENGTHS), n - 1, dtype=torch.float32) * 2 for _ in range(2))
    prior = torch.rand(len(LENGTHS), n - 1) if with_prior else None
    g_a, g_cum = torch.randn(len(LENGTHS), n - 1), torch.randn(len(LENGTHS), n)
    results = []
    for fn in (_reference_chain, fused_link_chain):
        inputs = [s_right.clone().requires_grad_(), s_left.clone().requires_grad_()]
        p = prior.clone().requires_grad_() if prior is not None else None
        a, cum = fn(*inputs, gap_mask, p, variant)
        grads = torch.autograd.grad((a * g_a).sum() + (cum * g_cum).sum(), inputs + ([p] if p is not None else []))
        results.append((a, cum, *grads))
    for ref, fast in zip(*results):
        torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
    assert not torch.equal(results[0][2], torch.zeros_like(results[0][2]))  # the gradients are not all 0


@pytest.mark.parametrize("variant,diagonal", [("paper", None), ("official", official_log_diagonal(2))])
@pytest.mark.parametrize("rows", [None, (2, 5)])
def test_log_prior_vjp_equals_autograd(variant, diagonal, rows):
    torch.manual_seed(1)
    cum = torch.cumsum(-torch.rand(3, 7) * 3, -1).requires_grad_()
    log_c = log_constituent_prior(cum, variant, diagonal, rows)
    grad_rows = torch.randn_like(log_c)
    (expected,) = torch.autograd.grad(log_c, cum, grad_rows)
    got = log_constituent_prior_vjp(cum.detach(), grad_rows, variant, diagonal, rows)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_vjp_by_hand():
    # P = (0, -1): x_01 = -1; paper log C_01 = P_1 - P_0 => d/dP_0 = -g_01, d/dP_1 = +g_01 (and g_10 alike)
    cum = torch.tensor([[0.0, -1.0]])
    grad_rows = torch.tensor([[[0.0, 2.0], [3.0, 0.0]]])
    got = log_constituent_prior_vjp(cum, grad_rows, "paper")
    torch.testing.assert_close(got, torch.tensor([[-5.0, 5.0]]))


@pytest.mark.parametrize("variant", ["paper", "official"])
def test_fused_prior_attention_equals_reference(variant):
    """The whole layer (prior module + sdpa kernel), fused vs today's path: values and gradients."""
    torch.manual_seed(2)
    d, heads, n = 16, 2, 9
    key_mask = _mask(LENGTHS, n)
    hidden = torch.randn(len(LENGTHS), n, d)
    q, k, v = (torch.randn(len(LENGTHS), heads, n, d // heads) for _ in range(3))
    module = ConstituentAttention(d, variant, layer_index=1)
    results = []
    for fused in (False, True):
        module.fused = fused
        inputs = [x.clone().requires_grad_() for x in (hidden, q, k, v)]
        prior, a = module.prior_state(inputs[0], key_mask, None)
        assert isinstance(prior, ConstituentPrior) and (prior.log_rows_vjp is not None) == fused
        out, _ = sdpa_attention(*inputs[1:], key_mask, prior)
        loss = (out * key_mask[:, None, :, None]).square().sum() + a.sum()
        params = [module.query.weight, module.key.weight, module.norm.weight]
        grads = torch.autograd.grad(loss, inputs + params)
        results.append((out, a, *grads))
    for ref, fast in zip(*results):
        torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-4)


def _model_loss(model, batch):
    torch.manual_seed(0)
    return model(**batch, masked_only=True).loss


@pytest.mark.slow
def test_compiled_model_matches_eager_fallback():
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("torch.compile on CPU needs a C compiler; none on this machine")
    torch.manual_seed(0)
    model = tiny_tree_transformer(constituent_fused=True, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = model.eval()
    ids = torch.randint(5, 50, (4, 8))
    mask = _mask([8, 5, 3, 8], 8)
    labels = torch.full_like(ids, -100)
    labels[:, 1] = ids[:, 1]
    batch = dict(input_ids=ids, attention_mask=mask, labels=labels)
    eager = _model_loss(model, batch)
    try:
        compiled = _model_loss(torch.compile(model), batch)
    except Exception as e:  # noqa: BLE001 - compile unavailable: the fallback is the eager model
        pytest.skip(f"torch.compile failed here ({type(e).__name__}); the benchmark falls back to eager")
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)
