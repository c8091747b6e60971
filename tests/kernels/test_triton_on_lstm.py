"""The Triton ON-LSTM cell (``cell_kernel="triton"``) equals the autograd cell and loop.

Without a GPU it runs in Triton's interpreter on CPU tensors (tests/conftest.py). Values and gradients
within float32 rounding with and without padding, with the recurrent weight's gradient per step or once;
a whole model with its dropouts gives the same loss and gradients (the cell draws no random numbers).
"""

import pytest
import torch

from syntaxformer.blocks.on_lstm import on_lstm_loop
from syntaxformer.kernels import triton_runs_on
from syntaxformer.models import MODELS, make_config

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

pytestmark = pytest.mark.skipif(
    not triton_runs_on(DEVICE), reason="needs Triton: CUDA, or the interpreter (pip install triton; TRITON_INTERPRET=1)"
)

if triton_runs_on(DEVICE):
    from syntaxformer.kernels import triton_on_lstm
    from syntaxformer.kernels.triton_on_lstm import triton_on_lstm_loop


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("weight_grad_once", [False, True])
def test_loop_equals_the_autograd_loop(padded, weight_grad_once):
    g = torch.Generator().manual_seed(0)
    batch, steps, width, chunk = 3, 6, 20, 4
    n_chunk = width // chunk
    gates_x = torch.randn(batch, steps, 2 * n_chunk + 4 * width, generator=g).to(DEVICE).requires_grad_()
    w_hh_t = (0.3 * torch.randn(width, 2 * n_chunk + 4 * width, generator=g)).to(DEVICE).requires_grad_()
    h0, c0 = (torch.randn(batch, width, generator=g).to(DEVICE).requires_grad_() for _ in range(2))
    mask = (torch.arange(steps)[None, :] < torch.tensor([6, 4, 1])[:, None]).to(DEVICE) if padded else None
    first_padded = 0 if padded else steps
    results = []
    for loop in (on_lstm_loop, triton_on_lstm_loop):
        outputs = loop(gates_x, w_hh_t, h0, c0, mask, first_padded, n_chunk, chunk, weight_grad_once)
        weights = [
            torch.randn(o.shape, generator=torch.Generator().manual_seed(i)).to(DEVICE) for i, o in enumerate(outputs)
        ]
        loss = sum((o * w).sum() for o, w in zip(outputs, weights, strict=True))
        results.append((*outputs, *torch.autograd.grad(loss, [gates_x, w_hh_t, h0, c0])))
    for fast, ref in zip(*results[::-1], strict=True):
        torch.testing.assert_close(fast, ref, atol=2e-6, rtol=1e-5)


def _loss_and_grads(cell_kernel, model_name="on-lstm"):
    torch.manual_seed(0)
    config = make_config(model_name, "tiny", 40, cell_kernel=cell_kernel)
    model = MODELS[model_name](config).to(DEVICE).train()  # its dropouts on: they draw the same masks
    ids = torch.randint(4, 40, (3, 7)).to(DEVICE)
    mask = (torch.arange(7)[None, :] < torch.tensor([7, 5, 2])[:, None]).long().to(DEVICE)
    torch.manual_seed(1)
    loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
    return loss, torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)


def _assert_grads_close(grads, ref_grads):
    """Float32 rounding of sums over the batch and time: relative to each gradient's largest entry (a
    bias's gradient sums B·N terms of up to ~40 here, so 1e-5 of it is ~4e-4)."""
    for grad, ref in zip(grads, ref_grads, strict=True):
        if ref is not None:
            torch.testing.assert_close(grad, ref, atol=1e-5 * max(1.0, ref.abs().max().item()), rtol=1e-4)


def test_model_with_the_triton_cell_equals_the_autograd_model(monkeypatch):
    calls = []
    apply = triton_on_lstm.TritonOnLstmRecurrence.apply
    monkeypatch.setattr(triton_on_lstm.TritonOnLstmRecurrence, "apply", lambda *a: calls.append(1) or apply(*a))
    ref_loss, ref_grads = _loss_and_grads("autograd")
    loss, grads = _loss_and_grads("triton")
    assert len(calls) == make_config("on-lstm", "tiny", 40).num_layers  # every layer
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    _assert_grads_close(grads, ref_grads)


def test_the_hybrid_with_the_triton_cell_equals_the_autograd_hybrid():
    """The ON-LSTM + self-attention hybrid's ON-LSTM layers take the same setting."""
    ref_loss, ref_grads = _loss_and_grads("autograd", "on-lstm-san")
    loss, grads = _loss_and_grads("triton", "on-lstm-san")
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    _assert_grads_close(grads, ref_grads)


def test_without_triton_the_setting_is_the_autograd_cell(monkeypatch):
    if DEVICE.type != "cpu":
        pytest.skip("the interpreter switch concerns CPU tensors")
    monkeypatch.delenv("TRITON_INTERPRET")
    ref_loss, ref_grads = _loss_and_grads("autograd")
    loss, grads = _loss_and_grads("triton")
    assert torch.equal(loss, ref_loss)
    assert all(g is r or torch.equal(g, r) for g, r in zip(grads, ref_grads, strict=True))
