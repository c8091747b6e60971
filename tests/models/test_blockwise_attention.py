"""BlockwisePriorAttention (the "sdpa" kernel with a prior): blockwise = eager, O(N) saved state."""

import math

import pytest
import torch

from syntaxformer.kernels.attention import BlockwisePriorAttention, padding_bias, query_blocks
from syntaxformer.kernels.denormals import exp_flushed
from syntaxformer.kernels.dropout import keep_mask, keep_scale
from syntaxformer.priors.attention import eager_attention
from syntaxformer.priors.constituent import ConstituentPrior, official_log_diagonal


def inputs(batch=2, heads=3, n=11, d_k=4, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, n, d_k, generator=g, dtype=dtype) for _ in range(3))
    cum = torch.cumsum(-2 * torch.rand(batch, n, generator=g, dtype=dtype), -1)
    key_mask = torch.ones(batch, n, dtype=torch.bool)
    key_mask[1, n - 3 :] = False  # padding in the second sentence
    return q, k, v, cum, key_mask


def prior_of(cum, variant):
    return ConstituentPrior(cum, variant, official_log_diagonal(2) if variant == "official" else None)


def blockwise(q, k, v, cum, key_mask, variant="paper", dropout_p=0.0, block_elements=None):
    prior = prior_of(cum, variant)
    return BlockwisePriorAttention.apply(
        q, k, v, cum, padding_bias(key_mask, torch.float32), dropout_p, False, prior.log_rows, block_elements
    )


def test_query_blocks_cover_the_queries_within_the_budget():
    assert query_blocks(2, 3, 11, 11, block_elements=66) == [
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 4),
        (4, 5),
        (5, 6),
        (6, 7),
        (7, 8),
        (8, 9),
        (9, 10),
        (10, 11),
    ]
    assert query_blocks(2, 3, 11, 11, block_elements=200) == [(0, 3), (3, 6), (6, 9), (9, 11)]
    assert query_blocks(2, 3, 11, 11, block_elements=10) == [(i, i + 1) for i in range(11)]  # >= 1 row
    assert query_blocks(2, 3, 11, 11) == [(0, 11)]


@pytest.mark.parametrize("variant", ["paper", "official"])
@pytest.mark.parametrize("block_elements", [66, 200, 1 << 20, None])  # 11, 4, 1 blocks; kept attention
def test_blockwise_equals_eager_values_and_gradients(variant, block_elements):
    q, k, v, cum, key_mask = inputs()
    weights = torch.linspace(-1, 1, 4, dtype=torch.float64)
    grads = {}
    for name in ("eager", "blockwise"):
        leaves = [t.clone().requires_grad_() for t in (q, k, v, cum)]
        if name == "eager":
            out, _ = eager_attention(*leaves[:3], key_mask, prior_of(leaves[3], variant))
        else:
            out = blockwise(*leaves, key_mask, variant, block_elements=block_elements)
        (out * weights).sum().backward()
        grads[name] = [out] + [t.grad for t in leaves]
    for a, b in zip(grads["eager"], grads["blockwise"]):
        assert torch.allclose(a, b, atol=1e-12)


def test_blockwise_gradcheck_several_blocks():
    q, k, v, cum, key_mask = inputs(n=6, heads=2, d_k=3)
    leaves = [t.requires_grad_() for t in (q, k, v, cum)]
    assert torch.autograd.gradcheck(lambda *x: blockwise(*x, key_mask, block_elements=30), leaves)


def test_dropout_masks_are_redrawn_block_by_block_in_the_backward():
    # 4 blocks of query rows; the reference applies the same masks (drawn in the same order from the
    # same seed) to the eager product and differentiates with autograd
    q, k, v, cum, key_mask = inputs(dtype=torch.float32)
    p, blocks = 0.3, query_blocks(2, 3, 11, 11, block_elements=200)
    leaves = [t.clone().requires_grad_() for t in (q, k, v, cum)]
    torch.manual_seed(5)
    out = blockwise(*leaves, key_mask, dropout_p=p, block_elements=200)
    state_after_forward = torch.get_rng_state()
    out.pow(2).sum().backward()
    assert torch.equal(torch.get_rng_state(), state_after_forward)  # the backward draws nothing for good

    torch.manual_seed(5)
    mask = torch.cat([keep_mask((2, 3, stop - start, 11), p) for start, stop in blocks], dim=2)
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v, cum)]
    attn = eager_attention(*ref_leaves[:3], key_mask, ConstituentPrior(ref_leaves[3]), output_attentions=True)[1]
    ref = (attn * mask * keep_scale(p)) @ ref_leaves[2]
    ref.pow(2).sum().backward()
    assert (mask == 0).any() and (mask == 1).any()
    assert torch.allclose(out, ref, atol=1e-5)
    for a, b in zip(leaves, ref_leaves):
        assert torch.allclose(a.grad, b.grad, atol=1e-4)


def saved_bytes(call) -> int:
    """Bytes that ``call()`` keeps for the backward (unique storages of the saved tensors)."""
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        call()
    return sum(storages.values())


def grad_inputs(batch, heads, n, d_k):
    return [
        t.requires_grad_() if t.is_floating_point() else t for t in inputs(batch, heads, n, d_k, dtype=torch.float32)
    ]


def test_saved_state_is_linear_in_length():
    # Q/√d_k, K, V, out: 4·B·H·N·d_k floats; P: B·N; padding mask: B·N (float32)
    for n in (16, 64, 256):
        q, k, v, cum, key_mask = grad_inputs(2, 4, n, 8)
        kept = saved_bytes(lambda: blockwise(q, k, v, cum, key_mask, block_elements=1 << 20))
        assert kept == 4 * (4 * 2 * 4 * n * 8 + 2 * n + 2 * n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_exp_flushed_is_exp_with_flush_to_zero(dtype):
    tiny = torch.finfo(dtype).tiny
    log_x = torch.tensor(
        [0.0, -1.0, -50.0, math.log(tiny) + 0.2, math.log(tiny) + 0.05, math.log(tiny) - 1, -1e4, -math.inf],
        dtype=dtype,
        requires_grad=True,
    )
    y = exp_flushed(log_x)
    reference = torch.exp(log_x.detach())
    reference = reference.masked_fill(reference < tiny * math.exp(0.1), 0.0)
    assert torch.equal(y.detach(), reference)
    assert (y[:4] > 0).all() and (y[4:] == 0).all()
    y.sum().backward()
    assert torch.equal(log_x.grad, reference)  # d exp = exp; 0 where flushed


def test_sdpa_keeps_the_attention_only_up_to_the_policy_size(monkeypatch):
    # keep mode saves A and E' (2 · B·H·N² floats) on top of the O(N) tensors; above the policy's
    # size, or without gradients, nothing N×N is kept
    from syntaxformer.kernels import attention as kernels
    from syntaxformer.priors import attention

    batch, heads, n, d_k = 2, 4, 32, 8
    q, k, v, cum, key_mask = grad_inputs(batch, heads, n, d_k)
    linear = 4 * (4 * batch * heads * n * d_k + batch * n + batch * n)

    def saved(limit):
        monkeypatch.setattr(kernels, "SAVE_ATTENTION_ELEMENTS", limit)
        return saved_bytes(lambda: attention.sdpa_attention(q, k, v, key_mask, ConstituentPrior(cum)))

    assert saved(batch * heads * n * n) == linear + 2 * 4 * batch * heads * n * n
    assert saved(batch * heads * n * n - 1) == linear
