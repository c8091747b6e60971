"""The masked-LM output and loss, one for every masked LM of the package.

A masked LM scores the labelled positions of its batch (``labels != -100``). With ``masked_only`` the
output layer runs at those positions only: the hidden states ``(B, N, d)`` are flattened to
``(B·N, d)`` and the rows named by an **index list** ``masked_positions`` ``(M,)`` (flat indices into
``B·N`` in row-major order, the order of ``hidden[labels != -100]``) are gathered
(``index_select``), scored by the output layer ``(M, V)`` and averaged by the cross-entropy. A
training batch carries the list, computed on the CPU when the batch is masked
(:func:`labelled_positions`; :class:`~syntaxformer.training.objectives.MaskedLM`), so a training step
indexes with no boolean mask and branches on no tensor's value, only on the list's length (a shape).
A caller that gives no list (evaluation, a user with ``labels``) gets it computed from ``labels``
here (``nonzero``). For static shapes (an accelerator's captured or compiled step) the list may have a
**fixed size**, padded after its real entries with a *dummy* position whose label is -100
(:func:`padded_positions`): the gathered dummy rows get the target -100, which the cross-entropy
ignores, so the loss and the gradients are the variable list's (up to float rounding of the sums over
more, zero, terms). No labelled position gives a zero loss that keeps the graph
(``logits.sum() * 0``). Without ``masked_only`` the output layer runs everywhere ``(B, N, V)`` and
the cross-entropy ignores the -100 labels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

#: Label value of a position that is not scored (PyTorch's ``ignore_index``).
IGNORE_INDEX = -100


def labelled_positions(labels: Tensor) -> Tensor:
    """The flat indices of the labelled positions, in row-major order.

    Args:
        labels: ``(B, N)`` target ids, -100 (:data:`IGNORE_INDEX`) = not scored.
    Returns:
        ``(M,)`` long, on ``labels``' device: the indices ``b·N + t`` of ``labels[b, t] != -100``,
        increasing (the order of boolean-mask indexing ``x[labels != -100]``).
    """
    return torch.nonzero(labels.reshape(-1) != IGNORE_INDEX, as_tuple=True)[0]


def padded_positions(labels: Tensor, size: int) -> Tensor:
    """The labelled positions as a list of ``size`` entries: :func:`labelled_positions`, then the
    first unlabelled position repeated (a dummy whose target is -100, ignored by the loss).

    Args:
        labels: ``(B, N)`` target ids, -100 = not scored.
        size: the list's length; at most ``B·N``.
    Returns:
        ``(max(size, M),)`` long: the ``M`` labelled positions (row-major), padded to ``size``; the
        unpadded list when ``M >= size`` (the caller chooses a larger size for such a batch).
    """
    flat = labels.reshape(-1)
    if size > flat.numel():
        raise ValueError(f"cannot pad the labelled positions to {size}: the batch has {flat.numel()} positions")
    positions = labelled_positions(labels)  # (M,)
    missing = size - positions.shape[0]
    if missing <= 0:
        return positions
    dummy = torch.nonzero(flat == IGNORE_INDEX, as_tuple=True)[0][:1]  # exists: M < size <= B·N
    return torch.cat([positions, dummy.expand(missing)])


def masked_lm_output(
    hidden: Tensor,
    lm_head: nn.Module,
    labels: Tensor | None,
    masked_only: bool = False,
    masked_positions: Tensor | None = None,
    zero_when_empty: bool = True,
) -> tuple[Tensor, Tensor | None]:
    """A masked LM's logits and mean cross-entropy (module docstring).

    Args:
        hidden: ``(B, N, d)`` the hidden states the output layer reads (after any dropout of the model).
        lm_head: the output layer, ``(..., d) -> (..., V)``.
        labels: ``(B, N)`` target ids, -100 = not scored; None: no loss.
        masked_only: logits only at the labelled positions (``(M, V)``, row-major); needs ``labels``.
        masked_positions: with ``masked_only``, ``(M,)`` long, the labelled positions as
            :func:`labelled_positions` gives them (e.g. carried by the training batch), or padded to a
            fixed size by :func:`padded_positions` (dummy entries at a position labelled -100, whose
            rows the cross-entropy ignores); None: computed from ``labels``. Ignored without ``masked_only``.
        zero_when_empty: without ``masked_only``, when no position is labelled: a zero loss that
            keeps the graph (True), or the cross-entropy's own NaN (False: StructFormer's full path).
    Returns:
        ``(logits, loss)``: logits ``(M, V)`` with ``masked_only``, else ``(B, N, V)``; loss the mean
        cross-entropy over the labelled positions (a scalar), or None without ``labels``.
    Raises:
        ValueError: ``masked_only`` without ``labels``.
    """
    if masked_only:
        if labels is None:
            raise ValueError("masked_only=True needs labels (the positions to predict)")
        if masked_positions is None:
            masked_positions = labelled_positions(labels)
        rows = hidden.reshape(-1, hidden.shape[-1]).index_select(0, masked_positions)  # (M, d)
        logits = lm_head(rows)  # (M, V)
        if masked_positions.shape[0] == 0:  # nothing to predict: a zero that keeps the graph
            return logits, logits.sum() * 0.0
        return logits, F.cross_entropy(logits, labels.reshape(-1).index_select(0, masked_positions))
    logits = lm_head(hidden)  # (B, N, V)
    if labels is None:
        return logits, None
    flat_logits, flat_targets = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
    if zero_when_empty and not bool((flat_targets != IGNORE_INDEX).any()):
        return logits, flat_logits.sum() * 0.0
    return logits, F.cross_entropy(flat_logits, flat_targets, ignore_index=IGNORE_INDEX)


__all__ = ["IGNORE_INDEX", "labelled_positions", "padded_positions", "masked_lm_output"]
