"""StructFormer (syntaxformer/models/structformer.py): shapes, the dependency distribution against
a brute-force sum over constituents, hand-built trees, padding invariance, gradients, save/load."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from syntaxformer.decoding.spans import split_by_distance
from syntaxformer.models.structformer import (
    StructFormerConfig,
    StructFormerForMaskedLM,
    calibrate_distances,
    dependency_distribution,
)

torch.set_num_threads(1)


def tiny_config(**overrides) -> StructFormerConfig:
    values = dict(
        vocab_size=40,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        n_parser_layers=2,
        conv_size=3,
        pad_token_id=0,
    )
    values.update(overrides)
    return StructFormerConfig(**values)


def tiny_model(seed: int = 0, **overrides) -> StructFormerForMaskedLM:
    torch.manual_seed(seed)
    return StructFormerForMaskedLM(tiny_config(**overrides)).eval()


# ------------------------------------------------------------------------------------------------
# Brute force, written from the paper's definitions (§4.3) with Python loops: O(n^4) per sentence.
# ------------------------------------------------------------------------------------------------


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def brute_force_dependency(tau: list[float], delta: list[float], s_d: float, s_h: float):
    """p_D(j|i) (n x n, zero diagonal) and the root mass p(i heads C(x_i)) for one sentence."""
    n = len(delta)

    def p_left_le(i, j):  # P(l_i <= j)
        if j < 0:
            return 0.0
        if j >= i:
            return 1.0
        return _sigmoid(s_d * (delta[i] - max(tau[j:i])))

    def p_right_ge(i, j):  # P(r_i >= j)
        if j >= n:
            return 0.0
        if j <= i:
            return 1.0
        return _sigmoid(s_d * (delta[i] - max(tau[i:j])))

    p = [[0.0] * n for _ in range(n)]
    root = [0.0] * n
    for i in range(n):
        for l in range(i + 1):
            p_l = p_left_le(i, l) - p_left_le(i, l - 1)
            for r in range(i, n):
                p_r = p_right_ge(i, r) - p_right_ge(i, r + 1)
                z = sum(math.exp(s_h * delta[k]) for k in range(l, r + 1))
                for j in range(l, r + 1):
                    mass = p_l * p_r * math.exp(s_h * delta[j]) / z
                    if j == i:
                        root[i] += mass
                    else:
                        p[i][j] += mass
    return p, root


sentences = st.integers(1, 6).flatmap(
    lambda n: st.tuples(
        st.lists(st.floats(-3, 3), min_size=n - 1, max_size=n - 1), st.lists(st.floats(-3, 3), min_size=n, max_size=n)
    )
)


@settings(max_examples=40, deadline=None)
@given(batch=st.lists(sentences, min_size=1, max_size=3), s_d=st.floats(0.1, 5), s_h=st.floats(0.1, 5))
def test_dependency_distribution_equals_brute_force_sum_over_constituents(batch, s_d, s_h):
    n_max = max(len(h) for _, h in batch)
    distances = (
        torch.zeros(len(batch), n_max - 1, dtype=torch.float64)
        if n_max > 1
        else torch.zeros(len(batch), 0, dtype=torch.float64)
    )
    heights = torch.zeros(len(batch), n_max, dtype=torch.float64)
    mask = torch.zeros(len(batch), n_max, dtype=torch.bool)
    for b, (tau, delta) in enumerate(batch):
        n = len(delta)
        distances[b, : n - 1] = torch.tensor(tau, dtype=torch.float64)
        distances[b, n - 1 :] = 7.0  # garbage at padded gaps: must not matter
        heights[b, :n] = torch.tensor(delta, dtype=torch.float64)
        heights[b, n:] = 9.0  # garbage at padding: must not matter
        mask[b, :n] = True
    p_dep, p_root = dependency_distribution(distances, heights, mask, s_d, s_h)
    for b, (tau, delta) in enumerate(batch):
        n = len(delta)
        expected, expected_root = brute_force_dependency(tau, delta, s_d, s_h)
        assert torch.allclose(p_dep[b, :n, :n], torch.tensor(expected, dtype=torch.float64), atol=1e-10)
        assert torch.allclose(p_root[b, :n], torch.tensor(expected_root, dtype=torch.float64), atol=1e-10)
        assert (p_dep[b, n:] == 0).all() and (p_dep[b, :, n:] == 0).all() and (p_root[b, n:] == 0).all()


def test_rows_sum_to_at_most_one_and_diagonal_is_zero():
    torch.manual_seed(1)
    distances, heights = torch.randn(4, 11) * 3, torch.randn(4, 12) * 3
    mask = torch.ones(4, 12, dtype=torch.bool)
    mask[1, 7:] = False
    mask[3, 1:] = False
    p_dep, p_root = dependency_distribution(distances, heights, mask, 2.0, 3.0)
    rows = p_dep.sum(-1)
    assert (p_dep.diagonal(dim1=1, dim2=2) == 0).all()
    assert (p_dep >= 0).all() and (rows <= 1 + 1e-12).all()
    assert torch.allclose((rows + p_root)[mask], torch.ones(int(mask.sum()), dtype=torch.float64), atol=1e-12)
    assert p_root[3, 0] == pytest.approx(1.0)  # a one-word sentence is its own root


# ------------------------------------------------------------------------------------------------
# Hand-built tree: "the cat sat on mats"
#   constituency ((the cat) (sat (on mats)))  dependency the->cat, cat->sat, sat=root, on->sat,
#   mats->on.  Distances (gaps the|cat, cat|sat, sat|on, on|mats) = 1, 4, 3, 1: top split after
#   "cat", then after "sat". Heights the 2, cat 5, sat 6, on 3.5, mats 2:
#   the: 1 < 2 < 4 -> C = [the cat], highest = cat.   cat: 5 > 4, 3, 1 -> C = whole, highest = sat.
#   sat: highest of the sentence -> heads itself -> root.  on: 3.5 > 3, < 4 -> C = [sat on mats],
#   highest = sat.  mats: 1 < 2 < 3 -> C = [on mats], highest = on.
# ------------------------------------------------------------------------------------------------

TAU = [1.0, 4.0, 3.0, 1.0]
DELTA = [2.0, 5.0, 6.0, 3.5, 2.0]
HEADS = [2, 3, 0, 3, 4]  # 1-based, 0 = root (CoNLL-U)


def test_hand_set_distances_and_heights_decode_to_the_known_trees():
    distances, heights = torch.tensor([TAU]), torch.tensor([DELTA])
    mask = torch.ones(1, 5, dtype=torch.bool)
    calibrated = calibrate_distances(distances, heights, mask)
    assert torch.equal(calibrated, distances)  # every margin is negative: no shift
    assert split_by_distance(calibrated[0].tolist()) == {(0, 5), (0, 2), (2, 5), (3, 5)}

    p_dep, p_root = dependency_distribution(calibrated, heights, mask, 20.0, 20.0)
    with_root = torch.cat([p_root[0, :, None], p_dep[0]], dim=1)  # column 0 = root
    assert with_root.argmax(dim=1).tolist() == HEADS
    assert (with_root.max(dim=1).values > 0.99).all()  # nearly hard


def test_tree_decoders_recover_the_hand_built_dependency_tree():
    dependency = pytest.importorskip("syntaxformer.decoding.dependency")
    distances, heights = torch.tensor([TAU]), torch.tensor([DELTA])
    mask = torch.ones(1, 5, dtype=torch.bool)
    p_dep, p_root = dependency_distribution(distances, heights, mask, 20.0, 20.0)
    scores = dependency.head_scores(p_dep[0], p_root[0])
    assert dependency.chu_liu_edmonds(scores) == HEADS
    assert dependency.argmax_heads(p_dep[0], heights[0]) == HEADS


def test_calibration_is_per_sentence_and_removes_the_second_root():
    # "on" lowered to 2.5 < tau(sat|on) = 3: [on mats] would be a constituent whose head has no
    # parent; margin = min(3, +inf) - max(2.5, 2) = 0.5 is subtracted from that sentence only.
    distances = torch.tensor([TAU, TAU])
    heights = torch.tensor([DELTA, [2.0, 5.0, 6.0, 2.5, 2.0]])
    mask = torch.ones(2, 5, dtype=torch.bool)
    calibrated = calibrate_distances(distances, heights, mask)
    assert calibrated[0].tolist() == TAU
    assert calibrated[1].tolist() == [0.5, 3.5, 2.5, 0.5]
    # after calibration "on" reaches "sat" with probability 1/2 (sigmoid(0)), before with ~0
    p_before, _ = dependency_distribution(distances[1:], heights[1:], mask[1:], 20.0, 20.0)
    p_after, _ = dependency_distribution(calibrated[1:], heights[1:], mask[1:], 20.0, 20.0)
    assert p_before[0, 3, 2] < 1e-4
    assert p_after[0, 3, 2] == pytest.approx(0.5, abs=1e-4)


def test_calibration_ignores_padding():
    distances = torch.tensor([TAU + [-50.0, 80.0]])
    heights = torch.tensor([DELTA + [100.0, -100.0]])
    mask = torch.tensor([[True] * 5 + [False] * 2])
    assert calibrate_distances(distances, heights, mask)[0, :4].tolist() == TAU


# ------------------------------------------------------------------------------------------------
# Memory: no tensor of the dependency distribution has more than B * N^2 elements.
# ------------------------------------------------------------------------------------------------


class _LargestTensor(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def test_dependency_distribution_uses_quadratic_memory():
    b, n = 2, 48
    distances = torch.randn(b, n - 1, requires_grad=True)
    heights = torch.randn(b, n, requires_grad=True)
    mask = torch.ones(b, n, dtype=torch.bool)
    with _LargestTensor() as probe:
        p_dep, p_root = dependency_distribution(distances, heights, mask, 1.0, 1.0)
        (p_dep.sum() + p_root.sum()).backward()
    assert probe.largest <= b * n * n  # the public code builds b * n^3 (and more)
    assert heights.grad.abs().sum() > 0 and distances.grad.abs().sum() > 0


# ------------------------------------------------------------------------------------------------
# The model
# ------------------------------------------------------------------------------------------------


def test_shapes():
    model = tiny_model()
    ids = torch.randint(1, 40, (3, 7))
    labels = torch.full_like(ids, -100)
    labels[0, 1], labels[2, 5], labels[2, 6] = 4, 5, 6
    out = model(ids, labels=labels, output_attentions=True, output_dependency=True)
    assert out.logits.shape == (3, 7, 40)
    assert out.distances.shape == (3, 6) and out.heights.shape == (3, 7)
    assert out.dependency_probs.shape == (3, 7, 7) and out.root_probs.shape == (3, 7)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (3, 4, 7, 7)
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    masked = model(ids, labels=labels, masked_only=True)
    assert masked.logits.shape == (3, 40)
    assert masked.dependency_probs is None and masked.attentions is None
    # masked_only computes the same loss as the full logits
    assert masked.loss.item() == pytest.approx(out.loss.item(), rel=1e-5)
    assert torch.allclose(masked.logits, out.logits[labels != -100], atol=1e-5)


def test_a_batch_of_one_word_sentences():
    out = tiny_model()(torch.tensor([[5], [7]]), output_dependency=True)
    assert out.distances.shape == (2, 0) and out.logits.shape == (2, 1, 40)
    assert out.dependency_probs.tolist() == [[[0.0]], [[0.0]]]
    assert out.root_probs.tolist() == [[1.0], [1.0]]


def test_padding_never_changes_real_tokens():
    model = tiny_model(seed=3)
    short = torch.tensor([[5, 9, 13, 2, 7]])
    alone = model(short, output_dependency=True)
    other = torch.tensor([[3, 4, 5, 6, 7, 8, 9, 10]])
    garbage = torch.tensor([[31, 17, 22]])  # not even pad ids: the mask decides
    batch = torch.cat([torch.cat([short, garbage], dim=1), other])
    mask = torch.tensor([[1] * 5 + [0] * 3, [1] * 8])
    padded = model(batch, attention_mask=mask, output_dependency=True)
    assert torch.allclose(padded.logits[0, :5], alone.logits[0], atol=1e-5)
    assert torch.allclose(padded.distances[0, :4], alone.distances[0], atol=1e-6)
    assert torch.allclose(padded.heights[0, :5], alone.heights[0], atol=1e-6)
    assert torch.allclose(padded.dependency_probs[0, :5, :5], alone.dependency_probs[0], atol=1e-9)
    assert (padded.dependency_probs[0, :, 5:] == 0).all()  # padding is never a parent
    assert (padded.dependency_probs[0, 5:] == 0).all()
    assert torch.isinf(padded.distances[0, 4:]).all() and torch.isinf(padded.heights[0, 5:]).all()
    # without an attention mask, pad_token_id marks the padding
    by_id = model(torch.cat([short, torch.zeros(1, 3, dtype=torch.long)], dim=1))
    assert torch.allclose(by_id.logits[0, :5], alone.logits[0], atol=1e-5)


def test_gradients_reach_the_parser_network():
    model = tiny_model(seed=4).train()
    ids = torch.randint(1, 40, (2, 9))
    labels = torch.where(torch.rand(2, 9) < 0.5, ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]
    model(ids, labels=labels, masked_only=True).loss.backward()
    parser = model.structformer.parser
    for name, param in [
        ("conv", parser.convs[0].weight),
        ("distance", parser.distance_out.weight),
        ("height", parser.height_out.weight),
        ("distance scale", parser.log_distance_scale),
        ("height scale", parser.log_height_scale),
        ("relation weights", model.structformer.encoder.layers[0].attention.relation_logits),
    ]:
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_no_denormal_attention_weights_with_a_sharp_parser():
    model = tiny_model(seed=5)
    with torch.no_grad():
        model.structformer.parser.log_distance_scale.fill_(6.0)
        model.structformer.parser.log_height_scale.fill_(6.0)
    out = model(torch.randint(1, 40, (2, 20)), output_attentions=True)
    for attn in out.attentions:
        positive = attn[attn > 0]
        assert positive.numel() > 0 and positive.min() >= torch.finfo(torch.float32).tiny


def test_save_and_load_through_the_auto_classes(tmp_path):
    from transformers import AutoModelForMaskedLM

    import syntaxformer  # noqa: F401  (registers the Auto classes)

    model = tiny_model(seed=6, relations=["head", "child", "sibling"], weight_act="sigmoid")
    model.save_pretrained(tmp_path)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, StructFormerForMaskedLM)
    assert loaded.config.relations == ["head", "child", "sibling"]
    assert loaded.lm_head.weight.data_ptr() == loaded.structformer.embeddings.weight.data_ptr()
    saved, back = model.state_dict(), loaded.state_dict()
    assert saved.keys() == back.keys() and all(torch.equal(saved[k], back[k]) for k in saved)
    ids = torch.randint(1, 40, (2, 8))
    # same parameters; the loaded (memory-mapped) tensors may take another CPU kernel path, which
    # can change float32 summation order (seen: 2.4e-7 apart on one machine)
    torch.testing.assert_close(loaded(ids).logits, model(ids).logits, rtol=0, atol=1e-6)


def test_config_rejects_bad_values():
    with pytest.raises(ValueError):
        StructFormerConfig(relations=("head", "cousin"))
    with pytest.raises(ValueError):
        StructFormerConfig(hidden_size=30, num_attention_heads=4)
    with pytest.raises(ValueError):
        tiny_model()(torch.ones(1, 3, dtype=torch.long), masked_only=True)


def test_registry_presets_build_the_model():
    from syntaxformer.models import MODELS, PRESETS, make_config

    assert MODELS["structformer"] is StructFormerForMaskedLM
    assert set(PRESETS["structformer"]) == {"paper", "small", "mini", "tiny"}
    mini = make_config("structformer", "mini", vocab_size=100)
    assert (mini.num_hidden_layers, mini.hidden_size, mini.num_attention_heads, mini.intermediate_size) == (
        4,
        128,
        4,
        512,
    )
    paper = make_config("structformer", "paper", vocab_size=10000)
    assert (
        paper.num_hidden_layers,
        paper.hidden_size,
        paper.num_attention_heads,
        paper.intermediate_size,
        paper.n_parser_layers,
        paper.conv_size,
        paper.hidden_dropout_prob,
    ) == (8, 512, 8, 2048, 3, 9, 0.1)
    torch.manual_seed(0)
    model = MODELS["structformer"](make_config("structformer", "tiny", vocab_size=30))
    ids = torch.randint(1, 30, (2, 6))
    labels = torch.where(torch.rand(2, 6) < 0.5, ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]
    # the trainer's call: positional (input_ids, attention_mask, labels), masked_only
    assert torch.isfinite(model(ids, torch.ones_like(ids), labels, masked_only=True).loss)
