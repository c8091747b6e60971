"""The ON-LSTM recurrence with its cell as a Triton kernel: per step one product and one kernel each way.

The same function as :func:`syntaxformer.blocks.on_lstm.on_lstm_loop` (Shen et al., ICLR 2019,
eqs. 9-14 and ``h_t = o_t ∘ tanh(c_t)``; a padded step keeps the state), which autograd runs as about
20 kernels forward and 35 backward per step and layer (the ON-LSTM's ``kernel="triton"``). The cell kernel: one
program per sentence row computes, from the step's pre-activations ``gates`` ``(B, G)``
(``[i~ | f~ | o | c^ | i | f]``, ``G = 2C + 4H``), the master gates (two ``cumax`` over the ``C``
chunks), the unit gates and the new state; its backward the pre-activations' gradient and the previous
cell state's in one pass. :class:`TritonOnLstmRecurrence` runs the loop over time as one autograd
function around it (no autograd graph per step; the recurrent weight's gradient once).

With ``u`` the units of a chunk, ``ĉ = tanh(z_c)``, ``τ = tanh(c_t)`` and the forward's gates:

    dc = dc_t + dh_t o (1 - τ²),   do = dh_t τ,   df^ = dc c_{t-1},   di^ = dc ĉ,   dĉ = dc i^
    dω = Σ_u [df^ (f - 1) + di^ (i - 1)],   df~ = dF~ + Σ_u df^ + dω i~,   di~ = Σ_u di^ + dω f~
    d z_f~ = p_f (r_f - Σ p_f r_f), r_f = revcumsum(df~);   d z_i~ likewise with r_i = revcumsum(-di~)
    d z_o = do o (1 - o),  d z_c = dĉ (1 - ĉ²),  d z_i = di^ ω i (1 - i),  d z_f = df^ ω f (1 - f)
    dc_{t-1} = dc f^

(``dF~`` the gradient of the step's master forget gate output, ``p`` the softmaxes of the ``cumax``.)
Padded rows (``keep`` false) output the previous state and pass its gradients through; their master
gate output is the step's own, as the loop's. Float32 inside; bf16 pre-activations are read as float32.
Runs where :func:`syntaxformer.kernels.triton_runs_on` the device; tested against the autograd loop in
``tests/kernels/test_kernel_table.py``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


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
def _cell_gates(z_im, z_fm, z_o, z_c, z_i, z_f, chunk_ok):
    """The step's gates from its pre-activations (eqs. 9-13): the master gates and the softmaxes of their
    ``cumax`` ``(BLOCK_C,)``, the overlap ``(BLOCK_C, 1)``, the unit gates, ``ĉ``, ``f^`` and ``i^``
    ``(BLOCK_C, BLOCK_S)``."""
    f_master, p_f = _cumax(z_fm, chunk_ok)  # eq. 9
    cum_i, p_i = _cumax(z_im, chunk_ok)
    i_master = 1.0 - cum_i  # eq. 10
    omega = (f_master * i_master)[:, None]  # eq. 11, (BC, 1)
    o, i, f = _sigmoid(z_o), _sigmoid(z_i), _sigmoid(z_f)
    f_hat = f * omega + (f_master[:, None] - omega)  # eq. 12
    i_hat = i * omega + (i_master[:, None] - omega)  # eq. 13
    return f_master, p_f, i_master, p_i, omega, o, i, f, _tanh(z_c), f_hat, i_hat


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
    f_master, _, _, _, _, o, _, _, c_cand, f_hat, i_hat = _cell_gates(z_im, z_fm, z_o, z_c, z_i, z_f, chunk_ok)
    c_new = f_hat * c_prev + i_hat * c_cand  # eq. 14
    h_new = o * _tanh(c_new)
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
    GATES, C_PREV, KEEP, GRAD_H, GRAD_H_STEP, GRAD_C, GRAD_F_MASTER, GRAD_GATES, GRAD_C_PREV, GRAD_H_PREV,
    C, S, H, G,
    HAS_KEEP: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    z_im, z_fm, z_o, z_c, z_i, z_f, c_prev, chunk, chunk_ok, units, ok = _cell_inputs(
        GATES, C_PREV, row, C, S, H, G, BLOCK_C, BLOCK_S
    )
    f_master, p_f, i_master, p_i, omega, o, i, f, c_cand, f_hat, i_hat = _cell_gates(
        z_im, z_fm, z_o, z_c, z_i, z_f, chunk_ok
    )
    tau = _tanh(f_hat * c_prev + i_hat * c_cand)
    # dh_t: through the next step (GRAD_H) and from the step's output (GRAD_H_STEP)
    grad_h = tl.load(GRAD_H + row * H + units, mask=ok, other=0.0)
    grad_h += tl.load(GRAD_H_STEP + row * H + units, mask=ok, other=0.0)
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


class TritonOnLstmRecurrence(torch.autograd.Function):
    """One ON-LSTM layer over time: each step's recurrent product and the cell kernel forward; the
    backward walks the steps in reverse, one cell kernel and one product per step, and forms the
    recurrent weight's gradient once, ``[h_0 .. h_{N-1}]ᵀ [dgates_1 .. dgates_N]`` (one matrix product),
    as fused LSTM kernels do. Float32 inside (autocast off): the state and the products.

    Inputs: ``gates_x`` (B, N, G) the input projections with both biases, ``w_hh_t`` (H, G), ``h``,
    ``c`` (B, H) the initial state, ``mask`` (B, N) bool or None (a padded step keeps the state),
    ``n_chunk``, ``chunk_size``. Outputs: ``(outputs (B, N, H), f_master (B, N, n_chunk), h_N, c_N)``,
    float32, as :func:`~syntaxformer.blocks.on_lstm.on_lstm_loop`. Saves the pre-activations and the
    cell states of every step (``N·B·(G + H)`` floats: what autograd's loop keeps, in two buffers). Not
    twice differentiable.
    """

    @staticmethod
    def forward(ctx, gates_x, w_hh_t, h, c, mask, n_chunk: int, chunk_size: int):
        batch, steps, width = gates_x.shape[0], gates_x.shape[1], h.shape[1]
        input_dtype, weight_dtype = gates_x.dtype, w_hh_t.dtype
        with torch.autocast(gates_x.device.type, enabled=False):
            gates_x, w_hh_t = gates_x.float(), w_hh_t.float()
            h, c = h.float().contiguous(), c.float().contiguous()
            keep = mask.t().to(torch.int8).contiguous() if mask is not None else None  # (N, B)
            gates = gates_x.new_empty(steps, batch, gates_x.shape[2])  # (N, B, G) pre-activations
            hs, cs = gates_x.new_empty(steps + 1, batch, width), gates_x.new_empty(steps + 1, batch, width)
            masters = gates_x.new_empty(steps, batch, n_chunk)
            hs[0], cs[0] = h, c
            options = _cell_options(gates_x.shape[2], width, n_chunk, chunk_size, keep is not None)
            for t in range(steps):
                torch.addmm(gates_x[:, t], hs[t], w_hh_t, out=gates[t])  # W x_t + U h_{t-1} + b
                _on_lstm_cell_forward[(batch,)](
                    gates[t], cs[t], hs[t], keep[t] if keep is not None else cs[t], hs[t + 1], cs[t + 1], masters[t],
                    **options,
                )  # fmt: skip
        ctx.save_for_backward(w_hh_t, gates, hs, cs, keep)
        ctx.options = options
        ctx.dtypes = (input_dtype, weight_dtype)
        # copies: a caller's in-place change to an output must not touch what the backward reads
        outputs = hs[1:].transpose(0, 1).contiguous()  # (B, N, H)
        return outputs, masters.transpose(0, 1).contiguous(), hs[steps].clone(), cs[steps].clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_outputs, grad_masters, grad_h_last, grad_c_last):
        w_hh_t, gates, hs, cs, keep = ctx.saved_tensors
        steps, batch, width = hs.shape[0] - 1, hs.shape[1], hs.shape[2]
        grad_h_steps = (  # (N, B, H)
            hs.new_zeros(steps, batch, width)
            if grad_outputs is None
            else grad_outputs.float().transpose(0, 1).contiguous()
        )
        grad_masters = (
            hs.new_zeros(steps, batch, ctx.options["C"])
            if grad_masters is None
            else grad_masters.float().transpose(0, 1).contiguous()
        )
        grad_h = hs.new_zeros(batch, width) if grad_h_last is None else grad_h_last.float().contiguous()
        grad_c = hs.new_zeros(batch, width) if grad_c_last is None else grad_c_last.float().clone()
        grad_gates = torch.empty_like(gates)  # (N, B, G)
        grad_c_prev = torch.empty_like(grad_c)
        grad_h_direct = torch.empty_like(grad_h) if keep is not None else grad_c_prev  # (a dummy without a mask)
        for t in reversed(range(steps)):
            _on_lstm_cell_backward[(batch,)](
                gates[t], cs[t], keep[t] if keep is not None else cs[t], grad_h, grad_h_steps[t], grad_c, grad_masters[t],
                grad_gates[t], grad_c_prev, grad_h_direct, **ctx.options,
            )  # fmt: skip
            grad_c, grad_c_prev = grad_c_prev, grad_c
            # dh_{t-1} = dgates_t Uᵀ (+ the state kept through a padded step)
            if keep is not None:
                grad_h = torch.addmm(grad_h_direct, grad_gates[t], w_hh_t.t())
            else:
                grad_h = grad_gates[t] @ w_hh_t.t()
        flat = grad_gates.reshape(steps * batch, -1)  # (N·B, G)
        grad_w = hs[:steps].reshape(steps * batch, width).t() @ flat  # (H, G): once, after the loop
        input_dtype, weight_dtype = ctx.dtypes
        return grad_gates.transpose(0, 1).to(input_dtype), grad_w.to(weight_dtype), grad_h, grad_c, None, None, None


def _cell_options(gates: int, width: int, n_chunk: int, chunk_size: int, has_keep: bool) -> dict:
    """The cell kernels' sizes and compile-time arguments (more threads for a row of more units)."""
    blocks = _blocks(n_chunk, chunk_size)
    warps = 4 if blocks["BLOCK_C"] * blocks["BLOCK_S"] <= 1024 else 8
    return dict(C=n_chunk, S=chunk_size, H=width, G=gates, HAS_KEEP=has_keep, num_warps=warps, **blocks)


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
    """:func:`syntaxformer.blocks.on_lstm.on_lstm_loop` (the same arguments and returns) by
    :class:`TritonOnLstmRecurrence`: per step one recurrent product and one cell kernel forward, one cell
    kernel and one product backward; the recurrent weight's gradient once (``weight_grad_once`` is
    always so). A mask applies to every step when ``first_padded`` is inside the sequence (the loop's
    callers pass 0 with a mask: the mask is true before its first padded step)."""
    masked = mask if mask is not None and first_padded < gates_x.shape[1] else None
    return TritonOnLstmRecurrence.apply(gates_x, w_hh_t, h, c, masked, n_chunk, chunk_size)


__all__ = ["TritonOnLstmRecurrence", "triton_on_lstm_loop"]
