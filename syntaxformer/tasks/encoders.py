"""Sentence encoders for classification tasks: a registry of base models and how a sentence vector
is pooled from them.

An encoder is a Hugging Face style base model (no output head) whose ``forward(input_ids,
attention_mask)`` returns an output with ``last_hidden_state`` ``(B, N, D)``; the task pools it into
one vector per sentence ``(B, D)``. :data:`ENCODERS` maps the ``--encoder`` name to an
:class:`EncoderEntry`: config class, base-model class, the task's size presets, fixed config fields,
the default pooling and the output width D.

* ``on-lstm``: :class:`~syntaxformer.models.on_lstm.OnLstmModel` (no output layer, the LM-only
  dropouts off); pooling ``last``.
* ``tree-transformer``: :class:`~syntaxformer.models.tree_transformer.TreeTransformerModel` with
  ``prior="constituent"``; pooling ``mean``.
* ``transformer``: the same model with ``prior="none"``, the plain Transformer; pooling ``mean``.
* ``lstm``: :class:`~syntaxformer.models.lstm.LstmModel` (``torch.nn.LSTM``); pooling ``last``.

**Pooling, a documented choice** (:data:`POOLINGS`; a task may override it): recurrent encoders
give the top layer's output at the sentence's last token (``last``), what the ON-LSTM paper's logic
experiment classifies from (Shen et al. 2019, §6.4; the public ``proplog.py`` takes
``output[lengths - 1]``): it has read the whole sentence. A self-attention encoder has no such state,
every position sees the whole sentence, so attention encoders average their outputs over the real
tokens (``mean``); ``max`` (the element-wise maximum over real tokens) is the other option.

**Adding an encoder is one line**: its model file in ``models/`` (the base model as above) and a
:func:`register_encoder` call at the end of this module, e.g. for the ON-LSTM + self-attention
hybrid (Hao et al. 2019, DESIGN.md §3.4)::

    register_encoder(EncoderEntry("on-lstm-san", OnLstmSanConfig, OnLstmSanModel,
                                  presets={"base": {...}, "tiny": {...}}, pooling="last"))

(``width`` defaults to the config's ``hidden_size``; give a function of the config otherwise.) Every
command that takes ``--encoder`` (``syntaxformer logic``) and ``benchmarks/logic_study.py`` then
know it.

**Presets** (``base``: the logic study's size; ``tiny``: tests). ``on-lstm`` / ``lstm`` ``base`` are
the public ON-LSTM logic code's encoder (``proplog.py``: embedding 128, one layer of 400 units,
chunk 10, dropout 0.2; the ON-LSTM's input and hidden dropouts are 0.1 here, chosen on validation
accuracy, docs/results/logic.md "Recipe choice"); the attention encoders' ``base`` (4 pre-LN layers,
d 128, 4 heads, d_ff 512, dropout 0.1) has a similar number of encoder parameters: 795,264 (plain) and 928,384 (Tree
Transformer, with its constituent prior) against 892,320 (ON-LSTM) and 849,920 (LSTM).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from transformers import PretrainedConfig

from syntaxformer.models.lstm import LstmConfig, LstmModel
from syntaxformer.models.on_lstm import OnLstmConfig, OnLstmModel
from syntaxformer.models.on_lstm_san import OnLstmSanConfig, OnLstmSanModel
from syntaxformer.models.tree_transformer import TreeTransformerConfig, TreeTransformerModel

# ----------------------------------------------------------------------------------------------
# Pooling: (B, N, D) outputs + (B, N) mask -> (B, D)
# ----------------------------------------------------------------------------------------------


def pool_last(hidden: Tensor, mask: Tensor) -> Tensor:
    """The output at each sentence's last real token (right padding): ``h[b, len_b - 1]``.
    hidden ``(B, N, D)``, mask ``(B, N)`` 1 = token -> ``(B, D)``."""
    last = (mask.sum(-1) - 1).clamp(min=0)  # (B,)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


def pool_mean(hidden: Tensor, mask: Tensor) -> Tensor:
    """The mean of the outputs over real tokens: ``sum_t m_t h_t / sum_t m_t``. ``(B, N, D)`` -> ``(B, D)``."""
    m = mask.to(hidden.dtype).unsqueeze(-1)  # (B, N, 1)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)


def pool_max(hidden: Tensor, mask: Tensor) -> Tensor:
    """The element-wise maximum of the outputs over real tokens. ``(B, N, D)`` -> ``(B, D)``."""
    return hidden.masked_fill(~mask.bool().unsqueeze(-1), float("-inf")).amax(1)


#: pooling name -> function ``(hidden (B, N, D), mask (B, N)) -> (B, D)``
POOLINGS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {"last": pool_last, "mean": pool_mean, "max": pool_max}


# ----------------------------------------------------------------------------------------------
# The registry
# ----------------------------------------------------------------------------------------------


def _hidden_size(config: PretrainedConfig) -> int:
    return config.hidden_size


@dataclass(frozen=True)
class EncoderEntry:
    """One sentence encoder of the registry.

    Attributes:
        name: the ``--encoder`` name.
        config_class: its ``PretrainedConfig`` subclass.
        model_class: the base model: ``model_class(config)(input_ids, attention_mask)`` returns an
            output with ``last_hidden_state`` ``(B, N, D)``.
        presets: ``{preset: config fields}`` (``base``, ``tiny``).
        pooling: the default pooling, a key of :data:`POOLINGS`.
        fixed: config fields every preset gets (e.g. ``prior="none"``).
        width: ``config -> D``, the width of ``last_hidden_state`` (default ``config.hidden_size``).
        lr: the peak learning rate of the logic task's default recipe for this encoder
            (:data:`syntaxformer.tasks.logic.RECIPE` leaves it to the encoder), chosen on validation
            accuracy (docs/logic/recipe-choice.json); default 1e-3, the public ON-LSTM code's.
        max_steps: the steps (of 128 pairs) of the logic task's default recipe for this encoder
            (:data:`~syntaxformer.tasks.logic.RECIPE` leaves them to the encoder as well); default
            4,000 (4.2 epochs).
        precision: the logic training's matrix-product precision for this encoder (``fp32``, or
            ``bf16``: ``torch.autocast`` to bfloat16, :attr:`syntaxformer.tasks.logic.LogicArguments.precision`);
            default ``fp32``.
    """

    name: str
    config_class: type
    model_class: type
    presets: dict
    pooling: str = "mean"
    fixed: dict = field(default_factory=dict)
    width: Callable[[PretrainedConfig], int] = _hidden_size
    lr: float = 1e-3
    max_steps: int = 4000
    precision: str = "fp32"


#: name -> entry
ENCODERS: dict[str, EncoderEntry] = {}


def register_encoder(entry: EncoderEntry) -> EncoderEntry:
    """Add ``entry`` to :data:`ENCODERS`; returns it.

    Raises:
        ValueError: the name is taken by another entry, or an unknown default pooling.
    """
    if entry.name in ENCODERS and ENCODERS[entry.name] != entry:
        raise ValueError(f"encoder name {entry.name!r} is already registered")
    if entry.pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {entry.pooling!r}; expected one of {sorted(POOLINGS)}")
    ENCODERS[entry.name] = entry
    return entry


def encoder_entry(name: str) -> EncoderEntry:
    """The entry of ``name``. Raises ValueError for an unknown name (listing the known ones)."""
    if name not in ENCODERS:
        raise ValueError(f"unknown encoder {name!r}; expected one of {sorted(ENCODERS)}")
    return ENCODERS[name]


def encoder_config(name: str, preset: str, vocab_size: int, pad_token_id: int, **overrides) -> PretrainedConfig:
    """The config of encoder ``name`` at ``preset``: its preset fields, then the fixed fields, then
    ``overrides``, with the vocabulary size and padding id.

    Raises:
        ValueError: unknown encoder or preset (listing the known ones), or a field the config refuses.
    """
    entry = encoder_entry(name)
    if preset not in entry.presets:
        raise ValueError(f"unknown preset {preset!r} for encoder {name}; expected one of {sorted(entry.presets)}")
    fields = {**entry.presets[preset], **entry.fixed, **overrides}
    return entry.config_class(vocab_size=vocab_size, pad_token_id=pad_token_id, **fields)


def build_encoder(name: str, config: PretrainedConfig) -> nn.Module:
    """The base model of encoder ``name`` from ``config`` (freshly initialised)."""
    return encoder_entry(name).model_class(config)


# ----------------------------------------------------------------------------------------------
# The encoders
# ----------------------------------------------------------------------------------------------

_TRANSFORMER_PRESETS = {
    "base": dict(
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=512,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    ),
    "tiny": dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    ),
}

register_encoder(
    EncoderEntry(
        "on-lstm",
        OnLstmConfig,
        OnLstmModel,
        presets={
            "base": dict(
                embedding_size=128, hidden_sizes=[400], num_layers=1, chunk_size=10, dropouti=0.1, dropouth=0.1
            ),
            "tiny": dict(embedding_size=16, hidden_sizes=[24], num_layers=1, chunk_size=4, dropouti=0.1, dropouth=0.1),
        },
        pooling="last",
        # no output layer (untied); the LM-only dropouts off; distances of the top layer
        fixed=dict(tie_word_embeddings=False, dropout=0.0, dropoute=0.0, wdrop=0.0, parse_layer=-1),
        width=lambda config: config.layer_sizes[-1],
        # chosen on validation accuracy (docs/results/logic.md, "Recipe choice"; docs/logic/recipe-choice.json):
        # lr 3e-3 (the public code's 1e-3 learns too slowly), dropouts 0.1 (the public code's 0.2), bf16
        # products and the steps that fit in 30 minutes of 2 CPU cores (the measured times are on that page)
        lr=3e-3,
        max_steps=8000,
        precision="bf16",
    )
)
register_encoder(
    EncoderEntry(
        "tree-transformer",
        TreeTransformerConfig,
        TreeTransformerModel,
        presets=_TRANSFORMER_PRESETS,
        pooling="mean",
        fixed=dict(prior="constituent"),
    )
)
register_encoder(
    EncoderEntry(
        "transformer",
        TreeTransformerConfig,
        TreeTransformerModel,
        presets=_TRANSFORMER_PRESETS,
        pooling="mean",
        fixed=dict(prior="none"),
    )
)
register_encoder(
    EncoderEntry(
        "lstm",
        LstmConfig,
        LstmModel,
        presets={
            "base": dict(embedding_size=128, hidden_size=400, num_layers=1, dropout=0.2),
            "tiny": dict(embedding_size=16, hidden_size=24, num_layers=1, dropout=0.1),
        },
        pooling="last",
    )
)

register_encoder(
    EncoderEntry(
        "on-lstm-san",
        OnLstmSanConfig,
        OnLstmSanModel,
        presets={
            "base": dict(
                hidden_size=128,
                num_on_lstm_layers=1,
                chunk_size=8,
                dropouti=0.2,
                dropouth=0.2,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=512,
            ),
            "tiny": dict(
                hidden_size=16,
                num_on_lstm_layers=1,
                chunk_size=4,
                dropouti=0.1,
                dropouth=0.1,
                num_hidden_layers=1,
                num_attention_heads=2,
                intermediate_size=32,
            ),
        },
        pooling="last",
        fixed=dict(dropoute=0.0, wdrop=0.0),
    )
)


__all__ = [
    "POOLINGS",
    "pool_last",
    "pool_mean",
    "pool_max",
    "EncoderEntry",
    "ENCODERS",
    "register_encoder",
    "encoder_entry",
    "encoder_config",
    "build_encoder",
]
