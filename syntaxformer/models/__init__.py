"""Models: one file per model, and the registry of architectures
(:mod:`syntaxformer.models.registry`): one :func:`register` line per architecture below says what it
can be used as (language model, sentence encoder, sentence-pair classifier) with its presets per use,
and, for a language model, what its ``forward`` accepts (:class:`Capabilities`; :func:`capabilities_of`).

``MODELS[name]`` is the language model's class; ``PRESETS[name][preset]`` the config fields of a
preset; :func:`make_config` builds a config from both; ``ENCODERS`` / ``PAIR_MODELS`` are the
architectures usable as sentence encoders (``logic``) and sentence-pair classifiers (``nli``);
:func:`default_architecture` names each use's default. Adding a model: its file and one line below.
"""

from __future__ import annotations

from . import gaussian_transformer, lstm, mean_pool_pair, on_lstm, on_lstm_san, pcfg, structformer, tree_transformer
from .gaussian_transformer import GaussianTransformerConfig, GaussianTransformerForSequencePairClassification
from .lstm import LstmConfig, LstmModel
from .mean_pool_pair import MeanPoolForSequencePairClassification, MeanPoolPairConfig
from .on_lstm import OnLstmConfig, OnLstmForCausalLM, OnLstmModel
from .on_lstm_san import OnLstmSanConfig, OnLstmSanForMaskedLM, OnLstmSanModel
from .pcfg import CompoundPcfgConfig, CompoundPcfgForLanguageModel, NeuralPcfgConfig, NeuralPcfgForLanguageModel
from .registry import (
    ENCODERS,
    MODELS,
    PAIR_MODELS,
    PRESETS,
    REGISTRY,
    USES,
    Architecture,
    Capabilities,
    EncoderUse,
    LanguageModelUse,
    PairClassifierUse,
    build_encoder,
    capabilities_of,
    default_architecture,
    encoder_use,
    make_config,
    make_encoder_config,
    register,
    unregister,
)
from .structformer import StructFormerConfig, StructFormerForMaskedLM
from .tree_transformer import TreeTransformerConfig, TreeTransformerForMaskedLM, TreeTransformerModel

_tt = tree_transformer
# what each language model's forward accepts (register checks it against the forward)
_ATTENTION_LM = dict(masked_only=True, head_mask=True, output_hidden_states=True)
# fmt: off
register(Architecture(_tt.NAME, TreeTransformerConfig, default_for=("language_model",),
                      language_model=LanguageModelUse(TreeTransformerForMaskedLM, _tt.PRESETS,
                                                      Capabilities(**_ATTENTION_LM, structure_inputs=True,
                                                                   output_priors=True, constituent_variant=True)),
                      encoder=EncoderUse(TreeTransformerModel, _tt.ENCODER_PRESETS, fixed=dict(prior="constituent"))))
register(Architecture(_tt.PLAIN_NAME, TreeTransformerConfig,
                      encoder=EncoderUse(TreeTransformerModel, _tt.ENCODER_PRESETS, fixed=dict(prior="none"))))
register(Architecture(structformer.NAME, StructFormerConfig,
                      language_model=LanguageModelUse(StructFormerForMaskedLM, structformer.PRESETS,
                                                      Capabilities(**_ATTENTION_LM))))
# the encoder's recipe (lr 3e-3, bf16 products, the steps of 30 minutes on 2 CPU cores) was chosen on
# validation accuracy: docs/results/logic.md, "Recipe choice"; records/logic/recipe-choice.json
register(Architecture(on_lstm.NAME, OnLstmConfig, default_for=("encoder",),
                      language_model=LanguageModelUse(OnLstmForCausalLM, on_lstm.PRESETS,
                                                      Capabilities(output_hidden_states=True)),
                      encoder=EncoderUse(OnLstmModel, on_lstm.ENCODER_PRESETS, pooling="last",
                                         fixed=on_lstm.ENCODER_FIXED, width=lambda config: config.layer_sizes[-1],
                                         lr=3e-3, max_steps=8000, precision="bf16")))
register(Architecture(on_lstm_san.NAME, OnLstmSanConfig,
                      language_model=LanguageModelUse(OnLstmSanForMaskedLM, on_lstm_san.PRESETS,
                                                      Capabilities(**_ATTENTION_LM)),
                      encoder=EncoderUse(OnLstmSanModel, on_lstm_san.ENCODER_PRESETS, pooling="last",
                                         fixed=on_lstm_san.ENCODER_FIXED)))
register(Architecture(pcfg.NEURAL_NAME, NeuralPcfgConfig,
                      language_model=LanguageModelUse(NeuralPcfgForLanguageModel, pcfg.PRESETS)))
register(Architecture(pcfg.COMPOUND_NAME, CompoundPcfgConfig,
                      language_model=LanguageModelUse(CompoundPcfgForLanguageModel, pcfg.COMPOUND_PRESETS)))
register(Architecture(lstm.NAME, LstmConfig, encoder=EncoderUse(LstmModel, lstm.ENCODER_PRESETS, pooling="last")))
register(Architecture("gaussian-transformer", GaussianTransformerConfig, default_for=("pair_classifier",),
                      pair_classifier=PairClassifierUse(GaussianTransformerForSequencePairClassification,
                                                        gaussian_transformer.PRESETS)))
register(Architecture("mean-pool", MeanPoolPairConfig,
                      pair_classifier=PairClassifierUse(MeanPoolForSequencePairClassification,
                                                        mean_pool_pair.PRESETS)))
# fmt: on

__all__ = [
    "USES",
    "Architecture",
    "Capabilities",
    "capabilities_of",
    "LanguageModelUse",
    "EncoderUse",
    "PairClassifierUse",
    "REGISTRY",
    "MODELS",
    "PRESETS",
    "ENCODERS",
    "PAIR_MODELS",
    "register",
    "unregister",
    "default_architecture",
    "make_config",
    "encoder_use",
    "make_encoder_config",
    "build_encoder",
    "GaussianTransformerConfig",
    "GaussianTransformerForSequencePairClassification",
    "MeanPoolPairConfig",
    "MeanPoolForSequencePairClassification",
    "TreeTransformerConfig",
    "TreeTransformerForMaskedLM",
    "StructFormerConfig",
    "StructFormerForMaskedLM",
    "OnLstmConfig",
    "OnLstmForCausalLM",
    "OnLstmSanConfig",
    "OnLstmSanForMaskedLM",
]
