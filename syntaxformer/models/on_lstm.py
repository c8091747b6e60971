"""ON-LSTM: the ordered-neurons LSTM language model and its syntactic distances.

Shen, Tan, Sordoni & Courville, "Ordered Neurons: Integrating Tree Structures into Recurrent Neural
Networks", ICLR 2019 (arXiv 1810.09536), §3 (eqs. 9-14), §5.2 (parsing); public code
yikangshen/Ordered-Neurons (``ON_LSTM.py``, ``model.py``, ``test_phrase_grammar.py``; read, not
copied). DESIGN.md §3.4.

The file reads bottom-up::

    OnLstmConfig
    equations            cumax, expand_chunks, master_forget_gate, master_input_gate, master_gates,
                         overlap, forget_gate_hat, input_gate_hat, cell_state, hidden_state,
                         syntactic_distance
    step / recurrence    on_lstm_step = addmm + on_lstm_cell (one time step); on_lstm_loop,
                         on_lstm_recurrence (the loop over time; _WeightGradientOnce)
    regularisation       locked_dropout, embedding_dropout, drop_connect (AWD-LSTM's, as the public code)
    layer / model        OnLstmLayer, OnLstmStack (the layers), OnLstmModel (embeddings + stack),
                         OnLstmForCausalLM (+ tied head)
    parsing              gap_distances (per-word distances -> the n-1 gaps of the top-down split)

Conventions
-----------
* Batch first, right padding (``attention_mask``: 1 = token, 0 = padding). A padded step keeps the
  state it received (``h``, ``c`` are copied through), so padding never changes a real output nor the
  final state, and distances at padding are 0. Any padding pattern (left padding too) gives each
  sentence's own values at its real positions.
* ``distances`` ``[B, L, N]``: per layer l and word t, ``d_t = 1 - mean_k f~_tk`` over the master
  units (chunks), in [0, 1]: the public code's ``distance_cforget`` (the paper's ``D_m - sum_k
  f~_tk`` divided by ``D_m``). Large = the master forget gate erases much of the ordered state: a
  large constituent ends before the word (the public parser splits before it).
* Layer sizes: the public ``[ninp] + [nhid] * (nlayers - 1) + [ninp]``: every layer has
  ``hidden_size`` units except the last, which has ``embedding_size`` so that the output layer can be
  tied to the embeddings; ``hidden_sizes`` lists them explicitly instead.
* Gate layout of one layer's projections (the public order, so its weights port row for row):
  ``[i~ logits (n_chunk) | f~ logits (n_chunk) | o (H) | c^ (H) | i (H) | f (H)]``.

The fast recurrence
-------------------
* The input-to-hidden projections of all time steps are one matmul per layer (``[B, N, in] @
  [in, G]``, both biases folded in) outside the loop; a step does one ``addmm`` with the recurrent
  weight and ~15 elementwise kernels on ``[B, n_chunk, chunk_size]`` views, so a master gate
  broadcasts over its chunk instead of being copied to every unit.
* Tensors are taken apart with ``unbind`` / ``split``, never by indexing: the backward of
  ``x[:, t]`` fills a zero tensor of the whole ``x`` for every t (this halved the time of a
  ``mini`` forward+backward).
* For large layers the recurrent weight's gradient is one ``[H, B N] @ [B N, G]`` matmul after
  the loop (:class:`_WeightGradientOnce`) instead of autograd's ``[H, B] @ [B, G]`` product written
  and accumulated at every step (memory-bound at large widths: x1.4-1.5 forward+backward at the
  paper's; small layers keep autograd's, which stays in cache).
* Padding costs nothing while every sentence is still real: the state is masked (``torch.where``)
  only from the first step at which some sentence is padded.
* Not TorchScript: scripting the loop gave x1.05 (mini) to x1.4 (tiny) on the forward pass and
  nothing on forward+backward on CPU, and ``torch.jit.script`` is deprecated in current PyTorch.

``benchmarks/on_lstm_speed.py`` measures tokens/s against ``torch.nn.LSTM`` of the same widths in
the same run (one CPU thread of a shared 2-core machine, runs of the same day: forward+backward
0.76 of the LSTM's tokens/s at ``mini``, 0.80-0.86 at ``small``, 0.68-0.74 at ``paper``; forward
only 0.65-0.79). No GPU figure yet.

Regularisation (the public ``RNNModel`` / AWD-LSTM options; all five implemented)
---------------------------------------------------------------------------------
``dropoute`` drops whole rows of the embedding matrix (a word type vanishes from the batch; kept
rows scaled by 1/(1-p)); ``dropouti`` / ``dropouth`` / ``dropout`` are locked (variational) dropout,
one mask per sentence shared by all time steps, on the embeddings, between layers and on the last
layer's output; ``wdrop`` is DropConnect on the hidden-to-hidden weights, one mask per forward pass
(as the public ``LinearDropConnect``: dropped weights are zeroed without rescaling in training, and
the weights are multiplied by ``1 - wdrop`` in evaluation). In evaluation nothing else is dropped.

Where this file differs from the public code
--------------------------------------------
* Batch first with an ``attention_mask`` (the public code is sequence first, unpadded, batch of one
  sentence at parse time).
* The input projections of all steps are one matmul and the recurrent weight's gradient is summed
  once after the loop; the values are those of the step-by-step equations (``tests/test_on_lstm.py``).
* Parsing hands the per-word distances to the shared top-down decoder as n-1 gap distances
  (:func:`gap_distances`), which reproduces the public ``build_tree`` exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from ..structures import SyntacticDistances

#: config fields of the named sizes (``make_config("on-lstm", preset, ...)``)
PRESETS = {
    # the public recipe (yikangshen/Ordered-Neurons README; DESIGN.md §3.4): 3 layers, embedding 400,
    # hidden 1150 (the last layer 400, tied), chunk 10, AWD-LSTM regularisation; trained with
    # batch 20 x bptt 70, SGD lr 30 then NT-ASGD, clip 0.25, weight decay 1.2e-6, 1000 epochs
    "paper": dict(embedding_size=400, hidden_size=1150, num_layers=3, chunk_size=10,
                  dropout=0.45, dropouth=0.3, dropouti=0.5, dropoute=0.1, wdrop=0.45),
    # CPU sizes (same shape: 3 layers, the last one as wide as the embeddings); their dropouts are
    # the public ones scaled down for short runs, not tuned (issue 15 item 2 chooses recipes).
    # The recurrent stack alone, forward+backward, batch 64 x 25, one CPU thread
    # (benchmarks/on_lstm_speed.py): small ~2,200 tokens/s, mini ~6,500 tokens/s
    "small": dict(embedding_size=256, hidden_size=512, num_layers=3, chunk_size=8,
                  dropout=0.3, dropouth=0.2, dropouti=0.3, dropoute=0.05, wdrop=0.3),
    "mini": dict(embedding_size=128, hidden_size=256, num_layers=3, chunk_size=8,
                 dropout=0.2, dropouth=0.1, dropouti=0.2, dropoute=0.0, wdrop=0.2),
    # tests: milliseconds
    "tiny": dict(embedding_size=16, hidden_size=24, num_layers=3, chunk_size=4,
                 dropout=0.1, dropouth=0.1, dropouti=0.1, dropoute=0.0, wdrop=0.1),
}

#: ``induce`` recipes (TrainArguments fields; ``overrides`` = config fields): next-word training on
#: ptb-sample's words (the causal-LM objective, sentences framed by ``[CLS]``), parsed from layer
#: ``parse_layer`` (1, the public parser's) by the top-down split at the largest distance. Not searched
#: (Adam with the trainer's schedule instead of the public SGD/NT-ASGD; clipping 0.25 as the public
#: code). Steps from the measured speed: a ``mini`` training step (64 sentences) took 0.39 s on 2
#: idle cores in a 120-step trainer run (the last 20 steps at 4,570 tokens/s; the Tree Transformer's
#: ``mini`` 0.24 s in the same conditions): ``default`` = 2,500 steps, ~14-16 minutes of training on
#: 2 idle CPU cores; ``long`` = 7,500 steps, three times as many. The parse layer stays the public
#: code's (1); on ptb-sample:dev this recipe's layer 2 parses better (README, docs/induce).
RECIPES = {
    "default": dict(preset="mini", max_steps=2500, batch_size=64, lr=2e-3,
                    warmup_steps=100, schedule="linear", final_lr_fraction=0.1, clip=0.25, min_freq=2),
    "long": dict(preset="mini", max_steps=7500, batch_size=64, lr=2e-3,
                 warmup_steps=100, schedule="linear", final_lr_fraction=0.1, clip=0.25, min_freq=2),
}

_DROPOUTS = ("dropout", "dropouth", "dropouti", "dropoute", "wdrop")


# ----------------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------------

class OnLstmConfig(PretrainedConfig):
    """Configuration of :class:`OnLstmForCausalLM`. Defaults: the public recipe (the ``paper`` preset).

    Args:
        vocab_size: number of tokens.
        embedding_size: word embedding width (the public ``emsize``, 400); also the last layer's width
            (the output layer is tied to the embeddings).
        hidden_size: width of every layer but the last (the public ``nhid``, 1150).
        hidden_sizes: the width of each layer, bottom-up, instead of ``hidden_size``; the last must
            equal ``embedding_size`` (tied output layer). None = ``[hidden_size] * (num_layers - 1) +
            [embedding_size]``.
        num_layers: ON-LSTM layers (the public 3).
        chunk_size: hidden units per master-gate unit (the public 10); every layer width must be a
            multiple of it. A layer of width H has ``H / chunk_size`` master units (chunks).
        dropout: locked dropout on the last layer's output, before the output layer (public 0.45).
        dropouth: locked dropout between layers (public 0.3).
        dropouti: locked dropout on the word embeddings (public 0.5).
        dropoute: dropout of whole embedding rows, i.e. word types (public 0.1).
        wdrop: DropConnect on the hidden-to-hidden weights (public 0.45).
        parse_layer: the layer (0-based) whose distances ``induce`` returns; the public parser reads
            the second layer (1). Negative values count from the top.
        parse_prefix_token_id: a token fed before every sentence by ``induce`` (its distance is
            dropped), as the public parser feeds ``<eos>`` (its models are trained on running text
            with ``<eos>`` between sentences); None = none.
        init_range: the embeddings are drawn from U(-init_range, init_range) (public 0.1).
        pad_token_id: padding token (padding is found from it when no ``attention_mask`` is given).
        tie_word_embeddings: tie the output layer to the embeddings (the public recipe does). Stated
            because ``transformers`` 5 no longer gives every config this field.

    Raises:
        ValueError: a width that is not a multiple of ``chunk_size``, ``hidden_sizes`` of the wrong
            length or (tied) a last width other than ``embedding_size``, a dropout outside [0, 1),
            or ``parse_layer`` out of range.
    """

    model_type = "on-lstm"
    attribute_map = {"num_hidden_layers": "num_layers"}

    def __init__(self, vocab_size: int = 10000, embedding_size: int = 400, hidden_size: int = 1150,
                 hidden_sizes: list[int] | None = None, num_layers: int = 3, chunk_size: int = 10,
                 dropout: float = 0.45, dropouth: float = 0.3, dropouti: float = 0.5,
                 dropoute: float = 0.1, wdrop: float = 0.45, parse_layer: int = 1,
                 parse_prefix_token_id: int | None = None, init_range: float = 0.1,
                 pad_token_id: int = 0, tie_word_embeddings: bool = True, **kwargs):
        super().__init__(pad_token_id=pad_token_id, tie_word_embeddings=tie_word_embeddings, **kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.hidden_sizes = list(hidden_sizes) if hidden_sizes is not None else None
        self.num_layers = num_layers
        self.chunk_size = chunk_size
        self.dropout, self.dropouth, self.dropouti, self.dropoute, self.wdrop = (
            dropout, dropouth, dropouti, dropoute, wdrop)
        self.parse_layer = parse_layer
        self.parse_prefix_token_id = parse_prefix_token_id
        self.init_range = init_range
        self._check()

    @property
    def layer_sizes(self) -> list[int]:
        """The width of each layer, bottom-up."""
        if self.hidden_sizes is not None:
            return list(self.hidden_sizes)
        return [self.hidden_size] * (self.num_layers - 1) + [self.embedding_size]

    def _check(self) -> None:
        if self.num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {self.num_layers}")
        sizes = self.layer_sizes
        if len(sizes) != self.num_layers:
            raise ValueError(f"hidden_sizes has {len(sizes)} widths for {self.num_layers} layers")
        if self.tie_word_embeddings and sizes[-1] != self.embedding_size:
            raise ValueError(f"the last layer's width {sizes[-1]} must equal embedding_size "
                             f"{self.embedding_size} (tied output layer)")
        bad = [s for s in sizes if s < 1 or s % self.chunk_size]
        if bad or self.chunk_size < 1:
            raise ValueError(f"layer widths {sizes} must be positive multiples of chunk_size "
                             f"{self.chunk_size}")
        for name in _DROPOUTS:
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must lie in [0, 1), got {getattr(self, name)}")
        if not -self.num_layers <= self.parse_layer < self.num_layers:
            raise ValueError(f"parse_layer {self.parse_layer} out of range for {self.num_layers} layers")


# ----------------------------------------------------------------------------------------------
# The equations (paper §3; DESIGN.md §3.4), one function each, any float dtype
# ----------------------------------------------------------------------------------------------

def cumax(x: Tensor) -> Tensor:
    """``cumax(x) = cumsum(softmax(x))`` over the last dimension (paper §3.1).

    The expectation of a binary gate ``g = (0, ..., 0, 1, ..., 1)`` whose split point follows
    ``softmax(x)``: monotonically non-decreasing, in [0, 1], last element 1 (up to rounding).
    Shape: ``[..., D]`` -> ``[..., D]``.
    """
    return torch.cumsum(torch.softmax(x, dim=-1), dim=-1)


def expand_chunks(gate: Tensor, chunk_size: int) -> Tensor:
    """Master gate per chunk ``[..., n_chunk]`` -> per hidden unit ``[..., n_chunk * chunk_size]``:
    unit ``u`` takes the value of chunk ``u // chunk_size`` (the public code's ``[:, :, None]``
    broadcast over ``[B, n_chunk, chunk_size]`` views; :func:`on_lstm_step` broadcasts the same way)."""
    return gate.repeat_interleave(chunk_size, dim=-1)


def master_forget_gate(logits: Tensor) -> Tensor:
    """``f~_t = cumax(W_f~ x_t + U_f~ h_{t-1} + b_f~)`` (eq. 9): rises from 0 to 1 over the master
    units. ``[..., n_chunk]``."""
    return cumax(logits)


def master_input_gate(logits: Tensor) -> Tensor:
    """``i~_t = 1 - cumax(W_i~ x_t + U_i~ h_{t-1} + b_i~)`` (eq. 10): falls from 1 to 0.
    ``[..., n_chunk]``."""
    return 1.0 - cumax(logits)


def master_gates(logits: Tensor) -> tuple[Tensor, Tensor]:
    """Both master gates from their logits ``[B, 2 n_chunk]`` (``[i~ | f~]``, the public order) with
    one :func:`cumax` call (eqs. 9-10, as :func:`master_forget_gate` and :func:`master_input_gate`).

    Returns ``(f~ [B, n_chunk], i~ [B, n_chunk])``.
    """
    cum_i, cum_f = cumax(logits.view(logits.shape[0], 2, -1)).unbind(1)          # (B, C) each
    return cum_f, 1.0 - cum_i


def overlap(f_master: Tensor, i_master: Tensor) -> Tensor:
    """``omega_t = f~_t o i~_t`` (eq. 11): the units both kept and written (shapes broadcast)."""
    return f_master * i_master


def forget_gate_hat(f: Tensor, f_master: Tensor, omega: Tensor) -> Tensor:
    """``f^_t = f_t o omega_t + (f~_t - omega_t)`` (eq. 12): the standard forget gate ``f_t``
    (sigmoid) acts inside the overlap; above it the master gate alone. ``[..., H]`` (broadcast)."""
    return torch.addcmul(f_master - omega, f, omega)


def input_gate_hat(i: Tensor, i_master: Tensor, omega: Tensor) -> Tensor:
    """``i^_t = i_t o omega_t + (i~_t - omega_t)`` (eq. 13). ``[..., H]`` (broadcast)."""
    return torch.addcmul(i_master - omega, i, omega)


def cell_state(f_hat: Tensor, c_prev: Tensor, i_hat: Tensor, c_candidate: Tensor) -> Tensor:
    """``c_t = f^_t o c_{t-1} + i^_t o c^_t`` (eq. 14), ``c^_t = tanh(W_c x_t + U_c h_{t-1} + b_c)``."""
    return torch.addcmul(f_hat * c_prev, i_hat, c_candidate)


def hidden_state(o: Tensor, c: Tensor) -> Tensor:
    """``h_t = o_t o tanh(c_t)`` (the LSTM's output, paper eq. 5)."""
    return o * torch.tanh(c)


def syntactic_distance(f_master: Tensor) -> Tensor:
    """``d_t = 1 - mean_k f~_tk`` over the master units (§5.2, normalised by ``D_m`` as the public
    ``distance_cforget``), in [0, 1]. ``[..., n_chunk]`` -> ``[...]``."""
    return 1.0 - f_master.mean(dim=-1)


# ----------------------------------------------------------------------------------------------
# One step and the recurrence
# ----------------------------------------------------------------------------------------------

def on_lstm_step(gates_x: Tensor, h: Tensor, c: Tensor, w_hh_t: Tensor, n_chunk: int,
                 chunk_size: int) -> tuple[Tensor, Tensor, Tensor]:
    """One ON-LSTM step (eqs. 9-14 and ``h_t = o_t o tanh(c_t)``).

    Args:
        gates_x: ``[B, G]`` the input projection of this step with both biases,
            ``G = 2 n_chunk + 4 H`` in the layout ``[i~ | f~ | o | c^ | i | f]``.
        h, c: ``[B, H]`` the previous hidden and cell state.
        w_hh_t: ``[H, G]`` the recurrent weight, transposed.
        n_chunk, chunk_size: master units and units per master unit (``H = n_chunk * chunk_size``).

    Returns:
        ``(h_t [B, H], c_t [B, H], f~_t [B, n_chunk])``.
    """
    return on_lstm_cell(torch.addmm(gates_x, h, w_hh_t), c, n_chunk, chunk_size)


def on_lstm_cell(gates: Tensor, c: Tensor, n_chunk: int, chunk_size: int) -> tuple[Tensor, Tensor, Tensor]:
    """The gates and state update of one step from its pre-activations ``gates`` ``[B, G]``
    (``W x_t + U h_{t-1} + b``, layout ``[i~ | f~ | o | c^ | i | f]``) and ``c_{t-1}`` ``[B, H]``.
    Returns ``(h_t [B, H], c_t [B, H], f~_t [B, n_chunk])`` (eqs. 9-14, :func:`on_lstm_step`)."""
    b = c.shape[0]
    gates = gates.to(c.dtype)      # under bf16 autocast the products are bf16; the state stays c's
    # split / unbind, never indexing: the backward of an index fills a zero tensor of the whole
    # input per index, the backward of a split concatenates once
    master_logits, unit_logits = gates.split([2 * n_chunk, gates.shape[1] - 2 * n_chunk], dim=1)
    f_master, i_master = master_gates(master_logits)                             # (B, C) each
    f_master_u, i_master_u = f_master[:, :, None], i_master[:, :, None]          # (B, C, 1): one per chunk
    o_z, c_z, i_z, f_z = unit_logits.view(b, 4, n_chunk, chunk_size).unbind(1)  # (B, C, S) each
    o, i, f = torch.sigmoid(o_z), torch.sigmoid(i_z), torch.sigmoid(f_z)
    c_candidate = torch.tanh(c_z)
    omega = overlap(f_master_u, i_master_u)                                      # (B, C, 1)
    f_hat = forget_gate_hat(f, f_master_u, omega)                                # (B, C, S)
    i_hat = input_gate_hat(i, i_master_u, omega)                                 # (B, C, S)
    c_new = cell_state(f_hat, c.view(b, n_chunk, chunk_size), i_hat, c_candidate)
    h_new = hidden_state(o, c_new)                                               # (B, C, S)
    return h_new.reshape(b, -1), c_new.reshape(b, -1), f_master


#: recurrent weights with at least this many elements get their gradient once after the loop
#: (8 MB in float32; the paper's layers have 5.6M and 1.9M, ``small``'s 1.1M, ``mini``'s 0.3M)
WEIGHT_GRAD_ONCE_MIN = 2 ** 21


class _WeightGradientOnce(torch.autograd.Function):
    """The recurrent weight's gradient in one matmul after the loop (what fused LSTM kernels do).

    Autograd would compute ``dW^T += h_{t-1}^T dgates_t`` at every step: a ``[H, G]`` product with
    inner size B, written and accumulated N times (memory-bound: 21 MB per step at the paper's
    width). Instead :class:`_RecurrentMatmul` keeps each step's ``(h_{t-1}, dgates_t)`` and this
    node, upstream of every step through a 0-d token, sums them as ``cat(h)^T @ cat(dgates)``
    (inner size B N) once all steps are done. Same values; first-order gradients only.
    """

    @staticmethod
    def forward(ctx, w_hh_t: Tensor, store: list) -> Tensor:
        ctx.store = store
        return w_hh_t.new_zeros(())                                              # the token

    @staticmethod
    def backward(ctx, _grad_token):
        if not ctx.store:
            return None, None
        hs, grads = zip(*ctx.store)
        ctx.store.clear()
        return torch.cat(hs).t() @ torch.cat(grads), None                          # (H, G)


class _RecurrentMatmul(torch.autograd.Function):
    """``gates_x + h @ w_hh_t`` whose backward gives ``dgates_x`` and ``dh`` and leaves ``dW`` to
    :class:`_WeightGradientOnce` (it stores ``(h, dgates)`` and returns a zero for the token)."""

    @staticmethod
    def forward(ctx, gates_x: Tensor, h: Tensor, w_hh_t: Tensor, token: Tensor, store: list) -> Tensor:
        ctx.save_for_backward(h, w_hh_t)
        ctx.store = store
        return torch.addmm(gates_x, h, w_hh_t)

    @staticmethod
    def backward(ctx, grad):
        h, w_hh_t = ctx.saved_tensors
        grad = grad.to(w_hh_t.dtype)      # under bf16 autocast the forward product was bf16, the weight is not
        ctx.store.append((h, grad))
        return grad, grad @ w_hh_t.t(), None, grad.new_zeros(()), None


def on_lstm_loop(gates_x: Tensor, w_hh_t: Tensor, h: Tensor, c: Tensor, mask: Optional[Tensor],
                 first_padded: int, n_chunk: int, chunk_size: int, weight_grad_once: bool | None = None
                 ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The loop over time of :func:`on_lstm_recurrence` (see it for the arguments), with the state
    masked from step ``first_padded`` on; ``w_hh_t`` is ``[H, G]``.

    ``weight_grad_once``: when gradients are wanted, compute the recurrent weight's gradient once
    after the loop (:class:`_WeightGradientOnce`) rather than autograd's product at every step.
    None = when the weight has at least :data:`WEIGHT_GRAD_ONCE_MIN` elements (measured on CPU:
    x1.4-1.5 forward+backward at the paper's widths, no difference beyond noise at ``mini`` /
    ``small``, whose per-step products stay in cache).
    """
    outputs: list[Tensor] = []
    masters: list[Tensor] = []
    if weight_grad_once is None:
        weight_grad_once = w_hh_t.numel() >= WEIGHT_GRAD_ONCE_MIN
    batched = weight_grad_once and torch.is_grad_enabled() and w_hh_t.requires_grad
    if batched:
        store: list = []
        token = _WeightGradientOnce.apply(w_hh_t, store)
    for t, gates_x_t in enumerate(gates_x.unbind(1)):     # unbind: one backward op, not N index fills
        gates = (_RecurrentMatmul.apply(gates_x_t, h, w_hh_t, token, store) if batched
                 else torch.addmm(gates_x_t, h, w_hh_t))                         # (B, G)
        h_new, c_new, f_master = on_lstm_cell(gates, c, n_chunk, chunk_size)
        if mask is not None and t >= first_padded:
            keep = mask[:, t:t + 1]                                              # (B, 1) bool
            h_new = torch.where(keep, h_new, h)
            c_new = torch.where(keep, c_new, c)
        h, c = h_new, c_new
        outputs.append(h)
        masters.append(f_master)
    return torch.stack(outputs, dim=1), torch.stack(masters, dim=1), h, c


def on_lstm_recurrence(gates_x: Tensor, w_hh: Tensor, h: Tensor, c: Tensor, mask: Tensor | None,
                       chunk_size: int, loop=on_lstm_loop) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Run one ON-LSTM layer over time.

    Args:
        gates_x: ``[B, N, G]`` input projections of every step, both biases included.
        w_hh: ``[G, H]`` the recurrent weight (after DropConnect).
        h, c: ``[B, H]`` the initial state.
        mask: ``[B, N]`` bool, True = real token; a padded step keeps the state. None = no padding.
        chunk_size: units per master unit.
        loop: :func:`on_lstm_loop`, or another loop with its signature (the benchmark's contrast).

    Returns:
        ``(outputs [B, N, H], f_master [B, N, n_chunk], h_N [B, H], c_N [B, H])``: each step's hidden
        state (the state carried through at padding), each step's master forget gate, the final state.
    """
    n_chunk = h.shape[1] // chunk_size
    first_padded = gates_x.shape[1]
    if mask is not None:
        padded_steps = (~mask).any(dim=0).nonzero()                              # steps where some row pads
        first_padded = int(padded_steps[0]) if len(padded_steps) else first_padded
    return loop(gates_x, w_hh.t(), h, c, mask, first_padded, n_chunk, chunk_size)


# ----------------------------------------------------------------------------------------------
# Regularisation (AWD-LSTM, as the public code applies it)
# ----------------------------------------------------------------------------------------------

def locked_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Variational dropout: one mask per sentence and feature, shared by every time step.
    ``[B, N, d]`` -> ``[B, N, d]`` (kept values scaled by 1/(1-p))."""
    if not training or p == 0.0:
        return x
    mask = x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(1.0 - p) / (1.0 - p)   # (B, 1, d)
    return x * mask


def embedding_dropout(weight: Tensor, input_ids: Tensor, p: float, training: bool) -> Tensor:
    """Embedding lookup with whole rows (word types) dropped (``embedded_dropout`` of AWD-LSTM).

    Args: weight ``[V, E]``; input_ids ``[B, N]``. Returns ``[B, N, E]``.
    """
    if training and p > 0.0:
        keep = weight.new_empty(weight.shape[0], 1).bernoulli_(1.0 - p) / (1.0 - p)    # (V, 1)
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

class OnLstmLayer(nn.Module):
    """One ON-LSTM layer: ``ih`` (input -> gates, all steps at once) and ``hh`` (hidden -> gates,
    each step), both with bias, ``G = 2 H / chunk_size + 4 H`` outputs (public ``ONLSTMCell``)."""

    def __init__(self, input_size: int, hidden_size: int, chunk_size: int, wdrop: float):
        super().__init__()
        self.hidden_size, self.chunk_size, self.wdrop = hidden_size, chunk_size, wdrop
        self.n_chunk = hidden_size // chunk_size
        gates = 4 * hidden_size + 2 * self.n_chunk
        self.ih = nn.Linear(input_size, gates)
        self.hh = nn.Linear(hidden_size, gates)
        self.loop = on_lstm_loop       # the loop over time (a benchmark may put a compiled one here)

    def forward(self, x: Tensor, mask: Tensor | None, state: tuple[Tensor, Tensor] | None = None):
        """x ``[B, N, in]``, mask ``[B, N]`` bool or None, state ``(h, c)`` each ``[B, H]`` or None
        (zeros). Returns ``(outputs [B, N, H], f_master [B, N, n_chunk], (h_N, c_N))``."""
        if state is None:
            zeros = x.new_zeros(x.shape[0], self.hidden_size)
            state = (zeros, zeros)
        gates_x = F.linear(x, self.ih.weight, self.ih.bias + self.hh.bias)       # (B, N, G)
        w_hh = drop_connect(self.hh.weight, self.wdrop, self.training)           # (G, H)
        out, f_master, h, c = on_lstm_recurrence(gates_x, w_hh, state[0], state[1], mask,
                                                 self.chunk_size, self.loop)
        return out, f_master, (h, c)


class OnLstmStack(nn.ModuleList):
    """Layers of :class:`OnLstmLayer` bottom-up with locked dropout (``dropouth``) between them; a
    ``ModuleList``, so parameters are named ``{i}.ih`` / ``{i}.hh`` under the attribute holding it
    (:class:`OnLstmModel` and the ON-LSTM + self-attention hybrid both use it).

    Args:
        sizes: ``[input width] + [width of each layer]``, bottom-up.
        chunk_size, wdrop: as :class:`OnLstmConfig`; dropouth: locked dropout between layers.
    """

    def __init__(self, sizes: list[int], chunk_size: int, wdrop: float, dropouth: float):
        super().__init__(OnLstmLayer(sizes[l], sizes[l + 1], chunk_size, wdrop) for l in range(len(sizes) - 1))
        self.dropouth = dropouth

    def forward(self, x: Tensor, mask: Tensor | None, state=None):
        """x ``[B, N, in]``, mask ``[B, N]`` bool or None, state per layer ``(h, c)`` or None.

        Returns:
            ``(hiddens, distances, states)``: each layer's outputs ``[B, N, H_l]`` (before dropout),
            the distances ``[B, L, N]`` (:func:`syntactic_distance`; 0 at padding) and each layer's
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
        distances = torch.stack([syntactic_distance(m) for m in masters], dim=1)         # (B, L, N)
        if mask is not None:
            distances = distances.masked_fill(~mask[:, None, :], 0.0)
        return hiddens, distances, states


@dataclass
class OnLstmOutput(ModelOutput):
    """Output of :class:`OnLstmModel`.

    Attributes:
        last_hidden_state: ``[B, N, E]`` the last layer's outputs (before output dropout).
        distances: ``[B, L, N]`` syntactic distance of each layer and word, in [0, 1]; 0 at padding.
        hidden_states: per layer ``[B, N, H_l]`` outputs (before dropout), when ``output_hidden_states``.
        state: per layer ``(h, c)`` ``[B, H_l]`` after each sentence's last real token.
    """

    last_hidden_state: torch.FloatTensor | None = None
    distances: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    state: tuple[tuple[torch.FloatTensor, torch.FloatTensor], ...] | None = None


@dataclass
class OnLstmCausalLMOutput(ModelOutput):
    """Output of :class:`OnLstmForCausalLM`.

    Attributes:
        loss: mean next-word cross-entropy (nats) over the scored positions, when ``labels`` are given.
        logits: ``[B, N, V]``; position t predicts token t+1.
        distances: ``[B, L, N]`` syntactic distances (see :class:`OnLstmOutput`).
        hidden_states: per layer outputs, when ``output_hidden_states``.
        state: per layer ``(h, c)`` final states (to continue running text).
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    distances: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    state: tuple[tuple[torch.FloatTensor, torch.FloatTensor], ...] | None = None


class OnLstmPreTrainedModel(PreTrainedModel):
    """Weight initialisation of the public code: embeddings U(-init_range, init_range), output bias
    0; the ON-LSTM projections PyTorch's ``nn.Linear`` default (weights and biases
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), written with ``nn.init``)."""

    config_class = OnLstmConfig
    base_model_prefix = "on_lstm"

    def _init_weights(self, module):
        # `nn.init` functions only: transformers 5 guards them so that they skip loaded tensors
        if isinstance(module, nn.Embedding):
            nn.init.uniform_(module.weight, -self.config.init_range, self.config.init_range)
        elif isinstance(module, nn.Linear) and module is getattr(self, "lm_head", None):
            nn.init.zeros_(module.bias)            # its weight is the embeddings' (tied)
        elif isinstance(module, nn.Linear):
            bound = 1.0 / math.sqrt(module.in_features)
            nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5))   # = U(-bound, bound)
            nn.init.uniform_(module.bias, -bound, bound)


def _padding_mask(config: OnLstmConfig, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor | None:
    """``[B, N]`` bool (True = token), or None when nothing is padded."""
    if attention_mask is not None:
        mask = attention_mask.bool()
    elif config.pad_token_id is not None:
        mask = input_ids != config.pad_token_id
    else:
        return None
    return None if bool(mask.all()) else mask


class OnLstmModel(OnLstmPreTrainedModel):
    """Embeddings -> ``num_layers`` :class:`OnLstmLayer` (locked dropout on the embeddings and
    between layers) -> the last layer's outputs and every layer's distances."""

    def __init__(self, config: OnLstmConfig):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_size)
        self.layers = OnLstmStack([config.embedding_size] + config.layer_sizes, config.chunk_size, config.wdrop,
                                  config.dropouth)
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings

    def set_input_embeddings(self, value):
        self.embeddings = value

    def forward(self, input_ids: torch.LongTensor, attention_mask: Tensor | None = None,
                state=None, output_hidden_states: bool = False, return_dict: bool = True) -> OnLstmOutput:
        """Args: input_ids ``[B, N]``; attention_mask ``[B, N]`` (1 = token, 0 = padding), default
        ``input_ids != pad_token_id``; state: per layer ``(h, c)`` ``[B, H_l]`` to start from (zeros
        when None). Returns :class:`OnLstmOutput`."""
        cfg = self.config
        mask = _padding_mask(cfg, input_ids, attention_mask)
        x = embedding_dropout(self.embeddings.weight, input_ids, cfg.dropoute, self.training)  # (B, N, E)
        x = locked_dropout(x, cfg.dropouti, self.training)
        hiddens, distances, states = self.layers(x, mask, state)                         # (B, L, N)
        out = OnLstmOutput(last_hidden_state=hiddens[-1], distances=distances,
                           hidden_states=tuple(hiddens) if output_hidden_states else None,
                           state=tuple(states))
        return out if return_dict else out.to_tuple()


class OnLstmForCausalLM(OnLstmPreTrainedModel):
    """ON-LSTM language model: :class:`OnLstmModel` -> locked dropout -> Linear tied to the word
    embeddings (+ bias), the public ``RNNModel``. Next-word objective; induces syntactic distances."""

    # {tied: source}: transformers 5 needs the mapping; 4.x iterates it and so sees the key
    _tied_weights_keys = {"lm_head.weight": "on_lstm.embeddings.weight"}
    induces_structure = True
    #: what it is trained for (syntaxformer.training.objectives: next-word prediction; the perplexity
    #: evaluator's next-word protocol)
    objective = "causal-lm"

    def __init__(self, config: OnLstmConfig):
        super().__init__(config)
        self.on_lstm = OnLstmModel(config)
        self.lm_head = nn.Linear(config.embedding_size, config.vocab_size)
        self.post_init()

    def get_input_embeddings(self):
        return self.on_lstm.embeddings

    def set_input_embeddings(self, value):
        self.on_lstm.embeddings = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def forward(self, input_ids: torch.LongTensor, attention_mask: Tensor | None = None,
                labels: torch.LongTensor | None = None, state=None, output_hidden_states: bool = False,
                return_dict: bool = True, **kwargs) -> OnLstmCausalLMOutput:
        """Causal-LM forward pass.

        Args:
            input_ids: ``[B, N]`` token ids.
            attention_mask: ``[B, N]`` 1 = token, 0 = padding; default ``input_ids != pad_token_id``.
            labels: ``[B, N]`` target ids aligned with ``input_ids`` (usually ``input_ids`` with
                padding set to -100); shifted inside, as Hugging Face causal LMs do: the logits at t
                are scored against ``labels[:, t + 1]``; -100 = not scored.
            state: per layer ``(h, c)`` to start from (running text), or None (zeros).
            output_hidden_states: also return every layer's outputs.
            return_dict: ``False`` returns the output's non-None fields as a tuple.
            **kwargs: ignored (Hugging Face callers pass e.g. ``use_cache``).
        """
        base = self.on_lstm(input_ids, attention_mask, state=state, output_hidden_states=output_hidden_states)
        hidden = locked_dropout(base.last_hidden_state, self.config.dropout, self.training)  # (B, N, E)
        logits = self.lm_head(hidden)                                                    # (B, N, V)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                                   ignore_index=-100)
        out = OnLstmCausalLMOutput(loss=loss, logits=logits, distances=base.distances,
                                   hidden_states=base.hidden_states, state=base.state)
        return out if return_dict else out.to_tuple()

    @torch.no_grad()
    def induce(self, input_ids: Tensor, attention_mask: Tensor) -> list[list[SyntacticDistances]]:
        """The structure interface (:mod:`syntaxformer.structures`): per sentence of t tokens, the
        syntactic distances of its t-1 gaps in every layer (``layers`` ``[L, t-1]``,
        :func:`gap_distances` of the per-word distances; float64 numpy), the default row being layer
        ``config.parse_layer`` (``--layer`` picks another). With ``config.parse_prefix_token_id`` that
        token is fed first and its distance dropped (the public parser feeds ``<eos>``; the causal-LM
        trainer sets it to the sentence boundary ``[CLS]`` it trains with).

        Args: input_ids ``[B, N]``; attention_mask ``[B, N]`` (1 = token, right padding).
        """
        prefix = self.config.parse_prefix_token_id
        skip = int(prefix is not None)                                                   # prefix steps
        if prefix is not None:
            input_ids = torch.cat([torch.full_like(input_ids[:, :1], prefix), input_ids], dim=1)
            attention_mask = torch.cat([torch.ones_like(attention_mask[:, :1]), attention_mask], dim=1)
        out = self(input_ids=input_ids, attention_mask=attention_mask)
        words = out.distances[:, :, skip:].double().cpu().numpy()                        # (B, L, N)
        lengths = (attention_mask.sum(-1) - skip).tolist()
        return [[SyntacticDistances.of_layers(np.stack([gap_distances(d[:t]) for d in words[row]]),
                                              self.config.parse_layer)]
                for row, t in enumerate(lengths)]


# ----------------------------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------------------------

def gap_distances(word_distances: np.ndarray) -> np.ndarray:
    """Per-word distances ``[n]`` -> gap distances ``[n-1]``: ``g_k = max(d_k, d_{k+1})``.

    The public parser (``build_tree`` in ``test_phrase_grammar.py``) works on words: in a segment
    it takes the word m of the largest distance (first on ties); if m is not the segment's first word
    it splits before m, and then always splits m off the rest of its right part; if m is the first
    word it splits after it. The top-down split at the largest gap distance with leftmost ties
    (:func:`syntaxformer.decoding.spans.split_by_distance`) over ``g`` makes the same splits: in a
    segment, the gap before m and the gap after m both equal ``d_m`` and every gap left of m is
    smaller, so the leftmost maximum is the gap before m (or after m when m comes first); in the
    right part ``[m, ...)`` the gap after m is again the maximum. So the trees equal the public
    code's (checked in ``tests/test_on_lstm.py``). A single word gives ``[]``.
    """
    d = np.asarray(word_distances, dtype=np.float64)
    return np.maximum(d[:-1], d[1:])


# A causal LM: Hugging Face's AutoModelForCausalLM reads its folders. (The registry, models/__init__.py,
# also maps it under AutoModelForMaskedLM, the one Auto class syntaxformer.parsing.load_model reads.)
AutoConfig.register(OnLstmConfig.model_type, OnLstmConfig, exist_ok=True)
AutoModelForCausalLM.register(OnLstmConfig, OnLstmForCausalLM, exist_ok=True)


__all__ = [
    "PRESETS", "RECIPES", "OnLstmConfig", "OnLstmLayer", "OnLstmStack", "OnLstmModel", "OnLstmForCausalLM",
    "OnLstmOutput", "OnLstmCausalLMOutput", "cumax", "expand_chunks", "master_forget_gate",
    "master_input_gate", "master_gates", "overlap", "forget_gate_hat", "input_gate_hat", "cell_state",
    "hidden_state", "syntactic_distance", "on_lstm_step", "on_lstm_cell", "on_lstm_loop",
    "on_lstm_recurrence", "locked_dropout", "embedding_dropout", "drop_connect", "gap_distances",
]
