"""Structural position representations (Wang, Tu, Wang & Shi, EMNLP 2019, "Self-Attention with
Structural Position Representations", §3; DESIGN.md §3.2).

A dependency tree per sentence (given, not induced by this model: gold heads or the maximum-spanning-
tree heads of a trained StructFormer) gives each word two kinds of *structural* position:

* **absolute**: the word's depth in the tree, ``abs(i)`` (root = 0; the paper counts from the main
  verb, i.e. the root, as well) -- :func:`structural_depths`;
* **relative**, for a pair (query i, key j) -- :func:`relative_structural_positions`::

      rel(i, j) = abs(i) − abs(j)                    if one of i, j is an ancestor of the other
                                                     (they lie on one root path; 0 for i = j)
                = (abs(i) + abs(j)) · sign(i − j)    otherwise

  The sign convention of the second case is **our choice** (DESIGN.md §3.2 leaves it open): positive
  when the key j precedes the query i, negative when it follows, as the sequential relative position
  ``i − j``. The first case is antisymmetric too (``rel(j, i) = −rel(i, j)``).

How they enter the model (the registry's ``"structural-position"`` prior):

* The relative positions enter the attention scores as learned relative-position *keys* (Shaw,
  Uszkoreit & Vaswani, NAACL 2018, eq. 4), clipped at ``K = structural_max_relative``:
  ``s_ij = q_i · (k_j + r_{clip(rel(i, j), −K, K)}) / √d_k``. :class:`StructuralPositionPrior`
  returns the ``q_i · r / √d_k`` part as ``PriorOutput.query_score_bias`` (B, H, N, N). **One table
  per layer**, shared by the heads, ``(2K + 2, d_k)`` (Shaw et al. share across heads and learn one
  table per layer): rows ``0 .. 2K`` for ``−K .. K`` and a last row for a pair that touches a token
  outside the tree (a special token such as ``[CLS]``, or padding).
* The absolute positions are fused with the sequential ones in the embeddings by a small non-linear
  layer, :class:`StructuralPositionFusion`: ``pos_i = p_i + W_2 tanh(W_1 [p_i ; e_{abs(i)}])``
  (``p_i`` the sinusoidal position, ``e`` a learned depth table clipped at
  ``structural_max_depth``, one row more for tokens outside the tree). The residual ``p_i +`` keeps
  the sequential position intact when the fusion's output is zero (our choice; the paper's fusion is
  a non-linear function of the concatenation). The model's embeddings build it through the prior
  class's hook :meth:`StructuralPositionPrior.position_fusion` (``priors.build_position_fusion``), so
  no model code names this prior.

Input: ``inputs["heads"]`` (B, N) long over **token positions**: the 0-based position of the token's
head, :data:`ROOT` (−1) for the root, :data:`NO_TREE` (−100) for a token outside the tree (special
tokens, padding). The model hands it to every layer's prior (``structure_inputs`` of the Tree
Transformer family). Without it the prior raises :class:`~syntaxformer.errors.InputError`.

Cost: the tree positions are computed from the heads twice per forward, by the fusion (depths) and by
the first layer's prior (relative buckets, handed to the layers above as the prior's state), each
O(depth) pointer-jumping steps over (B, N, N) booleans.

Config fields read (``getattr(config, name, default)``): ``num_attention_heads``, ``hidden_size``,
``structural_max_relative`` (:data:`MAX_RELATIVE`), ``structural_max_depth`` (:data:`MAX_DEPTH`).
"""

from __future__ import annotations

import torch
from torch import nn

from ..data.trees import NO_TREE, ROOT  # head of the root (-1); of a token outside the tree (-100)
from ..errors import InputError
from .base import PriorOutput, StructuralPrior

#: default clipping distance K of the relative structural positions (Shaw et al. clip at 2-16)
MAX_RELATIVE = 8
#: default largest depth with its own absolute embedding (deeper words share the last one)
MAX_DEPTH = 16


def _check_heads(heads: torch.Tensor) -> None:
    n = heads.shape[-1]
    bad = ((heads < ROOT) & (heads != NO_TREE)) | (heads >= n)
    if bad.any():
        raise ValueError(f"heads out of range: {heads[bad][:5].tolist()} (0..{n - 1}, {ROOT} or {NO_TREE})")


def ancestor_matrix(heads: torch.Tensor) -> torch.Tensor:
    """Which token is an ancestor of which, by following head pointers.

    Args:
        heads: (B, N) long, 0-based head position, :data:`ROOT` for the root, :data:`NO_TREE` for
            tokens outside the tree.
    Returns:
        (B, N, N) bool, ``[b, i, j]`` True iff j is i or an ancestor of i (False on rows/columns of
        tokens outside the tree).
    Raises:
        ValueError: a head out of range, or a cycle (no root reached within N steps).
    """
    _check_heads(heads)
    B, N = heads.shape
    in_tree = heads != NO_TREE  # (B, N)
    parent = torch.where(heads >= 0, heads, torch.full_like(heads, N))  # N = "above the root"
    parent = torch.cat([parent, torch.full_like(parent[:, :1], N)], dim=1)  # (B, N+1); N is absorbing
    current = torch.arange(N, device=heads.device).expand(B, N).clone()  # (B, N)
    current[~in_tree] = N
    anc = torch.zeros(B, N, N + 1, dtype=torch.bool, device=heads.device)
    for _ in range(N + 1):
        if (current == N).all():
            return anc[..., :N]
        anc.scatter_(2, current[..., None], True)
        current = parent.gather(1, current)  # (B, N)
    raise ValueError("the heads contain a cycle (no root reached)")


def structural_depths(heads: torch.Tensor) -> torch.Tensor:
    """Absolute structural positions: each token's depth in its dependency tree (paper §3.1, DESIGN.md §3.2).

    Args:
        heads: (B, N) long head positions (module docstring: :data:`ROOT`, :data:`NO_TREE`).
    Returns:
        (B, N) long depths, root = 0; 0 for tokens outside the tree.
    """
    return (ancestor_matrix(heads).sum(-1) - 1).clamp(min=0)


def relative_structural_positions(heads: torch.Tensor) -> torch.Tensor:
    """Relative structural positions ``rel(i, j)`` of every (query i, key j) pair (module docstring;
    paper §3.2, DESIGN.md §3.2).

    Args:
        heads: (B, N) long head positions (:data:`ROOT`, :data:`NO_TREE` as in the module docstring).
    Returns:
        (B, N, N) long: ``abs(i) − abs(j)`` when one is an ancestor of the other, else
        ``(abs(i) + abs(j)) · sign(i − j)``; 0 for a pair that touches a token outside the tree
        (:func:`tree_pairs` tells those apart).
    """
    anc = ancestor_matrix(heads)  # (B, N, N)
    depth = (anc.sum(-1) - 1).clamp(min=0)  # (B, N)
    same_path = anc | anc.transpose(1, 2)  # (B, N, N)
    n = heads.shape[1]
    positions = torch.arange(n, device=heads.device)
    order = torch.sign(positions[:, None] - positions[None, :])  # (N, N) sign(i − j)
    rel = torch.where(same_path, depth[:, :, None] - depth[:, None, :], (depth[:, :, None] + depth[:, None, :]) * order)
    return rel * tree_pairs(heads)


def tree_pairs(heads: torch.Tensor) -> torch.Tensor:
    """(B, N) heads -> (B, N, N) bool: both tokens of the pair are in the tree."""
    in_tree = heads != NO_TREE
    return in_tree[:, :, None] & in_tree[:, None, :]


def relative_buckets(heads: torch.Tensor, max_relative: int) -> torch.Tensor:
    """Rows of the relative table for every pair: ``clip(rel, −K, K) + K`` in ``0 .. 2K``, and
    ``2K + 1`` for a pair touching a token outside the tree. (B, N) heads -> (B, N, N) long."""
    rel = relative_structural_positions(heads).clamp(-max_relative, max_relative) + max_relative
    return torch.where(tree_pairs(heads), rel, torch.full_like(rel, 2 * max_relative + 1))


def depth_buckets(heads: torch.Tensor, max_depth: int) -> torch.Tensor:
    """Rows of the depth table: ``min(abs(i), D)`` in ``0 .. D``, ``D + 1`` outside the tree.
    (B, N) heads -> (B, N) long."""
    depth = structural_depths(heads).clamp(max=max_depth)
    return torch.where(heads != NO_TREE, depth, torch.full_like(depth, max_depth + 1))


def required_heads(inputs: dict | None, hidden: torch.Tensor) -> torch.Tensor:
    """``inputs["heads"]`` checked against the hidden states (B, N, d) -> (B, N) long on their device.

    Raises:
        InputError: no heads given, or a shape other than (B, N).
    """
    heads = None if inputs is None else inputs.get("heads")
    if heads is None:
        raise InputError(
            "prior='structural-position' needs a dependency tree per sentence: "
            "structure_inputs={'heads': (B, N) token positions} (train with --trees)"
        )
    if tuple(heads.shape) != tuple(hidden.shape[:2]):
        raise InputError(
            f"structure_inputs['heads'] has shape {tuple(heads.shape)}, the input ids {tuple(hidden.shape[:2])}"
        )
    return heads.to(device=hidden.device, dtype=torch.long)


class StructuralPositionFusion(nn.Module):
    """Fuses sequential and absolute structural positions (module docstring):
    ``p + W_2 tanh(W_1 [p ; e_depth])``.

    Args:
        hidden_size: d.
        max_depth: D; depths above share row D, row D + 1 is "outside the tree".
    """

    def __init__(self, hidden_size: int, max_depth: int = MAX_DEPTH):
        super().__init__()
        self.max_depth = max_depth
        self.depth_embeddings = nn.Embedding(max_depth + 2, hidden_size)
        self.fuse_in = nn.Linear(2 * hidden_size, hidden_size)
        self.fuse_out = nn.Linear(hidden_size, hidden_size)

    def forward(self, positions: torch.Tensor, words: torch.Tensor, inputs: dict | None) -> torch.Tensor:
        """positions (N, d) sequential positions, words (B, N, d) the word embeddings (for the shape,
        dtype and device), ``inputs["heads"]`` (B, N) -> (B, N, d) fused positions.

        Raises:
            InputError: no ``inputs["heads"]`` (or a wrong shape).
        """
        heads = required_heads(inputs, words)  # (B, N)
        depth = self.depth_embeddings(depth_buckets(heads, self.max_depth)).to(words.dtype)  # (B, N, d)
        seq = positions.to(words.dtype).expand_as(depth)  # (B, N, d)
        return seq + self.fuse_out(torch.tanh(self.fuse_in(torch.cat([seq, depth], dim=-1))))


class StructuralPositionPrior(StructuralPrior):
    """The registry's ``"structural-position"`` prior: relative structural position keys (module
    docstring), one table per layer shared by the heads.

    Args:
        head_dim: d_k.
        max_relative: K (clipping distance).
    """

    #: the keys of ``inputs`` (the model's ``structure_inputs``) this prior reads
    needs_inputs: tuple[str, ...] = ("heads",)
    #: config fields this prior reads, with their defaults (``train --set`` accepts them)
    config_defaults = {"structural_max_relative": MAX_RELATIVE, "structural_max_depth": MAX_DEPTH}
    #: it reads a dependency tree per sentence (``--trees``), whatever its config
    structure_input = "trees"
    structure_messages = {
        "train-missing": "--prior {prior} needs a dependency tree per sentence: give --trees gold or --trees induced:MODEL_DIR",
        "train-unread": "--trees: the prior {prior!r} reads no dependency trees (--prior structural-position does)",
        "eval-missing": "this model's prior {prior} needs a dependency tree per sentence: pass --trees gold "
        "or --trees induced:MODEL_DIR",
        "eval-unread": "--trees {value}: this {model} (prior {prior}) reads no trees; "
        "leave --trees out (only a prior such as structural-position reads them)",
    }

    def __init__(self, head_dim: int, max_relative: int = MAX_RELATIVE):
        super().__init__()
        if max_relative < 1:
            raise ValueError(f"structural_max_relative must be at least 1, got {max_relative}")
        self.max_relative = max_relative
        self.scale = head_dim**-0.5
        self.relative_keys = nn.Embedding(2 * max_relative + 2, head_dim)

    @classmethod
    def from_config(cls, config, layer_index: int) -> StructuralPositionPrior:
        """The prior of any layer (head width ``hidden_size / num_attention_heads``,
        ``structural_max_relative``)."""
        return cls(
            config.hidden_size // config.num_attention_heads, getattr(config, "structural_max_relative", MAX_RELATIVE)
        )

    @classmethod
    def position_fusion(cls, config) -> StructuralPositionFusion:
        """The embeddings' hook (``priors.build_position_fusion``): the absolute-position fusion."""
        return StructuralPositionFusion(config.hidden_size, getattr(config, "structural_max_depth", MAX_DEPTH))

    def forward(
        self, hidden: torch.Tensor, key_mask: torch.Tensor, state=None, inputs: dict[str, torch.Tensor] | None = None
    ) -> PriorOutput:
        """hidden (B, N, d), key_mask (B, N), ``inputs["heads"]`` (B, N), ``state``: the layer below's
        (B, N, N) relative buckets (None at the first layer) -> ``query_score_bias``: queries
        (B, H, N, d_k) -> (B, H, N, N) ``q_i · r_{bucket(i, j)} / √d_k``; the buckets go up as
        ``state`` (every layer shares the tree and K, so they are computed once per forward).

        Raises:
            InputError: no ``inputs["heads"]`` (or a wrong shape).
        """
        if state is None:
            state = relative_buckets(required_heads(inputs, hidden), self.max_relative)  # (B, N, N)
        buckets = state
        table = self.relative_keys.weight

        def bias(query: torch.Tensor) -> torch.Tensor:
            scores = torch.matmul(query, table.to(query.dtype).t()) * self.scale  # (B, H, N, 2K+2)
            index = buckets[:, None].expand(-1, query.shape[1], -1, -1)  # (B, H, N, N)
            return scores.gather(-1, index)

        return PriorOutput(query_score_bias=bias, state=buckets)

    def extra_repr(self) -> str:
        return f"max_relative={self.max_relative}, head_dim={self.relative_keys.weight.shape[1]}"
