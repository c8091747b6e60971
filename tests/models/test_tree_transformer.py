"""TreeTransformerForMaskedLM (tiny preset): shapes, eager/sdpa agreement, padding, save/load, denormals."""

import math

import pytest
import torch
from transformers import AutoModelForMaskedLM

import syntaxformer  # noqa: F401  (registers the Auto classes)
from syntaxformer import TreeTransformerConfig, TreeTransformerForMaskedLM
from syntaxformer.models import MODELS, PRESETS, make_config
from syntaxformer.priors.attention import ATTENTION_FUNCTIONS, eager_attention
from syntaxformer.priors.constituent import ConstituentAttention, ConstituentPrior

torch.set_num_threads(1)
V = 37


def tiny(**overrides):
    torch.manual_seed(0)
    return TreeTransformerForMaskedLM(make_config("tree-transformer", "tiny", V, **overrides)).eval()


def batch():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, V, (3, 9), generator=g)
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:] = 0
    mask[2, 2:] = 0
    ids[mask == 0] = 0
    return ids, mask


def test_shapes_and_outputs():
    model = tiny()
    ids, mask = batch()
    labels = torch.full_like(ids, -100)
    labels[0, 3] = ids[0, 3]
    labels[1, 1] = ids[1, 1]
    out = model(ids, mask, labels=labels, output_attentions=True, output_priors=True, output_hidden_states=True)
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    assert out.logits.shape == (3, 9, V)
    assert len(out.link_probs) == L and all(a.shape == (3, 8) for a in out.link_probs)
    assert len(out.priors) == L and all(c.shape == (3, 9, 9) for c in out.priors)
    assert len(out.attentions) == L and all(e.shape == (3, H, 9, 9) for e in out.attentions)
    assert len(out.hidden_states) == L + 1
    expected = torch.nn.functional.cross_entropy(out.logits[labels != -100], ids[labels != -100])
    assert torch.allclose(out.loss, expected)
    cheap = model(ids, mask, labels=labels, masked_only=True)
    assert cheap.logits.shape == (2, V)
    assert torch.allclose(cheap.logits, out.logits[labels != -100], atol=1e-5)
    assert torch.allclose(cheap.loss, out.loss, atol=1e-6)
    for l in range(1, L):  # hierarchical constraint across layers
        assert (out.link_probs[l] >= out.link_probs[l - 1]).all()
    # E = C ⊙ softmax, no renormalisation: rows sum to at most 1
    assert (out.attentions[0].sum(-1) <= 1 + 1e-5).all()


def test_attention_is_prior_times_softmax():
    torch.manual_seed(2)
    q, k, v = torch.randn(3, 2, 2, 6, 4).unbind(0)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    cum = torch.cumsum(-torch.rand(2, 6), -1)
    prior = ConstituentPrior(cum)
    _, attn = eager_attention(q, k, v, mask, prior, output_attentions=True)
    scores = (q @ k.transpose(-1, -2) / 2.0).masked_fill(~mask[:, None, None, :], -math.inf)
    c = torch.exp(-(cum[:, :, None] - cum[:, None, :]).abs())
    assert torch.allclose(attn, torch.softmax(scores, -1) * c[:, None], atol=1e-6)


@pytest.mark.parametrize("variant", ["paper", "official"])
@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_padding_invariance(variant, impl):
    model = tiny(constituent_variant=variant)
    model.config._attn_implementation = impl
    ids, mask = batch()
    with torch.no_grad():
        full = model(ids, mask)
        for b in range(3):
            n = int(mask[b].sum())
            alone = model(ids[b : b + 1, :n])
            assert torch.allclose(full.logits[b, :n], alone.logits[0], atol=1e-5)
            for a_full, a_alone in zip(full.link_probs, alone.link_probs):
                assert torch.allclose(a_full[b, : n - 1], a_alone[0], atol=1e-6)


@pytest.mark.parametrize("prior", ["constituent", "none"])
@pytest.mark.parametrize("variant", ["paper", "official"])
def test_sdpa_agrees_with_eager(variant, prior):
    model = tiny(constituent_variant=variant, prior=prior)
    ids, mask = batch()
    logits = {}
    for impl in ATTENTION_FUNCTIONS:
        model.config._attn_implementation = impl
        with torch.no_grad():  # the fused CPU path (flash kernel with row LSE)
            logits[impl] = model(ids, mask).logits
    real = mask.bool()
    assert torch.allclose(logits["sdpa"][real], logits["eager"][real], atol=1e-4)


@pytest.mark.parametrize("variant", ["paper", "official"])
def test_sdpa_gradients_match_eager(variant):
    ids, mask = batch()
    labels = ids.masked_fill(mask == 0, -100)
    grads = {}
    for impl in ("eager", "sdpa"):
        model = tiny(constituent_variant=variant)
        model.config._attn_implementation = impl
        model(ids, mask, labels=labels).loss.backward()
        module = model.tree_transformer.layers[0].constituent
        grads[impl] = (module.query.weight.grad, module.key.weight.grad, module.norm.weight.grad)
        assert all(g.abs().sum() > 0 for g in grads[impl])  # gradients reach the constituent module
    for ge, gs in zip(grads["eager"], grads["sdpa"]):
        assert torch.allclose(ge, gs, atol=1e-5)


def test_prior_none_is_plain_attention():
    model = tiny(prior="none")
    model.config._attn_implementation = "eager"
    ids, mask = batch()
    layer = model.tree_transformer.layers[0]
    assert layer.prior is None
    x = model.tree_transformer.embeddings(ids)
    h = layer.attention_norm(x)
    att = layer.attention
    q, k, v = (lin(h).view(3, 9, 2, 16).transpose(1, 2) for lin in (att.query, att.key, att.value))
    plain = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask.bool()[:, None, None, :])
    expected = att.output(plain.transpose(1, 2).reshape(3, 9, 32))
    got, attn = att(h, mask.bool(), None, output_attentions=True)
    assert torch.allclose(got, expected, atol=1e-5)
    scores = (q @ k.transpose(-1, -2) / 4.0).masked_fill(~mask.bool()[:, None, None, :], -math.inf)
    assert torch.allclose(attn, torch.softmax(scores, -1), atol=1e-6)
    assert model(ids, mask).link_probs == ()


@pytest.mark.parametrize("parts", [{}, dict(constituent_diagonal="one", constituent_scale=32.0)])
def test_save_load_round_trip(tmp_path, parts):
    model = tiny(constituent_variant="official", **parts)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    assert isinstance(loaded, TreeTransformerForMaskedLM)
    assert loaded.config._attn_implementation == "eager"
    assert loaded.config.constituent_variant == "official"
    priors = [m for m in loaded.modules() if isinstance(m, ConstituentAttention)]
    assert len(priors) == 3
    assert {(m.scale, m.diagonal) for m in priors} == ({(32.0, "one")} if parts else {(256.0, "official")})
    ids, mask = batch()
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        a, b = model(ids, mask), loaded(ids, mask)
    assert torch.equal(a.logits, b.logits)
    for x, y in zip(a.link_probs, b.link_probs):
        assert torch.equal(x, y)


def test_no_denormals_with_sharp_links():
    # links alternately near 0 and near 1, as a trained prior: C spans the float32 denormal range
    cum = torch.cumsum(torch.tensor([[0.0, -1e-6, -30.0, -1e-6, -30.0, -1e-6, -30.0, -1e-6]]), -1)
    exact = torch.exp(-(cum[:, :, None] - cum[:, None, :]).abs().double())
    assert ((exact > 0) & (exact < torch.finfo(torch.float32).tiny)).any()  # the test is meaningful
    torch.manual_seed(3)
    q, k, v = torch.randn(3, 1, 2, 8, 4).unbind(0)
    q = q * 10  # sharp softmax as well
    out, attn = eager_attention(
        q, k, v, torch.ones(1, 8, dtype=torch.bool), ConstituentPrior(cum), output_attentions=True
    )
    tiny_normal = torch.finfo(torch.float32).tiny
    for t in (out, attn):
        nonzero = t[t != 0].abs()
        assert nonzero.min() >= tiny_normal
    # the model's forward leaves the thread's float state alone (syntaxformer.runtime owns it)
    tiny()(torch.tensor([[1, 2, 3]]))
    assert (torch.tensor([1e-30]) * torch.tensor([1e-10])).item() != 0.0


def test_command_line_sets_flush_to_zero_for_worker_threads():
    # a fresh process: the CLI's process set-up before any tensor work, then a 2-thread product
    import subprocess
    import sys

    code = (
        "from syntaxformer.cli import prepare_process; prepare_process(); import torch; "
        "torch.set_num_threads(2); "
        "x = torch.full((1_000_000,), 1e-20); z = x * x; "
        "print(int(((z != 0) & (z.abs() < torch.finfo(torch.float32).tiny)).sum()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


def test_config_and_registry_errors():
    with pytest.raises(ValueError):
        TreeTransformerConfig(prior="nope")
    with pytest.raises(ValueError):
        TreeTransformerConfig(constituent_variant="x")
    with pytest.raises(ValueError, match="constituent_diagonal"):
        TreeTransformerConfig(constituent_diagonal="zero")
    with pytest.raises(ValueError, match="constituent_scale"):
        TreeTransformerConfig(constituent_scale=-1.0)
    with pytest.raises(ValueError):
        make_config("nope", "tiny", 10)
    with pytest.raises(ValueError):
        make_config("tree-transformer", "huge", 10)
    paper = make_config("tree-transformer", "paper", 100)
    assert (
        paper.num_hidden_layers,
        paper.hidden_size,
        paper.num_attention_heads,
        paper.intermediate_size,
        paper.hidden_dropout_prob,
    ) == (10, 512, 8, 2048, 0.1)
    assert MODELS["tree-transformer"] is TreeTransformerForMaskedLM
    assert set(PRESETS["tree-transformer"]) >= {"paper", "small", "tiny"}
    with pytest.raises(ValueError):
        tiny()(torch.tensor([[1, 2]]), masked_only=True)


def test_long_inputs_beyond_position_table():
    """A table of 8 positions and one of 64, same weights: the same logits on 6 tokens (within the
    small table) and on 20 (beyond it, where the small model extends its sinusoids); the big table's
    rows are the sinusoids of Vaswani et al. (2017, §3.5), computed here in float64."""
    small = tiny(max_position_embeddings=8)
    big = tiny(max_position_embeddings=64)
    big.load_state_dict(small.state_dict())  # the tables are buffers outside the state dict
    table = big.tree_transformer.embeddings.positions
    assert small.tree_transformer.embeddings.positions.shape == (8, 32) and table.shape == (64, 32)
    pos = torch.arange(64, dtype=torch.float64)[:, None]
    angle = pos / 10000 ** (torch.arange(0, 32, 2, dtype=torch.float64) / 32)  # (64, 16): pos / 10000^(2i/d)
    assert torch.allclose(table[:, 0::2].double(), angle.sin(), atol=1e-5)
    assert torch.allclose(table[:, 1::2].double(), angle.cos(), atol=1e-5)
    g = torch.Generator().manual_seed(2)
    for n in (6, 20):
        ids = torch.randint(1, V, (2, n), generator=g)
        with torch.no_grad():
            a, b = small(ids).logits, big(ids).logits
        assert a.shape == (2, n, V) and torch.isfinite(a).all()
        assert torch.equal(a, b), n  # identical: the same sinusoid values, the same operations


@pytest.mark.parametrize("variant", ["paper", "official"])
def test_training_step_sdpa_equals_eager_with_dropout(variant):
    # training mode: attention dropout on; the fused kernel draws the same dropout masks as eager;
    # 6 sentences × 9 tokens > d_model: the constituent module's single-product neighbour scores
    ids, mask = (torch.cat([t, t.flip(0)]) for t in batch())
    labels = ids.masked_fill(mask == 0, -100)
    results = {}
    for impl in ("eager", "sdpa"):
        model = tiny(constituent_variant=variant).train()
        model.config._attn_implementation = impl
        torch.manual_seed(7)
        out = model(ids, mask, labels=labels)
        out.loss.backward()
        results[impl] = out.logits, {n: p.grad for n, p in model.named_parameters()}
    (le, ge), (ls, gs) = results["eager"], results["sdpa"]
    real = mask.bool()
    assert torch.allclose(le[real], ls[real], atol=1e-4)
    assert ge.keys() == gs.keys()
    for name in ge:
        assert torch.allclose(ge[name], gs[name], atol=1e-4), name
    assert gs["tree_transformer.layers.0.constituent.query.weight"].abs().sum() > 0


@pytest.mark.parametrize("flush", [False, True])
def test_constituent_attention_function_gradcheck(flush):
    # the hand-written backward against finite differences (float64, with padding, no dropout)
    from syntaxformer.kernels.attention import BlockwisePriorAttention, padding_bias

    torch.manual_seed(8)
    q, k, v = (torch.randn(2, 2, 5, 3, dtype=torch.float64, requires_grad=True) for _ in range(3))
    key_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    cum = torch.cumsum(-torch.rand(2, 5, dtype=torch.float64), -1).requires_grad_()

    def fn(q, k, v, cum):
        return BlockwisePriorAttention.apply(
            q, k, v, cum, padding_bias(key_mask, q.dtype), 0.0, flush, ConstituentPrior(cum).log_rows
        )

    assert torch.autograd.gradcheck(fn, (q, k, v, cum))
    # and it is the eager product
    out, _ = eager_attention(q, k, v, key_mask, ConstituentPrior(cum))
    assert torch.allclose(fn(q, k, v, cum), out, atol=1e-12)


def test_constituent_attention_function_flushes_denormals():
    # IEEE floats (conftest): the kernel flushes explicitly, as the eager one, gradients included
    from syntaxformer.kernels.attention import BlockwisePriorAttention, padding_bias

    cum = torch.cumsum(torch.tensor([[0.0, -1e-6, -30.0, -1e-6, -30.0, -1e-6, -30.0, -1e-6]]), -1)
    key_mask = torch.ones(1, 8, dtype=torch.bool)
    torch.manual_seed(3)
    q, k, v = torch.randn(3, 1, 2, 8, 4).unbind(0)
    grads = []
    for fused in (False, True):
        leaves = [t.clone().requires_grad_() for t in (q * 10, k, v)]
        if fused:
            out = BlockwisePriorAttention.apply(
                *leaves, cum, padding_bias(key_mask, q.dtype), 0.0, True, ConstituentPrior(cum).log_rows
            )
            nonzero = out[out != 0].abs()
            assert nonzero.min() >= torch.finfo(torch.float32).tiny
        else:
            out, _ = eager_attention(*leaves, key_mask, ConstituentPrior(cum))
        (out * torch.linspace(-1, 1, 4)).sum().backward()
        grads.append([t.grad for t in leaves])
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("prior", ["constituent", "none"])
def test_zero_residual_init_starts_as_the_embeddings(prior, tmp_path):
    model = tiny(prior=prior, residual_init="zero")
    ids, mask = batch()
    base = model.tree_transformer
    with torch.no_grad():
        out = base(ids, mask, output_hidden_states=True)
        embedded = base.embeddings(ids)
    # every untrained layer is the identity: all hidden states equal the embeddings
    for h in out.hidden_states:
        assert torch.equal(h, embedded)
    torch.testing.assert_close(out.last_hidden_state, base.norm(embedded), rtol=0, atol=0)
    # ... and it learns: every zeroed projection gets a gradient from the masked-LM loss
    model.train()
    labels = torch.where(mask.bool(), ids, torch.full_like(ids, -100))
    model(ids, mask, labels=labels).loss.backward()
    for layer in base.layers:
        assert layer.attention.output.weight.grad.abs().sum() > 0
        assert layer.ffn.fc_out.weight.grad.abs().sum() > 0
    # the field survives save/load, and loading keeps the trained weights (not re-zeroed)
    with torch.no_grad():
        base.layers[0].ffn.fc_out.weight.fill_(0.5)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path)
    assert loaded.config.residual_init == "zero"
    assert torch.equal(loaded.tree_transformer.layers[0].ffn.fc_out.weight, base.layers[0].ffn.fc_out.weight)
    assert tiny(prior=prior).tree_transformer.layers[0].attention.output.weight.abs().sum() > 0  # xavier default
    with pytest.raises(ValueError, match="residual_init"):
        tiny(residual_init="ones")
