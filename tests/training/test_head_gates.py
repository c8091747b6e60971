"""Hard-concrete head gates (Louizos et al. 2018; Voita et al. 2019; DESIGN.md §3.5): the gate
equations, determinism at test time, pruning the closed heads, fine-tuning with ``--head-gates``."""

from __future__ import annotations

import json
import math

import pytest
import torch

from syntaxformer.blocks.hard_concrete import (
    GAMMA,
    LOUIZOS_TEMPERATURE,
    TEMPERATURE,
    ZETA,
    HeadGates,
    binarise,
    deterministic_gates,
    l0_penalty,
    probability_closed,
    sample_gates,
)
from syntaxformer.cli import main as cli_main
from syntaxformer.models import MODELS, make_config
from syntaxformer.tasks.finetune import GatedMaskedLM

# ----------------------------------------------------------------------------------------- the equations


@pytest.mark.parametrize("temperature", [TEMPERATURE, LOUIZOS_TEMPERATURE])
def test_closed_form_probability_matches_the_frequency_of_exact_zeros(temperature):
    n = 100_000
    log_alpha = torch.tensor([-2.0, -0.5, 0.0, 0.7, 2.5], dtype=torch.float64)
    generator = torch.Generator().manual_seed(0)
    samples = sample_gates(log_alpha.expand(n, -1), temperature, generator=generator)  # (n, 5)
    frequency = (samples == 0.0).double().mean(0)
    p = probability_closed(log_alpha, temperature)
    sigma = torch.sqrt(p * (1 - p) / n)
    assert torch.all((frequency - p).abs() <= 3 * sigma), (frequency, p, 3 * sigma)
    # exact ones occur too, and every sample lies in [0, 1]
    assert samples.min() == 0.0 and samples.max() == 1.0
    assert float((samples == 1.0).double().mean()) > 0.05


def test_closed_form_values_penalty_and_its_gradient():
    # P(g = 0) = sigmoid(beta * log(-gamma / zeta) - log alpha)
    beta = TEMPERATURE
    expected = 1.0 / (1.0 + math.exp(-(beta * math.log(0.1 / 1.1) - 0.0)))
    assert expected == pytest.approx(0.311888, abs=1e-6)  # 1 / (1 + exp(0.33 ln 11))
    log_alpha = torch.tensor([0.0, 1.0, -1.0], dtype=torch.float64, requires_grad=True)
    p = probability_closed(log_alpha, beta)
    assert float(p[0].detach()) == pytest.approx(expected, abs=1e-12)
    present = torch.tensor([True, True, False])
    penalty = l0_penalty(log_alpha, beta, present=present)
    assert float(penalty.detach()) == pytest.approx(float((1 - p[:2].detach()).sum()), abs=1e-12)
    penalty.backward()
    p = p.detach()
    # d(1 - P)/d log alpha = P (1 - P); no gradient where the gate is not counted
    assert torch.allclose(log_alpha.grad, torch.stack([p[0] * (1 - p[0]), p[1] * (1 - p[1]), p.new_zeros(())]))
    with pytest.raises(ValueError, match="negative"):
        probability_closed(log_alpha, beta, gamma=0.0)


def test_deterministic_gate_and_binarisation():
    log_alpha = torch.tensor([-6.0, -2.0, 0.0, 2.0, 6.0])
    g = deterministic_gates(log_alpha)
    expected = torch.clamp(torch.sigmoid(log_alpha) * (ZETA - GAMMA) + GAMMA, 0, 1)
    assert torch.equal(g, expected)
    assert g[0] == 0.0 and g[-1] == 1.0 and g[2] == pytest.approx(0.5)
    # log alpha = 0 gives exactly 0.5: not above the threshold, closed
    assert binarise(g).tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]


# ----------------------------------------------------------------------------------------- gated models

CASES = [
    ("tree-transformer", dict(constituent_variant="official")),
    ("tree-transformer", dict(prior="none")),
    ("structformer", dict()),
]


def _gated(name, overrides, log_alpha):
    torch.manual_seed(0)
    model = MODELS[name](make_config(name, "mini", 40, **overrides))  # 4 layers x 4 heads, dropout 0.1
    model.prune_heads({1: [2]})  # a head pruned before gating: its gate counts nowhere
    present = torch.ones(4, 4, dtype=torch.bool)
    present[1, 2] = False
    gates = HeadGates(present)
    with torch.no_grad():
        gates.log_alpha.copy_(log_alpha)
    return GatedMaskedLM(model, gates)


def _inputs():
    torch.manual_seed(1)
    ids = torch.randint(5, 40, (3, 11))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    return ids, mask


@pytest.mark.parametrize("name,overrides", CASES)
def test_output_is_deterministic_at_test_time_and_sampled_in_training(name, overrides):
    ids, mask = _inputs()
    gated = _gated(name, overrides, torch.zeros(4, 4))  # every gate half open: samples vary a lot
    gated.eval()
    with torch.no_grad():
        first, second = gated(ids, mask).logits, gated(ids, mask).logits
        reference = gated.model(ids, mask, head_mask=deterministic_gates(torch.zeros(4, 4))).logits
    assert torch.equal(first, second)
    assert torch.equal(first, reference)
    gated.train()
    gated.model.eval()  # no dropout: only the gates are random
    with torch.no_grad():
        a, b = gated(ids, mask).logits, gated(ids, mask).logits
    assert not torch.allclose(a, b, atol=1e-3)


@pytest.mark.parametrize("name,overrides", CASES)
def test_pruning_the_closed_heads_leaves_the_output_unchanged(name, overrides):
    ids, mask = _inputs()
    real = mask.bool()
    log_alpha = torch.tensor(
        [
            [6.0, -6.0, 6.0, -6.0],  # two open, two closed
            [-6.0, 6.0, 0.0, 6.0],  # (head 2 pruned before)
            [-6.0, -6.0, -6.0, -5.0],  # every gate closed: one head kept, silenced
            [6.0, 6.0, 6.0, -6.0],
        ]
    )
    gated = _gated(name, overrides, log_alpha).eval()
    assert gated.gates.deterministic().unique().tolist() == [0.0, 1.0]
    with torch.no_grad():
        before = gated(ids, mask).logits
        pruned, record = gated.finalise()
        after = pruned(ids, mask).logits
    assert torch.allclose(before[real], after[real], atol=1e-5), (before - after)[real].abs().max()
    assert record["kept_per_layer"] == [2, 2, 0, 3] and record["n_kept"] == 7 and record["n_heads"] == 15
    assert record["closed"] == {"0": [1, 3], "1": [0], "2": [0, 1, 2], "3": [3]}
    assert record["silenced"] == {"2": [3]} and record["max_binarisation_change"] == 0.0
    assert pruned.config.pruned_heads == {0: [1, 3], 1: [0, 2], 2: [0, 1, 2], 3: [3]}
    assert [a.num_heads for a in pruned.attention_modules()] == [2, 2, 1, 3]
    assert gated.model.config.pruned_heads == {1: [2]}  # the gated model itself is unchanged


@pytest.mark.parametrize("name,overrides", CASES[:1] + CASES[2:])
def test_with_fractional_gates_pruning_the_closed_heads_equals_masking_them(name, overrides):
    ids, mask = _inputs()
    real = mask.bool()
    log_alpha = torch.tensor(
        [[1.0, -6.0, 0.3, 6.0], [-6.0, 0.5, 0.0, -0.2], [2.0, -6.0, 1.0, -1.0], [0.1, 0.2, -6.0, 6.0]]
    )
    gated = _gated(name, overrides, log_alpha).eval()
    g = gated.gates.deterministic()
    assert ((g > 0) & (g < 1)).sum() >= 6
    closed = {
        layer: [h for h in range(4) if g[layer, h] == 0.0 and gated.gates.present[layer, h]] for layer in range(4)
    }
    with torch.no_grad():
        before = gated(ids, mask).logits
        gated.model.prune_heads({k: v for k, v in closed.items() if v})
        after = gated.model(ids, mask, head_mask=g).logits
    assert torch.allclose(before[real], after[real], atol=1e-5)


# ----------------------------------------------------------------------------------------- fine-tuning


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    from syntaxformer.data.corpus import load_corpus

    path = tmp_path_factory.mktemp("corpus") / "ptb-sample-300.txt"
    path.write_text("\n".join(" ".join(s) for s in load_corpus("ptb-sample")[:300]) + "\n")
    return path


@pytest.fixture(scope="module")
def source(tmp_path_factory, ptb_gold):
    """An untrained tiny Tree Transformer with 4 heads in each of its 3 layers, and its tokenizer."""
    from syntaxformer.data.tokenization import build_word_tokenizer, save_tokenizer

    tokenizer = build_word_tokenizer([tree.leaves() for tree in ptb_gold])
    torch.manual_seed(0)
    model = MODELS["tree-transformer"](make_config("tree-transformer", "tiny", len(tokenizer), num_attention_heads=4))
    folder = tmp_path_factory.mktemp("source")
    model.save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    return folder


GATE_RUN = dict(
    head_gates=True,
    gate_l0=2.0,
    gate_lr=0.5,
    gate_init=0.5,
    batch_size=16,
    lr=1e-3,
    save_every=3,
    eval_every=0,
    log_every=2,
    threads=1,
    quiet=True,
    seed=2,
)


def test_penalty_is_added_to_the_mlm_loss_and_gradients_reach_the_gates(source, small_corpus, tmp_path):
    from syntaxformer.tasks.finetune import FineTuneTrainer
    from syntaxformer.tasks.language_model import TrainArguments

    args = TrainArguments(
        out=str(tmp_path / "run"), init_from=str(source), corpus=str(small_corpus), max_steps=1, **GATE_RUN
    )
    trainer = FineTuneTrainer(args)
    trainer.build()
    assert trainer.args.model == "tree-transformer" and trainer.args.tokenizer == str(source)
    assert [g.get("lr") for g in trainer.optimizer.param_groups] == [1e-3, 0.5]
    batch = trainer.valid_batches[0]
    torch.manual_seed(5)
    loss = trainer.training_loss(trainer.model, batch)
    torch.manual_seed(5)
    mlm = trainer.model_loss(trainer.model, batch)
    penalty = trainer.model.gates.penalty().detach()
    assert float(loss.detach()) == pytest.approx(float(mlm.detach()) + 2.0 * float(penalty), abs=1e-5)
    assert float(penalty) == pytest.approx(12 * (1 - float(probability_closed(torch.tensor(0.5)))), abs=1e-5)
    mlm.backward()
    torch.manual_seed(5)
    sampled = trainer.model.gates()  # the same sample (the forward pass draws the gates first)
    inside = (sampled > 0) & (sampled < 1)
    assert inside.any() and not inside.all()
    grad = trainer.model.gates.log_alpha.grad
    # the MLM loss reaches every gate that was not clipped to 0 or 1, and only those
    assert torch.all(grad[inside] != 0) and torch.all(grad[~inside] == 0)


def test_fine_tuning_with_gates_saves_the_pruned_model_and_resumes(source, small_corpus, tmp_path):
    from safetensors.torch import load_file

    from syntaxformer.parsing import load_model
    from syntaxformer.tasks.run import train

    out, straight = tmp_path / "gated", tmp_path / "straight"
    train(out=str(out), init_from=str(source), corpus=str(small_corpus), max_steps=4, **GATE_RUN)
    train(out=str(out), init_from=str(source), corpus=str(small_corpus), max_steps=8, resume=True, **GATE_RUN)
    train(out=str(straight), init_from=str(source), corpus=str(small_corpus), max_steps=8, **GATE_RUN)
    record = json.loads((out / "training.json").read_text())
    gates = json.loads((out / "gates.json").read_text())
    assert record["steps"] == 8 and record["resumed_from_steps"] == [4]
    # the resumed run ends where the uninterrupted one does: the same gates and the same saved weights
    assert gates == json.loads((straight / "gates.json").read_text())
    resumed, uninterrupted = load_file(out / "model.safetensors"), load_file(straight / "model.safetensors")
    assert resumed.keys() == uninterrupted.keys()
    for name in resumed:
        assert torch.equal(resumed[name], uninterrupted[name]), name
    assert record["init_from"]["folder"] == str(source) and record["arguments"]["gate_l0"] == 2.0
    head_gates = record["head_gates"]
    assert head_gates["n_kept"] == gates["n_kept"] == sum(gates["kept_per_layer"])
    # lambda = 2 nats per open head against a tiny untrained model's loss: heads close
    assert gates["n_kept"] < 12
    closed = {int(k): v for k, v in gates["closed"].items()}
    model, tokenizer, _ = load_model(out)
    assert model.config.pruned_heads == closed
    assert [a.num_heads for a in model.attention_modules()] == [4 - len(closed.get(l, [])) for l in range(3)]
    assert len(tokenizer) == len(load_model(source)[1])
    # the saved model is the pruned one: its validation loss is the one recorded, recomputed here as the
    # float64 cross-entropy of its logits at the masked validation tokens (the run's own batches, rebuilt)
    from syntaxformer.tasks.finetune import FineTuneTrainer
    from syntaxformer.tasks.language_model import TrainArguments

    rebuilt = FineTuneTrainer(
        TrainArguments(
            out=str(tmp_path / "rebuilt"), init_from=str(source), corpus=str(small_corpus), max_steps=8, **GATE_RUN
        )
    )
    rebuilt.build()
    assert rebuilt.valid_batches
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for batch in rebuilt.valid_batches:
            inputs, attention_mask, labels = batch.input_ids, batch.attention_mask, batch.labels
            logits = model(input_ids=inputs, attention_mask=attention_mask).logits.double()  # (B, N, V)
            scored = labels != -100
            total += float(torch.nn.functional.cross_entropy(logits[scored], labels[scored], reduction="sum"))
            count += int(scored.sum())
    assert head_gates["pruned_valid_loss"] == pytest.approx(total / count, abs=1e-5)


def test_fine_tuning_without_gates_starts_from_the_folder(source, small_corpus, tmp_path):
    from safetensors.torch import load_file

    from syntaxformer.tasks.run import train

    out = train(
        out=str(tmp_path / "ft"),
        init_from=str(source),
        corpus=str(small_corpus),
        max_steps=1,
        lr=1e-9,
        batch_size=16,
        threads=1,
        quiet=True,
        eval_every=0,
    )
    before, after = load_file(source / "model.safetensors"), load_file(out / "model.safetensors")
    assert before.keys() == after.keys()
    for k in before:
        torch.testing.assert_close(after[k], before[k], rtol=0, atol=1e-6)  # lr 1e-9: one tiny step
    assert not (out / "gates.json").exists()


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--head-gates", "--gate-l0", "0.1"], "--head-gates fine-tunes a trained model: give --model DIR"),
        (["--model", "{source}", "--gate-l0", "0.1"], "--gate-l0 without --head-gates"),
        (["--model", "{source}", "--head-gates", "--gate-l0", "-1"], "--gate-l0 must not be negative"),
        (["--model", "{source}", "--head-gates", "--gate-temperature", "0"], "--gate-temperature must be positive"),
        (["--model", "{source}", "--prior", "none"], "--prior and --set cannot change it"),
        (["--model", "{missing}", "--head-gates"], "not a model folder"),
        (["--model", "{lstm}", "--head-gates"], "no attention heads to gate"),
        (["--model", "{source}", "--head-gates", "--eval-treebank", "ptb-sample:dev"], "--eval-treebank"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(argv, message, source, tiny_model, tmp_path, capsys):
    names = dict(source=str(source), missing=str(tmp_path / "nowhere"), lstm=str(tiny_model("on-lstm")))
    argv = [a.format(**names) for a in argv]
    assert cli_main(["train", "--out", str(tmp_path / "out"), "--max-steps", "1", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "out").exists()
