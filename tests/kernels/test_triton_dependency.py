"""StructFormer's parse stage and its dependency-constrained attention by the Triton kernels
(``dependency_kernel="triton"``) equal the written ones.

Without a GPU the kernels run in Triton's interpreter on CPU tensors (tests/conftest.py). Against
``calibrate_distances`` + ``dependency_distribution``: the calibrated distances bit for bit (both float32),
``p_D`` and the root mass to float64 rounding, the gradients of the distances, heights and both
temperatures to float32 rounding; with padding, one-word and two-word sentences, a row of padding only
(a fixed-shape batch's filler), a positive calibration
margin (its gradient routed to the boundary and the tallest word), clamped parent logits; a whole model
gives the same loss and gradients; batches the kernels do not take compute as the written path, bit for bit.
The attention against ``dependency_structure`` + ``dependency_constrained_attention``: output and the
gradients of the queries, keys, values, ``p_D`` and the relation logits to float32 rounding (padding, a row
of padding only, weights below 1e-30, one relation or two, softmax or sigmoid mixing); layers that need
their weights, a head mask, attention dropout or the sibling relation take the written path.
"""

import pytest
import torch

from syntaxformer.blocks.dropout import Dropout
from syntaxformer.kernels import triton_runs_on
from syntaxformer.models import MODELS, make_config
from syntaxformer.models.structformer import (
    StructFormerAttention,
    calibrate_distances,
    calibrated_dependency_distribution,
    dependency_constrained_attention,
    dependency_distribution,
    dependency_structure,
    relation_weights,
)

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

pytestmark = pytest.mark.skipif(
    not triton_runs_on(DEVICE), reason="needs Triton: CUDA, or the interpreter (pip install triton; TRITON_INTERPRET=1)"
)

if triton_runs_on(DEVICE):
    from syntaxformer.kernels import triton_dependency
    from syntaxformer.kernels.triton_dependency import MAX_TOKENS, triton_dependency_distribution
    from syntaxformer.kernels.triton_dependency_attention import fits, triton_dependency_attention


def _written(distances, heights, mask, s_d, s_h):
    calibrated = calibrate_distances(distances, heights, mask)
    return (calibrated, *dependency_distribution(calibrated, heights, mask, s_d, s_h))


def _outputs_and_grads(stage, distances, heights, mask, log_scales):
    """The stage's three outputs and the gradients of a random weighting of them (seeded: the same weights
    for either stage)."""
    s_d, s_h = log_scales.exp()
    outputs = stage(distances, heights, mask, s_d, s_h)
    g = torch.Generator().manual_seed(1)
    loss = sum((o * torch.randn(o.shape, generator=g, dtype=o.dtype).to(DEVICE)).sum() for o in outputs)
    return outputs, torch.autograd.grad(loss, [distances, heights, log_scales])


def _compare(distances, heights, lengths, log_scales=(0.3, -0.2)):
    n = heights.shape[1]
    mask = (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]).to(DEVICE)
    inputs = [distances.to(DEVICE).requires_grad_(), heights.to(DEVICE).requires_grad_(), mask]
    log_scales = torch.tensor(log_scales, device=DEVICE, requires_grad=True)
    (ref, ref_grads), (fast, fast_grads) = (
        _outputs_and_grads(stage, *inputs, log_scales) for stage in (_written, triton_dependency_distribution)
    )
    assert torch.equal(fast[0], ref[0])  # calibrated distances: the same float32 operations
    assert fast[1].dtype == fast[2].dtype == torch.float64
    torch.testing.assert_close(fast[1], ref[1], rtol=0, atol=1e-12)
    torch.testing.assert_close(fast[2], ref[2], rtol=0, atol=1e-12)
    for fast_grad, ref_grad in zip(fast_grads, ref_grads, strict=True):
        torch.testing.assert_close(fast_grad, ref_grad, rtol=1e-5, atol=1e-5)
    return ref, ref_grads


def test_random_batch_with_padding_short_sentences_and_an_empty_row():
    g = torch.Generator().manual_seed(0)
    distances, heights = 2 * torch.randn(5, 10, generator=g), 2 * torch.randn(5, 11, generator=g)
    _compare(distances, heights, [11, 7, 2, 1, 0])  # the last row all padding, as a fixed-shape batch's filler rows


def test_a_positive_margin_routes_its_gradient_to_the_boundary_and_the_tallest_word():
    # gaps far above every height: single words are constituents without a parent, so the margin is positive
    g = torch.Generator().manual_seed(2)
    distances, heights = 3 + torch.rand(3, 8, generator=g), 0.5 * torch.randn(3, 9, generator=g)
    mask = torch.arange(9)[None, :] < torch.tensor([9, 6, 9])[:, None]
    margin = (distances - calibrate_distances(distances, heights, mask))[:, 0]
    assert (margin > 0).all()
    _, (grad_distances, grad_heights, _) = _compare(distances, heights, [9, 6, 9])
    assert grad_distances.abs().sum() > 0 and grad_heights.abs().sum() > 0


def test_clamped_parent_logits():
    # one sentence's height logits spread over more than 700 nats: e_j clamped at +-350 (no gradient there)
    heights = torch.tensor([[0.0, 800.0, -5.0, 3.0, 1.0, 900.0]])
    distances = torch.tensor([[0.5, -1.0, 2.0, 0.3, -0.7]])
    _compare(distances, heights, [6])


def test_a_model_gives_the_same_loss_and_gradients():
    results = []
    for kernel in ("autograd", "triton"):
        torch.manual_seed(0)
        config = make_config("structformer", "tiny", 40, dependency_kernel=kernel, hidden_dropout_prob=0.0)
        model = MODELS["structformer"](config).to(DEVICE).train()
        ids = torch.randint(4, 40, (3, 9)).to(DEVICE)
        mask = (torch.arange(9)[None, :] < torch.tensor([9, 6, 3])[:, None]).long().to(DEVICE)
        labels = ids.masked_fill(torch.rand(3, 9, generator=torch.Generator().manual_seed(3)).to(DEVICE) > 0.3, -100)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        results.append((loss, torch.autograd.grad(loss, list(model.parameters()))))
    (ref_loss, ref_grads), (loss, grads) = results
    torch.testing.assert_close(loss, ref_loss, rtol=1e-6, atol=1e-6)
    for grad, ref_grad in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-6)


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
    written = _written(distances, heights, mask, 1.0, 1.0)
    chosen = calibrated_dependency_distribution(distances, heights, mask, kernel="triton")
    assert all(torch.equal(a, b) for a, b in zip(chosen, written, strict=True))


def test_an_unknown_kernel_is_refused():
    with pytest.raises(ValueError, match="dependency_kernel must be one of"):
        make_config("structformer", "tiny", 40, dependency_kernel="cuda")


# ----------------------------------------------------------------------------------------------
# The dependency-constrained attention
# ----------------------------------------------------------------------------------------------


def _attention_inputs(lengths, heads=2, n=7, d=16, relations=2, seed=0):
    """Queries, keys and values (B, H, N, d_h) as views of (B, N, H d_h) projections (as the layer makes
    them), a ``p_D`` zero off the sentences' pairs and on the diagonal with some entries below 1e-30, the
    relation logits (H, R), and the key mask."""
    g = torch.Generator().manual_seed(seed)
    batch = len(lengths)
    mask = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]
    qkv = [torch.randn(batch, n, heads * d, generator=g) for _ in range(3)]
    qkv = [t.to(DEVICE).view(batch, n, heads, d).transpose(1, 2).requires_grad_() for t in qkv]
    p = torch.rand(batch, n, n, generator=g) * (mask[:, :, None] & mask[:, None, :])
    p = p.masked_fill(torch.eye(n, dtype=torch.bool), 0.0)
    p[0, 1, 2] = p[0, 2, 1] = 1e-31  # weights below 1e-30 (both relations): set to 0, no gradient through them
    logits = torch.randn(heads, relations, generator=g)
    return [*qkv, p.to(DEVICE).requires_grad_(), logits.to(DEVICE).requires_grad_()], mask.to(DEVICE)


def _attention_compare(inputs, mask, relations, weight_act="softmax"):
    def written(q, k, v, p, logits):
        structure = dependency_structure(p, relation_weights(logits, weight_act), relations)
        return dependency_constrained_attention(q, k, v, structure, mask, Dropout(0.0))[0]

    def fast(q, k, v, p, logits):
        return triton_dependency_attention(q, k, v, p, relation_weights(logits, weight_act), mask, relations)

    g = torch.Generator().manual_seed(1)
    weighting = torch.randn(inputs[0].shape, generator=g).to(DEVICE)
    results = []
    for attention in (written, fast):
        out = attention(*inputs)
        results.append((out, torch.autograd.grad((out * weighting).sum(), inputs)))
    (ref, ref_grads), (out, grads) = results
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    for grad, ref_grad in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(grad, ref_grad, rtol=1e-5, atol=1e-5)
    return out, grads


def test_the_attention_equals_the_written_one_with_padding_and_an_empty_row():
    inputs, mask = _attention_inputs([7, 4, 0])
    out, grads = _attention_compare(inputs, mask, ["head", "child"])
    assert out.transpose(1, 2).is_contiguous()  # (B, N, H, d_h) underneath: merging the heads copies nothing
    assert all(g.abs().sum() > 0 for g in grads)
    assert grads[3][0, 1, 2] == grads[3][0, 2, 1] == 0  # the weights below 1e-30 were dropped: no gradient
    assert grads[3][1, 4:].abs().sum() == 0 and grads[3][1, :, 4:].abs().sum() == 0  # nor to padding


@pytest.mark.parametrize(("relations", "weight_act"), [(["child"], "sigmoid"), (["child", "head"], "softmax")])
def test_the_attention_with_one_relation_or_the_other_order(relations, weight_act):
    inputs, mask = _attention_inputs([5, 3], heads=3, n=5, d=8, relations=len(relations), seed=2)
    _attention_compare(inputs, mask, relations, weight_act)


def test_layers_that_need_what_the_kernels_do_not_give_take_the_written_path():
    torch.manual_seed(0)
    config = make_config("structformer", "tiny", 40, dependency_kernel="triton")
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
    sibling = StructFormerAttention(make_config("structformer", "tiny", 40, dependency_kernel="triton",
                                                relations=("head", "sibling"))).to(DEVICE)  # fmt: skip
    assert sibling(x, p, mask, need_weights=False)[1] is not None
    queries = torch.zeros(1, 2, MAX_TOKENS + 1, 8)
    assert not fits(queries, ["head"]) and not fits(queries[:, :, :4].double(), ["head"])
    with pytest.raises(ValueError, match="dependency attention kernels take float32"):
        triton_dependency_attention(queries, queries, queries, torch.zeros(1, 65, 65), torch.ones(2, 1),
                                    torch.ones(1, 65, dtype=torch.bool), ["head"])  # fmt: skip
