"""Multi-granularity self-attention, MG-SA (Hao, Wang, Shi, Zhang & Tu, "Multi-Granularity
Self-Attention for Neural Machine Translation", EMNLP 2019; DESIGN.md §3.3).

Some heads keep their word queries but take keys and values from a *phrase memory* ``H_g``:

    Q^h = H W_Q^h,    K^h = H_g W_K^h,    V^h = H_g W_V^h

(the same ``W_K^h``, ``W_V^h`` the head would apply to words). ``H_g`` is built per layer and per
granularity ``g`` in three steps:

1. **partition** the sentence into phrases: non-overlapping n-grams (:func:`ngram_partition`) or
   syntactic phrases cut from a constituency tree at a level (:func:`tree_partition`, given to the
   model as ``inputs["phrase_ids"]``);
2. **compose** each phrase into one vector (:func:`compose_phrases`: max-pool, a CNN within the
   phrase then max-pool, or self-attention within the phrase then max-pool);
3. let the phrases **interact** with an ON-LSTM over the phrase sequence (:func:`interact_phrases`,
   the ON-LSTM layers of :mod:`syntaxformer.models.on_lstm`), or not.

Optionally the syntactic phrases are **supervised** with their labels (NP, VP, PP, ...): a softmax
classifier on each composed phrase, ``weight × NLL`` added to the training loss
(:func:`phrase_label_nll`; the prior returns it as ``PriorOutput.loss``).

As a prior of the registry (``config.prior = "multi-granularity"``) it returns
``PriorOutput.key_memories``: one :class:`~syntaxformer.priors.base.KeyMemory` per granularity other
than ``"word"``, naming its heads; the attention (``models/encoder.py: MultiHeadSelfAttention``)
groups the heads by memory (different key lengths) and calls the kernel once per group.

Config fields read (all optional):

``mgsa_granularities``
    one granularity per head (original head numbers): ``"word"`` (plain attention over words),
    ``"<n>gram"`` (non-overlapping n-grams, n >= 1) or ``"tree"`` (the phrases of
    ``inputs["phrase_ids"]``). A list, or a comma-separated string where ``name*k`` repeats a name
    (``"word*2,2gram,3gram"``). Default (:func:`default_granularities`): the first half of the heads
    ``"word"``, the others ``"2gram"``, ``"3gram"``, ``"2gram"``, ...
``mgsa_composition``
    ``"max-pool"`` (default), ``"cnn"`` or ``"attention"`` (:data:`COMPOSITIONS`).
``mgsa_interaction``
    ``"on-lstm"`` (default, as the paper's full model) or ``"none"``.
``mgsa_chunk_size``
    the ON-LSTM's chunk size (default 8; must divide ``hidden_size``).
``mgsa_num_phrase_labels``, ``mgsa_phrase_loss_weight``
    size of the phrase-label set (0 = no classifier, the default) and the loss weight (default 0).
``mgsa_tree_level``
    the level at which the data cuts trees into phrases (:func:`tree_partition`; default 1). The
    prior itself reads only ``inputs["phrase_ids"]``.

Differences from the paper (DESIGN.md §3.3): the encoder is pre-LN, so the prior composes phrases
from the block input normalised by its own LayerNorm (as the constituent prior), where the paper's
post-LN layer uses the same ``H`` for words and phrases; phrases and their memory are rebuilt at every
layer; the label loss is averaged over the layers (``weight × mean_l NLL_l``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..blocks.on_lstm import OnLstmStack
from ..data.phrases import label_vocabulary
from ..data.structure_source import StructureSource
from ..decoding.phrases import tree_partition, tree_phrases  # noqa: F401  (re-exported)
from ..errors import InputError
from .base import KeyMemory, PriorOutput, StructuralPrior

#: the phrase compositions of :func:`compose_phrases`
COMPOSITIONS = ("max-pool", "cnn", "attention")
#: the phrase interaction through an ordered-neurons recurrence (``blocks/on_lstm.py``) over each
#: granularity's phrases, the paper's full model (a config value, not a model name)
ORDERED_NEURONS = "on-lstm"
#: the phrase interactions (:func:`interact_phrases`)
INTERACTIONS = (ORDERED_NEURONS, "none")
_GRANULARITY = re.compile(r"^(word|tree|[1-9][0-9]*gram)$")


# ----------------------------------------------------------------------------------------------
# Granularities
# ----------------------------------------------------------------------------------------------


def default_granularities(num_heads: int) -> tuple[str, ...]:
    """The first ``ceil(H/2)`` heads ``"word"``, the others ``"2gram"``, ``"3gram"``, ``"2gram"``, ..."""
    words = num_heads - num_heads // 2
    return ("word",) * words + tuple(("2gram", "3gram")[i % 2] for i in range(num_heads // 2))


def expand_granularities(spec: str | Sequence[str]) -> list[str]:
    """The granularity names of a ``mgsa_granularities`` value (a list, or ``"word*2,2gram,tree"``),
    repetitions ``name*k`` expanded, in head order; the number of heads is not checked.

    Raises:
        ValueError: a name other than ``word``, ``<n>gram``, ``tree``, or a bad repetition.
    """
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    names: list[str] = []
    for item in items:
        name, _, count = str(item).strip().partition("*")
        if not _GRANULARITY.match(name) or (count and not count.isdigit()):
            raise ValueError(f"mgsa_granularities: {item!r} is not 'word', '<n>gram' or 'tree' (optionally '*k')")
        names += [name] * (int(count) if count else 1)
    return names


def parse_granularities(spec: str | Sequence[str] | None, num_heads: int) -> tuple[str, ...]:
    """One granularity per head from a list or a compact string (module docstring).

    Args:
        spec: list of names, ``"word*2,2gram,3gram"``, or None (:func:`default_granularities`).
        num_heads: H, the number of heads before pruning.
    Returns:
        H names, each ``"word"``, ``"<n>gram"`` or ``"tree"``.
    Raises:
        ValueError: an unknown name, a bad repetition, or not exactly H names.
    """
    if spec is None:
        return default_granularities(num_heads)
    names = expand_granularities(spec)
    if len(names) != num_heads:
        raise ValueError(f"mgsa_granularities gives {len(names)} heads, the layer has {num_heads}")
    return tuple(names)


# ----------------------------------------------------------------------------------------------
# Partitions
# ----------------------------------------------------------------------------------------------


def ngram_partition(key_mask: torch.Tensor, n: int) -> torch.Tensor:
    """Non-overlapping n-grams from the first real token (Hao et al. 2019, §2.2 "n-gram phrases").

    Args:
        key_mask: (B, N) bool, True = real token (any padding pattern).
        n: phrase length, >= 1; a sentence's last phrase is shorter when n does not divide its length.
    Returns:
        (B, N) long phrase ids: the k-th real token (0-based) of a sentence is in phrase ``k // n``;
        -1 at padding.
    """
    if n < 1:
        raise ValueError(f"n-gram phrases need n >= 1, got {n}")
    position = key_mask.long().cumsum(-1) - 1  # (B, N) index of each real token among the real ones
    return torch.where(key_mask, torch.div(position, n, rounding_mode="floor"), torch.full_like(position, -1))


def pad_phrase_ids(partitions: Iterable[Sequence[int]], length: int) -> torch.Tensor:
    """Per-sentence phrase ids (right padding) -> (B, length) long, -1 at padding: the model's
    ``inputs["phrase_ids"]``."""
    rows = [list(p) + [-1] * (length - len(p)) for p in partitions]
    return torch.tensor(rows, dtype=torch.long)


# ----------------------------------------------------------------------------------------------
# Composition and interaction
# ----------------------------------------------------------------------------------------------


def phrase_mask(phrase_ids: torch.Tensor) -> torch.Tensor:
    """(B, N) phrase ids (-1 padding) -> (B, P) bool, True = a real phrase; P = largest id + 1 in the
    batch (at least 1). Ids must number each sentence's phrases 0, 1, ... in order."""
    count = phrase_ids.max(-1).values + 1  # (B,) phrases per sentence
    slots = max(int(count.max()), 1) if phrase_ids.numel() else 1
    return torch.arange(slots, device=phrase_ids.device)[None, :] < count[:, None]


def max_pool_phrases(hidden: torch.Tensor, phrase_ids: torch.Tensor, num_phrases: int) -> torch.Tensor:
    """Element-wise max over each phrase's words: (B, N, d), (B, N) ids -> (B, P, d), 0 at empty slots."""
    B, N, d = hidden.shape
    index = torch.where(phrase_ids >= 0, phrase_ids, num_phrases)  # padding words into a dump slot
    pooled = hidden.new_full((B, num_phrases + 1, d), float("-inf")).scatter_reduce(
        1, index[..., None].expand(B, N, d), hidden, reduce="amax", include_self=True
    )[:, :num_phrases]
    return pooled.masked_fill(torch.isinf(pooled), 0.0)


class PhraseCNN(nn.Module):
    """A 1-D convolution over words that never reads across a phrase boundary: word t's output is
    ``W [x_{t-r}; ...; x_{t+r}] + b`` with neighbours outside its phrase (or padding) taken as 0.

    Args:
        hidden_size: d; kernel_size: 2r + 1 words (odd).
    """

    def __init__(self, hidden_size: int, kernel_size: int = 3):
        super().__init__()
        if kernel_size % 2 == 0:
            raise ValueError(f"the phrase CNN needs an odd kernel size, got {kernel_size}")
        self.radius = kernel_size // 2
        self.proj = nn.Linear(kernel_size * hidden_size, hidden_size)

    def forward(self, hidden: torch.Tensor, phrase_ids: torch.Tensor) -> torch.Tensor:
        """(B, N, d), (B, N) ids -> (B, N, d)."""
        r = self.radius
        padded = F.pad(hidden, (0, 0, r, r))  # (B, N + 2r, d)
        padded_ids = F.pad(phrase_ids, (r, r), value=-2)
        n = hidden.shape[1]
        parts = []
        for offset in range(2 * r + 1):
            same = (padded_ids[:, offset : offset + n] == phrase_ids) & (phrase_ids >= 0)  # (B, N)
            parts.append(padded[:, offset : offset + n] * same[..., None].to(hidden.dtype))
        return self.proj(torch.cat(parts, dim=-1))


class PhraseSelfAttention(nn.Module):
    """Single-head scaled dot-product self-attention restricted to the words of the same phrase."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden: torch.Tensor, phrase_ids: torch.Tensor) -> torch.Tensor:
        """(B, N, d), (B, N) ids -> (B, N, d) (rows of padding words are finite garbage)."""
        q, k, v = self.query(hidden), self.key(hidden), self.value(hidden)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hidden.shape[-1])  # (B, N, N)
        same = (phrase_ids[:, :, None] == phrase_ids[:, None, :]) & (phrase_ids[:, None, :] >= 0)
        scores = scores.masked_fill(~same, torch.finfo(scores.dtype).min)
        return torch.softmax(scores, dim=-1) @ v


def compose_phrases(
    hidden: torch.Tensor, phrase_ids: torch.Tensor, method: str = "max-pool", encoder: nn.Module | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Phrase vectors from word vectors (Hao et al. 2019, §2.2 "composition"; DESIGN.md §3.3).

    Args:
        hidden: (B, N, d) word vectors.
        phrase_ids: (B, N) long phrase of each word, -1 at padding (each sentence's phrases 0, 1, ...).
        method: ``"max-pool"`` (element-wise max over the phrase's words), ``"cnn"`` (``encoder`` a
            :class:`PhraseCNN`, then max-pool) or ``"attention"`` (``encoder`` a
            :class:`PhraseSelfAttention`, then max-pool).
        encoder: the word-level module of ``"cnn"`` / ``"attention"``.
    Returns:
        memory (B, P, d) (0 at empty slots) and its mask (B, P) bool (:func:`phrase_mask`).
    """
    if method not in COMPOSITIONS:
        raise ValueError(f"unknown phrase composition {method!r}; expected one of {COMPOSITIONS}")
    mask = phrase_mask(phrase_ids)
    words = hidden if method == "max-pool" else encoder(hidden, phrase_ids)
    return max_pool_phrases(words, phrase_ids, mask.shape[1]), mask


def interact_phrases(stack: nn.Module, memory: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Phrases read in order by an ON-LSTM (Hao et al. 2019, §2.3; Shen et al. 2019; DESIGN.md §3.4).

    Args:
        stack: a :class:`~syntaxformer.models.on_lstm.OnLstmStack` (its last layer's width d).
        memory: (B, P, d) composed phrases; mask: (B, P) bool.
    Returns:
        (B, P, d): the last layer's outputs, 0 at empty slots (a padded step keeps the state).
    """
    hiddens, _, _ = stack(memory, mask)
    return hiddens[-1].masked_fill(~mask[..., None], 0.0)


def phrase_label_nll(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood (nats) of the phrase labels.

    Args:
        logits: (B, P, C) phrase-label scores; labels: (B, P') long, -100 = no label (P' may differ
            from P: missing slots count as unlabelled, extra ones are dropped).
    Returns:
        scalar: mean over labelled phrases of ``-log softmax(logits)[label]``; 0 (keeping the graph)
        when no phrase is labelled.
    """
    P = logits.shape[1]
    labels = labels[:, :P].to(logits.device)
    if labels.shape[1] < P:
        labels = F.pad(labels, (0, P - labels.shape[1]), value=-100)
    flat, targets = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
    if not (targets != -100).any():
        return flat.sum() * 0.0
    return F.cross_entropy(flat, targets, ignore_index=-100)


# ----------------------------------------------------------------------------------------------
# The prior
# ----------------------------------------------------------------------------------------------


class PhraseMemory(nn.Module):
    """One granularity's phrase memory: composition (+ its word-level module) and interaction."""

    def __init__(self, hidden_size: int, composition: str, interaction: str, chunk_size: int):
        super().__init__()
        if composition not in COMPOSITIONS or interaction not in INTERACTIONS:
            raise ValueError(
                f"mgsa: composition {composition!r} (one of {COMPOSITIONS}), "
                f"interaction {interaction!r} (one of {INTERACTIONS})"
            )
        self.composition = composition
        self.encoder = None  # the word-level module of the composition
        if composition == "cnn":
            self.encoder = PhraseCNN(hidden_size)
        elif composition == "attention":
            self.encoder = PhraseSelfAttention(hidden_size)
        self.interaction = None
        if interaction == ORDERED_NEURONS:
            if hidden_size % chunk_size:
                raise ValueError(f"mgsa_chunk_size {chunk_size} does not divide hidden_size {hidden_size}")
            self.interaction = OnLstmStack([hidden_size, hidden_size], chunk_size, wdrop=0.0, dropouth=0.0)

    def forward(self, hidden: torch.Tensor, phrase_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, N, d), (B, N) ids -> memory (B, P, d), mask (B, P)."""
        memory, mask = compose_phrases(hidden, phrase_ids, self.composition, self.encoder)
        if self.interaction is not None:
            memory = interact_phrases(self.interaction, memory, mask)
        return memory, mask


class MultiGranularityPrior(StructuralPrior):
    """The registry's ``"multi-granularity"`` prior (module docstring; DESIGN.md §3.3).

    Args:
        hidden_size: d.
        granularities: one per original head (:func:`parse_granularities`).
        composition, interaction, chunk_size: as the config fields ``mgsa_*``.
        num_phrase_labels: C > 0 adds a phrase-label classifier on the ``"tree"`` memory.
        phrase_loss_weight: λ; the layer's loss is ``λ · NLL / num_layers`` when
            ``inputs["phrase_labels"]`` is given and λ > 0.
        num_layers: L, the layers sharing the label loss.
        layer_norm_eps: epsilon of the prior's LayerNorm.
    """

    record_names = ("phrase_logits",)
    config_defaults = {
        "mgsa_granularities": None,
        "mgsa_composition": "max-pool",
        "mgsa_interaction": ORDERED_NEURONS,
        "mgsa_chunk_size": 8,
        "mgsa_num_phrase_labels": 0,
        "mgsa_phrase_loss_weight": 0.0,
        "mgsa_tree_level": 1,
    }
    #: a model with ``"tree"`` heads reads a phrase partition per sentence (``--phrases``; :meth:`reads_structure`)
    structure_input = "phrases"
    structure_messages = {
        "train-missing": "a 'tree' granularity of --prior multi-granularity needs a phrase partition per "
        "sentence: give --phrases gold or --phrases induced:MODEL_DIR",
        "train-unread": "--phrases feeds the 'tree' heads of --prior multi-granularity: give that prior "
        "with a tree head, e.g. --set mgsa_granularities='\"word*2,tree,2gram\"'",
        "eval-missing": "this model's multi-granularity prior has 'tree' heads, which need a phrase partition "
        "per sentence: pass --phrases gold or --phrases induced:MODEL_DIR",
        "eval-unread": "--phrases {value}: this {model} (prior {prior}) has no 'tree' heads "
        "and reads no phrases; leave --phrases out",
    }

    @classmethod
    def reads_structure(cls, config: Mapping) -> bool:
        """Whether ``config``'s ``mgsa_granularities`` has a ``"tree"`` head (the default has none).

        Raises:
            InputError: a granularity :func:`expand_granularities` refuses.
        """
        spec = config.get("mgsa_granularities")
        try:
            return spec is not None and "tree" in expand_granularities(spec)
        except ValueError as e:
            raise InputError(str(e)) from None

    @classmethod
    def check_structure_source(cls, config: Mapping, source: StructureSource) -> None:
        """Phrase labels (``mgsa_phrase_loss_weight > 0``) need gold trees: induced ones have no labels.

        Raises:
            InputError: labels wanted from an induced ``source``.
        """
        if not source.is_gold and cls._labelled(config):
            raise InputError("mgsa_phrase_loss_weight > 0 needs phrase labels, which only --phrases gold has")

    @classmethod
    def tree_level(cls, config: Mapping) -> int:
        """``mgsa_tree_level`` of ``config`` (the run's overrides, or a model folder's ``config.json``),
        else the default (1)."""
        return int(config.get("mgsa_tree_level", cls.config_defaults["mgsa_tree_level"]))

    @classmethod
    def phrase_label_vocabulary(cls, config: Mapping, phrases: Sequence[Sequence]) -> list[str] | None:
        """With ``mgsa_phrase_loss_weight > 0``: the ``mgsa_phrase_labels`` of ``config`` (a fine-tuned
        folder's), else the labels of the training ``phrases``
        (:func:`~syntaxformer.data.phrases.label_vocabulary`); None without label supervision."""
        if not cls._labelled(config):
            return None
        saved = config.get("mgsa_phrase_labels")
        return list(saved) if saved else label_vocabulary(phrases)

    @classmethod
    def with_phrase_labels(cls, overrides: dict, labels: Sequence[str]) -> dict:
        """``overrides`` with ``mgsa_num_phrase_labels`` = the number of ``labels``.

        Raises:
            InputError: ``mgsa_num_phrase_labels`` already set to another value.
        """
        n = len(labels)
        given = overrides.get("mgsa_num_phrase_labels")
        if given not in (None, 0, n):
            raise InputError(
                f"mgsa_num_phrase_labels is {given}, the phrase labels of the training trees are "
                f"{n} ({', '.join(labels)}): leave it unset"
            )
        return {**overrides, "mgsa_num_phrase_labels": n}

    @classmethod
    def save_phrase_labels(cls, config, labels: Sequence[str]) -> None:
        """``config.mgsa_phrase_labels``: the label vocabulary, saved with the config."""
        config.mgsa_phrase_labels = list(labels)

    @staticmethod
    def _labelled(config: Mapping) -> bool:
        return float(config.get("mgsa_phrase_loss_weight") or 0) > 0

    def __init__(
        self,
        hidden_size: int,
        granularities: Sequence[str],
        composition: str = "max-pool",
        interaction: str = ORDERED_NEURONS,
        chunk_size: int = 8,
        num_phrase_labels: int = 0,
        phrase_loss_weight: float = 0.0,
        num_layers: int = 1,
        layer_norm_eps: float = 1e-6,
    ):
        super().__init__()
        self.granularities = tuple(granularities)
        self.groups = {}  # granularity -> original head numbers, in order of first appearance
        for head, name in enumerate(self.granularities):
            if name != "word":
                self.groups.setdefault(name, []).append(head)
        if num_phrase_labels > 0 and "tree" not in self.groups:
            raise ValueError("mgsa_num_phrase_labels > 0 needs a 'tree' head (labels are syntactic phrases')")
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.memories = nn.ModuleDict(
            {name: PhraseMemory(hidden_size, composition, interaction, chunk_size) for name in self.groups}
        )
        self.phrase_classifier = nn.Linear(hidden_size, num_phrase_labels) if num_phrase_labels > 0 else None
        self.phrase_loss_weight = phrase_loss_weight
        self.num_layers = num_layers

    @classmethod
    def from_config(cls, config, layer_index: int) -> MultiGranularityPrior:
        """The prior of any layer (``hidden_size``, the ``mgsa_*`` fields of ``config_defaults``)."""
        field = {k: getattr(config, k, default) for k, default in cls.config_defaults.items()}
        return cls(
            config.hidden_size,
            parse_granularities(field["mgsa_granularities"], config.num_attention_heads),
            field["mgsa_composition"],
            field["mgsa_interaction"],
            field["mgsa_chunk_size"],
            field["mgsa_num_phrase_labels"],
            field["mgsa_phrase_loss_weight"],
            config.num_hidden_layers,
            getattr(config, "layer_norm_eps", 1e-6),
        )

    def partition(self, name: str, key_mask: torch.Tensor, inputs: dict | None) -> torch.Tensor:
        """(B, N) phrase ids of granularity ``name`` (n-grams from the mask, ``"tree"`` from inputs)."""
        if name != "tree":
            return ngram_partition(key_mask, int(name[: -len("gram")]))
        if not inputs or inputs.get("phrase_ids") is None:
            raise ValueError("a 'tree' head of the multi-granularity prior needs inputs['phrase_ids'] (B, N)")
        ids = inputs["phrase_ids"].to(key_mask.device)
        if ids.shape != key_mask.shape:
            raise ValueError(f"inputs['phrase_ids'] has shape {tuple(ids.shape)}, the batch {tuple(key_mask.shape)}")
        return ids.masked_fill(~key_mask, -1)

    def forward(
        self, hidden: torch.Tensor, key_mask: torch.Tensor, state=None, inputs: dict[str, torch.Tensor] | None = None
    ) -> PriorOutput:
        """hidden (B, N, d) block input, key_mask (B, N) bool, inputs (``"phrase_ids"`` (B, N) long,
        ``"phrase_labels"`` (B, P) long, for ``"tree"`` heads) -> ``key_memories`` (one per
        granularity), ``record["phrase_logits"]`` (B, P, C) and ``loss`` with a classifier."""
        words = self.norm(hidden)
        memories, record, loss = [], {}, None
        for name, heads in self.groups.items():
            ids = self.partition(name, key_mask, inputs)
            memory, mask = self.memories[name](words, ids)
            memories.append(KeyMemory(memory, mask, tuple(heads), ids))
            if name == "tree" and self.phrase_classifier is not None:
                record["phrase_logits"] = logits = self.phrase_classifier(memory)  # (B, P, C)
                labels = (inputs or {}).get("phrase_labels")
                if labels is not None and self.phrase_loss_weight > 0:
                    loss = self.phrase_loss_weight / self.num_layers * phrase_label_nll(logits, labels)
        return PriorOutput(key_memories=tuple(memories), record=record, loss=loss)

    def extra_repr(self) -> str:
        return f"granularities={list(self.granularities)}"
