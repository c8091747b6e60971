"""What the models run under ``torch.compile`` (``fullgraph=True``, checked on the CPU with the ``eager``
and ``aot_eager`` backends): the operators the compiler traces, the same function as the eager paths.

Under compilation the constituent prior's attention is the written one (the blockwise kernel's backward
calls autograd inside itself), the ON-LSTM's recurrent product autograd's (the weight-gradient-once pair's
backward appends to a list), the Triton kernels are off (the compiler makes its own), and a CPU dropout
mask is drawn with ``rand`` (``random_`` is not traced) at the same drop probability. Whether the CUDA
side traces is checked without a GPU by ``benchmarks/speed/compile_trace.py`` (a CUDA build of PyTorch).
"""

from __future__ import annotations

import shutil

import pytest
import torch
from helpers import tiny_tree_transformer

from syntaxformer.blocks.dropout import dropout
from syntaxformer.blocks.mlm_head import labelled_positions
from syntaxformer.blocks.on_lstm import on_lstm_loop
from syntaxformer.kernels import attention as attention_kernels
from syntaxformer.kernels import triton_runs_on
from syntaxformer.kernels.dropout import LANE_BITS, drop_probability, keep_mask, keep_scale


def _loss_and_grads(model, ids, labels):
    model.zero_grad(set_to_none=True)
    positions = labelled_positions(labels)  # the trainer's fixed-size gather (no data-dependent branch)
    loss = model(
        input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels, masked_only=True, masked_positions=positions
    ).loss
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_a_compiled_tree_transformer_runs_the_written_attention(monkeypatch):
    """Eager, the prior's attention is the blockwise kernel; compiled, the written attention with the
    same loss and gradients (float64, to 1e-10), the kernel never called."""
    torch.manual_seed(0)
    model = tiny_tree_transformer(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).double()
    ids = torch.randint(4, 50, (3, 9))
    labels = ids.masked_fill(torch.rand(3, 9) > 0.3, -100)
    calls = []
    kernel = attention_kernels.BlockwisePriorAttention.apply

    def counted(*args):
        calls.append(1)
        return kernel(*args)

    monkeypatch.setattr(attention_kernels.BlockwisePriorAttention, "apply", counted)
    eager_loss, eager_grads = _loss_and_grads(model, ids, labels)
    assert len(calls) == 2  # one per layer

    def refused(*args):
        raise AssertionError("the blockwise kernel under torch.compile")

    monkeypatch.setattr(attention_kernels.BlockwisePriorAttention, "apply", refused)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True, dynamic=False)
    loss, grads = _loss_and_grads(compiled, ids, labels)
    torch.testing.assert_close(loss, eager_loss, rtol=0, atol=1e-10)
    assert len(grads) == len(eager_grads)
    for a, b in zip(grads, eager_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_a_compiled_on_lstm_loop_gives_the_weight_gradient_of_autograds_product():
    """The loop asked for the weight-gradient-once product (``weight_grad_once=True``), compiled: the
    outputs and every gradient of the eager loop (which uses it), float64 to 1e-10."""
    torch.manual_seed(0)
    b, n, hidden, chunk = 2, 5, 8, 2
    gates_x = torch.randn(b, n, 4 * hidden + 2 * hidden // chunk, dtype=torch.float64, requires_grad=True)
    w_hh_t = torch.randn(hidden, gates_x.shape[-1], dtype=torch.float64, requires_grad=True)
    h0, c0 = torch.zeros(b, hidden, dtype=torch.float64), torch.zeros(b, hidden, dtype=torch.float64)
    mask = torch.tensor([[True] * n, [True] * 3 + [False] * 2])

    def run(loop):
        out, f_master, h, c = loop(gates_x, w_hh_t, h0, c0, mask, 0, hidden // chunk, chunk, weight_grad_once=True)
        total = out.square().sum() + f_master.sum() + h.sum() + c.sum()
        grads = torch.autograd.grad(total, (gates_x, w_hh_t))
        return out.detach(), grads

    eager_out, eager_grads = run(on_lstm_loop)
    torch._dynamo.reset()
    out, grads = run(torch.compile(on_lstm_loop, backend="aot_eager", fullgraph=True, dynamic=False))
    torch.testing.assert_close(out, eager_out, rtol=0, atol=1e-10)
    for a, b in zip(grads, eager_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


@pytest.mark.skipif(
    not triton_runs_on("cpu"), reason="needs Triton's interpreter (pip install triton; TRITON_INTERPRET=1)"
)
def test_the_triton_kernels_are_off_under_compile():
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: x * float(triton_runs_on(x.device)), backend="eager", fullgraph=True)
    assert compiled(torch.ones(2)).tolist() == [0.0, 0.0]  # eager: 1.0 (the interpreter runs them)


def test_compiled_cpu_dropout_keeps_the_drop_probability_and_the_scale():
    """A compiled CPU mask (lanes from ``rand``) drops at ``drop_probability(p)`` (2^20 draws: within
    five standard deviations); compiled dropout scales kept values by exactly ``keep_scale``."""
    p, size = 0.1, 1 << 20
    torch._dynamo.reset()
    torch.manual_seed(0)
    keep = torch.compile(lambda: keep_mask((size,), p), backend="eager", fullgraph=True)()
    rate, expected = 1.0 - keep.double().mean().item(), drop_probability(p)
    assert abs(rate - expected) < 5 * (expected * (1 - expected) / size) ** 0.5
    assert drop_probability(p) == round(p * 2**LANE_BITS) / 2**LANE_BITS
    x = torch.rand(64, 33) + 1.0
    out = torch.compile(lambda t: dropout(t, p), backend="eager", fullgraph=True)(x)
    kept = out != 0
    assert 0 < kept.sum() < x.numel()
    assert torch.equal(out[kept], x[kept] * keep_scale(p))


def _model_loss(model, batch):
    torch.manual_seed(0)
    return model(**batch, masked_only=True).loss


@pytest.mark.slow
def test_a_compiled_model_with_the_fused_kernels_matches_its_eager_fallback():
    """``torch.compile`` with the default (inductor) backend, where a C compiler is present, of a model
    with ``kernel="fused"``: the loss of the eager model on a fixed batch."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("torch.compile on CPU needs a C compiler; none on this machine")
    torch.manual_seed(0)
    model = tiny_tree_transformer(kernel="fused", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = model.eval()
    ids = torch.randint(5, 50, (4, 8))
    mask = torch.arange(8)[None, :] < torch.tensor([8, 5, 3, 8])[:, None]
    labels = torch.full_like(ids, -100)
    labels[:, 1] = ids[:, 1]
    batch = dict(input_ids=ids, attention_mask=mask, labels=labels)
    eager = _model_loss(model, batch)
    try:
        compiled = _model_loss(torch.compile(model), batch)
    except Exception as e:  # noqa: BLE001 - compile unavailable: the fallback is the eager model
        pytest.skip(f"torch.compile failed here ({type(e).__name__}); the benchmark falls back to eager")
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)
