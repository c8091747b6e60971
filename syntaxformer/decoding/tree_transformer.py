"""Tree Transformer parsing: link probabilities of every layer -> constituency spans.

Two decoders (Wang, Lee & Chen, EMNLP 2019, "Tree Transformer: Integrating Tree Structures into
Self-Attention", §4 "Unsupervised parsing"; DESIGN.md §1.1-1.2):

* :func:`algorithm1` - the paper's Algorithm 1: top-down and greedy over *all* layers, with a break
  threshold and a minimum layer; non-binary (flat) constituents where no layer breaks a span.
* :func:`single_layer` - the paper's Figure 4(b): the plain top-down greedy split (Shen et al. 2018)
  of one layer's link probabilities, i.e. :func:`~syntaxformer.decoding.spans.split_by_distance` with
  syntactic distance ``-a``. Always binary.

Conventions (ARCHITECTURE.md):

* ``link_probs[l, k]`` = a^l_k, the link probability of the gap between words ``k`` and ``k + 1`` in
  layer ``l``; layers are **0-based** (``l = 0`` is the lowest layer, ``L - 1`` the top one). Only word
  links: a ``[CLS]`` token's link and word-piece links must be removed/converted before decoding.
* Spans are half-open word intervals ``(i, j)``. The decoders return every constituent of length >= 2,
  the whole sentence ``(0, n)`` included (so a 1-word sentence gives the empty set), exactly like
  :func:`~syntaxformer.decoding.spans.split_by_distance`; :func:`~syntaxformer.decoding.spans.brackets`
  / :func:`~syntaxformer.decoding.spans.spans_to_tree` take them from there.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from .spans import Span, split_by_distance

logger = logging.getLogger(__name__)

#: The minimum layer the authors' public code hard-codes (0-based; = the paper's best m = 3, 1-based).
DEFAULT_MIN_LAYER = 2
#: The break threshold of the paper and of the public code.
DEFAULT_THRESHOLD = 0.8
#: The public code's extra rule: a child span whose weakest link is above this descends one layer.
OFFICIAL_DESCEND_THRESHOLD = 0.7


def _link_array(link_probs, ndim: int) -> np.ndarray:
    """``link_probs`` (list, numpy array or tensor) as a float64 numpy array of ``ndim`` dimensions.

    Raises:
        ValueError: wrong number of dimensions, no layer, or values that are not probabilities in
            [0, 1] (NaN included) - e.g. logits passed by mistake.
    """
    if isinstance(link_probs, torch.Tensor):
        link_probs = link_probs.detach().cpu().double().numpy()
    a = np.asarray(link_probs, dtype=np.float64)
    if a.ndim != ndim:
        raise ValueError(f"link probabilities must have {ndim} dimension(s), got shape {a.shape}")
    if ndim == 2 and a.shape[0] == 0:
        raise ValueError("link probabilities have no layer (shape [0, n-1])")
    if not np.all((a >= 0.0) & (a <= 1.0)):  # also catches NaN
        raise ValueError("link probabilities must lie in [0, 1] (got NaN or a value outside)")
    return a


def resolve_min_layer(num_layers: int, min_layer: int | None = None) -> int:
    """The 0-based minimum layer :func:`algorithm1` uses for a model of ``num_layers`` layers.

    ``None`` means the public code's value, layer index 2 (the paper's m = 3 counted 1-based),
    lowered to the top layer ``num_layers - 1`` for models with fewer than 3 layers (``tiny``).

    Raises:
        ValueError: an explicit ``min_layer`` outside ``0 .. num_layers - 1``.
    """
    if min_layer is None:
        return min(DEFAULT_MIN_LAYER, num_layers - 1)
    if not 0 <= min_layer < num_layers:
        raise ValueError(f"min_layer must be a 0-based layer index in 0..{num_layers - 1}, got {min_layer}")
    return int(min_layer)


def algorithm1(
    link_probs,
    threshold: float = DEFAULT_THRESHOLD,
    min_layer: int | None = None,
    descend_threshold: float | None = None,
) -> set[Span]:
    """Unsupervised parsing over all layers: the Tree Transformer's Algorithm 1.

    Source: Wang, Lee & Chen (EMNLP 2019), §4 and Algorithm 1 "Unsupervised Parsing with Multiple
    Layers"; DESIGN.md §1.1; the authors' public code (yaushian/Tree-Transformer, ``parse.py``,
    ``build_tree``) for the points the pseudocode leaves open.

    The procedure, on a span ``(s, e)`` of at least 2 words visited at layer ``l`` (the whole sentence
    starts at the top layer ``L - 1``):

    1. ``p`` = the span's weakest inner link at layer ``l``: argmin of ``a^l_k`` over ``k = s .. e-2``
       (ties: the leftmost).
    2. If ``a^l_p < threshold``, gap ``p`` is a break point: split into ``(s, p+1)`` and ``(p+1, e)``
       and visit both children **at the same layer l** (the paper's pseudocode and the public code
       both recurse with ``l``; a child descends only when it has no break point at ``l``). Without
       the 0.7 rule, restarting the children at the top layer would give the same tree: a child's
       gaps had no break point above ``l`` (that is why its parent came down to ``l``).
    3. Otherwise no gap of the span breaks at layer ``l``: visit the same span at layer ``l - 1``.
       At the minimum layer there is nothing below: the span becomes one flat (n-ary) constituent
       whose children are its words. Layers below ``min_layer`` are never read.

    Every visited span of >= 2 words is a constituent. Without ``descend_threshold`` the result equals
    the top-down split (:func:`~syntaxformer.decoding.spans.split_by_distance`) by the key
    (highest layer ``<= L-1`` and ``>= min_layer`` at which the gap is below the threshold, then
    ``-a`` at that layer), with flat constituents where no gap breaks; the test suite checks this.

    Args:
        link_probs: ``[L, n-1]`` (list, numpy array or tensor) link probabilities in [0, 1], layer 0 =
            lowest. The hierarchical constraint makes them non-decreasing in ``l``; this decoder does
            not rely on it.
        threshold: a link is a break point when strictly below it (paper: 0.8). The public code splits
            also at exact equality (``>`` tests for descending); only exact float ties differ.
        min_layer: 0-based index of the lowest layer used. ``None``: 2 as in the public code (the
            paper's m = 3 counts layers from 1), clipped to the top layer for models with < 3 layers.
        descend_threshold: ``None`` for the paper. ``0.7`` reproduces the public code's extra rule:
            after a split at layer ``l``, a child whose weakest link at ``l`` is ``> 0.7`` is visited
            at ``max(l - 1, min_layer)`` instead of ``l`` (the whole sentence never descends this way).

    Returns:
        The constituents as half-open spans of length >= 2, ``(0, n)`` included when ``n >= 2``;
        n-ary where a span had no break point down to the minimum layer. Laminar (no two cross).

    Raises:
        ValueError: ``link_probs`` not 2-D, no layer, values outside [0, 1], or a bad ``min_layer``.
    """
    a = _link_array(link_probs, ndim=2)  # (L, n-1)
    top = a.shape[0] - 1
    m = resolve_min_layer(top + 1, min_layer)
    n = a.shape[1] + 1

    spans: set[Span] = set()
    stack: list[tuple[int, int, int]] = [(0, n, top)]  # (start, end, layer to visit at)
    while stack:
        s, e, l = stack.pop()
        if e - s < 2:
            continue
        spans.add((s, e))
        # Steps 1 and 3: descend until the weakest link of the span is a break point.
        while True:
            p = s + int(np.argmin(a[l, s : e - 1]))
            if a[l, p] < threshold or l == m:
                break
            l -= 1
        if a[l, p] >= threshold:  # no break point down to the minimum layer: flat constituent
            continue
        # Step 2: split at gap p, visit both children at layer l.
        for cs, ce in ((s, p + 1), (p + 1, e)):
            child_layer = l
            if descend_threshold is not None and ce - cs >= 2 and a[l, cs : ce - 1].min() > descend_threshold:
                child_layer = max(l - 1, m)
            stack.append((cs, ce, child_layer))
    return spans


def single_layer(link_probs_layer) -> set[Span]:
    """Top-down greedy parse of one layer's link probabilities (paper Figure 4(b)).

    Source: Wang, Lee & Chen (EMNLP 2019), §4 / Figure 4(b), which parses from a single layer with the
    top-down greedy split of Shen et al. (ACL 2018, §3.2). The weakest link splits first: this is
    :func:`~syntaxformer.decoding.spans.split_by_distance` with syntactic distance ``d_k = -a_k``
    (``-a`` rather than ``1 - a`` so that no two different probabilities round to the same
    distance). Ties split at the leftmost weakest link.

    Args:
        link_probs_layer: ``[n-1]`` link probabilities in [0, 1] of one layer (e.g.
            ``link_probs[layer]``, 0-based layer index).

    Returns:
        The spans of a binary tree, length >= 2, ``(0, n)`` included when ``n >= 2``.

    Raises:
        ValueError: not 1-D, or values outside [0, 1].
    """
    a = _link_array(link_probs_layer, ndim=1)  # (n-1,)
    return split_by_distance((-a).tolist())
