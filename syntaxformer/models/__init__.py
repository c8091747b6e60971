"""Models: one file per model; the registry maps a ``--model`` name to its classes and presets.

``MODELS[name]`` is the masked-LM class; ``PRESETS[name][preset]`` the config fields of a preset;
:func:`make_config` builds a config from both.
"""
from __future__ import annotations

from transformers import PretrainedConfig

from .structformer import StructFormerConfig, StructFormerForMaskedLM
from .tree_transformer import TreeTransformerConfig, TreeTransformerForMaskedLM

MODELS = {"tree-transformer": TreeTransformerForMaskedLM, "structformer": StructFormerForMaskedLM}

PRESETS = {
    "tree-transformer": {
        # the paper's headline configuration (Wang et al. 2019, §4; DESIGN.md §1)
        "paper": dict(num_hidden_layers=10, hidden_size=512, num_attention_heads=8, intermediate_size=2048,
                      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1),
        # CPU default for a <= 20-minute run on 2 cores: the size DESIGN.md §5 measured to train
        # (~2,000-2,700 tokens/s, loss leaving the unigram plateau after ~600 steps); 6 layers leave
        # Algorithm 1 room for a minimum layer of 1-2.
        "small": dict(num_hidden_layers=6, hidden_size=256, num_attention_heads=4, intermediate_size=1024,
                      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1),
        # the induce recipes' size (docs/recipes.md): on 2 CPU cores ~7,900 tokens/s, 3.4x the
        # speed of `small`, and the best dev F1 per CPU minute of the sizes searched
        "mini": dict(num_hidden_layers=4, hidden_size=128, num_attention_heads=4, intermediate_size=512,
                     hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1),
        # tests: seconds
        "tiny": dict(num_hidden_layers=3, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                     hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1),
    },
    "structformer": {
        # the public configuration (Shen et al. 2021, §5; DESIGN.md §2); train with mask rate 0.3,
        # Adam lr 3e-4 (see StructFormerConfig)
        "paper": dict(num_hidden_layers=8, hidden_size=512, num_attention_heads=8, intermediate_size=2048,
                      n_parser_layers=3, conv_size=9, hidden_dropout_prob=0.1,
                      attention_probs_dropout_prob=0.0),
        # CPU, a <= 20-minute run on 2 cores: ~640 tokens/s per training step on one busy core
        # (batch 64 x 25 words, vocabulary 10k, logits at masked positions only)
        "small": dict(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024,
                      n_parser_layers=2, conv_size=9, hidden_dropout_prob=0.1,
                      attention_probs_dropout_prob=0.0),
        # the induce recipes' size (docs/recipes.md): ~7,300 tokens/s on 2 CPU cores
        "mini": dict(num_hidden_layers=4, hidden_size=128, num_attention_heads=4, intermediate_size=512,
                     n_parser_layers=2, conv_size=9, hidden_dropout_prob=0.1,
                     attention_probs_dropout_prob=0.0),
        # tests: seconds
        "tiny": dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                     n_parser_layers=2, conv_size=3, hidden_dropout_prob=0.1,
                     attention_probs_dropout_prob=0.0),
    },
}


def make_config(model: str, preset: str, vocab_size: int, **overrides) -> PretrainedConfig:
    """Config of ``model`` at ``preset`` with ``vocab_size`` and any field overridden.

    Args:
        model: a key of :data:`MODELS` (e.g. "tree-transformer").
        preset: a key of ``PRESETS[model]`` ("paper", "small", "tiny").
        vocab_size: vocabulary size.
        **overrides: config fields (e.g. ``prior="none"``, ``constituent_variant="official"``,
            ``attn_implementation="eager"``).
    Raises:
        ValueError: unknown model or preset (or an invalid field value, from the config).
    """
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; expected one of {sorted(MODELS)}")
    if preset not in PRESETS[model]:
        raise ValueError(f"unknown preset {preset!r} for {model}; expected one of {sorted(PRESETS[model])}")
    fields = {**PRESETS[model][preset], **overrides}
    return MODELS[model].config_class(vocab_size=vocab_size, **fields)


__all__ = ["MODELS", "PRESETS", "make_config", "TreeTransformerConfig", "TreeTransformerForMaskedLM",
           "StructFormerConfig", "StructFormerForMaskedLM"]
