"""The ON-LSTM recurrence as a network block: its equations, one time step, the loop over time, the
AWD-LSTM regularisers and the layer stack (:class:`OnLstmStack`), used by the ON-LSTM language model
(:mod:`syntaxformer.models.on_lstm`), the ON-LSTM+SAN hybrid and the multi-granularity prior's phrase
interaction (:mod:`syntaxformer.priors.multi_granularity`).

Shen, Tan, Sordoni & Courville, "Ordered Neurons", ICLR 2019, §3 (eqs. 9-14); public code
yikangshen/Ordered-Neurons (``ON_LSTM.py``; read, not copied). DESIGN.md §3.4. Conventions (batch
first, right padding, distances in [0, 1]) are those of :mod:`syntaxformer.models.on_lstm`.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..kernels import triton_runs_on
from ..kernels.on_lstm import WEIGHT_GRAD_ONCE_MIN, weight_gradient_once_product

# ----------------------------------------------------------------------------------------------
# The equations (paper §3; DESIGN.md §3.4), one function each, any float dtype
# ----------------------------------------------------------------------------------------------


def cumax(x: Tensor) -> Tensor:
    """``cumax(x) = cumsum(softmax(x))`` over the last dimension (paper §3.1).

    The expectation of a binary gate ``g = (0, ..., 0, 1, ..., 1)`` whose split point follows
    ``softmax(x)``: monotonically non-decreasing, in [0, 1], last element 1 (up to rounding).
    Shape: ``(..., D)`` -> ``(..., D)``.
    """
    return torch.cumsum(torch.softmax(x, dim=-1), dim=-1)


def expand_chunks(gate: Tensor, chunk_size: int) -> Tensor:
    """Master gate per chunk ``(..., n_chunk)`` -> per hidden unit ``(..., n_chunk * chunk_size)``:
    unit ``u`` takes the value of chunk ``u // chunk_size`` (the public code's ``[:, :, None]``
    broadcast over ``(B, n_chunk, chunk_size)`` views; :func:`on_lstm_step` broadcasts the same way)."""
    return gate.repeat_interleave(chunk_size, dim=-1)


def master_forget_gate(logits: Tensor) -> Tensor:
    """``f~_t = cumax(W_f~ x_t + U_f~ h_{t-1} + b_f~)`` (eq. 9): rises from 0 to 1 over the master
    units. ``(..., n_chunk)``."""
    return cumax(logits)


def master_input_gate(logits: Tensor) -> Tensor:
    """``i~_t = 1 - cumax(W_i~ x_t + U_i~ h_{t-1} + b_i~)`` (eq. 10): falls from 1 to 0.
    ``(..., n_chunk)``."""
    return 1.0 - cumax(logits)


def master_gates(logits: Tensor) -> tuple[Tensor, Tensor]:
    """Both master gates from their logits ``(B, 2 n_chunk)`` (``[i~ | f~]``, the public order) with
    one :func:`cumax` call (eqs. 9-10, as :func:`master_forget_gate` and :func:`master_input_gate`).

    Returns ``(f~ (B, n_chunk), i~ (B, n_chunk))``.
    """
    cum_i, cum_f = cumax(logits.view(logits.shape[0], 2, -1)).unbind(1)  # (B, C) each
    return cum_f, 1.0 - cum_i


def overlap(f_master: Tensor, i_master: Tensor) -> Tensor:
    """``omega_t = f~_t o i~_t`` (eq. 11): the units both kept and written (shapes broadcast)."""
    return f_master * i_master


def forget_gate_hat(f: Tensor, f_master: Tensor, omega: Tensor) -> Tensor:
    """``f^_t = f_t o omega_t + (f~_t - omega_t)`` (eq. 12): the standard forget gate ``f_t``
    (sigmoid) acts inside the overlap; above it the master gate alone. ``(..., H)`` (broadcast)."""
    return torch.addcmul(f_master - omega, f, omega)


def input_gate_hat(i: Tensor, i_master: Tensor, omega: Tensor) -> Tensor:
    """``i^_t = i_t o omega_t + (i~_t - omega_t)`` (eq. 13). ``(..., H)`` (broadcast)."""
    return torch.addcmul(i_master - omega, i, omega)


def cell_state(f_hat: Tensor, c_prev: Tensor, i_hat: Tensor, c_candidate: Tensor) -> Tensor:
    """``c_t = f^_t o c_{t-1} + i^_t o c^_t`` (eq. 14), ``c^_t = tanh(W_c x_t + U_c h_{t-1} + b_c)``."""
    return torch.addcmul(f_hat * c_prev, i_hat, c_candidate)


def hidden_state(o: Tensor, c: Tensor) -> Tensor:
    """``h_t = o_t o tanh(c_t)`` (the LSTM's output, paper eq. 5)."""
    return o * torch.tanh(c)


def syntactic_distance(f_master: Tensor) -> Tensor:
    """``d_t = 1 - mean_k f~_tk`` over the master units (§5.2, normalised by ``D_m`` as the public
    ``distance_cforget``), in [0, 1]. ``(..., n_chunk)`` -> ``(...)``."""
    return 1.0 - f_master.mean(dim=-1)


# ----------------------------------------------------------------------------------------------
# One step and the recurrence
# ----------------------------------------------------------------------------------------------


def on_lstm_step(
    gates_x: Tensor, h: Tensor, c: Tensor, w_hh_t: Tensor, n_chunk: int, chunk_size: int
) -> tuple[Tensor, Tensor, Tensor]:
    """One ON-LSTM step (eqs. 9-14 and ``h_t = o_t o tanh(c_t)``).

    Args:
        gates_x: ``(B, G)`` the input projection of this step with both biases,
            ``G = 2 n_chunk + 4 H`` in the layout ``[i~ | f~ | o | c^ | i | f]``.
        h, c: ``(B, H)`` the previous hidden and cell state.
        w_hh_t: ``(H, G)`` the recurrent weight, transposed.
        n_chunk, chunk_size: master units and units per master unit (``H = n_chunk * chunk_size``).

    Returns:
        ``(h_t (B, H), c_t (B, H), f~_t (B, n_chunk))``.
    """
    return on_lstm_cell(torch.addmm(gates_x, h, w_hh_t), c, n_chunk, chunk_size)


def on_lstm_cell(gates: Tensor, c: Tensor, n_chunk: int, chunk_size: int) -> tuple[Tensor, Tensor, Tensor]:
    """The gates and state update of one step from its pre-activations ``gates`` ``(B, G)``
    (``W x_t + U h_{t-1} + b``, layout ``[i~ | f~ | o | c^ | i | f]``) and ``c_{t-1}`` ``(B, H)``.
    Returns ``(h_t (B, H), c_t (B, H), f~_t (B, n_chunk))`` (eqs. 9-14, :func:`on_lstm_step`)."""
    b = c.shape[0]
    gates = gates.to(c.dtype)  # under bf16 autocast the products are bf16; the state stays c's
    # split / unbind, never indexing: the backward of an index fills a zero tensor of the whole
    # input per index, the backward of a split concatenates once
    master_logits, unit_logits = gates.split([2 * n_chunk, gates.shape[1] - 2 * n_chunk], dim=1)
    f_master, i_master = master_gates(master_logits)  # (B, C) each
    f_master_u, i_master_u = f_master[:, :, None], i_master[:, :, None]  # (B, C, 1): one per chunk
    o_z, c_z, i_z, f_z = unit_logits.view(b, 4, n_chunk, chunk_size).unbind(1)  # (B, C, S) each
    o, i, f = torch.sigmoid(o_z), torch.sigmoid(i_z), torch.sigmoid(f_z)
    c_candidate = torch.tanh(c_z)
    omega = overlap(f_master_u, i_master_u)  # (B, C, 1)
    f_hat = forget_gate_hat(f, f_master_u, omega)  # (B, C, S)
    i_hat = input_gate_hat(i, i_master_u, omega)  # (B, C, S)
    c_new = cell_state(f_hat, c.view(b, n_chunk, chunk_size), i_hat, c_candidate)
    h_new = hidden_state(o, c_new)  # (B, C, S)
    return h_new.reshape(b, -1), c_new.reshape(b, -1), f_master


def on_lstm_loop(
    gates_x: Tensor,
    w_hh_t: Tensor,
    h: Tensor,
    c: Tensor,
    mask: Optional[Tensor],
    first_padded: int,
    n_chunk: int,
    chunk_size: int,
    weight_grad_once: bool | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The loop over time of :func:`on_lstm_recurrence` (see it for the arguments), with the state
    masked from step ``first_padded`` on; ``w_hh_t`` is ``(H, G)``.

    ``weight_grad_once``: when gradients are wanted, compute the recurrent weight's gradient once
    after the loop (:func:`~syntaxformer.kernels.on_lstm.weight_gradient_once_product`: the same
    product, one ``(H, B N) @ (B N, G)`` matmul after the loop) rather than autograd's product at every
    step. None = when the weight has at least
    :data:`~syntaxformer.kernels.on_lstm.WEIGHT_GRAD_ONCE_MIN` elements (measured on CPU: x1.4-1.5
    forward+backward at the paper's widths, no difference beyond noise at ``mini`` / ``small``, whose
    per-step products stay in cache). Under ``torch.compile`` autograd's product (the compiler
    schedules the weight's gradient itself).
    """
    outputs: list[Tensor] = []
    masters: list[Tensor] = []
    if weight_grad_once is None:
        weight_grad_once = w_hh_t.numel() >= WEIGHT_GRAD_ONCE_MIN
    fast_product = None  # the kernel's per-step product (kernels/on_lstm.py), or None: torch.addmm
    # not under torch.compile: the product's backward appends to a list, a side effect it does not trace
    if weight_grad_once and torch.is_grad_enabled() and w_hh_t.requires_grad and not torch.compiler.is_compiling():
        fast_product = weight_gradient_once_product(w_hh_t)
    for t, gates_x_t in enumerate(gates_x.unbind(1)):  # unbind: one backward op, not N index fills
        # W x_t + U h_{t-1} + b: (B, G)
        gates = torch.addmm(gates_x_t, h, w_hh_t) if fast_product is None else fast_product(gates_x_t, h)
        h_new, c_new, f_master = on_lstm_cell(gates, c, n_chunk, chunk_size)  # (B, H), (B, H), (B, n_chunk)
        if mask is not None and t >= first_padded:
            keep = mask[:, t : t + 1]  # (B, 1) bool
            h_new = torch.where(keep, h_new, h)
            c_new = torch.where(keep, c_new, c)
        h, c = h_new, c_new
        outputs.append(h)
        masters.append(f_master)
    return torch.stack(outputs, dim=1), torch.stack(masters, dim=1), h, c


def on_lstm_recurrence(
    gates_x: Tensor, w_hh: Tensor, h: Tensor, c: Tensor, mask: Tensor | None, chunk_size: int, loop=on_lstm_loop
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Run one ON-LSTM layer over time.

    Args:
        gates_x: ``(B, N, G)`` input projections of every step, both biases included.
        w_hh: ``(G, H)`` the recurrent weight (after DropConnect).
        h, c: ``(B, H)`` the initial state.
        mask: ``(B, N)`` bool, True = real token; a padded step keeps the state. None = no padding.
        chunk_size: units per master unit.
        loop: :func:`on_lstm_loop`, or another loop with its signature (the benchmark's contrast).

    Returns:
        ``(outputs (B, N, H), f_master (B, N, n_chunk), h_N (B, H), c_N (B, H))``: each step's hidden
        state (the state carried through at padding), each step's master forget gate, the final state.
    """
    n_chunk = h.shape[1] // chunk_size
    # with a mask, every step keeps the state where it pads (torch.where with a true mask returns the new
    # state itself, so unpadded rows get exactly the values of no mask); finding the first padded step
    # would read the mask's values on the host, a synchronisation with the device at every forward pass
    first_padded = gates_x.shape[1] if mask is None else 0
    return loop(gates_x, w_hh.t(), h, c, mask, first_padded, n_chunk, chunk_size)


# ----------------------------------------------------------------------------------------------
# Regularisation (AWD-LSTM, as the public code applies it)
# ----------------------------------------------------------------------------------------------


def locked_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Variational dropout: one mask per sentence and feature, shared by every time step.
    ``(B, N, d)`` -> ``(B, N, d)`` (kept values scaled by 1/(1-p))."""
    if not training or p == 0.0:
        return x
    mask = x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(1.0 - p) / (1.0 - p)  # (B, 1, d)
    return x * mask


def embedding_dropout(weight: Tensor, input_ids: Tensor, p: float, training: bool) -> Tensor:
    """Embedding lookup with whole rows (word types) dropped (``embedded_dropout`` of AWD-LSTM).

    Args: weight ``(V, E)``; input_ids ``(B, N)``. Returns ``(B, N, E)``.
    """
    if training and p > 0.0:
        keep = weight.new_empty(weight.shape[0], 1).bernoulli_(1.0 - p) / (1.0 - p)  # (V, 1)
        weight = weight * keep
    return F.embedding(input_ids, weight)


def drop_connect(weight: Tensor, p: float, training: bool) -> Tensor:
    """DropConnect as the public ``LinearDropConnect``: in training each weight is zeroed with
    probability p (no rescaling), in evaluation all weights are multiplied by ``1 - p``."""
    if p == 0.0:
        return weight
    if not training:
        return weight * (1.0 - p)
    return weight.masked_fill(torch.rand_like(weight) < p, 0.0)


# ----------------------------------------------------------------------------------------------
# Layer and model
# ----------------------------------------------------------------------------------------------


def triton_on_lstm_loop_where_it_runs(
    gates_x: Tensor,
    w_hh_t: Tensor,
    h: Tensor,
    c: Tensor,
    mask: Optional[Tensor],
    first_padded: int,
    n_chunk: int,
    chunk_size: int,
    weight_grad_once: bool | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """:func:`on_lstm_loop` with each step's cell as one Triton kernel each way
    (:func:`~syntaxformer.kernels.triton_on_lstm.triton_on_lstm_loop`; ``kernel="triton"``) where
    :func:`~syntaxformer.kernels.triton_runs_on` the device; elsewhere :func:`on_lstm_loop`, bit for bit.
    The same arguments and returns as :func:`on_lstm_loop`."""
    if not triton_runs_on(gates_x.device):
        return on_lstm_loop(gates_x, w_hh_t, h, c, mask, first_padded, n_chunk, chunk_size, weight_grad_once)
    # Triton, an optional dependency: imported only where it runs (triton_runs_on)
    from ..kernels.triton_on_lstm import triton_on_lstm_loop

    return triton_on_lstm_loop(gates_x, w_hh_t, h, c, mask, first_padded, n_chunk, chunk_size, weight_grad_once)


#: the config's ``kernel`` -> the loop over time an :class:`OnLstmLayer` calls
#: (:mod:`syntaxformer.models.kernel_choice`): the cell's equations with autograd, or one Triton kernel each
#: way where it runs; no ``"fused"`` form. Each takes and returns as :func:`on_lstm_loop`.
CELL_KERNELS = {
    "reference": on_lstm_loop,
    "triton": triton_on_lstm_loop_where_it_runs,
}


class OnLstmLayer(nn.Module):
    """One ON-LSTM layer: ``ih`` (input -> gates, all steps at once) and ``hh`` (hidden -> gates,
    each step), both with bias, ``G = 2 H / chunk_size + 4 H`` outputs (public ``ONLSTMCell``).
    ``kernel``: a key of :data:`CELL_KERNELS`, resolved here into :attr:`loop`.

    Raises:
        ValueError: an unknown ``kernel``.
    """

    def __init__(self, input_size: int, hidden_size: int, chunk_size: int, wdrop: float, kernel: str = "reference"):
        super().__init__()
        if kernel not in CELL_KERNELS:
            raise ValueError(f"unknown kernel {kernel!r} for the ON-LSTM cell; expected one of {tuple(CELL_KERNELS)}")
        self.hidden_size, self.chunk_size, self.wdrop = hidden_size, chunk_size, wdrop
        self.n_chunk = hidden_size // chunk_size
        gates = 4 * hidden_size + 2 * self.n_chunk
        self.ih = nn.Linear(input_size, gates)
        self.hh = nn.Linear(hidden_size, gates)
        #: the loop over time (:data:`CELL_KERNELS`; a benchmark or test may put another loop here)
        self.loop = CELL_KERNELS[kernel]

    def forward(self, x: Tensor, mask: Tensor | None, state: tuple[Tensor, Tensor] | None = None):
        """x ``(B, N, in)``, mask ``(B, N)`` bool or None, state ``(h, c)`` each ``(B, H)`` or None
        (zeros). Returns ``(outputs (B, N, H), f_master (B, N, n_chunk), (h_N, c_N))``."""
        if state is None:
            zeros = x.new_zeros(x.shape[0], self.hidden_size)
            state = (zeros, zeros)
        gates_x = F.linear(x, self.ih.weight, self.ih.bias + self.hh.bias)  # (B, N, G)
        w_hh = drop_connect(self.hh.weight, self.wdrop, self.training)  # (G, H)
        out, f_master, h, c = on_lstm_recurrence(gates_x, w_hh, state[0], state[1], mask, self.chunk_size, self.loop)
        return out, f_master, (h, c)


class OnLstmStack(nn.ModuleList):
    """Layers of :class:`OnLstmLayer` bottom-up with locked dropout (``dropouth``) between them; a
    ``ModuleList``, so parameters are named ``{i}.ih`` / ``{i}.hh`` under the attribute holding it
    (:class:`OnLstmModel` and the ON-LSTM + self-attention hybrid both use it).

    Args:
        sizes: ``[input width] + [width of each layer]``, bottom-up.
        chunk_size, wdrop, kernel: as :class:`~syntaxformer.models.on_lstm.OnLstmConfig`; dropouth: locked
            dropout between layers.
    """

    def __init__(self, sizes: list[int], chunk_size: int, wdrop: float, dropouth: float, kernel: str = "reference"):
        super().__init__(OnLstmLayer(sizes[l], sizes[l + 1], chunk_size, wdrop, kernel) for l in range(len(sizes) - 1))
        self.dropouth = dropouth

    def forward(self, x: Tensor, mask: Tensor | None, state=None):
        """x ``(B, N, in)``, mask ``(B, N)`` bool or None, state per layer ``(h, c)`` or None.

        Returns:
            ``(hiddens, distances, states)``: each layer's outputs ``(B, N, H_l)`` (before dropout),
            the distances ``(B, L, N)`` (:func:`syntactic_distance`; 0 at padding) and each layer's
            final ``(h, c)``.
        """
        masters, hiddens, states = [], [], []
        for l, layer in enumerate(self):
            x, f_master, layer_state = layer(x, mask, None if state is None else state[l])  # (B, N, H_l)
            masters.append(f_master)
            hiddens.append(x)
            states.append(layer_state)
            if l < len(self) - 1:
                x = locked_dropout(x, self.dropouth, self.training)
        distances = torch.stack([syntactic_distance(m) for m in masters], dim=1)  # (B, L, N)
        if mask is not None:
            distances = distances.masked_fill(~mask[:, None, :], 0.0)
        return hiddens, distances, states


__all__ = [
    "cumax",
    "expand_chunks",
    "master_forget_gate",
    "master_input_gate",
    "master_gates",
    "overlap",
    "forget_gate_hat",
    "input_gate_hat",
    "cell_state",
    "hidden_state",
    "syntactic_distance",
    "on_lstm_step",
    "on_lstm_cell",
    "on_lstm_loop",
    "on_lstm_recurrence",
    "triton_on_lstm_loop_where_it_runs",
    "locked_dropout",
    "embedding_dropout",
    "drop_connect",
    "OnLstmLayer",
    "OnLstmStack",
    "CELL_KERNELS",
    "WEIGHT_GRAD_ONCE_MIN",
]
