"""A Transformer for translation whose encoder is any of the project's structured encoders.

Encoder-decoder (Vaswani et al. 2017) with one joint subword vocabulary and one embedding table
shared three ways (source words, target words, output layer: fairseq's ``--share-all-embeddings``):

    h = Encoder(x, structure)                        # the registry's encoder with the variant's prior
    s_t = Decoder(y_<t, h)                           # pre-LN self-attention, cross-attention, FFN
    p(y_t | y_<t, x) = softmax(E s_t)                # E: the shared embedding table (V, d)

* **Encoder**: an architecture of the registry's ``encoder`` use (:data:`syntaxformer.models.ENCODERS`)
  built from ``config.encoder_fields``: the plain pre-LN Transformer (``transformer``), the same
  encoder with a structural prior (``tree-transformer`` with ``prior`` = ``structural-position``,
  ``multi-granularity``; DESIGN.md §3.2, §3.3) or ON-LSTM layers under self-attention with the
  short-cut (``on-lstm-san``, §3.4). A prior that reads a tree per sentence gets it as
  ``structure_inputs`` (token positions, as the masked LM does).
* **Decoder**: Hugging Face's mBART decoder (``MBartDecoder``: pre-LN layers with causal
  self-attention, cross-attention and a ReLU feed-forward block; learned positions; a LayerNorm on
  the embeddings and one after the last layer), so generation, the key-value cache and beam search
  are ``transformers``' own (:meth:`TranslationModel.generate`).
* **Variants** by a config string (:data:`VARIANTS`): ``baseline``, ``structural-position``,
  ``mgsa-ngram``, ``mgsa-syntactic``, ``on-lstm-san``; :func:`translation_config` builds a config
  from a variant and a size (:data:`PRESETS`: ``anchor`` is ``transformer_tiny`` of Wu et al. 2021's
  Multi30k code, 4+4 layers, d 128, FFN 256, 4 heads, dropout 0.3).

Differences from fairseq's ``transformer_tiny`` (DESIGN.md, "Translation"): the decoder's embedding
LayerNorm (mBART's ``layernorm_embedding``) and learned decoder positions (fairseq: sinusoidal), the
encoder's sinusoidal positions and its own initialisation (the registry's encoders).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, GenerationMixin, MBartConfig, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput
from transformers.models.mbart.modeling_mbart import MBartDecoder

from .encoder import SinusoidalEmbeddings, sinusoidal_positions
from .registry import ENCODERS

#: special tokens of the joint vocabulary, in id order (:mod:`syntaxformer.data.parallel`)
PAD, BOS, EOS, UNK = 0, 1, 2, 3

#: sizes: the anchor (Wu et al. 2021's ``transformer_tiny`` for Multi30k) and a test size
PRESETS = {
    "anchor": dict(d_model=128, layers=4, heads=4, ffn=256, dropout=0.3),
    "tiny": dict(d_model=32, layers=2, heads=2, ffn=64, dropout=0.1),
}


@dataclass(frozen=True)
class Variant:
    """One encoder structure of the translation study.

    Attributes:
        encoder: the registry name of the encoder (:data:`syntaxformer.models.ENCODERS`).
        fields: encoder config fields beyond the size (e.g. the prior and its settings).
        structure: what the source side needs per sentence: None, ``"heads"`` (a dependency tree) or
            ``"phrase_ids"`` (a constituency tree cut into phrases).
        about: one line for ``--help`` and the report.
    """

    encoder: str
    fields: dict
    structure: str | None
    about: str


#: the encoder structures by name (``--variant``)
VARIANTS = {
    "baseline": Variant("transformer", {}, None, "the plain pre-LN Transformer encoder"),
    "structural-position": Variant(
        "tree-transformer",
        dict(prior="structural-position"),
        "heads",
        "structural positions, absolute (depth fused with the positions) and relative (keys of the "
        "attention), from a dependency tree (Wang et al. 2019)",
    ),
    "mgsa-ngram": Variant(
        "tree-transformer",
        dict(prior="multi-granularity"),  # the prior's default: half the heads words, then 2-, 3-, 2-grams ...
        None,
        "multi-granularity self-attention, half the heads over n-gram phrases (Hao et al. 2019)",
    ),
    "mgsa-syntactic": Variant(
        "tree-transformer",
        dict(prior="multi-granularity", mgsa_granularities="tree-half"),  # per size: encoder_fields
        "phrase_ids",
        "multi-granularity self-attention, half the heads over syntactic phrases (Hao et al. 2019), "
        "without the phrase-label loss (induced trees have no labels)",
    ),
    "on-lstm-san": Variant(
        "on-lstm-san",
        dict(dropoute=0.0, wdrop=0.0),
        None,
        "ON-LSTM layers under self-attention layers with the short-cut (Hao et al. 2019)",
    ),
}


def encoder_fields(variant: str, preset: str) -> dict:
    """The encoder config fields of ``variant`` at ``preset``.

    Raises:
        ValueError: an unknown variant or preset.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    size, spec = PRESETS[preset], VARIANTS[variant]
    fields = dict(hidden_size=size["d_model"], num_attention_heads=size["heads"], intermediate_size=size["ffn"])
    if spec.encoder == "on-lstm-san":  # half the layers recurrent, half self-attention (Hao et al.: 3 + 3 of 6)
        rnn = size["layers"] // 2
        fields.update(num_on_lstm_layers=rnn, num_hidden_layers=size["layers"] - rnn, chunk_size=8)
        fields.update(dropouti=size["dropout"], dropouth=size["dropout"], dropout=size["dropout"])
    else:
        fields.update(num_hidden_layers=size["layers"], hidden_dropout_prob=size["dropout"])
        fields.update(attention_probs_dropout_prob=0.1, max_position_embeddings=256)
    fields.update(spec.fields)
    if fields.get("mgsa_granularities") == "tree-half":  # half the heads words, half the tree's phrases
        heads = size["heads"]
        fields["mgsa_granularities"] = f"word*{heads - heads // 2},tree*{heads // 2}"
    return fields


def translation_config(variant: str, preset: str, vocab_size: int, **overrides) -> TranslationConfig:
    """The config of a translation model: ``variant``'s encoder and the decoder at ``preset``, the
    joint vocabulary's size, any field of :class:`TranslationConfig` overridden.

    Raises:
        ValueError: an unknown variant or preset, or a field the configs refuse.
    """
    size = PRESETS.get(preset)
    fields = encoder_fields(variant, preset)  # raises for unknown names
    config = dict(
        variant=variant,
        encoder_architecture=VARIANTS[variant].encoder,
        encoder_fields=fields,
        vocab_size=vocab_size,
        d_model=size["d_model"],
        decoder_layers=size["layers"],
        decoder_attention_heads=size["heads"],
        decoder_ffn_dim=size["ffn"],
        dropout=size["dropout"],
    )
    return TranslationConfig(**{**config, **overrides})


class TranslationConfig(MBartConfig):
    """Configuration of :class:`TranslationModel`: mBART's decoder fields plus the encoder's.

    Args:
        variant: the name of the encoder structure (:data:`VARIANTS`), for reports and cards.
        encoder_architecture: the registry name of the encoder (:data:`~syntaxformer.models.ENCODERS`).
        encoder_fields: its config fields (``hidden_size`` must equal ``d_model``).
        label_smoothing: ε of the label-smoothed cross-entropy (Szegedy et al. 2016; fairseq's 0.1).
        source_language, target_language: language codes, for the card and the Moses tokenisers.
        lowercase: whether the training text was lower-cased (inputs are then lower-cased too).
        **kwargs: ``MBartConfig`` fields (``vocab_size``, ``d_model``, ``decoder_layers``,
            ``decoder_attention_heads``, ``decoder_ffn_dim``, ``dropout``, ...).
    Raises:
        ValueError: an encoder without the registry's encoder use, or an encoder width other than ``d_model``.
    """

    model_type = "syntaxformer-translation"

    def __init__(
        self,
        variant: str = "baseline",
        encoder_architecture: str = "transformer",
        encoder_fields: dict | None = None,
        label_smoothing: float = 0.1,
        source_language: str = "en",
        target_language: str = "de",
        lowercase: bool = True,
        **kwargs,
    ):
        defaults = dict(
            activation_function="relu",
            scale_embedding=True,
            attention_dropout=0.0,
            activation_dropout=0.0,
            decoder_layerdrop=0.0,
            pad_token_id=PAD,
            bos_token_id=BOS,
            eos_token_id=EOS,
            decoder_start_token_id=BOS,
            forced_eos_token_id=None,
            max_position_embeddings=256,
            is_encoder_decoder=True,
            tie_word_embeddings=True,
        )
        super().__init__(**{**defaults, **kwargs})
        self.variant = variant
        self.encoder_architecture = encoder_architecture
        self.encoder_fields = dict(encoder_fields or {})
        self.label_smoothing = label_smoothing
        self.source_language = source_language
        self.target_language = target_language
        self.lowercase = lowercase
        if encoder_architecture not in ENCODERS:
            raise ValueError(f"unknown encoder {encoder_architecture!r}; expected one of {sorted(ENCODERS)}")
        width = self.encoder_fields.get("hidden_size", self.d_model)
        if width != self.d_model:
            raise ValueError(f"the encoder's hidden_size {width} differs from d_model {self.d_model}")

    def encoder_config(self):
        """The encoder's own config (its registry class, ``encoder_fields``, this vocabulary)."""
        arch = ENCODERS[self.encoder_architecture]
        fields = {**arch.encoder.fixed, **self.encoder_fields}
        return arch.config_class(vocab_size=self.vocab_size, pad_token_id=self.pad_token_id, **fields)


def share_embedding(owner: nn.Module, name: str, embedding: nn.Embedding) -> None:
    """Make ``owner.<name>`` the shared ``embedding`` without registering it as ``owner``'s child:
    the table is a parameter of the translation model once (one state-dict entry, whatever the
    version of ``transformers``' tying rules), and the encoder reads it under its usual name."""
    delattr(owner, name)  # the encoder's own table, never used
    object.__setattr__(owner, name, embedding)


class TranslationEncoder(nn.Module):
    """The registry's encoder with the shared embedding table; returns ``BaseModelOutput``.

    ``forward(input_ids (B, N), attention_mask (B, N), structure_inputs)`` → ``last_hidden_state``
    (B, N, d) (``transformers``' generation calls it through :meth:`TranslationModel.get_encoder`).
    """

    main_input_name = "input_ids"

    def __init__(self, config: TranslationConfig, shared: nn.Embedding):
        super().__init__()
        arch = ENCODERS[config.encoder_architecture]
        self.body = arch.encoder.model_class(config.encoder_config())
        if isinstance(getattr(self.body, "embeddings", None), SinusoidalEmbeddings):
            share_embedding(self.body.embeddings, "word_embeddings", shared)
        else:  # the ON-LSTM hybrid reads ``embeddings.weight``
            share_embedding(self.body, "embeddings", shared)

    def forward(self, input_ids, attention_mask=None, structure_inputs=None, **kwargs) -> BaseModelOutput:
        """(B, N) ids, (B, N) 1 = token / 0 = padding, the structure dict (None without) → (B, N, d)."""
        if structure_inputs is not None:
            out = self.body(input_ids, attention_mask, structure_inputs=structure_inputs)
        else:
            out = self.body(input_ids, attention_mask)
        return BaseModelOutput(last_hidden_state=out.last_hidden_state)


class TranslationModel(PreTrainedModel, GenerationMixin):
    """Encoder-decoder translation model (module docstring); ``generate()`` is ``transformers``'.

    ``forward(input_ids, attention_mask, decoder_input_ids, labels, structure_inputs, ...)``:
    ``input_ids`` (B, N) source pieces ending in ``</s>``; ``decoder_input_ids`` (B, T) ``<s>`` then the
    target pieces; ``labels`` (B, T) the target pieces then ``</s>``, ``-100`` or padding ignored.
    Returns ``Seq2SeqLMOutput``: ``logits`` (B, T, V), ``loss`` the label-smoothed cross-entropy (nats per
    target token, mean over the tokens) with labels, ``past_key_values`` when caching.
    """

    config_class = TranslationConfig
    base_model_prefix = "translation"
    main_input_name = "input_ids"
    _supports_sdpa = True

    def __init__(self, config: TranslationConfig):
        super().__init__(config)
        self.shared = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
        self.encoder = TranslationEncoder(config, self.shared)
        self.decoder = MBartDecoder(config)
        self.decoder.embed_tokens = None  # the decoder reads the shared table (``inputs_embeds``)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """fairseq's Transformer initialisation: Xavier-uniform matrices, zero biases, embeddings
        N(0, d^-1/2) with a zero padding row, LayerNorm (1, 0); the sinusoidal table refilled."""
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=module.embedding_dim**-0.5)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, SinusoidalEmbeddings):
            with torch.no_grad():
                module.positions.copy_(sinusoidal_positions(*module.positions.shape))

    def get_input_embeddings(self) -> nn.Embedding:
        return self.shared

    def get_output_embeddings(self):
        return None  # the output layer is the shared table itself (no separate weight to tie)

    def get_encoder(self) -> TranslationEncoder:
        return self.encoder

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs=None,
        past_key_values=None,
        labels: torch.Tensor | None = None,
        use_cache: bool | None = None,
        structure_inputs: dict | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        """See the class docstring; ``encoder_outputs`` (a ``BaseModelOutput`` or tuple, ``[0]`` (B, N, d))
        skips the encoder.

        Raises:
            ValueError: no ``decoder_input_ids`` (training passes ``<s> y``; ``generate`` passes its prefix).
        """
        if decoder_input_ids is None:
            raise ValueError("TranslationModel.forward needs decoder_input_ids (<s> followed by the target prefix)")
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids, attention_mask, structure_inputs)
        hidden = encoder_outputs[0]  # (B, N, d)
        decoded = self.decoder(
            inputs_embeds=self.shared(decoder_input_ids) * self.embed_scale,  # (B, T, d)
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=hidden,
            encoder_attention_mask=attention_mask,
            past_key_values=past_key_values,
            use_cache=use_cache,
        )
        logits = F.linear(decoded.last_hidden_state, self.shared.weight)  # (B, T, V)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(
                logits.flatten(0, 1).float(),
                labels.flatten(),
                ignore_index=-100,
                label_smoothing=self.config.label_smoothing,
            )
        return Seq2SeqLMOutput(loss=loss, logits=logits, past_key_values=decoded.past_key_values)


# saved folders name their config class (AutoConfig / AutoTokenizer read config.json)
AutoConfig.register(TranslationConfig.model_type, TranslationConfig, exist_ok=True)

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "PRESETS",
    "Variant",
    "VARIANTS",
    "encoder_fields",
    "translation_config",
    "TranslationConfig",
    "TranslationEncoder",
    "TranslationModel",
    "share_embedding",
]
