"""head_mask and prune_heads (Hugging Face conventions) for every model: masking a head = pruning it."""

import pytest
import torch

from syntaxformer.models import MODELS, make_config

CASES = [
    ("tree-transformer", dict(constituent_variant="paper")),
    ("tree-transformer", dict(constituent_variant="official")),
    ("tree-transformer", dict(prior="none")),
    ("tree-transformer", dict(prior="gaussian", gaussian_w_init=0.3, gaussian_b_init=-0.5)),
    ("structformer", dict()),
]
PRUNE = {0: [1], 2: [0, 3]}  # mini preset: 4 layers x 4 heads


def _model(name, overrides, impl):
    torch.manual_seed(0)
    config = make_config(name, "mini", 40, **overrides)
    if name == "tree-transformer":  # StructFormer has one attention path (its sigmoid attention)
        config._attn_implementation = impl
    return MODELS[name](config).eval()


def _inputs():
    torch.manual_seed(1)
    ids = torch.randint(5, 40, (3, 11))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    mask[2, 4:] = 0
    return ids, mask


def _mask_for(model, prune):
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    head_mask = torch.ones(layers, heads)
    for layer, hs in prune.items():
        head_mask[layer, hs] = 0.0
    return head_mask


@pytest.mark.parametrize(
    "name,overrides,impl",
    [(n, o, impl) for n, o in CASES for impl in ("eager", "sdpa") if n == "tree-transformer" or impl == "eager"],
)
def test_masking_a_head_equals_pruning_it(name, overrides, impl):
    ids, mask = _inputs()
    model = _model(name, overrides, impl)
    real = mask.bool()
    with torch.no_grad():
        full = model(ids, mask).logits
        masked = model(ids, mask, head_mask=_mask_for(model, PRUNE)).logits
        model.prune_heads(PRUNE)
        pruned = model(ids, mask).logits
    assert not torch.allclose(full[real], masked[real], atol=1e-3)  # the heads mattered
    assert torch.allclose(masked[real], pruned[real], atol=1e-5), (masked - pruned)[real].abs().max()
    attention = model.attention_modules()
    assert [a.num_heads for a in attention] == [3, 4, 2, 4]
    assert attention[2].head_ids == [1, 2]
    assert attention[2].query.weight.shape == (2 * 32, 128) and attention[2].output.weight.shape == (128, 64)
    assert model.config.pruned_heads == {0: [1], 2: [0, 3]}
    # a head_mask in original numbering still applies to the pruned model
    with torch.no_grad():
        again = model(ids, mask, head_mask=_mask_for(model, PRUNE)).logits
    assert torch.allclose(again[real], pruned[real], atol=1e-6)


@pytest.mark.parametrize("name,overrides", [CASES[1], CASES[3]])
def test_pruned_model_round_trips_through_save_pretrained(name, overrides, tmp_path):
    ids, mask = _inputs()
    model = _model(name, overrides, "sdpa")
    model.prune_heads(PRUNE)
    model.prune_heads({0: [1]})  # idempotent
    with torch.no_grad():
        before = model(ids, mask).logits
    model.save_pretrained(tmp_path)
    loaded = type(model).from_pretrained(tmp_path).eval()
    assert loaded.config.pruned_heads == {0: [1], 2: [0, 3]}
    assert [a.num_heads for a in loaded.attention_modules()] == [3, 4, 2, 4]
    with torch.no_grad():
        after = loaded(ids, mask).logits
    assert torch.equal(before, after)


def test_head_mask_shapes_gradients_and_errors():
    ids, mask = _inputs()
    model = _model("tree-transformer", dict(constituent_variant="official"), "sdpa")
    with torch.no_grad():
        one = model(ids, mask, head_mask=torch.tensor([1.0, 0.0, 1.0, 1.0])).logits
        every = model(ids, mask, head_mask=torch.tensor([[1.0, 0.0, 1.0, 1.0]] * 4)).logits
    assert torch.equal(one, every)
    # importance (Michel et al. 2019): d loss / d head_mask exists for every head
    head_mask = torch.ones(4, 4, requires_grad=True)
    model(ids, mask, labels=ids, head_mask=head_mask).loss.backward()
    assert head_mask.grad.shape == (4, 4) and (head_mask.grad != 0).all()
    with pytest.raises(ValueError, match="head_mask of shape"):
        model(ids, mask, head_mask=torch.ones(3))
    with pytest.raises(ValueError, match="every head"):
        model.prune_heads({1: [0, 1, 2, 3]})
    with pytest.raises(ValueError, match="no layer 9"):
        model.prune_heads({9: [0]})
    with pytest.raises(ValueError, match="no head"):
        model.prune_heads({1: [7]})
