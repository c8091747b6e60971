"""ON-LSTM below self-attention: the hybrid encoder of Hao, Wang, Shi, Zhang & Tu (EMNLP 2019,
"Towards Better Modeling Hierarchical Structure for Self-Attention with Ordered Neurons"; DESIGN.md
§3.4), as a masked LM and a sentence encoder.

K ON-LSTM layers read the word embeddings (the cascaded encoder's bottom), L self-attention layers
read their output, and the encoder's output is the sum of the two (the paper's short-cut)::

    H_on  = ON-LSTM^K(E)                           # (B, N, d), left to right (models/on_lstm.py)
    H_san = LN(SAN^L(H_on))                        # the shared pre-LN encoder, models/encoder.py
    H     = H_on + H_san                           # (B, N, d): last_hidden_state

The ON-LSTM layers are those of :mod:`syntaxformer.models.on_lstm` (:class:`OnLstmStack`; every
layer ``hidden_size`` wide so that the two outputs add up), with its dropouts (``dropouti`` on the
embeddings, ``dropouth`` between layers, ``dropoute``, ``wdrop``); the self-attention layers are
:class:`~syntaxformer.models.encoder.PreLNEncoder` with ``prior="none"`` (any prior of the registry
plugs in) and the final LayerNorm of a pre-LN stack, with ``head_mask`` and ``prune_heads``.

Choices of this file (not the paper's): the ON-LSTM reads left to right only, also under the
masked-LM objective (a word's ON-LSTM state sees its left context and the ``[MASK]`` itself; the
self-attention sees both sides); by default no position encodings are added to the self-attention
input, since the recurrence gives it the word order (``san_positions=True`` adds the sinusoids of
the Transformer); the output layer is untied (as the Tree Transformer's); every ``nn.Linear``
Xavier-uniform with zero bias, embeddings U(-init_range, init_range) (the ON-LSTM's), LayerNorm (1, 0).

The per-layer syntactic distances of the ON-LSTM layers come back in the output (``distances``,
``[B, K, N]``), but the model does not offer them as a parser (``induces_structure`` is False).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from ..blocks.mlm_head import masked_lm_output
from ..priors import check_prior
from .encoder import (
    HeadPruningMixin,
    MultiHeadSelfAttention,
    PreLNEncoder,
    check_attention_sizes,
    normalise_pruned_heads,
    sinusoidal_positions,
)
from .kernel_choice import resolve_kernel
from .on_lstm import CELL_KERNELS, OnLstmStack, embedding_dropout, locked_dropout

#: config fields of the named sizes (``make_config("on-lstm-san", preset, ...)``): K = 2-3 ON-LSTM
#: layers under L = 2-3 self-attention layers of the same width (our CPU sizes, not the paper's NMT ones)
PRESETS = {
    "small": dict(
        hidden_size=256,
        num_on_lstm_layers=3,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=1024,
        chunk_size=8,
    ),
    "mini": dict(
        hidden_size=128,
        num_on_lstm_layers=2,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=512,
        chunk_size=8,
    ),
    # tests: milliseconds
    "tiny": dict(
        hidden_size=32,
        num_on_lstm_layers=2,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        chunk_size=4,
    ),
}

#: the registry name (models/__init__.py)
NAME = "on-lstm-san"

#: sentence-encoder presets (``logic``; the registry's ``encoder`` use); ``tiny``: tests
ENCODER_PRESETS = {
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
}
#: config fields every encoder preset gets (the LM-only dropouts off)
ENCODER_FIXED = dict(dropoute=0.0, wdrop=0.0)


class OnLstmSanConfig(PretrainedConfig):
    """Configuration of the ON-LSTM + self-attention hybrid (BERT names for the self-attention part).

    Args:
        vocab_size: number of tokens.
        hidden_size: d, the width of the embeddings, of every ON-LSTM layer and of the self-attention.
        num_on_lstm_layers: K ON-LSTM layers.
        chunk_size: ON-LSTM units per master unit (``hidden_size`` must be a multiple).
        dropouti, dropouth, dropoute, wdrop: the ON-LSTM's dropouts (:class:`~syntaxformer.models.on_lstm.OnLstmConfig`).
        num_hidden_layers: L self-attention layers (pre-LN, :mod:`syntaxformer.models.encoder`).
        num_attention_heads, intermediate_size: heads per layer and d_ff.
        hidden_dropout_prob: dropout on the self-attention input, its residual branches and inside the FFN.
        attention_probs_dropout_prob: dropout on the attention weights.
        max_position_embeddings: length of the sinusoid table (``san_positions``; longer inputs work).
        san_positions: add sinusoidal positions to the self-attention input (default False: the
            recurrence gives the order).
        layer_norm_eps: LayerNorm epsilon.
        init_range: embeddings U(-init_range, init_range).
        pad_token_id: padding token.
        prior: a name in :data:`syntaxformer.priors.PRIORS` for the self-attention layers ("none").
        pruned_heads: {layer: [heads]} removed by ``prune_heads`` (restored by ``from_pretrained``).
        tie_word_embeddings: tie the output layer to the embeddings (default False: untied, as the
            Tree Transformer's). Stated because ``transformers`` 5 no longer gives every config this field.
        kernel: "reference" or "triton" (:mod:`syntaxformer.models.kernel_choice`): the ON-LSTM layers'
            cell (:class:`~syntaxformer.models.on_lstm.OnLstmConfig`), and the self-attention layers'
            prior where it has kernels (the constituent prior). No "fused" form: refused. The old field
            ``cell_kernel`` ("autograd", "triton") is still taken and mapped (a saved config writes
            ``kernel``).

    Raises:
        ValueError: ``hidden_size`` not a multiple of ``chunk_size`` or of ``num_attention_heads``,
            fewer than one layer of either kind, a dropout outside [0, 1), an unknown prior, a ``kernel``
            not in ``CELL_KERNELS`` ("fused" included), an unknown ``cell_kernel`` or one that names
            another kernel than ``kernel``.
    """

    model_type = "on-lstm-san"
    #: the field ``kernel`` replaces, still taken by ``__init__`` (:mod:`syntaxformer.models.kernel_choice`)
    old_kernel_field = "cell_kernel"

    def __init__(
        self,
        vocab_size: int = 10000,
        hidden_size: int = 256,
        num_on_lstm_layers: int = 3,
        chunk_size: int = 8,
        dropouti: float = 0.1,
        dropouth: float = 0.1,
        dropoute: float = 0.0,
        wdrop: float = 0.1,
        num_hidden_layers: int = 3,
        num_attention_heads: int = 4,
        intermediate_size: int = 1024,
        hidden_dropout_prob: float = 0.1,
        attention_probs_dropout_prob: float = 0.1,
        max_position_embeddings: int = 512,
        san_positions: bool = False,
        layer_norm_eps: float = 1e-6,
        init_range: float = 0.1,
        pad_token_id: int = 0,
        prior: str = "none",
        pruned_heads=None,
        tie_word_embeddings: bool = False,
        kernel: str | None = None,
        **kwargs,
    ):
        kernel = resolve_kernel(kernel, tuple(CELL_KERNELS), self.old_kernel_field, kwargs, "ON-LSTM-SAN")
        check_prior(prior)
        check_attention_sizes(
            hidden_size,
            num_attention_heads,
            vocab_size=vocab_size,
            chunk_size=chunk_size,
            intermediate_size=intermediate_size,
            max_position_embeddings=max_position_embeddings,
        )
        if hidden_size % chunk_size:
            raise ValueError(f"hidden_size {hidden_size} is not a multiple of chunk_size {chunk_size}")
        if num_on_lstm_layers < 1 or num_hidden_layers < 1:
            raise ValueError(f"need at least one layer of each kind, got K={num_on_lstm_layers}, L={num_hidden_layers}")
        for name, p in (("dropouti", dropouti), ("dropouth", dropouth), ("dropoute", dropoute), ("wdrop", wdrop)):
            if not 0.0 <= p < 1.0:
                raise ValueError(f"{name} must lie in [0, 1), got {p}")
        super().__init__(pad_token_id=pad_token_id, tie_word_embeddings=tie_word_embeddings, **kwargs)
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.num_on_lstm_layers, self.chunk_size = num_on_lstm_layers, chunk_size
        self.dropouti, self.dropouth, self.dropoute, self.wdrop = dropouti, dropouth, dropoute, wdrop
        self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.san_positions = san_positions
        self.layer_norm_eps, self.init_range = layer_norm_eps, init_range
        self.prior = prior
        self.pruned_heads = normalise_pruned_heads(pruned_heads)
        self.kernel = kernel


@dataclass
class OnLstmSanOutput(ModelOutput):
    """Output of :class:`OnLstmSanModel`.

    Attributes:
        last_hidden_state: ``(B, N, d)`` the encoder's output ``H_on + H_san``.
        on_lstm_hidden_state: ``(B, N, d)`` ``H_on``, the top ON-LSTM layer's output.
        san_hidden_state: ``(B, N, d)`` ``H_san``, the self-attention stack's output (after its LayerNorm).
        distances: ``(B, K, N)`` the ON-LSTM layers' syntactic distances (0 at padding).
        attentions: per self-attention layer ``(B, H, N, N)``, when asked.
        hidden_states: the self-attention input, then each of its layers' output, when asked.
    """

    last_hidden_state: torch.Tensor | None = None
    on_lstm_hidden_state: torch.Tensor | None = None
    san_hidden_state: torch.Tensor | None = None
    distances: torch.Tensor | None = None
    attentions: tuple | None = None
    hidden_states: tuple | None = None


@dataclass
class OnLstmSanMaskedLMOutput(ModelOutput):
    """Output of :class:`OnLstmSanForMaskedLM`: ``loss`` (mean cross-entropy in nats over labels
    other than -100), ``logits`` ``(B, N, V)`` (or ``(M, V)`` with ``masked_only``), and the
    base model's ``distances``, ``attentions``, ``hidden_states``."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    distances: torch.Tensor | None = None
    attentions: tuple | None = None
    hidden_states: tuple | None = None


class OnLstmSanPreTrainedModel(HeadPruningMixin, PreTrainedModel):
    """Initialisation (module docstring) and the Hugging Face plumbing (save/load, head pruning)."""

    config_class = OnLstmSanConfig
    base_model_prefix = "on_lstm_san"
    _supports_sdpa = True

    @classmethod
    def _can_set_attn_implementation(cls) -> bool:
        return True  # the encoder's kernels are chosen at call time from config._attn_implementation

    def attention_modules(self) -> list[MultiHeadSelfAttention]:
        """Each self-attention layer's attention, bottom-up (what ``prune_heads`` prunes)."""
        return [layer.attention for layer in self.base_model.san]

    def _init_weights(self, module: nn.Module) -> None:
        # `nn.init` functions only: transformers 5 guards them so that they skip loaded tensors
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.uniform_(module.weight, -self.config.init_range, self.config.init_range)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)


class OnLstmSanModel(OnLstmSanPreTrainedModel):
    """Embeddings -> K ON-LSTM layers -> L self-attention layers (+ LayerNorm); output the sum of the
    ON-LSTM output and the self-attention output (module docstring). The sentence encoder."""

    def __init__(self, config: OnLstmSanConfig):
        super().__init__(config)
        d = config.hidden_size
        self.embeddings = nn.Embedding(config.vocab_size, d)
        self.on_lstm = OnLstmStack(
            [d] * (config.num_on_lstm_layers + 1),
            config.chunk_size,
            config.wdrop,
            config.dropouth,
            config.kernel,
        )
        self.san_dropout = nn.Dropout(config.hidden_dropout_prob)
        self.san = PreLNEncoder(config)
        self.san_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings

    def set_input_embeddings(self, value):
        self.embeddings = value

    def san_input(self, on_lstm_hidden: torch.Tensor) -> torch.Tensor:
        """``(B, N, d)`` the self-attention stack's input: ``H_on`` (+ sinusoids with
        ``san_positions``), dropout."""
        x = on_lstm_hidden
        if self.config.san_positions:
            x = x + sinusoidal_positions(x.shape[1], x.shape[2]).to(x)
        return self.san_dropout(x)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        **kwargs,
    ) -> OnLstmSanOutput:
        """Args: input_ids ``(B, N)``; attention_mask ``(B, N)`` 1 = token, 0 = padding (None: all
        real); head_mask ``(H,)`` or ``(L, H)`` (1 keeps a head). Returns :class:`OnLstmSanOutput`."""
        cfg = self.config
        key_mask = (torch.ones_like(input_ids) if attention_mask is None else attention_mask).bool()  # (B, N)
        x = embedding_dropout(self.embeddings.weight, input_ids, cfg.dropoute, self.training)  # (B, N, d)
        x = locked_dropout(x, cfg.dropouti, self.training)
        hiddens, distances, _ = self.on_lstm(x, None if attention_mask is None else key_mask)
        on_lstm_hidden = hiddens[-1]  # (B, N, d)
        out = self.san(
            self.san_input(on_lstm_hidden),
            key_mask,
            head_mask,
            output_attentions,
            output_hidden_states=output_hidden_states,
        )
        san_hidden = self.san_norm(out.hidden)  # (B, N, d)
        return OnLstmSanOutput(
            last_hidden_state=on_lstm_hidden + san_hidden,
            on_lstm_hidden_state=on_lstm_hidden,
            san_hidden_state=san_hidden,
            distances=distances,
            attentions=out.attentions,
            hidden_states=out.hidden_states,
        )


class OnLstmSanForMaskedLM(OnLstmSanPreTrainedModel):
    """The hybrid with an (untied) output layer for masked language modelling (``--model on-lstm-san``)."""

    #: trained with BERT masking (syntaxformer.training.objectives)
    objective = "masked-lm"
    induces_structure = False

    def __init__(self, config: OnLstmSanConfig):
        super().__init__(config)
        self.on_lstm_san = OnLstmSanModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        masked_only: bool = False,
        return_dict: bool = True,
        masked_positions: torch.Tensor | None = None,
        **kwargs,
    ) -> OnLstmSanMaskedLMOutput | tuple:
        """Masked-LM forward pass.

        Args:
            input_ids: ``(B, N)`` token ids; attention_mask: ``(B, N)`` 1 = real, 0 = padding.
            labels: ``(B, N)`` target ids, -100 = ignored; gives ``loss``.
            head_mask: ``(H,)`` or ``(L, H)`` for the self-attention layers.
            output_attentions, output_hidden_states: also return them.
            masked_only: logits only at labelled positions (``(M, V)``, row-major); needs ``labels``.
            return_dict: False returns a tuple of the non-None fields.
            masked_positions: with ``masked_only``, ``(M,)`` long flat indices into ``B·N`` of the
                labelled positions, row-major (:func:`~syntaxformer.blocks.mlm_head.labelled_positions`;
                the training batch carries them); None: computed from ``labels``.
        Raises:
            ValueError: ``masked_only`` without ``labels``.
        """
        out = self.on_lstm_san(input_ids, attention_mask, head_mask, output_attentions, output_hidden_states)
        logits, loss = masked_lm_output(out.last_hidden_state, self.lm_head, labels, masked_only, masked_positions)
        result = OnLstmSanMaskedLMOutput(
            loss=loss,
            logits=logits,
            distances=out.distances,
            attentions=out.attentions,
            hidden_states=out.hidden_states,
        )
        return result if return_dict else result.to_tuple()


__all__ = [
    "PRESETS",
    "OnLstmSanConfig",
    "OnLstmSanModel",
    "OnLstmSanForMaskedLM",
    "OnLstmSanOutput",
    "OnLstmSanMaskedLMOutput",
]
