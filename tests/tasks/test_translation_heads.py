"""Heads of a translation model: gates, Michel's importance, BLEU pruning curves, Voita's gates, the commands.

Tiny models (``translation_config(variant, "tiny", V)``, random weights, no dropout): gate 0 on a head
equals zeroing its columns of the output projection by hand, for the three kinds; gates of 1 leave the
logits bit for bit; the importance equals central finite differences of the loss and the token-weighted
mean over batches; the curves follow the pruning rules (fractions, one head kept per attention module,
lowest importance first); ``prune`` and ``heads`` end to end on a saved tiny model.
"""

from __future__ import annotations

import json

import pytest
import torch

from syntaxformer.analysis.pruning import curve_fractions, reachable_fractions
from syntaxformer.analysis.translation_gates import finetune_with_gates, gates_record
from syntaxformer.analysis.translation_heads import (
    GatedHeads,
    attention_projections,
    pair_batches,
    translation_head_layout,
    translation_importance,
)
from syntaxformer.analysis.translation_pruning import BleuData, measure_bleu, removable_share, translation_curve
from syntaxformer.cli import main
from syntaxformer.data.parallel import build_subwords
from syntaxformer.models.translation import TranslationModel, translation_config
from syntaxformer.tasks.translation_data import EncodedPairs, encode_pairs, wrap_subwords
from syntaxformer.tasks.translator import Translator

V = 40


def tiny_model(variant: str = "baseline", seed: int = 0) -> TranslationModel:
    torch.manual_seed(seed)
    return TranslationModel(translation_config(variant, "tiny", V, dropout=0.0)).eval()


def random_pairs(seed: int = 1, lengths=((3, 4), (5, 2), (7, 6), (4, 5))) -> EncodedPairs:
    g = torch.Generator().manual_seed(seed)
    source = [torch.randint(4, V, (n,), generator=g).tolist() + [2] for n, _ in lengths]
    target = [torch.randint(4, V, (m,), generator=g).tolist() for _, m in lengths]
    return EncodedPairs(source, target)


def logits(model, batch):
    return model(**{k: v for k, v in batch.features.items() if k != "labels"}).logits


# --------------------------------------------------------------------------------------------------
# gates


@pytest.mark.parametrize("variant", ["baseline", "on-lstm-san"])
def test_gates_of_one_leave_the_output_exactly(variant):
    model = tiny_model(variant)
    batch = pair_batches(random_pairs(), 4)[0]
    layout = translation_head_layout(model)
    reference = logits(model, batch)
    with GatedHeads(model, layout.gates()) as hooks:
        assert len(hooks.handles) == layout.layout.layers
        gated = logits(model, batch)
    assert torch.equal(gated, reference)
    assert torch.equal(logits(model, batch), reference)  # hooks removed on exit


@pytest.mark.parametrize("kind", ["encoder", "decoder_self", "cross"])
def test_gate_zero_equals_removing_the_heads_columns_of_the_output_projection(kind):
    model = tiny_model()
    batch = pair_batches(random_pairs(), 4)[0]
    layout = translation_head_layout(model)
    layer, head = 1, 1
    gates = layout.gates()
    gates[kind][layer, head] = 0.0
    with GatedHeads(model, gates):
        gated = logits(model, batch)
    by_hand = tiny_model()
    projection = attention_projections(by_hand)[kind][layer]
    d = projection.head_dim
    with torch.no_grad():
        projection.linear.weight[:, head * d : (head + 1) * d] = 0.0  # the head's input columns
    expected = logits(by_hand, batch)
    torch.testing.assert_close(gated, expected, rtol=0, atol=1e-6)
    assert not torch.allclose(gated, logits(model, batch), atol=1e-4)  # the head mattered


def test_layout_stacks_the_kinds():
    model = tiny_model("on-lstm-san")  # 1 self-attention layer in the encoder, 2 decoder layers
    layout = translation_head_layout(model)
    assert layout.layers == {"encoder": 1, "decoder_self": 2, "cross": 2}
    assert layout.layout.layers == 5 and layout.layout.heads == 2
    assert [layout.name((r, 1)) for r in range(5)] == [
        ("encoder", 0, 1),
        ("decoder_self", 0, 1),
        ("decoder_self", 1, 1),
        ("cross", 0, 1),
        ("cross", 1, 1),
    ]
    assert layout.by_kind([(4, 0), (0, 1), (3, 1), (3, 0)]) == {"encoder": {"0": [1]}, "cross": {"0": [0, 1], "1": [0]}}
    encoder = translation_head_layout(model, ("encoder",))
    assert encoder.layout.layers == 1 and encoder.kinds == ("encoder",)


# --------------------------------------------------------------------------------------------------
# importance


@torch.no_grad()
def plain_loss(model, batch, gates):
    with GatedHeads(model, gates):
        out = logits(model, batch)
    return torch.nn.functional.cross_entropy(out.flatten(0, 1), batch.labels.flatten(), ignore_index=-100)


def test_importance_is_the_absolute_gradient_by_finite_differences():
    model = tiny_model().double()
    pairs = random_pairs()
    batch = pair_batches(pairs, 4)[0]
    layout = translation_head_layout(model)
    importance, n_tokens, loss = translation_importance(model, [batch], layout)
    assert n_tokens == sum(len(t) + 1 for t in pairs.target)
    ones = layout.gates(dtype=torch.float64)
    assert loss == pytest.approx(float(plain_loss(model, batch, ones)), rel=1e-12)
    eps = 1e-4
    for row, head in [(0, 0), (1, 1), (2, 0), (3, 1), (4, 1), (5, 0)]:
        kind, layer, h = layout.name((row, head))
        up, down = layout.gates(dtype=torch.float64), layout.gates(dtype=torch.float64)
        up[kind][layer, h] += eps
        down[kind][layer, h] -= eps
        numeric = (plain_loss(model, batch, up) - plain_loss(model, batch, down)) / (2 * eps)
        assert float(importance[row, head]) == pytest.approx(abs(float(numeric)), rel=1e-5, abs=1e-9)


def test_importance_is_the_token_weighted_mean_over_batches():
    model = tiny_model().double()
    batches = pair_batches(random_pairs(), 2)
    layout = translation_head_layout(model)
    together, n, _ = translation_importance(model, batches, layout)
    parts = [translation_importance(model, [b], layout) for b in batches]
    expected = sum(part * t for part, t, _ in parts) / sum(t for _, t, _ in parts)
    assert n == sum(t for _, t, _ in parts)
    torch.testing.assert_close(together, expected, rtol=1e-12, atol=0)


# --------------------------------------------------------------------------------------------------
# curves


def toy_tokenizer():
    text = ["a man is walking", "ein mann geht", "two dogs play", "zwei hunde spielen"]
    return wrap_subwords(build_subwords(text, 60)), text


def bleu_data(model, tokenizer, sources, targets):
    pairs = encode_pairs(tokenizer, [s.split() for s in sources], [t.split() for t in targets])
    translator = Translator(model, tokenizer, beam=1, batch_size=8)
    return BleuData(translator, pairs, list(targets), translation_head_layout(model))


def test_curve_follows_the_rules_and_the_importance_order():
    tokenizer, _ = toy_tokenizer()
    torch.manual_seed(0)
    model = TranslationModel(translation_config("baseline", "tiny", len(tokenizer), dropout=0.0)).eval()
    data = bleu_data(model, tokenizer, ["a man is walking", "two dogs play"], ["ein mann geht", "zwei hunde spielen"])
    layout = data.full  # 6 modules x 2 heads: at most 6 removable
    fractions, left_out = reachable_fractions(curve_fractions(0.25), layout.layout)
    assert fractions == [0.0, 0.25, 0.5] and left_out == [0.75]
    # importance: head 0 of every module is the less important, module 5's the least of all
    importance = torch.tensor(
        [[0.2, 1.0], [0.3, 1.0], [0.4, 1.0], [0.5, 1.0], [0.6, 1.0], [0.1, 1.0]], dtype=torch.float64
    )
    points = translation_curve(layout, "importance", fractions, data, importance=importance)
    assert [p["n_removed"] for p in points] == [0, 3, 6]
    # normalised head-0 scores a / sqrt(a^2 + 1): rows 5, 0, 1 are the three lowest
    assert points[1]["removed_per_layer"] == [1, 1, 0, 0, 0, 1]
    assert points[1]["removed"] == {"encoder": {"0": [0], "1": [0]}, "cross": {"1": [0]}}
    assert points[2]["removed_per_layer"] == [1] * 6  # one head kept per module
    assert points[2]["removed_per_kind"] == {"encoder": 2, "decoder_self": 2, "cross": 2}
    assert points[0]["bleu"] == measure_bleu(data, [])["bleu"]
    runs = [translation_curve(layout, "random", fractions, data, seed=s) for s in (0, 0, 1)]
    assert runs[0] == runs[1]
    assert all(p["removed_per_layer"] == [1] * 6 for p in (r[2] for r in runs))


def test_removable_share_is_the_first_crossing():
    points = [
        dict(fraction_removed=0.0, n_removed=0, bleu=30.0),
        dict(fraction_removed=0.25, n_removed=2, bleu=29.6),
        dict(fraction_removed=0.5, n_removed=4, bleu=29.4),
        dict(fraction_removed=0.75, n_removed=6, bleu=29.9),  # a recovery after the crossing does not count
    ]
    assert removable_share(points, 30.0) == dict(fraction_removed=0.25, n_removed=2, bleu=29.6)
    assert removable_share(points, 30.0, tolerance=1.0)["n_removed"] == 6
    assert removable_share(points, 40.0)["n_removed"] == 0


# --------------------------------------------------------------------------------------------------
# Voita's gates


def test_gates_close_under_a_strong_penalty_and_the_model_is_not_changed():
    model = tiny_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    layout = translation_head_layout(model, ("encoder",))
    pairs = random_pairs(lengths=((3, 4), (5, 2)) * 4)
    tuned, gates, log = finetune_with_gates(model, layout, pairs, l0=100.0, steps=30, gate_lr=0.5, max_tokens=64)
    record = gates_record(gates, layout)
    assert record["n_heads"] == 4 and record["n_kept"] == 0 and record["layers_without_heads"] == [0, 1]
    assert log[-1]["expected_open"] < log[0]["expected_open"]
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    _, open_gates_, _ = finetune_with_gates(model, layout, pairs, l0=0.0, steps=3, lr=0.0, gate_lr=0.0, max_tokens=64)
    assert gates_record(open_gates_, layout)["n_kept"] == 4


# --------------------------------------------------------------------------------------------------
# the commands


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("translation")
    tokenizer, _ = toy_tokenizer()
    torch.manual_seed(0)
    model = TranslationModel(translation_config("baseline", "tiny", len(tokenizer), dropout=0.0))
    model.save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    (folder / "val.en").write_text("a man is walking\ntwo dogs play\na dog is walking\n")
    (folder / "val.de").write_text("ein mann geht\nzwei hunde spielen\nein hund geht\n")
    return folder


def test_prune_on_a_tiny_translation_model(saved_model, capsys):
    d = saved_model
    out = d / "prune"
    argv = ["prune", "--model", str(d / "model"), "--out", str(out), "--source", str(d / "val.en")]
    argv += ["--target", str(d / "val.de"), "--step", "0.25", "--seeds", "2", "--curves", "all", "encoder"]
    argv += [
        "--gates",
        "0",
        "--gate-steps",
        "2",
        "--train-source",
        str(d / "val.en"),
        "--train-target",
        str(d / "val.de"),
    ]
    assert main(argv + ["--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    report = json.loads((out / "prune.json").read_text())
    assert report["task"] == "translation" and report["random_seeds"] == [0, 1] and report["search"] == "greedy"
    assert report["data"]["pairs"] == 3 and report["code"]["version"]
    assert report["curves"]["all"]["fractions"] == [0.0, 0.25, 0.5] and report["curves"]["all"]["n_heads"] == 12
    assert report["curves"]["encoder"]["fractions"] == [0.0, 0.25, 0.5] and report["curves"]["encoder"]["n_heads"] == 4
    random = report["curves"]["all"]["orders"]["random"]
    assert len(random["runs"]) == 2 and "bleu_sd" in random["points"][0]
    assert summary["curves"]["encoder"]["importance"]["bleu"][0] == report["full_bleu"]
    assert set(report["importance"]["kinds"]) == {"encoder", "decoder_self", "cross"}
    gates = json.loads((out / "gates.json").read_text())
    assert gates["lambdas"] == [0.0] and gates["results"][0]["n_heads"] == 4
    closed = 4 - gates["results"][0]["n_kept"]
    assert gates["results"][0]["importance_order"]["n_removed"] == min(closed, 2)
    assert gates["settings"]["steps"] == 2
    assert (out / "prune-all.png").is_file() and (out / "prune-encoder.svg").is_file()


def test_heads_on_a_tiny_translation_model(saved_model, capsys):
    d = saved_model
    argv = ["heads", "--model", str(d / "model"), "--out", str(d / "heads"), "--source", str(d / "val.en")]
    assert main(argv + ["--target", str(d / "val.de")]) == 0
    report = json.loads((d / "heads" / "heads.json").read_text())
    for kind in ("encoder", "decoder_self", "cross"):
        normalised = torch.tensor(report["importance"]["kinds"][kind]["normalised"])
        assert normalised.shape == (2, 2)
        torch.testing.assert_close(normalised.pow(2).sum(-1), torch.ones(2, dtype=normalised.dtype), atol=1e-3, rtol=0)
    assert main(["heads", "--model", str(d / "model"), "--out", str(d / "h2")]) == 1
    assert "give --source and --target" in capsys.readouterr().err
