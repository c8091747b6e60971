"""The prior interface: what a structural prior gives a layer's self-attention.

A *structural prior* is one module per layer (``config.prior`` names it in the registry,
:data:`syntaxformer.priors.PRIORS`). Before the layer's attention it receives the layer's input hidden
states, the padding mask and its own state from the layer below, and returns a :class:`PriorOutput`:
any of

* ``score_bias`` -- an additive bias on the scores ``Q Kᵀ/√d_k`` (B, 1 or H, N, N) before the softmax:
  fits PyTorch's fused attention as a float mask (e.g. a distance prior);
* ``query_score_bias`` -- an additive bias that depends on the queries, a function
  ``(B, H, N, d_k) -> (B, H, N, N)`` (e.g. relative-position keys ``q_i · r_ij``);
* ``multiplicative`` -- a post-softmax prior ``E = M ⊙ softmax(S)`` (no renormalisation) described by
  O(N) state: a :class:`MultiplicativePrior` whose ``log_rows`` builds any block of rows of ``log M``
  from the state, so the blockwise kernel never materialises ``M`` (the Tree Transformer's constituent
  prior, Wang et al. 2019 §3.1);
* ``key_memories`` -- heads whose keys and values come from a memory instead of the words
  (:class:`KeyMemory`, e.g. the phrase memories of multi-granularity self-attention, DESIGN.md §3.3):
  the layer projects the memory with those heads' own ``W_K``, ``W_V``; ``loss`` -- an auxiliary
  training loss (already weighted) that the model adds to its own (e.g. phrase-label supervision);
* ``state`` -- what this layer's prior hands the layer above (e.g. link probabilities for the
  hierarchical constraint), and ``record`` -- per-layer tensors the model returns (e.g.
  ``{"link_probs": (B, N-1)}``).

The attention functions (:mod:`syntaxformer.priors.attention`, and the kernels of
:mod:`syntaxformer.kernels.attention` behind its ``"sdpa"``) consume the fields; they know no prior by
name. Per-sentence structure given with the input (e.g. a dependency tree's heads) reaches every
layer's prior as ``forward(..., inputs=dict)`` (the model's ``structure_inputs``). A new prior is one file defining a :class:`StructuralPrior` subclass, one line in the registry,
and its tests (ARCHITECTURE.md, "How to add a prior").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from ..data.structure_source import StructureSource


@dataclass
class MultiplicativePrior:
    """A post-softmax attention prior ``M`` (B, N, N), shared by the heads, kept as O(N) state.

    Attributes:
        state: (B, N) (or (B, N, k)) tensor from which every row of ``log M`` is computed; the
            blockwise kernel differentiates ``log_rows`` with respect to it.
        log_rows: ``log_rows(state, rows) -> (B, stop - start, N)``: rows ``start:stop`` of ``log M``
            (nats, <= 0), or all rows (B, N, N) when ``rows`` is None. Must be a pure function of
            ``state`` (the kernel calls it again in the backward).
        attention: the prior's own kernel for the ``"sdpa"`` attention, ``attention(query, key, value,
            key_mask, prior, dropout_p) -> (B, H, N, d_k)`` (chosen by the prior's ``kernel``, e.g.
            :func:`~syntaxformer.priors.attention.triton_laplace_attention`), or None: the blockwise
            kernel (:func:`~syntaxformer.priors.attention.blockwise_attention`).
    """

    state: torch.Tensor
    log_rows: Callable[[torch.Tensor, tuple[int, int] | None], torch.Tensor]
    attention: Callable | None = None

    def log_prior(self, rows: tuple[int, int] | None = None) -> torch.Tensor:
        """(B, N, N) ``log M``, or rows ``start:stop`` of it (B, stop - start, N)."""
        return self.log_rows(self.state, rows)


@dataclass
class KeyMemory:
    """Keys and values of some heads taken from a memory instead of the words (DESIGN.md §3.3).

    The heads keep their word queries ``Q^h = H W_Q^h`` and attend over ``K^h = M W_K^h``,
    ``V^h = M W_V^h`` (Hao et al., EMNLP 2019, multi-granularity self-attention).

    Attributes:
        hidden: (B, P, d) the memory (e.g. one vector per phrase).
        mask: (B, P) bool, True = a real memory slot.
        heads: original numbers of the heads that use this memory (pruned heads are skipped).
        phrase_ids: (B, N) long, the slot of each word (-1 = padding), or None; used to show the
            heads' attention over words (a slot's weight split evenly over its words).
    """

    hidden: torch.Tensor
    mask: torch.Tensor
    heads: tuple[int, ...]
    phrase_ids: torch.Tensor | None = None


@dataclass
class PriorOutput:
    """What a :class:`StructuralPrior` gives the attention of its layer (module docstring).

    Attributes:
        score_bias: (B, 1 or H, N, N) additive score bias, or None.
        query_score_bias: function (B, H, N, d_k) queries -> (B, H, N, N) additive bias, or None.
        multiplicative: :class:`MultiplicativePrior` (post-softmax, O(N) state), or None.
        state: handed to the same prior of the layer above (None for the first layer's input).
        record: per-layer outputs the model returns, by name (e.g. ``"link_probs"``).
        key_memories: :class:`KeyMemory` per group of heads whose keys/values come from a memory;
            heads in none of them attend over the words. Empty for most priors.
        loss: auxiliary loss of this layer (scalar, nats, already weighted) that the model adds to
            its training loss, or None.
    """

    score_bias: torch.Tensor | None = None
    query_score_bias: Callable[[torch.Tensor], torch.Tensor] | None = None
    multiplicative: MultiplicativePrior | None = None
    state: object = None
    record: dict[str, torch.Tensor] = field(default_factory=dict)
    key_memories: tuple[KeyMemory, ...] = ()
    loss: torch.Tensor | None = None

    def additive_bias(self, query: torch.Tensor) -> torch.Tensor | None:
        """The total additive score bias for ``query`` (B, H, N, d_k): ``score_bias`` plus
        ``query_score_bias(query)``, (B, 1 or H, N, N); None when the prior has neither."""
        bias = self.score_bias
        if self.query_score_bias is not None:
            extra = self.query_score_bias(query)
            bias = extra if bias is None else bias + extra
        return bias


class StructuralPrior(nn.Module):
    """Base class of the priors in the registry: one instance per layer.

    Subclasses implement :meth:`from_config` and :meth:`forward`; ``record_names`` lists the names
    their ``record`` uses (the model returns one tuple over layers per name).
    """

    #: names of the tensors this prior records per layer (see :class:`PriorOutput`)
    record_names: tuple[str, ...] = ()
    #: config fields this prior reads beyond the model's own, with their defaults: the trainer
    #: accepts them as ``--set`` overrides and writes them into the config of a model with this prior
    config_defaults: dict[str, object] = {}
    #: the per-sentence structure a model with this prior may read, named as its option and its
    #: ``TrainArguments`` field: ``"trees"`` (a dependency tree per sentence, ``--trees``) or
    #: ``"phrases"`` (a phrase partition cut from a constituency tree, ``--phrases``); None: none.
    #: :meth:`reads_structure` decides it for a config.
    structure_input: str | None = None
    #: the one-line messages of the structure checks of a prior that reads a structure, ``str.format``
    #: templates with ``prior`` (the registry name), ``model`` (class name) and ``value`` (the option's
    #: value): ``"train-missing"`` / ``"eval-missing"`` (this prior reads it, none given to ``train`` /
    #: to ``perplexity`` and ``probe``), ``"train-unread"`` / ``"eval-unread"`` (given, the model's
    #: prior reads none; asked of the prior that does read that structure)
    structure_messages: dict[str, str] = {}

    @classmethod
    def reads_structure(cls, config: Mapping) -> bool:
        """Whether a model with ``config`` (its fields as a mapping: the run's overrides, a
        ``config.json``, ``config.to_dict()``) reads :attr:`structure_input`; by default whenever the
        prior declares one.

        Raises:
            InputError (one line): config fields the prior cannot read.
        """
        return cls.structure_input is not None

    @classmethod
    def check_structure_source(cls, config: Mapping, source: StructureSource) -> None:
        """Raise :class:`InputError` (one line) when a model with ``config`` cannot use ``source`` for
        the structure it reads (e.g. labels that only gold trees have); by default it can."""

    @classmethod
    def tree_level(cls, config: Mapping) -> int:
        """The level at which constituency trees are cut into the phrases a model with ``config``
        reads (:func:`~syntaxformer.data.phrases.cut_tree`); 1 by default."""
        return 1

    @classmethod
    def phrase_label_vocabulary(cls, config: Mapping, phrases: Sequence[Sequence]) -> list[str] | None:
        """The phrase labels a model with ``config`` is trained to predict, given the training
        sentences' phrases (per sentence, ``(start, end, label)`` triples), or None: no phrase labels
        (the default)."""
        return None

    @classmethod
    def with_phrase_labels(cls, overrides: dict, labels: Sequence[str]) -> dict:
        """The config ``overrides`` of a model trained to predict ``labels``
        (:meth:`phrase_label_vocabulary`); by default unchanged.

        Raises:
            InputError (one line): an override that contradicts ``labels``.
        """
        return overrides

    @classmethod
    def save_phrase_labels(cls, config, labels: Sequence[str]) -> None:
        """Record ``labels`` in the model ``config`` (saved with it), so a model fine-tuned from it
        keeps the vocabulary; by default nothing."""

    @classmethod
    def from_config(cls, config, layer_index: int) -> StructuralPrior:
        """The prior of 0-based layer ``layer_index`` of a model with ``config``."""
        raise NotImplementedError

    def forward(
        self, hidden: torch.Tensor, key_mask: torch.Tensor, state=None, inputs: dict[str, torch.Tensor] | None = None
    ) -> PriorOutput:
        """hidden (B, N, d) layer input, key_mask (B, N) bool (True = real token), state from the layer
        below (None at the first layer), ``inputs``: per-sentence structure the model was given
        (``structure_inputs``, the same dict for every layer; e.g. ``{"heads": (B, N) long}`` in token
        positions for the structural-position prior), None when none was given; a prior that needs
        none ignores it -> :class:`PriorOutput`."""
        raise NotImplementedError
