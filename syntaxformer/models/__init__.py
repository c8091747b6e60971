"""Models: one file per model, and the registry (:mod:`syntaxformer.models.registry`) that maps a
``--model`` name to its config class, model class, presets and ``induce`` recipes.

``MODELS[name]`` is the masked-LM class; ``PRESETS[name][preset]`` the config fields of a preset;
:func:`make_config` builds a config from both. Adding a model: its file and one line below.

Sentence-pair classifiers (natural-language inference, ``syntaxformer nli``) are not masked LMs: they
are in :data:`PAIR_MODELS` (name -> :class:`ModelEntry`; registered with Hugging Face's
``AutoModelForSequenceClassification`` in their own files), not in :data:`REGISTRY`.
"""

from __future__ import annotations

from . import gaussian_transformer, mean_pool_pair, on_lstm, on_lstm_san, structformer, tree_transformer
from .gaussian_transformer import GaussianTransformerConfig, GaussianTransformerForSequencePairClassification
from .mean_pool_pair import MeanPoolForSequencePairClassification, MeanPoolPairConfig
from .on_lstm import OnLstmConfig, OnLstmForCausalLM
from .on_lstm_san import OnLstmSanConfig, OnLstmSanForMaskedLM
from .registry import MODELS, PRESETS, REGISTRY, ModelEntry, make_config, register_model, unregister_model
from .structformer import StructFormerConfig, StructFormerForMaskedLM
from .tree_transformer import TreeTransformerConfig, TreeTransformerForMaskedLM

register_model(
    ModelEntry(
        "tree-transformer",
        TreeTransformerConfig,
        TreeTransformerForMaskedLM,
        tree_transformer.PRESETS,
        tree_transformer.RECIPES,
    )
)
register_model(
    ModelEntry("structformer", StructFormerConfig, StructFormerForMaskedLM, structformer.PRESETS, structformer.RECIPES)
)
register_model(ModelEntry("on-lstm", OnLstmConfig, OnLstmForCausalLM, on_lstm.PRESETS, on_lstm.RECIPES))
register_model(
    ModelEntry("on-lstm-san", OnLstmSanConfig, OnLstmSanForMaskedLM, on_lstm_san.PRESETS, on_lstm_san.RECIPES)
)

#: ``syntaxformer nli --model``: name -> entry of a sentence-pair classifier (not a masked LM)
PAIR_MODELS: dict[str, ModelEntry] = {
    "gaussian-transformer": ModelEntry(
        "gaussian-transformer",
        GaussianTransformerConfig,
        GaussianTransformerForSequencePairClassification,
        gaussian_transformer.PRESETS,
    ),
    "mean-pool": ModelEntry(
        "mean-pool", MeanPoolPairConfig, MeanPoolForSequencePairClassification, mean_pool_pair.PRESETS
    ),
}

__all__ = [
    "PAIR_MODELS",
    "GaussianTransformerConfig",
    "GaussianTransformerForSequencePairClassification",
    "MeanPoolPairConfig",
    "MeanPoolForSequencePairClassification",
    "MODELS",
    "PRESETS",
    "REGISTRY",
    "ModelEntry",
    "make_config",
    "register_model",
    "unregister_model",
    "TreeTransformerConfig",
    "TreeTransformerForMaskedLM",
    "StructFormerConfig",
    "StructFormerForMaskedLM",
    "OnLstmConfig",
    "OnLstmForCausalLM",
    "OnLstmSanConfig",
    "OnLstmSanForMaskedLM",
]
