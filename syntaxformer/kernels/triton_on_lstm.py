"""A Triton kernel for the ON-LSTM cell: one step's gates and state update in one kernel each way.

The same function as :func:`syntaxformer.blocks.on_lstm.on_lstm_cell` with the padding step of
:func:`~syntaxformer.blocks.on_lstm.on_lstm_loop` (Shen et al., ICLR 2019, eqs. 9-14 and
``h_t = o_t ∘ tanh(c_t)``; a padded step keeps the state), which autograd runs as about 20 kernels
forward and 35 backward per step and layer: one program per sentence row computes, from the step's
pre-activations ``gates`` ``(B, G)`` (``[i~ | f~ | o | c^ | i | f]``, ``G = 2C + 4H``), the master
gates (two ``cumax`` over the ``C`` chunks), the unit gates and the new state; the backward computes
the pre-activations' gradient and the previous cell state's in one pass (``on_lstm_kernels="triton"``).

With ``u`` the units of a chunk, ``ĉ = tanh(z_c)``, ``τ = tanh(c_t)`` and the forward's gates:

    dc = dc_t + dh_t o (1 - τ²),   do = dh_t τ,   df^ = dc c_{t-1},   di^ = dc ĉ,   dĉ = dc i^
    dω = Σ_u [df^ (f - 1) + di^ (i - 1)],   df~ = dF~ + Σ_u df^ + dω i~,   di~ = Σ_u di^ + dω f~
    d z_f~ = p_f (r_f - Σ p_f r_f), r_f = revcumsum(df~);   d z_i~ likewise with r_i = revcumsum(-di~)
    d z_o = do o (1 - o),  d z_c = dĉ (1 - ĉ²),  d z_i = di^ ω i (1 - i),  d z_f = df^ ω f (1 - f)
    dc_{t-1} = dc f^

(``dF~`` the gradient of the step's master forget gate output, ``p`` the softmaxes of the ``cumax``.)
Padded rows (``keep`` false) output the previous state and pass its gradients through; their master
gate output is the step's own, as the loop's. Float32 inside; bf16 pre-activations are read as float32.
Runs where :func:`syntaxformer.kernels.triton_runs_on` the device; tested against the autograd cell in
``tests/test_triton_on_lstm.py``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .on_lstm import WEIGHT_GRAD_ONCE_MIN, weight_gradient_once_product


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x >= 0, t, -t)


@triton.jit
def _cumax(z, ok):
    """``cumsum(softmax(z))`` over the valid lanes of a 1-D block; returns ``(cumax, softmax)``."""
    z = tl.where(ok, z, float("-inf"))
    e = tl.exp(z - tl.max(z, 0))
    p = e / tl.sum(e, 0)
    return tl.cumsum(p, 0), p


@triton.jit
def _cell_inputs(GATES, C_PREV, row, C, S, H, G, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    """The row's master logits ``(BLOCK_C,)`` each and unit logits and previous cell state
    ``(BLOCK_C, BLOCK_S)`` (chunks × units), float32, with the lanes' masks."""
    chunk = tl.arange(0, BLOCK_C)
    unit = tl.arange(0, BLOCK_S)
    chunk_ok = chunk < C
    ok = chunk_ok[:, None] & (unit[None, :] < S)
    base = GATES + row * G
    z_i_master = tl.load(base + chunk, mask=chunk_ok, other=0.0).to(tl.float32)
    z_f_master = tl.load(base + C + chunk, mask=chunk_ok, other=0.0).to(tl.float32)
    units = chunk[:, None] * S + unit[None, :]  # (BC, BS) unit index
    z_o = tl.load(base + 2 * C + units, mask=ok, other=0.0).to(tl.float32)
    z_c = tl.load(base + 2 * C + H + units, mask=ok, other=0.0).to(tl.float32)
    z_i = tl.load(base + 2 * C + 2 * H + units, mask=ok, other=0.0).to(tl.float32)
    z_f = tl.load(base + 2 * C + 3 * H + units, mask=ok, other=0.0).to(tl.float32)
    c_prev = tl.load(C_PREV + row * H + units, mask=ok, other=0.0).to(tl.float32)
    return z_i_master, z_f_master, z_o, z_c, z_i, z_f, c_prev, chunk, chunk_ok, units, ok


@triton.jit
def _on_lstm_cell_forward(
    GATES, C_PREV, H_PREV, KEEP, H_OUT, C_OUT, F_MASTER,
    C, S, H, G,
    HAS_KEEP: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    z_im, z_fm, z_o, z_c, z_i, z_f, c_prev, chunk, chunk_ok, units, ok = _cell_inputs(
        GATES, C_PREV, row, C, S, H, G, BLOCK_C, BLOCK_S
    )
    f_master, _ = _cumax(z_fm, chunk_ok)  # eq. 9
    cum_i, _ = _cumax(z_im, chunk_ok)
    i_master = 1.0 - cum_i  # eq. 10
    omega = (f_master * i_master)[:, None]  # eq. 11, (BC, 1)
    f_hat = _sigmoid(z_f) * omega + (f_master[:, None] - omega)  # eq. 12
    i_hat = _sigmoid(z_i) * omega + (i_master[:, None] - omega)  # eq. 13
    c_new = f_hat * c_prev + i_hat * _tanh(z_c)  # eq. 14
    h_new = _sigmoid(z_o) * _tanh(c_new)
    if HAS_KEEP:  # a padded step keeps the state
        keep = tl.load(KEEP + row) != 0
        h_prev = tl.load(H_PREV + row * H + units, mask=ok, other=0.0)
        h_new = tl.where(keep, h_new, h_prev)
        c_new = tl.where(keep, c_new, c_prev)
    tl.store(H_OUT + row * H + units, h_new, mask=ok)
    tl.store(C_OUT + row * H + units, c_new, mask=ok)
    tl.store(F_MASTER + row * C + chunk, f_master, mask=chunk_ok)


@triton.jit
def _on_lstm_cell_backward(
    GATES, C_PREV, KEEP, GRAD_H, GRAD_C, GRAD_F_MASTER, GRAD_GATES, GRAD_C_PREV, GRAD_H_PREV,
    C, S, H, G,
    HAS_KEEP: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    z_im, z_fm, z_o, z_c, z_i, z_f, c_prev, chunk, chunk_ok, units, ok = _cell_inputs(
        GATES, C_PREV, row, C, S, H, G, BLOCK_C, BLOCK_S
    )
    f_master, p_f = _cumax(z_fm, chunk_ok)
    cum_i, p_i = _cumax(z_im, chunk_ok)
    i_master = 1.0 - cum_i
    omega = (f_master * i_master)[:, None]
    o, i, f = _sigmoid(z_o), _sigmoid(z_i), _sigmoid(z_f)
    c_cand = _tanh(z_c)
    f_hat = f * omega + (f_master[:, None] - omega)
    i_hat = i * omega + (i_master[:, None] - omega)
    tau = _tanh(f_hat * c_prev + i_hat * c_cand)
    grad_h = tl.load(GRAD_H + row * H + units, mask=ok, other=0.0)
    grad_c_out = tl.load(GRAD_C + row * H + units, mask=ok, other=0.0)
    if HAS_KEEP:  # a padded row: the state's gradients pass through, the cell's are 0
        keep = tl.load(KEEP + row) != 0
        tl.store(GRAD_H_PREV + row * H + units, tl.where(keep, 0.0, grad_h), mask=ok)
        grad_h = tl.where(keep, grad_h, 0.0)
        grad_c_through = tl.where(keep, 0.0, grad_c_out)
        grad_c_out = tl.where(keep, grad_c_out, 0.0)
    else:
        grad_c_through = tl.zeros_like(grad_c_out)
    grad_c = grad_c_out + grad_h * o * (1.0 - tau * tau)
    grad_f_hat = grad_c * c_prev
    grad_i_hat = grad_c * c_cand
    grad_omega = tl.sum(tl.where(ok, grad_f_hat * (f - 1.0) + grad_i_hat * (i - 1.0), 0.0), 1)  # (BC,)
    grad_f_master = tl.load(GRAD_F_MASTER + row * C + chunk, mask=chunk_ok, other=0.0)
    grad_f_master += tl.sum(tl.where(ok, grad_f_hat, 0.0), 1) + grad_omega * i_master
    grad_i_master = tl.sum(tl.where(ok, grad_i_hat, 0.0), 1) + grad_omega * f_master
    r_f = tl.cumsum(tl.where(chunk_ok, grad_f_master, 0.0), 0, reverse=True)  # d softmax of cumax
    r_i = tl.cumsum(tl.where(chunk_ok, -grad_i_master, 0.0), 0, reverse=True)
    grad_z_fm = p_f * (r_f - tl.sum(p_f * r_f, 0))
    grad_z_im = p_i * (r_i - tl.sum(p_i * r_i, 0))
    base = GRAD_GATES + row * G
    tl.store(base + chunk, grad_z_im, mask=chunk_ok)
    tl.store(base + C + chunk, grad_z_fm, mask=chunk_ok)
    tl.store(base + 2 * C + units, grad_h * tau * o * (1.0 - o), mask=ok)
    tl.store(base + 2 * C + H + units, grad_c * i_hat * (1.0 - c_cand * c_cand), mask=ok)
    tl.store(base + 2 * C + 2 * H + units, grad_i_hat * omega * i * (1.0 - i), mask=ok)
    tl.store(base + 2 * C + 3 * H + units, grad_f_hat * omega * f * (1.0 - f), mask=ok)
    tl.store(GRAD_C_PREV + row * H + units, grad_c * f_hat + grad_c_through, mask=ok)


def _blocks(n_chunk: int, chunk_size: int) -> dict:
    return dict(BLOCK_C=max(16, triton.next_power_of_2(n_chunk)), BLOCK_S=max(2, triton.next_power_of_2(chunk_size)))


class TritonOnLstmCell(torch.autograd.Function):
    """One ON-LSTM step's gates and state update by the Triton kernels (module docstring).

    Inputs: ``gates`` ``(B, G)`` pre-activations, ``c`` ``(B, H)`` and ``h`` ``(B, H)`` the previous
    state (float32), ``keep`` ``(B,)`` bool (a padded step keeps the state) or None, ``n_chunk``,
    ``chunk_size``. Outputs ``(h_t, c_t, f~_t)``: ``(B, H)``, ``(B, H)``, ``(B, n_chunk)`` float32.
    Not twice differentiable.
    """

    @staticmethod
    def forward(ctx, gates, c, h, keep, n_chunk: int, chunk_size: int):
        batch, width = c.shape
        gates, c, h = gates.contiguous(), c.contiguous(), h.contiguous()
        keep_rows = keep.to(torch.int8).contiguous() if keep is not None else None
        h_out, c_out = torch.empty_like(c), torch.empty_like(c)
        f_master = c.new_empty(batch, n_chunk)
        options = dict(
            C=n_chunk,
            S=chunk_size,
            H=width,
            G=gates.shape[1],
            HAS_KEEP=keep is not None,
            **_blocks(n_chunk, chunk_size),
        )
        rows = keep_rows if keep_rows is not None else c
        _on_lstm_cell_forward[(batch,)](gates, c, h, rows, h_out, c_out, f_master, **options)
        ctx.options = options
        ctx.save_for_backward(gates, c, keep_rows)
        return h_out, c_out, f_master

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_h, grad_c, grad_f_master):
        gates, c, keep_rows = ctx.saved_tensors
        grad_h, grad_c, grad_f_master = (
            torch.zeros_like(ref) if g is None else g.float().contiguous()
            for g, ref in ((grad_h, c), (grad_c, c), (grad_f_master, c.new_empty(c.shape[0], ctx.options["C"])))
        )
        grad_gates = torch.empty(gates.shape, dtype=torch.float32, device=gates.device)
        grad_c_prev = torch.empty_like(c)
        grad_h_prev = torch.empty_like(c) if keep_rows is not None else None
        _on_lstm_cell_backward[(c.shape[0],)](
            gates, c, keep_rows if keep_rows is not None else c, grad_h, grad_c, grad_f_master,
            grad_gates, grad_c_prev, grad_h_prev if grad_h_prev is not None else c, **ctx.options,
        )  # fmt: skip
        return grad_gates.to(gates.dtype), grad_c_prev, grad_h_prev, None, None, None


def triton_on_lstm_cell(
    gates: torch.Tensor, c: torch.Tensor, h: torch.Tensor, keep: torch.Tensor | None, n_chunk: int, chunk_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(h_t, c_t, f~_t)`` of one step by :class:`TritonOnLstmCell`: the values of
    :func:`~syntaxformer.blocks.on_lstm.on_lstm_cell` followed by the loop's padding step.

    Args:
        gates: ``(B, G)`` pre-activations ``W x_t + U h_{t-1} + b`` (``[i~ | f~ | o | c^ | i | f]``).
        c, h: ``(B, H)`` the previous cell and hidden state, float32.
        keep: ``(B,)`` bool, False where the step is padding (the state is kept), or None (no padding).
        n_chunk, chunk_size: master units and units per master unit (``H = n_chunk · chunk_size``).
    Returns:
        ``(h_t (B, H), c_t (B, H), f~_t (B, n_chunk))``.
    """
    return TritonOnLstmCell.apply(gates, c, h, keep, n_chunk, chunk_size)


def triton_on_lstm_loop(
    gates_x: torch.Tensor,
    w_hh_t: torch.Tensor,
    h: torch.Tensor,
    c: torch.Tensor,
    mask: torch.Tensor | None,
    first_padded: int,
    n_chunk: int,
    chunk_size: int,
    weight_grad_once: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`syntaxformer.blocks.on_lstm.on_lstm_loop` (the same arguments and returns) with each step's
    cell and padding step by :func:`triton_on_lstm_cell`: per step, the recurrent product and one
    kernel forward, one kernel and the product's backward. ``weight_grad_once`` as there
    (:func:`~syntaxformer.kernels.on_lstm.weight_gradient_once_product`)."""
    outputs: list[torch.Tensor] = []
    masters: list[torch.Tensor] = []
    if weight_grad_once is None:
        weight_grad_once = w_hh_t.numel() >= WEIGHT_GRAD_ONCE_MIN
    fast_product = None
    if weight_grad_once and torch.is_grad_enabled() and w_hh_t.requires_grad:
        fast_product = weight_gradient_once_product(w_hh_t)
    for t, gates_x_t in enumerate(gates_x.unbind(1)):
        gates = torch.addmm(gates_x_t, h, w_hh_t) if fast_product is None else fast_product(gates_x_t, h)  # (B, G)
        keep = mask[:, t] if mask is not None and t >= first_padded else None  # (B,) bool
        h, c, f_master = triton_on_lstm_cell(gates, c, h, keep, n_chunk, chunk_size)
        outputs.append(h)
        masters.append(f_master)
    return torch.stack(outputs, dim=1), torch.stack(masters, dim=1), h, c


__all__ = ["TritonOnLstmCell", "triton_on_lstm_cell", "triton_on_lstm_loop"]
