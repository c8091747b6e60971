"""The ON-LSTM recurrence's recurrent-weight gradient computed once after the loop (what fused LSTM
kernels do), for :func:`syntaxformer.blocks.on_lstm.on_lstm_loop`.

Each step of the recurrence computes ``gates_t = gates_x_t + h_{t-1} U^T`` (Shen et al., ICLR 2019,
eqs. 9-14: every gate's pre-activation). Autograd would compute ``dU^T += h_{t-1}^T dgates_t`` at every
step: an ``(H, G)`` product with inner size B, written and accumulated N times (memory-bound: 21 MB per
step at the paper's width). :func:`weight_gradient_once_product` gives the same per-step product whose
backward keeps each step's ``(h_{t-1}, dgates_t)`` (:class:`RecurrentMatmul`), and one node upstream
of every step (:class:`WeightGradientOnce`, reached through a 0-d token) sums them as
``cat(h)^T @ cat(dgates)`` (inner size B·N) once all steps are done. Same values up to float rounding;
first-order gradients only. Measured on CPU: x1.4-1.5 forward+backward at the paper's widths, nothing
at ``mini`` / ``small`` (:data:`WEIGHT_GRAD_ONCE_MIN` picks by size; ``benchmarks/speed/on_lstm_speed.py``).
Tested against autograd's per-step gradient in ``tests/models/test_on_lstm.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

#: recurrent weights with at least this many elements get their gradient once after the loop
#: (8 MB in float32; the paper's layers have 5.6M and 1.9M, ``small``'s 1.1M, ``mini``'s 0.3M)
WEIGHT_GRAD_ONCE_MIN = 2**21


class WeightGradientOnce(torch.autograd.Function):
    """The recurrent weight's gradient in one matmul after the loop.

    Forward: ``w_hh_t`` ``(H, G)`` and ``store`` (the list the steps' :class:`RecurrentMatmul` fill)
    -> a 0-d token, which every step takes as an input (so this node runs after all of them in the
    backward). Backward: ``d w_hh_t = cat(h)^T @ cat(dgates)`` ``(H, G)`` from the stored pairs (the
    store is emptied), or None when no step stored one.
    """

    @staticmethod
    def forward(ctx, w_hh_t: Tensor, store: list) -> Tensor:
        ctx.store = store
        return w_hh_t.new_zeros(())  # the token

    @staticmethod
    def backward(ctx, _grad_token):
        if not ctx.store:
            return None, None
        hs, grads = zip(*ctx.store)
        ctx.store.clear()
        return torch.cat(hs).t() @ torch.cat(grads), None  # (H, G)


class RecurrentMatmul(torch.autograd.Function):
    """``gates_x + h @ w_hh_t`` (``(B, G)``, from ``(B, G)``, ``(B, H)``, ``(H, G)``) whose backward gives
    ``dgates_x`` and ``dh`` and leaves ``dW`` to :class:`WeightGradientOnce` (it stores ``(h, dgates)``
    in ``store`` and returns a zero for the token)."""

    @staticmethod
    def forward(ctx, gates_x: Tensor, h: Tensor, w_hh_t: Tensor, token: Tensor, store: list) -> Tensor:
        ctx.save_for_backward(h, w_hh_t)
        ctx.store = store
        return torch.addmm(gates_x, h, w_hh_t)

    @staticmethod
    def backward(ctx, grad):
        h, w_hh_t = ctx.saved_tensors
        grad = grad.to(w_hh_t.dtype)  # under bf16 autocast the forward product was bf16, the weight is not
        ctx.store.append((h, grad))
        return grad, grad @ w_hh_t.t(), None, grad.new_zeros(()), None


def weight_gradient_once_product(w_hh_t: Tensor) -> Callable[[Tensor, Tensor], Tensor]:
    """The recurrence's per-step product ``(gates_x_t, h) -> gates_x_t + h @ w_hh_t`` for one loop,
    with the weight's gradient computed once after the loop (module docstring).

    Call it once before the loop (it creates the loop's :class:`WeightGradientOnce` node) and the
    returned function at every step.

    Args:
        w_hh_t: ``(H, G)`` the recurrent weight, transposed (requires grad).
    Returns:
        ``product(gates_x_t (B, G), h (B, H)) -> (B, G)``.
    """
    store: list = []
    token = WeightGradientOnce.apply(w_hh_t, store)
    return lambda gates_x_t, h: RecurrentMatmul.apply(gates_x_t, h, w_hh_t, token, store)


__all__ = ["WEIGHT_GRAD_ONCE_MIN", "RecurrentMatmul", "WeightGradientOnce", "weight_gradient_once_product"]
