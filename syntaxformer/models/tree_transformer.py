"""Tree Transformer (Wang, Lee & Chen, EMNLP 2019, arXiv 1909.06639) for masked language modelling.

One readable file, bottom-up: config -> embeddings -> self-attention -> layer -> encoder -> model ->
MLM head. The constituent prior (link probabilities, C) lives in
:mod:`syntaxformer.priors.constituent`; the attention kernels ("eager", "sdpa") in
:mod:`syntaxformer.priors.attention`.

Architecture (the authors' public code, DESIGN.md §1.2): word embeddings × √d_model + sinusoidal
positions; ``L`` pre-LayerNorm blocks, each

    a^l, C^l = ConstituentAttention(x, mask, a^{l-1})           # on the block input, own LayerNorm
    x = x + Dropout(SelfAttention(LN(x), C^l))                  # E = C ⊙ softmax(QKᵀ/√d_k), no renorm.
    x = x + Dropout(FFN(LN(x)))                                 # Linear -> GELU -> Dropout -> Linear

then a final LayerNorm and an *untied* output layer (as the public code). ``prior="none"`` gives the
plain Transformer baseline of the paper (C = 1, no constituent module).

Initialisation: every weight matrix Xavier-uniform (as the public code's Annotated-Transformer
recipe), biases 0, LayerNorm (1, 0); word embeddings N(0, ``initializer_range``) (default 0.02), so
that after the × √d_model scaling they are about 0.3-0.5 per coordinate, below the sinusoidal
positions (≈ 0.7): DESIGN.md §5 measured that N(0, 1) embeddings × √d drown the position signal and
training stalls at the unigram loss, while small (Xavier) embeddings train.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from ..priors.attention import ATTENTION_FUNCTIONS, flush_denormals_on_cpu
from ..priors.constituent import VARIANTS, ConstituentAttention, ConstituentPrior

PRIORS = ("constituent", "none")


# ----------------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------------

class TreeTransformerConfig(PretrainedConfig):
    """Configuration of a Tree Transformer (BERT field names).

    Args:
        vocab_size: number of tokens.
        hidden_size: d_model.
        num_hidden_layers: L.
        num_attention_heads: heads per layer (``hidden_size`` must be divisible by it).
        intermediate_size: d_ff of the feed-forward block.
        hidden_dropout_prob: dropout on embeddings, residual branches and inside the FFN.
        attention_probs_dropout_prob: dropout on the attention ``E`` (after the product with C).
        max_position_embeddings: length of the precomputed sinusoidal table (longer inputs work: the
            table is extended on the fly).
        layer_norm_eps: LayerNorm epsilon (1e-6 as the public code).
        pad_token_id: id of the padding token.
        initializer_range: std of the word-embedding initialisation (module docstring).
        prior: "constituent" (Tree Transformer) or "none" (plain Transformer).
        constituent_variant: "paper" or "official" (see :mod:`syntaxformer.priors.constituent`).
        attn_implementation: Hugging Face convention: "eager" (literal reference, can return
            attentions) or "sdpa" (fused; the default Hugging Face picks when none is given).
    Raises:
        ValueError: unknown ``prior`` or ``constituent_variant``, or heads not dividing hidden_size.
    """

    model_type = "tree-transformer"

    def __init__(self, vocab_size: int = 10000, hidden_size: int = 512, num_hidden_layers: int = 10,
                 num_attention_heads: int = 8, intermediate_size: int = 2048, hidden_dropout_prob: float = 0.1,
                 attention_probs_dropout_prob: float = 0.1, max_position_embeddings: int = 512,
                 layer_norm_eps: float = 1e-6, pad_token_id: int = 0, initializer_range: float = 0.02,
                 prior: str = "constituent", constituent_variant: str = "paper", **kwargs):
        if prior not in PRIORS:
            raise ValueError(f"unknown prior {prior!r}; expected one of {PRIORS}")
        if constituent_variant not in VARIANTS:
            raise ValueError(f"unknown constituent_variant {constituent_variant!r}; expected one of {VARIANTS}")
        if hidden_size % num_attention_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_attention_heads {num_attention_heads}")
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.prior = prior
        self.constituent_variant = constituent_variant


# ----------------------------------------------------------------------------------------------
# Embeddings
# ----------------------------------------------------------------------------------------------

def sinusoidal_positions(length: int, d_model: int) -> torch.Tensor:
    """(length, d_model) sinusoidal position encodings (Vaswani et al. 2017, §3.5)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div[: d_model // 2])
    return pe


class TreeTransformerEmbeddings(nn.Module):
    """Word embeddings × √d_model + sinusoidal positions, then dropout (public code)."""

    def __init__(self, config: TreeTransformerConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.scale = math.sqrt(config.hidden_size)
        self.register_buffer("positions", sinusoidal_positions(config.max_position_embeddings, config.hidden_size),
                             persistent=False)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, N) ids -> (B, N, d)."""
        n = input_ids.shape[1]
        positions = self.positions
        if n > positions.shape[0]:  # sinusoids work at any length
            positions = sinusoidal_positions(n, positions.shape[1]).to(positions.device)
        x = self.word_embeddings(input_ids) * self.scale + positions[:n].to(self.word_embeddings.weight.dtype)
        return self.dropout(x)


# ----------------------------------------------------------------------------------------------
# Attention, feed-forward, layer
# ----------------------------------------------------------------------------------------------

class TreeTransformerSelfAttention(nn.Module):
    """Multi-head self-attention whose probabilities are multiplied by the constituent prior.

    The kernel is ``ATTENTION_FUNCTIONS[config._attn_implementation]`` ("eager" or "sdpa").
    """

    def __init__(self, config: TreeTransformerConfig):
        super().__init__()
        self.config = config
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.output = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor, prior: ConstituentPrior | None,
                output_attentions: bool = False):
        """x (B, N, d), key_mask (B, N) bool -> ((B, N, d), attentions (B, H, N, N) or None)."""
        B, N, d = x.shape
        q, k, v = (lin(x).view(B, N, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, N, d_k)
                   for lin in (self.query, self.key, self.value))
        attention = ATTENTION_FUNCTIONS[self.config._attn_implementation or "eager"]
        out, attn = attention(q, k, v, key_mask, prior, dropout_p=self.dropout_p if self.training else 0.0,
                              output_attentions=output_attentions)
        out = out.transpose(1, 2).reshape(B, N, d)  # (B, N, d)
        return self.output(out), attn


class TreeTransformerFeedForward(nn.Module):
    """Linear -> GELU -> Dropout -> Linear."""

    def __init__(self, config: TreeTransformerConfig):
        super().__init__()
        self.fc_in = nn.Linear(config.hidden_size, config.intermediate_size)
        self.fc_out = nn.Linear(config.intermediate_size, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc_out(self.dropout(F.gelu(self.fc_in(x))))


class TreeTransformerLayer(nn.Module):
    """One pre-LayerNorm block with constituent attention (module docstring)."""

    def __init__(self, config: TreeTransformerConfig, layer_index: int):
        super().__init__()
        self.constituent = (ConstituentAttention(config.hidden_size, config.constituent_variant, layer_index,
                                                 config.layer_norm_eps)
                            if config.prior == "constituent" else None)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = TreeTransformerSelfAttention(config)
        self.ffn_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.ffn = TreeTransformerFeedForward(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x, key_mask, links, output_attentions=False):
        """x (B, N, d), key_mask (B, N) bool, links (B, N-1) of the layer below or None.

        Returns ``(x, links, prior, attentions)``: new hidden states, this layer's link probabilities
        (None without a prior), its :class:`ConstituentPrior` (or None) and attentions (or None).
        """
        prior = None
        if self.constituent is not None:
            prior, links = self.constituent.prior_state(x, key_mask, links)
        h, attn = self.attention(self.attention_norm(x), key_mask, prior, output_attentions)
        x = x + self.dropout(h)
        x = x + self.dropout(self.ffn(self.ffn_norm(x)))
        return x, links, prior, attn


# ----------------------------------------------------------------------------------------------
# Encoder, model, MLM head
# ----------------------------------------------------------------------------------------------

@dataclass
class TreeTransformerOutput(ModelOutput):
    """Output of :class:`TreeTransformerModel`.

    Attributes:
        last_hidden_state: (B, N, d) after the final LayerNorm.
        link_probs: tuple over layers of (B, N-1) link probabilities a^l (after the hierarchical
            constraint); empty for ``prior="none"``.
        priors: tuple over layers of (B, N, N) constituent priors C^l, when asked.
        attentions: tuple over layers of (B, H, N, N) attention E = C ⊙ softmax, when asked.
        hidden_states: tuple of (B, N, d): embeddings, then each layer's output, when asked.
    """
    last_hidden_state: torch.Tensor | None = None
    link_probs: tuple | None = None
    priors: tuple | None = None
    attentions: tuple | None = None
    hidden_states: tuple | None = None


@dataclass
class TreeTransformerMaskedLMOutput(ModelOutput):
    """Output of :class:`TreeTransformerForMaskedLM`.

    Attributes:
        loss: mean cross-entropy (nats) over positions whose label is not -100, when labels are given.
        logits: (B, N, V), or (M, V) at the M labelled positions (row-major order) with ``masked_only``.
        link_probs, priors, attentions, hidden_states: as :class:`TreeTransformerOutput`.
    """
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    link_probs: tuple | None = None
    priors: tuple | None = None
    attentions: tuple | None = None
    hidden_states: tuple | None = None


class TreeTransformerPreTrainedModel(PreTrainedModel):
    """Weight initialisation and the Hugging Face plumbing (save/load, attention selection)."""

    config_class = TreeTransformerConfig
    base_model_prefix = "tree_transformer"
    _supports_sdpa = True

    @classmethod
    def _can_set_attn_implementation(cls) -> bool:
        # our kernels are chosen at call time from config._attn_implementation, so switching works
        return True

    def _init_weights(self, module: nn.Module) -> None:
        """Xavier-uniform matrices, zero biases, LayerNorm (1, 0), embeddings N(0, initializer_range)."""
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=self.config.initializer_range)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)


class TreeTransformerModel(TreeTransformerPreTrainedModel):
    """Embeddings and the stack of layers, final LayerNorm; no output head."""

    def __init__(self, config: TreeTransformerConfig):
        super().__init__(config)
        self.embeddings = TreeTransformerEmbeddings(config)
        self.layers = nn.ModuleList(TreeTransformerLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                output_attentions: bool = False, output_priors: bool = False,
                output_hidden_states: bool = False) -> TreeTransformerOutput:
        """input_ids (B, N), attention_mask (B, N) 1 = real / 0 = padding (None: all real)."""
        flush_denormals_on_cpu(input_ids.device)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        key_mask = attention_mask.bool()  # (B, N)
        x = self.embeddings(input_ids)
        links = None
        all_links, all_priors, all_attn, all_hidden = [], [], [], [x]
        for layer in self.layers:
            x, links, prior, attn = layer(x, key_mask, links, output_attentions)
            if links is not None:
                all_links.append(links)
            if output_priors and prior is not None:
                all_priors.append(torch.exp(prior.log_prior()))
            if output_attentions:
                all_attn.append(attn)
            all_hidden.append(x)
        x = self.norm(x)
        return TreeTransformerOutput(
            last_hidden_state=x, link_probs=tuple(all_links),
            priors=tuple(all_priors) if output_priors else None,
            attentions=tuple(all_attn) if output_attentions else None,
            hidden_states=tuple(all_hidden) if output_hidden_states else None)


class TreeTransformerForMaskedLM(TreeTransformerPreTrainedModel):
    """Tree Transformer with an (untied, as the public code) output layer for masked language modelling."""

    def __init__(self, config: TreeTransformerConfig):
        super().__init__(config)
        self.tree_transformer = TreeTransformerModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, output_attentions: bool = False,
                output_priors: bool = False, output_hidden_states: bool = False, masked_only: bool = False,
                return_dict: bool = True) -> TreeTransformerMaskedLMOutput | tuple:
        """Masked-LM forward pass.

        Args:
            input_ids: (B, N) token ids.
            attention_mask: (B, N), 1 = real token, 0 = padding (None: all real).
            labels: (B, N) target ids, -100 = ignored; gives ``loss``.
            output_attentions: return (B, H, N, N) attentions per layer (the sdpa path falls back to
                eager for this call).
            output_priors: return (B, N, N) constituent priors per layer.
            output_hidden_states: return the embeddings and each layer's (B, N, d) output.
            masked_only: compute logits only at labelled positions ((M, V)), the cheap training path;
                requires ``labels``.
            return_dict: False returns a tuple of the non-None fields.
        Returns:
            :class:`TreeTransformerMaskedLMOutput`; ``link_probs`` always (empty for ``prior="none"``).
        Raises:
            ValueError: ``masked_only`` without ``labels``.
        """
        out = self.tree_transformer(input_ids, attention_mask, output_attentions=output_attentions,
                                    output_priors=output_priors, output_hidden_states=output_hidden_states)
        hidden = out.last_hidden_state
        loss = None
        if masked_only:
            if labels is None:
                raise ValueError("masked_only=True needs labels (the positions to predict)")
            selected = labels != -100  # (B, N)
            logits = self.lm_head(hidden[selected])  # (M, V)
            targets = labels[selected]
        else:
            logits = self.lm_head(hidden)  # (B, N, V)
            targets = labels
        if labels is not None:
            flat_logits = logits.reshape(-1, logits.shape[-1])
            flat_targets = targets.reshape(-1)
            if (flat_targets != -100).any():
                loss = F.cross_entropy(flat_logits, flat_targets, ignore_index=-100)
            else:  # nothing to predict: a zero that keeps the graph
                loss = flat_logits.sum() * 0.0
        result = TreeTransformerMaskedLMOutput(loss=loss, logits=logits, link_probs=out.link_probs,
                                               priors=out.priors, attentions=out.attentions,
                                               hidden_states=out.hidden_states)
        return result if return_dict else result.to_tuple()
