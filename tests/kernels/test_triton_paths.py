"""Where the Triton kernels run and where they leave a batch to another path; what they do that the literal
math does not compare (their own dropout masks, their gradients' zeros).

Their values and gradients against the literal math: ``test_kernel_table.py``. Without a GPU these run in
Triton's interpreter on CPU tensors (tests/conftest.py sets ``TRITON_INTERPRET=1`` before Triton's first
import); on a GPU, on CUDA tensors.
"""

import pytest
import torch
from helpers import dependency_attention, dependency_attention_inputs, tiny_tree_transformer

from syntaxformer.kernels import triton_runs_on
from syntaxformer.models import MODELS, make_config
from syntaxformer.models.structformer import StructFormerAttention, calibrate_distances
from syntaxformer.models.structformer_parse import PARSE_STAGE_KERNELS
from syntaxformer.priors.attention import eager_attention, sdpa_attention
from syntaxformer.priors.constituent import ConstituentPrior

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

pytestmark = pytest.mark.skipif(
    not triton_runs_on(DEVICE), reason="needs Triton: CUDA, or the interpreter (pip install triton; TRITON_INTERPRET=1)"
)

if triton_runs_on(DEVICE):
    from syntaxformer.kernels import triton_dependency, triton_prior
    from syntaxformer.kernels.triton_dependency import MAX_TOKENS, triton_dependency_distribution
    from syntaxformer.kernels.triton_dependency_attention import fits, triton_dependency_attention
    from syntaxformer.kernels.triton_prior import laplace_prior_attention


def _mask(lengths, n):
    return (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]).to(DEVICE)


def _randn(*shape, g):
    return torch.randn(*shape, generator=g).to(DEVICE).requires_grad_()


# ----------------------------------------------------------------------------------------------
# Where Triton cannot run: each setting's fallback, bit for bit
# ----------------------------------------------------------------------------------------------


def _tree_transformer(kernel):
    torch.manual_seed(0)
    return tiny_tree_transformer(
        kernel=kernel, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="sdpa"
    )


def _registered(name, **fields):
    def build(kernel):
        torch.manual_seed(0)
        return MODELS[name](make_config(name, "tiny", 40, kernel=kernel, **fields)).train()

    return build


#: (model builder, the kernel ``kernel="triton"`` computes as where Triton cannot run)
FALLBACKS = {
    "tree-transformer": (_tree_transformer, "fused"),
    "structformer": (_registered("structformer", hidden_dropout_prob=0.0), "reference"),
    "on-lstm": (_registered("on-lstm"), "reference"),
    "on-lstm-san": (_registered("on-lstm-san"), "reference"),
}


def _loss_and_grads(model):
    torch.manual_seed(0)
    ids = torch.randint(5, 40, (4, 8))
    labels = torch.full_like(ids, -100)
    labels[:, 1] = ids[:, 1]
    torch.manual_seed(1)
    out = model(input_ids=ids, attention_mask=_mask([8, 5, 3, 8], 8).cpu().long(), labels=labels)
    return out.loss, torch.autograd.grad(out.loss, list(model.parameters()), allow_unused=True)


@pytest.mark.parametrize("model", sorted(FALLBACKS))
def test_where_triton_cannot_run_the_setting_computes_its_fallback_bit_for_bit(model, monkeypatch):
    """Here: no interpreter on a CPU (the Tree Transformer's "triton" computes as "fused", the others' as
    "reference"), losses and every gradient bit for bit."""
    if DEVICE.type != "cpu":
        pytest.skip("the interpreter switch concerns CPU tensors")
    monkeypatch.delenv("TRITON_INTERPRET")
    assert not triton_runs_on("cpu")
    build, fallback = FALLBACKS[model]
    ref_loss, ref_grads = _loss_and_grads(build(fallback))
    loss, grads = _loss_and_grads(build("triton"))
    assert torch.equal(loss, ref_loss)
    assert all(g is r or torch.equal(g, r) for g, r in zip(grads, ref_grads, strict=True))


# ----------------------------------------------------------------------------------------------
# The constituent prior's attention
# ----------------------------------------------------------------------------------------------


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


def test_long_sentences_take_the_blockwise_kernel(monkeypatch):
    monkeypatch.setattr(triton_prior, "MAX_TOKENS", 8)
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 9, 4, generator=g).to(DEVICE) for _ in range(3))
    cum = torch.cumsum(-torch.rand(1, 9, generator=g), -1).to(DEVICE)
    prior = ConstituentPrior(cum, "paper", kernel="triton")
    with pytest.raises(ValueError, match="at most 8 tokens"):
        laplace_prior_attention(q, k, v, _mask([9], 9), cum)
    out, _ = sdpa_attention(q, k, v, _mask([9], 9), prior)
    torch.testing.assert_close(out, eager_attention(q, k, v, _mask([9], 9), prior)[0], atol=1e-6, rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# StructFormer's parse stage and attention
# ----------------------------------------------------------------------------------------------


def test_a_positive_margin_gives_the_boundary_and_the_tallest_word_a_gradient():
    # gaps far above every height: single words are constituents without a parent, so the margin is positive
    g = torch.Generator().manual_seed(2)
    distances, heights = 3 + torch.rand(3, 8, generator=g), 0.5 * torch.randn(3, 9, generator=g)
    mask = torch.arange(9)[None, :] < torch.tensor([9, 6, 9])[:, None]
    margin = (distances - calibrate_distances(distances, heights, mask))[:, 0]
    assert (margin > 0).all()
    distances, heights = distances.to(DEVICE).requires_grad_(), heights.to(DEVICE).requires_grad_()
    outputs = triton_dependency_distribution(distances, heights, mask.to(DEVICE), 1.3, 0.8)
    grad_distances, grad_heights = torch.autograd.grad(sum(o.sum() for o in outputs), [distances, heights])
    assert grad_distances.abs().sum() > 0 and grad_heights.abs().sum() > 0


@pytest.mark.parametrize("case", ["long", "float64"])
def test_batches_the_kernels_do_not_take_compute_as_the_written_path(case):
    n = MAX_TOKENS + 1 if case == "long" else 6
    dtype = torch.float32 if case == "long" else torch.float64
    g = torch.Generator().manual_seed(4)
    distances, heights = torch.randn(2, n - 1, generator=g, dtype=dtype), torch.randn(2, n, generator=g, dtype=dtype)
    mask = torch.ones(2, n, dtype=torch.bool)
    assert not triton_dependency.fits(distances, heights)
    with pytest.raises(ValueError, match="float32 rows of 2 to 64 tokens"):
        triton_dependency_distribution(distances, heights, mask)
    written = PARSE_STAGE_KERNELS["reference"](distances, heights, mask, 1.0, 1.0)
    chosen = PARSE_STAGE_KERNELS["triton"](distances, heights, mask, 1.0, 1.0)
    assert all(torch.equal(a, b) for a, b in zip(chosen, written, strict=True))


def test_the_attention_kernels_gradients_leave_out_dropped_weights_and_padding():
    inputs, mask = dependency_attention_inputs([7, 4, 0], DEVICE)
    out = dependency_attention("triton", inputs, mask, ("head", "child"), "softmax")
    assert out.transpose(1, 2).is_contiguous()  # (B, N, H, d_h) underneath: merging the heads copies nothing
    grads = torch.autograd.grad(out.square().sum(), inputs)
    assert all(g.abs().sum() > 0 for g in grads)
    assert grads[3][0, 1, 2] == grads[3][0, 2, 1] == 0  # the weights below 1e-30 were dropped: no gradient
    assert grads[3][1, 4:].abs().sum() == 0 and grads[3][1, :, 4:].abs().sum() == 0  # nor to padding


def test_layers_that_need_what_the_kernels_do_not_give_take_the_written_path():
    torch.manual_seed(0)
    config = make_config("structformer", "tiny", 40, kernel="triton")
    layer = StructFormerAttention(config).to(DEVICE).train()
    x = torch.randn(2, 6, config.hidden_size).to(DEVICE)
    p = torch.rand(2, 6, 6).to(DEVICE)
    mask = torch.ones(2, 6, dtype=torch.bool).to(DEVICE)
    out, weights = layer(x, p, mask, need_weights=False)  # the kernels: no weights
    assert weights is None
    written, weights = layer(x, p, mask)  # the weights asked for: the written path
    assert weights.shape == (2, 2, 6, 6)
    torch.testing.assert_close(out, written, rtol=1e-5, atol=1e-6)
    _, weights = layer(x, p, mask, head_mask=torch.ones(2).to(DEVICE), need_weights=False)
    assert weights is not None
    layer.dropout.p = 0.1  # attention dropout while training: the written path; at evaluation, the kernels
    assert layer(x, p, mask, need_weights=False)[1] is not None
    assert layer.eval()(x, p, mask, need_weights=False)[1] is None
    sibling = StructFormerAttention(make_config("structformer", "tiny", 40, kernel="triton",
                                                relations=("head", "sibling"))).to(DEVICE)  # fmt: skip
    assert sibling(x, p, mask, need_weights=False)[1] is not None
    queries = torch.zeros(1, 2, MAX_TOKENS + 1, 8)
    assert not fits(queries, ["head"]) and not fits(queries[:, :, :4].double(), ["head"])
    with pytest.raises(ValueError, match="dependency attention kernels take float32"):
        triton_dependency_attention(queries, queries, queries, torch.zeros(1, 65, 65), torch.ones(2, 1),
                                    torch.ones(1, 65, dtype=torch.bool), ["head"])  # fmt: skip
