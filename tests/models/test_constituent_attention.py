"""Constituent attention (Tree Transformer §3): the prior's math against brute force, both variants."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from syntaxformer import ConstituentAttention
from syntaxformer.priors.constituent import (
    OFFICIAL_EPS,
    ConstituentPrior,
    cumulative_log_links,
    hierarchical_constraint,
    link_probability,
    log_constituent_prior,
    neighbour_log_probabilities,
    neighbour_scores,
    official_log_diagonal,
)

torch.set_num_threads(1)


def brute_force_prior(a: torch.Tensor) -> torch.Tensor:
    """C_ij = prod_{k=i}^{j-1} a_k (i < j), symmetric, C_ii = 1, by explicit products (paper eq. 3)."""
    B, n1 = a.shape
    n = n1 + 1
    c = torch.ones(B, n, n, dtype=a.dtype)
    for i in range(n):
        for j in range(i + 1, n):
            c[:, i, j] = c[:, j, i] = torch.prod(a[:, i:j], dim=-1)
    return c


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 12), st.integers(0, 10_000))
def test_prior_equals_product_of_links(n, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(2, n - 1, generator=g, dtype=torch.float64)
    gap = torch.ones_like(a, dtype=torch.bool)
    c = torch.exp(log_constituent_prior(cumulative_log_links(a, gap)))
    expected = brute_force_prior(a)
    assert torch.allclose(c, expected, atol=1e-6, rtol=0)
    assert torch.equal(c, c.transpose(1, 2))  # symmetric exactly
    assert torch.equal(torch.diagonal(c, dim1=1, dim2=2), torch.ones(2, n, dtype=torch.float64))


def test_module_prior_symmetric_product_and_unit_diagonal():
    torch.manual_seed(0)
    module = ConstituentAttention(16).double()
    hidden = torch.randn(3, 9, 16, dtype=torch.float64)
    c, a = module.constituent_prior(hidden)
    assert c.shape == (3, 9, 9) and a.shape == (3, 8)
    assert ((a > 0) & (a < 1)).all()
    assert torch.allclose(c, brute_force_prior(a), atol=1e-6, rtol=0)
    assert torch.equal(c, c.transpose(1, 2))
    assert torch.allclose(torch.diagonal(c, dim1=1, dim2=2), torch.ones(3, 9, dtype=torch.float64))


def test_neighbour_softmax_matches_brute_force_and_edges():
    torch.manual_seed(1)
    q, k = torch.randn(2, 6, 8), torch.randn(2, 6, 8)
    s_right, s_left = neighbour_scores(q, k, 4.0)
    gap = torch.ones(2, 5, dtype=torch.bool)
    lpr, lpl = neighbour_log_probabilities(s_right, s_left, gap)
    for i in range(5):  # p_{i,i+1}: word i picks its right neighbour among its real neighbours
        cands = [q[:, i] @ k[:, i + 1].T] + ([q[:, i] @ k[:, i - 1].T] if i > 0 else [])
        cands = torch.stack([c.diagonal() for c in cands], -1) / 4.0
        assert torch.allclose(lpr[:, i].exp(), torch.softmax(cands, -1)[:, 0], atol=1e-6)
    # the edges have one neighbour: p = 1
    assert torch.allclose(lpr[:, 0], torch.zeros(2)) and torch.allclose(lpl[:, -1], torch.zeros(2))
    a_hat = link_probability(lpr, lpl, gap)
    assert torch.allclose(a_hat, torch.sqrt(lpr.exp() * lpl.exp()), atol=1e-7)


def test_hierarchical_constraint_links_only_grow():
    torch.manual_seed(2)
    module = ConstituentAttention(16)
    hidden = torch.randn(2, 7, 16)
    a1 = module.constituent_prior(hidden)[1]
    a2 = module.constituent_prior(torch.randn(2, 7, 16), prior=a1)[1]
    assert (a2 >= a1).all()
    assert torch.allclose(hierarchical_constraint(torch.tensor([0.5]), torch.tensor([0.5])), torch.tensor([0.75]))
    assert hierarchical_constraint(None, a1) is a1


@pytest.mark.parametrize("variant", ["paper", "official"])
def test_padding_does_not_leak(variant):
    torch.manual_seed(3)
    module = ConstituentAttention(16, variant).eval()
    real = torch.randn(1, 5, 16)
    c0, a0 = module.constituent_prior(real, torch.ones(1, 5, dtype=torch.bool))
    padded = torch.cat([real, 100 * torch.randn(1, 3, 16)], dim=1)
    mask = torch.tensor([[True] * 5 + [False] * 3])
    prior = torch.cat([torch.rand(1, 4), torch.rand(1, 3)], dim=1)
    c1, a1 = module.constituent_prior(padded, mask)
    assert torch.allclose(a1[:, :4], a0, atol=1e-6)
    assert torch.allclose(c1[:, :5, :5], c0, atol=1e-6)
    # with a prior from below: the real links only depend on real links
    c2, a2 = module.constituent_prior(padded, mask, prior)
    c3, a3 = module.constituent_prior(real, None, prior[:, :4])
    assert torch.allclose(a2[:, :4], a3, atol=1e-6) and torch.allclose(c2[:, :5, :5], c3, atol=1e-6)
    # the last real word's right neighbour is padding: it is an edge (p = 1 to the left)
    expected_pad_link = 0.0 if variant == "paper" else math.sqrt(OFFICIAL_EPS)
    assert torch.allclose(a1[:, 4:], torch.full((1, 3), expected_pad_link))


def test_official_variant_documented_differences():
    torch.manual_seed(4)
    paper, official = ConstituentAttention(32, "paper"), ConstituentAttention(32, "official", layer_index=2)
    assert paper.scale == 16.0 and official.scale == 256.0
    assert ConstituentAttention(512, "paper").scale == 256.0  # equal at d_model 512
    # diagonal: sqrt(1e-9) through the hierarchical constraint once per layer
    e = math.sqrt(1e-9)
    d = 0.0
    for layer in range(3):
        d = d + (1 - d) * e
        assert math.isclose(math.exp(official_log_diagonal(layer)), d, rel_tol=1e-9)
    assert math.isclose(math.exp(official_log_diagonal(0)), 3.1622776601683795e-05, rel_tol=1e-12)
    # off-diagonal: prod (a_k + 1e-9) + 1e-9 ; a = sqrt(p p + 1e-9)
    a = torch.tensor([[0.5, 0.25, 1e-12]], dtype=torch.float64)
    gap = torch.ones_like(a, dtype=torch.bool)
    prior = ConstituentPrior(cumulative_log_links(a, gap, "official"), "official", official_log_diagonal(2))
    c = prior.log_prior().exp()[0]
    assert math.isclose(c[0, 1].item(), 0.5 + 1e-9 + 1e-9, rel_tol=1e-12)
    assert math.isclose(c[0, 2].item(), (0.5 + 1e-9) * (0.25 + 1e-9) + 1e-9, rel_tol=1e-12)
    assert math.isclose(c[0, 3].item(), (0.5 + 1e-9) * (0.25 + 1e-9) * (1e-12 + 1e-9) + 1e-9, rel_tol=1e-9)
    assert math.isclose(c[2, 2].item(), d, rel_tol=1e-9)
    lp = torch.log(torch.tensor([[0.3]], dtype=torch.float64))
    assert math.isclose(
        link_probability(lp, lp, torch.ones(1, 1, dtype=torch.bool), "official").item(),
        math.sqrt(0.09 + 1e-9),
        rel_tol=1e-12,
    )


def test_gradients_reach_the_module():
    torch.manual_seed(5)
    module = ConstituentAttention(16)
    c, a = module.constituent_prior(torch.randn(2, 6, 16))
    (c.sum() + a.sum()).backward()
    for p in (module.query.weight, module.key.weight, module.norm.weight):
        assert p.grad is not None and p.grad.abs().sum() > 0


def test_unknown_variant():
    with pytest.raises(ValueError):
        ConstituentAttention(8, "nope")
    with pytest.raises(ValueError, match="diagonal"):
        ConstituentAttention(8, "paper", diagonal="zero")
    with pytest.raises(ValueError, match="scale"):
        ConstituentAttention(8, "paper", scale=0.0)


def test_scale_and_diagonal_separate_the_official_variant():
    """``scale`` and ``diagonal`` change exactly one part of a variant each (docs/results/induce/recipes.md ablation)."""
    torch.manual_seed(6)
    hidden = torch.randn(2, 7, 32, dtype=torch.float64)
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[1, 5:] = False

    def prior(variant, **kw):
        module = ConstituentAttention(32, variant, layer_index=1, **kw).double()
        torch.manual_seed(7)  # the same weights in every module
        for p in module.parameters():
            torch.nn.init.normal_(p)
        return module.constituent_prior(hidden, mask)

    eye = torch.eye(7, dtype=torch.bool).expand(2, 7, 7)
    paper_c, paper_a = prior("paper")
    official_c, official_a = prior("official")
    # the default of each variant is its own diagonal and scale
    assert torch.equal(prior("paper", diagonal="one", scale=16.0)[0], paper_c)
    assert torch.equal(prior("official", diagonal="official", scale=256.0)[0], official_c)
    # the paper's equations with the public code's diagonal: off the diagonal unchanged, on it 3.16e-5 x 2
    c, a = prior("paper", diagonal="official")
    assert torch.equal(a, paper_a) and torch.equal(c[~eye], paper_c[~eye])
    assert torch.allclose(
        c[eye], torch.full((14,), math.exp(official_log_diagonal(1)), dtype=torch.float64), rtol=1e-12, atol=0
    )
    # the public code with the paper's unit diagonal: off the diagonal unchanged
    c, a = prior("official", diagonal="one")
    assert torch.equal(a, official_a) and torch.equal(c[~eye], official_c[~eye])
    assert torch.equal(c[eye], torch.ones(14, dtype=torch.float64))
    # the scale: the paper's links with the public code's 256 equal the public code's up to its 1e-9
    _, a = prior("paper", scale=256.0)
    gap = mask[:, :-1] & mask[:, 1:]
    assert not torch.allclose(paper_a[gap], official_a[gap], atol=1e-3)
    assert torch.allclose(a[gap], official_a[gap], atol=1e-6, rtol=0)


def test_the_undivided_form_is_the_divided_one_times_the_divisor():
    # scale 1: no division made (the Triton chain divides the scores); any other divisor divides each term
    from syntaxformer.kernels.constituent import neighbour_score_form

    torch.manual_seed(7)
    module = ConstituentAttention(8, "paper").double()
    undivided = neighbour_score_form(module.query, module.key)
    w_q, w_k, b_q, b_k = module.query.weight, module.key.weight, module.query.bias, module.key.bias
    assert torch.equal(undivided[0], w_q.t() @ w_k)
    assert torch.equal(undivided[1], torch.stack([w_q.t() @ b_k, w_k.t() @ b_q], dim=1))
    assert torch.equal(undivided[2], b_q @ b_k)
    for divided, whole in zip(neighbour_score_form(module.query, module.key, 4.0), undivided, strict=True):
        assert torch.equal(divided, whole / 4.0)


@pytest.mark.parametrize("variant", ["paper", "official"])
def test_batched_links_equal_single_sentence_links(variant):
    # a padded batch (B·N > d: the single-product form) against each sentence alone (N < d: two projections)
    torch.manual_seed(7)
    module = ConstituentAttention(16, variant)
    for p in (module.query.bias, module.key.bias):
        torch.nn.init.normal_(p, std=0.5)
    lengths = [9, 5, 2, 7]
    hidden = torch.randn(4, 9, 16)
    mask = torch.arange(9)[None] < torch.tensor(lengths)[:, None]
    a, cum = module.link_probabilities(hidden, mask)
    for b, n in enumerate(lengths):
        a1, cum1 = module.link_probabilities(hidden[b : b + 1, :n])
        assert torch.allclose(a[b, : n - 1], a1[0], atol=1e-6)
        assert torch.allclose(cum[b, :n], cum1[0], atol=1e-5)
