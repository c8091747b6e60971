"""ON-LSTM (Shen et al., ICLR 2019; DESIGN.md §3.4): the equations, the fast recurrence against a
literal step-by-step reference, padding, dropouts, the causal LM, save/load, parsing.

The reference (:func:`reference_stack`) is written from the paper's equations 9-14 one time step and
one hidden unit at a time (scalars, no broadcasting, a running sum for cumax), and is compared with
the model in float64 at 1e-10, values and gradients.
"""

from __future__ import annotations

import functools
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

from syntaxformer.data.tokenization import build_word_tokenizer, save_tokenizer
from syntaxformer.decoding.spans import labelled_spans, split_by_distance
from syntaxformer.models import MODELS, make_config
from syntaxformer.models.on_lstm import (
    PRESETS,
    OnLstmConfig,
    OnLstmForCausalLM,
    cumax,
    drop_connect,
    embedding_dropout,
    expand_chunks,
    gap_distances,
    locked_dropout,
    master_forget_gate,
    master_gates,
    master_input_gate,
    on_lstm_loop,
    on_lstm_step,
)
from syntaxformer.parsing import decode, load_model, model_structures
from syntaxformer.structures import SyntacticDistances

torch.set_num_threads(1)

NO_DROPOUT = dict(dropout=0.0, dropouth=0.0, dropouti=0.0, dropoute=0.0, wdrop=0.0)


def tiny_model(vocab_size: int = 30, seed: int = 0, dtype=torch.float64, **overrides) -> OnLstmForCausalLM:
    """An untrained tiny ON-LSTM (widths 24, 24, 16; chunk 4), evaluation mode."""
    torch.manual_seed(seed)
    config = make_config("on-lstm", "tiny", vocab_size, **{**NO_DROPOUT, **overrides})
    return OnLstmForCausalLM(config).to(dtype).eval()


# ------------------------------------------------------------------------------------------------
# The literal reference: one step, one unit at a time


def reference_cumax(logits):
    """softmax then a running sum, element by element (a list of 0-d tensors)."""
    top = max(float(v.detach()) for v in logits)
    exps = [torch.exp(v - top) for v in logits]
    total = sum(exps)
    out, running = [], 0.0
    for e in exps:
        running = running + e / total
        out.append(running)
    return out


def reference_layer(x, layer, chunk_size):
    """One sentence ``x`` ``[N, in]`` through one layer by eqs. 9-14; returns (outputs [N, H], d [N])."""
    w_ih, b_ih, w_hh, b_hh = layer.ih.weight, layer.ih.bias, layer.hh.weight, layer.hh.bias
    hidden = w_hh.shape[1]
    n_chunk = hidden // chunk_size
    h = [x.new_zeros(()) for _ in range(hidden)]
    c = [x.new_zeros(()) for _ in range(hidden)]
    outputs, distances = [], []
    for t in range(x.shape[0]):
        z = w_ih @ x[t] + b_ih + w_hh @ torch.stack(h) + b_hh  # (G,)
        f_master = reference_cumax(z[n_chunk : 2 * n_chunk])  # eq. 9
        i_master = [1.0 - v for v in reference_cumax(z[:n_chunk])]  # eq. 10
        o_z, c_z, i_z, f_z = (z[2 * n_chunk + k * hidden : 2 * n_chunk + (k + 1) * hidden] for k in range(4))
        new_c, new_h = [], []
        for u in range(hidden):
            k = u // chunk_size  # the unit's master unit
            omega = f_master[k] * i_master[k]  # eq. 11
            f_hat = torch.sigmoid(f_z[u]) * omega + (f_master[k] - omega)  # eq. 12
            i_hat = torch.sigmoid(i_z[u]) * omega + (i_master[k] - omega)  # eq. 13
            cu = f_hat * c[u] + i_hat * torch.tanh(c_z[u])  # eq. 14
            new_c.append(cu)
            new_h.append(torch.sigmoid(o_z[u]) * torch.tanh(cu))
        h, c = new_h, new_c
        outputs.append(torch.stack(h))
        distances.append(1.0 - sum(f_master) / n_chunk)
    return torch.stack(outputs), torch.stack(distances)


def reference_stack(model, input_ids):
    """Per sentence: the last layer's outputs ``[N, E]`` and the distances ``[L, N]``."""
    results = []
    for ids in input_ids:
        x = model.on_lstm.embeddings.weight[ids]
        dists = []
        for layer in model.on_lstm.layers:
            x, d = reference_layer(x, layer, model.config.chunk_size)
            dists.append(d)
        results.append((x, torch.stack(dists)))
    return results


# ------------------------------------------------------------------------------------------------
# cumax, chunks, the cell


def test_cumax_is_monotone_in_unit_interval_and_ends_at_one():
    g = torch.Generator().manual_seed(0)
    logits = torch.cat([torch.randn(200, 17, generator=g, dtype=torch.float64) * s for s in (0.1, 1, 10, 100)])
    out = cumax(logits)
    assert (out.diff(dim=-1) >= 0).all()
    assert (out >= 0).all() and (out <= 1 + 1e-12).all()
    assert torch.allclose(out[:, -1], torch.ones(len(out), dtype=torch.float64), atol=1e-12, rtol=0)
    # the master gates: f~ rises from 0 to 1, i~ falls from 1 to 0, as eqs. 9-10 say
    f_master, i_master = master_forget_gate(logits), master_input_gate(logits)
    assert (f_master.diff(dim=-1) >= 0).all() and (i_master.diff(dim=-1) <= 0).all()
    assert torch.allclose(i_master[:, -1], torch.zeros(len(out), dtype=torch.float64), atol=1e-12)
    # both at once from [i~ | f~] logits (the step's form)
    both = torch.cat([logits[:, :8], logits[:, 8:16]], dim=1)
    f2, i2 = master_gates(both)
    assert torch.equal(f2, master_forget_gate(logits[:, 8:16]))
    assert torch.equal(i2, master_input_gate(logits[:, :8]))


def test_expand_chunks_gives_each_unit_its_chunk_value():
    gate = torch.arange(12.0).view(2, 6)
    wide = expand_chunks(gate, 4)  # (2, 24)
    assert wide.shape == (2, 24)
    for u in range(24):
        assert torch.equal(wide[:, u], gate[:, u // 4])


def use_loop(model, loop) -> None:
    for layer in model.on_lstm.layers:
        layer.loop = loop


@pytest.mark.parametrize("weight_grad_once", [False, True])
def test_model_equals_the_literal_equations_values_and_gradients(weight_grad_once):
    model = tiny_model()
    use_loop(model, functools.partial(on_lstm_loop, weight_grad_once=weight_grad_once))
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(4, 30, (2, 6), generator=g)
    out = model.on_lstm(ids)
    ref = reference_stack(model, ids)
    weights = torch.randn(out.last_hidden_state.shape, generator=g, dtype=torch.float64)
    for b, (hidden, dist) in enumerate(ref):
        assert torch.allclose(out.last_hidden_state[b], hidden, atol=1e-10, rtol=0)
        assert torch.allclose(out.distances[b], dist, atol=1e-10, rtol=0)
    named = list(model.on_lstm.named_parameters())  # (lm_head: not involved)
    params = [p for _, p in named]
    fast = torch.autograd.grad((out.last_hidden_state * weights).sum() + out.distances.sum(), params)
    slow = torch.autograd.grad(sum((h * weights[b]).sum() + d.sum() for b, (h, d) in enumerate(ref)), params)
    for (name, _), a, b in zip(named, fast, slow):
        assert torch.allclose(a, b, atol=1e-10, rtol=0), name


def per_step_loop(gates_x, w_hh_t, h, c, mask, first_padded, n_chunk, chunk_size):
    """``on_lstm_loop`` with a plain ``addmm`` per step: autograd's own recurrent-weight gradient."""
    outputs, masters = [], []
    for t in range(gates_x.shape[1]):
        h_new, c_new, f_master = on_lstm_step(gates_x[:, t], h, c, w_hh_t, n_chunk, chunk_size)
        if mask is not None:
            h_new, c_new = torch.where(mask[:, t : t + 1], h_new, h), torch.where(mask[:, t : t + 1], c_new, c)
        h, c = h_new, c_new
        outputs.append(h)
        masters.append(f_master)
    return torch.stack(outputs, dim=1), torch.stack(masters, dim=1), h, c


def test_both_loops_equal_a_plain_loop_in_training_with_padding():
    """Training mode (DropConnect on the recurrent weights, every dropout on), padding, the loss on
    part of the outputs: the library loop, with the recurrent weights' gradient summed once after
    the loop or left to autograd, equals a plain indexing loop (values and every gradient)."""
    model = tiny_model(dropout=0.2, dropouth=0.2, dropouti=0.2, dropoute=0.1, wdrop=0.3).train()
    ids = torch.randint(4, 30, (3, 8))
    mask = torch.ones_like(ids)
    mask[0, 5:] = 0
    labels = ids.masked_fill(mask == 0, -100)
    labels[1, :3] = -100
    results = []
    for loop in (
        per_step_loop,
        functools.partial(on_lstm_loop, weight_grad_once=True),
        functools.partial(on_lstm_loop, weight_grad_once=False),
        on_lstm_loop,
    ):
        use_loop(model, loop)
        torch.manual_seed(5)  # the same dropout masks
        model.zero_grad()
        loss = model(ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    for loss, grads in results[1:]:
        assert torch.allclose(loss, results[0][0], atol=1e-12, rtol=0)
        assert grads.keys() == results[0][1].keys()
        for name in grads:
            assert torch.allclose(grads[name], results[0][1][name], atol=1e-12, rtol=0), name


def test_distances_lie_in_unit_interval_and_are_zero_at_padding():
    model = tiny_model(dtype=torch.float32, **PRESETS["tiny"] | dict(dropout=0.3, wdrop=0.3, dropouti=0.3))
    ids = torch.randint(4, 30, (4, 9))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    for training in (False, True):
        model.train(training)
        d = model(ids, attention_mask=mask).distances  # (B, L, N)
        assert d.shape == (4, 3, 9)
        assert (d >= 0).all() and (d <= 1).all()
        assert (d[1, :, 5:] == 0).all()


# ------------------------------------------------------------------------------------------------
# padding, causality, loss


def test_padding_never_changes_a_sentence():
    model = tiny_model()
    g = torch.Generator().manual_seed(2)
    sentences = [torch.randint(4, 30, (n,), generator=g) for n in (7, 3, 5, 1)]
    n = max(len(s) for s in sentences)
    for side in ("right", "left"):
        ids = torch.zeros(len(sentences), n, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for b, s in enumerate(sentences):
            cols = slice(0, len(s)) if side == "right" else slice(n - len(s), n)
            ids[b, cols], mask[b, cols] = s, 1
        batch = model(ids, attention_mask=mask)
        for b, s in enumerate(sentences):
            alone = model(s[None])
            real = mask[b].bool()
            assert torch.allclose(batch.logits[b, real], alone.logits[0], atol=1e-12, rtol=0)
            assert torch.allclose(batch.distances[b][:, real], alone.distances[0], atol=1e-12, rtol=0)
            for (h, c), (h1, c1) in zip(batch.state, alone.state):  # the state after the last token
                assert torch.allclose(h[b], h1[0], atol=1e-12, rtol=0)
                assert torch.allclose(c[b], c1[0], atol=1e-12, rtol=0)


def test_logits_at_t_do_not_depend_on_later_tokens():
    model = tiny_model()
    ids = torch.randint(4, 30, (2, 8))
    logits = model(ids).logits
    for t in range(7):
        changed = ids.clone()
        changed[:, t + 1 :] = torch.randint(4, 30, changed[:, t + 1 :].shape)
        assert torch.equal(model(changed).logits[:, : t + 1], logits[:, : t + 1])
        assert not torch.allclose(model(changed).logits[:, t + 1 :], logits[:, t + 1 :])


def test_loss_is_the_shifted_next_word_cross_entropy():
    model = tiny_model()
    ids = torch.randint(4, 30, (3, 6))
    labels = ids.clone()
    labels[0, 4:] = -100
    labels[2, 2] = -100
    out = model(ids, labels=labels)
    terms = [
        -F.log_softmax(out.logits[b, t], dim=-1)[labels[b, t + 1]]
        for b in range(3)
        for t in range(5)
        if labels[b, t + 1] != -100
    ]
    assert torch.allclose(out.loss, torch.stack(terms).mean(), atol=1e-12, rtol=0)
    out.loss.backward()  # the graph is whole
    assert model.on_lstm.embeddings.weight.grad is not None


# ------------------------------------------------------------------------------------------------
# dropouts


def test_dropouts_act_in_training_only_and_as_the_public_code():
    p = 0.5
    # locked dropout: one mask per sentence and feature, shared by every step; kept values x 1/(1-p)
    x = torch.ones(3, 7, 40)
    y = locked_dropout(x, p, training=True)
    assert torch.equal(y, y[:, :1].expand_as(y)) and set(y.unique().tolist()) <= {0.0, 2.0}
    assert torch.equal(locked_dropout(x, p, training=False), x)
    # embedding dropout: a dropped word type is zero wherever it occurs
    weight = torch.randn(50, 8)
    ids = torch.tensor([[3, 3, 4, 5, 3]])
    torch.manual_seed(0)
    e = embedding_dropout(weight, ids, p, training=True)
    assert torch.equal(e[0, 0], e[0, 1]) and torch.equal(e[0, 0], e[0, 4])
    assert all(torch.equal(row, 0 * row) or torch.allclose(row, weight[i] / (1 - p)) for row, i in zip(e[0], ids[0]))
    # DropConnect (public LinearDropConnect): zeroed without rescaling in training, x (1-p) in eval
    w = torch.randn(200, 100)
    dropped = drop_connect(w, 0.3, training=True)
    kept = dropped != 0
    assert torch.equal(dropped[kept], w[kept]) and abs(1 - kept.float().mean().item() - 0.3) < 0.02
    assert torch.equal(drop_connect(w, 0.3, training=False), w * 0.7)


def test_model_dropouts_change_training_outputs_and_wdrop_scales_in_eval():
    ids = torch.randint(4, 30, (2, 6))
    plain = tiny_model()
    dropped = tiny_model(dropout=0.3, dropouth=0.3, dropouti=0.3, dropoute=0.3)
    assert torch.equal(plain(ids).logits, dropped(ids).logits)  # no effect in eval
    assert not torch.allclose(plain(ids).logits, dropped.train()(ids).logits)
    wdrop = tiny_model(wdrop=0.4)
    with torch.no_grad():
        for layer in plain.on_lstm.layers:
            layer.hh.weight.mul_(0.6)
    assert torch.allclose(wdrop(ids).logits, plain(ids).logits, atol=1e-12, rtol=0)


# ------------------------------------------------------------------------------------------------
# config, save / load, registry


def test_config_checks_and_presets():
    for preset in PRESETS:
        config = make_config("on-lstm", preset, 100)
        assert config.layer_sizes[-1] == config.embedding_size
        assert all(s % config.chunk_size == 0 for s in config.layer_sizes)
    assert make_config("on-lstm", "paper", 100).layer_sizes == [1150, 1150, 400]
    config = OnLstmConfig(embedding_size=8, hidden_sizes=[12, 8], num_layers=2, chunk_size=4)
    assert config.layer_sizes == [12, 8]
    for bad in (
        dict(chunk_size=7),
        dict(hidden_sizes=[1150, 400]),
        dict(hidden_sizes=[1150, 1150, 500]),
        dict(dropout=1.0),
        dict(wdrop=-0.1),
        dict(parse_layer=3),
        dict(num_layers=0),
    ):
        with pytest.raises(ValueError):
            OnLstmConfig(**bad)
    assert OnLstmConfig(num_layers=4).num_hidden_layers == 4


def test_save_load_round_trip_is_exact(tmp_path):
    model = tiny_model(dtype=torch.float32, parse_layer=2, dropout=0.2)
    model.save_pretrained(tmp_path)
    for auto in (AutoModelForCausalLM, AutoModelForMaskedLM):  # the second: what load_model reads
        loaded = auto.from_pretrained(tmp_path).eval()
        assert type(loaded) is OnLstmForCausalLM
        assert loaded.config.parse_layer == 2 and loaded.config.layer_sizes == [24, 24, 16]
        assert loaded.lm_head.weight is loaded.on_lstm.embeddings.weight  # still tied
        state, original = loaded.state_dict(), model.state_dict()
        assert state.keys() == original.keys()
        assert all(torch.equal(state[k], original[k]) for k in state)
        ids = torch.randint(4, 30, (2, 7))
        a, b = model(ids), loaded(ids)
        assert torch.equal(a.logits, b.logits) and torch.equal(a.distances, b.distances)
    assert model.lm_head.weight is model.on_lstm.embeddings.weight
    assert MODELS["on-lstm"] is OnLstmForCausalLM


# ------------------------------------------------------------------------------------------------
# parsing


def build_tree_spans(depth, start=0):
    """The public parser's ``build_tree`` (test_phrase_grammar.py), as spans: split before the word of
    the largest distance (first on ties), then split that word off the rest; if it is the first
    word, split after it. Returns the half-open spans of length >= 2."""
    n = len(depth)
    if n <= 1:
        return set()
    spans = {(start, start + n)}
    m = int(np.argmax(depth))
    if m > 0:
        spans |= build_tree_spans(depth[:m], start)
        if n - m > 1:
            spans.add((start + m, start + n))
    spans |= build_tree_spans(depth[m + 1 :], start + m + 1)
    return spans


def test_gap_distances_reproduce_the_public_build_tree():
    rng = random.Random(0)
    for _ in range(500):
        n = rng.randint(1, 30)
        depth = np.array([rng.choice([0.1, 0.2, 0.3, 0.5]) if rng.random() < 0.5 else rng.random() for _ in range(n)])
        gaps = gap_distances(depth)
        assert len(gaps) == n - 1
        assert split_by_distance(list(gaps)) == build_tree_spans(depth)


def test_induce_and_parse_ptb_sample_sentences(tmp_path, ptb_gold):
    sentences = [list(t.leaves()) for t in ptb_gold[:80]] + [["yes"], ["it", "rains"]]
    assert {len(s) for s in sentences} >= {1, 2} and max(len(s) for s in sentences) >= 40
    tokenizer = build_word_tokenizer(sentences)
    torch.manual_seed(0)
    model = OnLstmForCausalLM(make_config("on-lstm", "tiny", len(tokenizer)))
    model.save_pretrained(tmp_path)
    save_tokenizer(tokenizer, tmp_path)
    loaded, tok, _ = load_model(tmp_path)
    assert type(loaded) is OnLstmForCausalLM and loaded.induces_structure
    structures = model_structures(loaded, tok, sentences, batch_size=16)
    trees, heads = decode(structures)
    assert heads is None
    for words, s, tree in zip(sentences, structures, trees):
        (item,) = s.items
        assert isinstance(item, SyntacticDistances) and item.distances.shape == (len(words) - 1,)
        assert tree.leaves() == words
        ids = torch.tensor([tok.convert_tokens_to_ids(words)])
        with torch.no_grad():
            depth = loaded(ids).distances[0, 1].double().numpy()  # layer 1: the public choice
        spans = {(i, j) for i, j, _ in labelled_spans(tree) if j - i >= 2}
        assert spans == build_tree_spans(depth) | ({(0, len(words))} if len(words) > 1 else set())
        assert len(spans) == max(len(words) - 1, 0)  # binary: n-1 internal nodes
    # a prefix token is fed first and its distance dropped
    loaded.config.parse_prefix_token_id = tok.cls_token_id
    ids = torch.tensor([tok.convert_tokens_to_ids(sentences[0])])
    (item,) = loaded.induce(ids, torch.ones_like(ids))[0]
    with torch.no_grad():
        prefixed = torch.cat([torch.tensor([[tok.cls_token_id]]), ids], 1)
        depth = loaded(prefixed).distances[0, 1, 1:].double().numpy()
    assert np.allclose(item.distances, gap_distances(depth), atol=1e-6)


@pytest.mark.parametrize("weight_grad_once", [True, False])
def test_bf16_autocast_keeps_the_state_float32_and_near_float32(weight_grad_once):
    """Under ``torch.autocast`` to bfloat16 (``logic train --bf16``) the products are bf16 but
    the gates, cell state, outputs, distances and gradients are float32, within bf16 rounding of the
    float32 model (both ways of taking the recurrent weight's gradient)."""
    model = tiny_model(dtype=torch.float32)
    use_loop(model, functools.partial(on_lstm_loop, weight_grad_once=weight_grad_once))
    ids = torch.randint(4, 30, (3, 8), generator=torch.Generator().manual_seed(2))
    params = list(model.on_lstm.parameters())
    ref = model.on_lstm(ids)
    ref_grads = torch.autograd.grad(ref.last_hidden_state.square().sum(), params)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model.on_lstm(ids)
    assert out.last_hidden_state.dtype == out.distances.dtype == torch.float32
    assert torch.allclose(out.last_hidden_state, ref.last_hidden_state, atol=1e-2, rtol=0)
    assert torch.allclose(out.distances, ref.distances, atol=1e-2, rtol=0)
    assert not torch.equal(out.last_hidden_state, ref.last_hidden_state)  # the products were bf16
    grads = torch.autograd.grad(out.last_hidden_state.square().sum(), params)
    for a, b in zip(grads, ref_grads):
        assert a.dtype == torch.float32
        assert (a - b).norm() <= 0.05 * b.norm() + 1e-6
