"""The Triton kernels of the constituent prior (``constituent_fused="triton"``) equal the PyTorch paths.

On a machine without a GPU they run in Triton's interpreter on CPU tensors (tests/conftest.py sets
``TRITON_INTERPRET=1`` before Triton's first import); on a GPU, on CUDA tensors. Values and gradients
within float32 rounding of the fused PyTorch link chain and the literal attention, at padding, several
query tiles and both variants; dropout masks checked by reading ``E'`` through an identity ``V``.
"""

import math

import pytest
import torch
from helpers import tiny_tree_transformer

from syntaxformer.kernels import triton_runs_on
from syntaxformer.kernels.constituent import BilinearNeighbourScores, fused_link_chain, neighbour_score_form
from syntaxformer.models.tree_transformer import TreeTransformerConfig
from syntaxformer.priors.attention import eager_attention, sdpa_attention
from syntaxformer.priors.constituent import ConstituentPrior, official_log_diagonal

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

pytestmark = pytest.mark.skipif(
    not triton_runs_on(DEVICE), reason="needs Triton: CUDA, or the interpreter (pip install triton; TRITON_INTERPRET=1)"
)

if triton_runs_on(DEVICE):
    from syntaxformer.kernels import triton_prior
    from syntaxformer.kernels.triton_prior import laplace_prior_attention, triton_prior_chain


def _mask(lengths, n):
    return (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]).to(DEVICE)


def _randn(*shape, g):
    return torch.randn(*shape, generator=g).to(DEVICE).requires_grad_()


def _form(variant: str, log_diagonal: float | None) -> tuple[float, float]:
    return ConstituentPrior(torch.zeros(1, 1), variant, log_diagonal, fused="triton").laplace_form


def _pytorch_chain(r, hidden, linear, offset, gap, prior, variant):
    return fused_link_chain(*BilinearNeighbourScores.apply(r, hidden, linear, offset), gap, prior, variant)


@pytest.mark.parametrize("variant", ["paper", "official"])
@pytest.mark.parametrize("with_prior", [False, True])
@pytest.mark.parametrize("d", [8, 80])  # 80: two chunks of the hidden size
def test_prior_chain_equals_the_fused_pytorch_chain(variant, with_prior, d):
    """Eq. 5 (the bilinear form) then eqs. 6-8 and P: values and the gradients of h, the projections'
    weights and biases (through h M, the form's linear terms and offset) and the prior; the Triton chain
    divides the undivided form's scores by the divisor itself."""
    g = torch.Generator().manual_seed(0)
    lengths = [9, 6, 1, 9, 4]  # padding, a one-word sentence, full rows
    gap = _mask(lengths, 9)[:, :-1] & _mask(lengths, 9)[:, 1:]
    query, key = torch.nn.Linear(d, d).to(DEVICE), torch.nn.Linear(d, d).to(DEVICE)
    hidden = _randn(5, 9, d, g=g)
    prior = torch.rand(5, 8, generator=g).to(DEVICE).requires_grad_() if with_prior else None
    inputs = [hidden, query.weight, query.bias, key.weight, key.bias] + ([prior] if with_prior else [])
    grad_a, grad_cum = torch.randn(5, 8, generator=g).to(DEVICE), torch.randn(5, 9, generator=g).to(DEVICE)
    bilinear, linear, offset = neighbour_score_form(query, key, d / 2)
    reference = _pytorch_chain(hidden @ bilinear, hidden, linear, offset, gap, prior, variant)
    bilinear, linear, offset = neighbour_score_form(query, key)
    by_triton = triton_prior_chain(hidden @ bilinear, hidden, linear, offset, gap, prior, variant, scale=d / 2)
    results = []
    for a, cum in (reference, by_triton):
        grads = torch.autograd.grad((a * grad_a).sum() + (cum * grad_cum).sum(), inputs, retain_graph=True)
        results.append((a, cum, *grads))
    for fast, ref in zip(*results[::-1], strict=True):
        torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(("variant", "diagonal", "n"), [("paper", None, 11), ("official", 2, 11), ("paper", None, 70)])
def test_attention_equals_the_literal_attention(variant, diagonal, n):
    """n = 70: keys padded to 128 lanes, queries in three tiles of 32."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (_randn(2, 3, n, 8, g=g) for _ in range(3))
    cum = torch.cumsum(-0.5 * torch.rand(2, n, generator=g), -1).to(DEVICE).requires_grad_()
    key_mask = _mask([n, n - 4], n)
    log_diagonal = official_log_diagonal(diagonal) if diagonal is not None else None
    grad_out = torch.randn(2, 3, n, 8, generator=g).to(DEVICE)
    ref, _ = eager_attention(q, k, v, key_mask, ConstituentPrior(cum, variant, log_diagonal))
    fast = laplace_prior_attention(q, k, v, key_mask, cum, *_form(variant, log_diagonal))
    ref_grads = torch.autograd.grad((ref * grad_out).sum(), [q, k, v, cum])
    fast_grads = torch.autograd.grad((fast * grad_out).sum(), [q, k, v, cum])
    rows = key_mask[:, None, :, None]  # padding queries give finite garbage on both paths
    torch.testing.assert_close(fast * rows, ref * rows, atol=1e-5, rtol=1e-5)
    for fast_grad, ref_grad in zip(fast_grads, ref_grads, strict=True):
        torch.testing.assert_close(fast_grad, ref_grad, atol=1e-5, rtol=1e-4)


def test_attention_dropout_masks_are_redrawn_in_the_backward():
    """``V = I`` makes the output ``E'`` itself: each entry is 0 or ``E / (1 - p)``; the gradients
    equal the literal attention's with that mask; the same seed draws the same mask, another seed another."""
    n, p = 16, 0.3
    g = torch.Generator().manual_seed(2)
    q, k = (_randn(2, 2, n, n, g=g) for _ in range(2))
    cum = torch.cumsum(-0.2 * torch.rand(2, n, generator=g), -1).to(DEVICE).requires_grad_()
    key_mask = _mask([n, n], n)
    identity = torch.eye(n, device=DEVICE).expand(2, 2, n, n)
    torch.manual_seed(5)
    e_dropped = laplace_prior_attention(q, k, identity, key_mask, cum, 0.0, 1.0, p).detach()
    e, _ = eager_attention(q, k, identity, key_mask, ConstituentPrior(cum, "paper"))  # E, without dropout
    keep = e_dropped != 0
    torch.testing.assert_close(e_dropped, torch.where(keep, e.detach() / (1 - p), 0.0), atol=1e-6, rtol=1e-5)
    assert 0.2 < 1 - keep.float().mean().item() < 0.4  # 1,024 draws at p = 0.3

    v = _randn(2, 2, n, n, g=g)
    torch.manual_seed(5)  # the same seed: the same mask
    fast = laplace_prior_attention(q, k, v, key_mask, cum, 0.0, 1.0, p)
    ref = (torch.where(keep, e / (1 - p), 0.0)) @ v
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
    grad_out = torch.randn(2, 2, n, n, generator=g).to(DEVICE)
    for fast_grad, ref_grad in zip(
        torch.autograd.grad((fast * grad_out).sum(), [q, k, v, cum]),
        torch.autograd.grad((ref * grad_out).sum(), [q, k, v, cum]),
        strict=True,
    ):
        torch.testing.assert_close(fast_grad, ref_grad, atol=1e-5, rtol=1e-4)
    torch.manual_seed(6)
    assert not torch.equal(laplace_prior_attention(q, k, identity, key_mask, cum, 0.0, 1.0, p) != 0, keep)


def _model(fused, dropout=0.0):
    torch.manual_seed(0)
    model = tiny_tree_transformer(
        constituent_fused=fused,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        attn_implementation="sdpa",
    )
    return model.to(DEVICE)


def _loss_and_grads(model):
    torch.manual_seed(0)
    ids = torch.randint(5, 50, (4, 8)).to(DEVICE)
    labels = torch.full_like(ids, -100)
    labels[:, 1] = ids[:, 1]
    out = model(input_ids=ids, attention_mask=_mask([8, 5, 3, 8], 8), labels=labels)
    return out.loss, torch.autograd.grad(out.loss, list(model.parameters()), allow_unused=True)


def test_model_with_triton_kernels_equals_the_fused_model(monkeypatch):
    calls = []
    for name in ("LaplacePriorAttention", "TritonPriorChain"):
        function = getattr(triton_prior, name)
        monkeypatch.setattr(function, "apply", _counting(function.apply, calls, name))
    ref_loss, ref_grads = _loss_and_grads(_model(True))
    loss, grads = _loss_and_grads(_model("triton"))
    assert sorted(set(calls)) == ["LaplacePriorAttention", "TritonPriorChain"] and len(calls) == 4  # 2 layers
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    for grad, ref in zip(grads, ref_grads, strict=True):
        if ref is not None:
            torch.testing.assert_close(grad, ref, atol=1e-5, rtol=1e-4)


def _counting(apply, calls, name):
    def counted(*args):
        calls.append(name)
        return apply(*args)

    return counted


def test_without_triton_the_setting_is_the_fused_pytorch_path(monkeypatch):
    """Where Triton cannot run (here: no interpreter on a CPU), "triton" computes as True, bit for bit."""
    if DEVICE.type != "cpu":
        pytest.skip("the interpreter switch concerns CPU tensors")
    monkeypatch.delenv("TRITON_INTERPRET")
    assert not triton_runs_on("cpu")
    ref_loss, ref_grads = _loss_and_grads(_model(True))
    loss, grads = _loss_and_grads(_model("triton"))
    assert torch.equal(loss, ref_loss)
    assert all(g is r or torch.equal(g, r) for g, r in zip(grads, ref_grads, strict=True))


def test_long_sentences_take_the_blockwise_kernel(monkeypatch):
    monkeypatch.setattr(triton_prior, "MAX_TOKENS", 8)
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 9, 4, generator=g).to(DEVICE) for _ in range(3))
    cum = torch.cumsum(-torch.rand(1, 9, generator=g), -1).to(DEVICE)
    prior = ConstituentPrior(cum, "paper", fused="triton")
    with pytest.raises(ValueError, match="at most 8 tokens"):
        laplace_prior_attention(q, k, v, _mask([9], 9), cum)
    out, _ = sdpa_attention(q, k, v, _mask([9], 9), prior)
    torch.testing.assert_close(out, eager_attention(q, k, v, _mask([9], 9), prior)[0], atol=1e-6, rtol=1e-5)


def test_the_setting_is_checked_and_saved(tmp_path):
    with pytest.raises(ValueError, match="constituent_fused"):
        TreeTransformerConfig(constituent_fused="cuda")
    TreeTransformerConfig(constituent_fused="triton").save_pretrained(tmp_path)
    assert TreeTransformerConfig.from_pretrained(tmp_path).constituent_fused == "triton"
    assert _form("official", official_log_diagonal(0)) == (1e-9, math.exp(official_log_diagonal(0)))
    assert _form("paper", None) == (0.0, 1.0)
