"""The ON-LSTM + self-attention hybrid (Hao et al., EMNLP 2019; DESIGN.md §3.4):
shapes, the output is the sum of the ON-LSTM output and the self-attention output, the ON-LSTM part is
the ON-LSTM model's, padding invariance, save/load, a masked-LM step, ``train --architecture on-lstm-san``."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForMaskedLM

from syntaxformer.models import MODELS, make_config
from syntaxformer.models.on_lstm import OnLstmConfig, OnLstmForCausalLM
from syntaxformer.models.on_lstm_san import OnLstmSanForMaskedLM, OnLstmSanModel

torch.set_num_threads(1)

NO_DROPOUT = dict(
    dropouti=0.0, dropouth=0.0, dropoute=0.0, wdrop=0.0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
)
V = 40


def tiny(seed: int = 0, **overrides) -> OnLstmSanForMaskedLM:
    """An untrained tiny hybrid (d 32, K = 2 ON-LSTM layers, L = 2 self-attention layers), eval mode."""
    torch.manual_seed(seed)
    return OnLstmSanForMaskedLM(make_config("on-lstm-san", "tiny", V, **{**NO_DROPOUT, **overrides})).eval()


def batch(seed: int = 1, b: int = 3, n: int = 9):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, V, (b, n), generator=g)
    am = torch.ones_like(ids)
    am[1, 6:] = 0
    am[2, 3:] = 0
    return ids.masked_fill(am == 0, 0), am


def test_registry_shapes_and_masked_only_logits():
    assert MODELS["on-lstm-san"] is OnLstmSanForMaskedLM and OnLstmSanForMaskedLM.objective == "masked-lm"
    model = tiny()
    ids, am = batch()
    base = model.on_lstm_san(ids, am, output_attentions=True, output_hidden_states=True)
    assert base.last_hidden_state.shape == base.on_lstm_hidden_state.shape == (3, 9, 32)
    assert base.distances.shape == (3, 2, 9) and (base.distances[am[:, None, :].expand(-1, 2, -1) == 0] == 0).all()
    assert len(base.attentions) == 2 and base.attentions[0].shape == (3, 2, 9, 9)
    assert len(base.hidden_states) == 3
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[1, 4] = ids[0, 2], ids[1, 4]
    full = model(ids, am, labels=labels)
    cheap = model(ids, am, labels=labels, masked_only=True)
    assert full.logits.shape == (3, 9, V) and cheap.logits.shape == (2, V)
    torch.testing.assert_close(cheap.logits, full.logits[labels != -100])
    torch.testing.assert_close(cheap.loss, full.loss)


def test_output_is_the_sum_of_the_on_lstm_and_the_self_attention_outputs():
    model = tiny()
    base = model.on_lstm_san
    ids, am = batch()
    with torch.no_grad():
        out = base(ids, am)
        # the two parts computed step by step from the modules
        mask = am.bool()
        hiddens, _, _ = base.on_lstm(base.embeddings(ids), mask)
        san = base.san_norm(base.san(hiddens[-1], mask).hidden)
    torch.testing.assert_close(out.on_lstm_hidden_state, hiddens[-1], rtol=0, atol=0)
    torch.testing.assert_close(out.san_hidden_state, san, rtol=0, atol=0)
    torch.testing.assert_close(out.last_hidden_state, hiddens[-1] + san, rtol=0, atol=0)
    # the self-attention output zeroed (its final LayerNorm's weight and bias 0): the ON-LSTM output alone
    with torch.no_grad():
        base.san_norm.weight.zero_()
        base.san_norm.bias.zero_()
        zeroed = base(ids, am)
    assert torch.equal(zeroed.last_hidden_state, out.on_lstm_hidden_state)


def test_the_on_lstm_part_is_the_on_lstm_model_and_reads_left_to_right():
    model = tiny()
    base = model.on_lstm_san
    config = OnLstmConfig(
        vocab_size=V,
        embedding_size=32,
        hidden_sizes=[32, 32],
        num_layers=2,
        chunk_size=4,
        dropout=0.0,
        dropouth=0.0,
        dropouti=0.0,
        dropoute=0.0,
        wdrop=0.0,
    )
    reference = OnLstmForCausalLM(config).eval()
    reference.on_lstm.embeddings.load_state_dict(base.embeddings.state_dict())
    reference.on_lstm.layers.load_state_dict(base.on_lstm.state_dict())
    ids, am = batch()
    with torch.no_grad():
        ours, theirs = base(ids, am), reference.on_lstm(ids, am)
    torch.testing.assert_close(ours.on_lstm_hidden_state, theirs.last_hidden_state, rtol=0, atol=0)
    torch.testing.assert_close(ours.distances, theirs.distances, rtol=0, atol=0)
    # a later word changes no earlier ON-LSTM state, but the self-attention sees both sides
    changed = ids.clone()
    changed[0, 6] = (ids[0, 6] + 1 - 4) % (V - 4) + 4
    with torch.no_grad():
        other = base(changed, am)
    assert torch.equal(other.on_lstm_hidden_state[0, :6], ours.on_lstm_hidden_state[0, :6])
    assert not torch.allclose(other.san_hidden_state[0, :6], ours.san_hidden_state[0, :6])


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_padding_never_changes_a_sentence(attn):
    model = tiny(attn_implementation=attn)
    ids, am = batch()
    with torch.no_grad():
        together = model.on_lstm_san(ids, am).last_hidden_state
        for row in range(3):
            n = int(am[row].sum())
            alone = model.on_lstm_san(ids[row : row + 1, :n], am[row : row + 1, :n]).last_hidden_state
            torch.testing.assert_close(together[row, :n], alone[0], rtol=1e-5, atol=1e-5)


def test_save_load_round_trip_is_exact(tmp_path):
    model = tiny(seed=3, san_positions=True)
    model.prune_heads({1: [0]})
    model.save_pretrained(tmp_path)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is OnLstmSanForMaskedLM and loaded.config.san_positions
    assert loaded.config.pruned_heads == {1: [0]}
    assert model.state_dict().keys() == loaded.state_dict().keys()
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    ids, am = batch()
    with torch.no_grad():
        assert torch.equal(model(ids, am).logits, loaded(ids, am).logits)
    assert isinstance(OnLstmSanModel.from_pretrained(tmp_path), OnLstmSanModel)  # the sentence encoder


def test_masked_lm_steps_lower_the_loss_on_a_batch():
    model = tiny(seed=2).train()
    ids, am = batch(n=12)
    labels = torch.full_like(ids, -100)
    labels[:, 1::3] = ids[:, 1::3]
    labels[am == 0] = -100
    inputs = ids.masked_fill(labels != -100, 2)  # [MASK]
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(15):
        loss = model(inputs, am, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0] - 1.0, losses


def test_train_on_lstm_san_with_the_trainer(tmp_path):
    from syntaxformer.cli import main
    from syntaxformer.data.corpus import load_corpus

    corpus = tmp_path / "ptb-sample-200.txt"
    corpus.write_text("".join(" ".join(s) + "\n" for s in load_corpus("ptb-sample")[:200]))
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--architecture",
                "on-lstm-san",
                "--preset",
                "tiny",
                "--max-steps",
                "3",
                "--batch-size",
                "16",
                "--corpus",
                str(corpus),
                "--threads",
                "1",
                "--quiet",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    record = json.loads((out / "training.json").read_text())
    assert record["objective"] == "masked-lm" and record["model"] == "on-lstm-san" and record["steps"] == 3
    from syntaxformer.parsing import load_model

    model, _, _ = load_model(out)
    assert type(model) is OnLstmSanForMaskedLM and not model.induces_structure
