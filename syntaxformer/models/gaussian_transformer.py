"""Gaussian Transformer for natural-language inference (Guo, Zhang & Liu, AAAI 2019; DESIGN.md §3.1).

Config -> model -> classification head, in Hugging Face style (``save_pretrained`` /
``from_pretrained``; registered with ``AutoConfig`` and ``AutoModelForSequenceClassification``).
A premise ``p`` and a hypothesis ``h`` go through four blocks:

1. **embedding** (:class:`PairEmbeddings`): word vector ⊕ max-pooled character n-gram vectors,
   projected to d_model, + sinusoidal positions::

       e_i = W [word(w_i); max_{g ∈ ngrams(w_i)} char(g)] + PE_i

   Word vectors are learned, or pre-trained (word2vec on the project's text,
   :mod:`syntaxformer.data.word_vectors`) and frozen as in the paper (``freeze_word_embeddings``).
2. **encoding** (M = ``num_hidden_layers`` = 3): the project's pre-LN encoder
   (:class:`~syntaxformer.models.encoder.PreLNEncoder`) with the config's prior, by default the
   Gaussian prior ``s_ij = q_i·k_j/√d_k − |w d_ij² + b|`` (:mod:`syntaxformer.priors.gaussian`),
   the same weights for premise and hypothesis, then a LayerNorm: ``x = Enc(e)``.
3. **interaction** (N = ``num_interaction_layers``): pre-LN layers of attention from one sentence
   to the other (no causal mask), the same weights in both directions; the other sentence's
   encoding is the memory of every layer::

       x̃ = x + Attn(LN(x), y, y);  x̃ = x̃ + FFN(LN(x̃))          (y: the other sentence's encoding)

4. **comparison** and **classifier**::

       v_i = FFN([x_i; x̃_i]),   x̄ = Σ_i v_i / √l,   logits = FFN([p̄; h̄])

   (``classifier_features="match"`` gives the classifier ``[p̄; h̄; |p̄ − h̄|; p̄ ⊙ h̄]`` instead).

Choices the paper leaves open (recorded here and in the config): the interaction block's weights are
shared by both directions and its memory is the encoding output; the FFNs are Linear -> GELU ->
Dropout -> Linear; character n-grams are hashed into ``char_ngram_buckets`` buckets (fastText style;
:func:`syntaxformer.data.nli.char_ngram_ids`) with ``<`` and ``>`` marking the word's ends. ``prior="none"`` and
``prior="constituent"`` give the twins of the study (the same model without a prior, or with the
Tree Transformer's constituent prior in the encoding block).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from ..blocks.pair_head import PairClassificationHead
from ..data.nli import LABELS
from ..priors import check_prior
from ..priors.attention import ATTENTION_FUNCTIONS
from ..priors.constituent import check_constituent_options
from .encoder import (
    FeedForward,
    PreLNEncoder,
    check_attention_sizes,
    check_residual_init,
    mark_zero_residual,
    normalise_pruned_heads,
    sinusoidal_positions,
    zero_init_if_marked,
)

#: config fields of the named sizes
PRESETS = {
    # the paper's SNLI size (d_model 300 as its GloVe vectors, M = 3, N = 2)
    "paper": dict(
        hidden_size=300,
        num_hidden_layers=3,
        num_interaction_layers=2,
        num_attention_heads=6,
        intermediate_size=1200,
        word_embedding_dim=300,
        char_embedding_dim=100,
    ),
    # the CPU recipe's size (README, docs/results/nli/study.md): d_model 64 keeps inference well above 2,000 pairs/s
    # on 2 CPU cores at batch 64
    "small": dict(
        hidden_size=64,
        num_hidden_layers=3,
        num_interaction_layers=1,
        num_attention_heads=4,
        intermediate_size=128,
        word_embedding_dim=100,
        char_embedding_dim=50,
    ),
    # tests: seconds
    "tiny": dict(
        hidden_size=32,
        num_hidden_layers=3,
        num_interaction_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        word_embedding_dim=16,
        char_embedding_dim=8,
        char_ngram_buckets=1000,
    ),
}


# ----------------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------------


class GaussianTransformerConfig(PretrainedConfig):
    """Configuration of a Gaussian Transformer for sentence-pair classification (BERT field names).

    Args:
        vocab_size: word vocabulary size (the tokenizer's).
        word_embedding_dim: size of the word vectors (the pre-trained ones' when given).
        char_embedding_dim: size of a character n-gram vector.
        char_ngram_sizes: the n of the n-grams (default (3, 4, 5)).
        char_ngram_buckets: hash buckets of the n-grams (id 0 is padding).
        freeze_word_embeddings: keep the word vectors fixed (the paper, with pre-trained vectors).
        hidden_size: d_model; num_hidden_layers: M, the encoding block's layers;
        num_interaction_layers: N, the interaction block's layers; num_attention_heads: heads per
            layer (dividing hidden_size); intermediate_size: d_ff of every FFN.
        hidden_dropout_prob: dropout on embeddings, residual branches, FFNs and the classifier.
        attention_probs_dropout_prob: dropout on attention weights.
        max_position_embeddings: precomputed sinusoid table length (longer inputs work).
        layer_norm_eps: LayerNorm epsilon.
        initializer_range: std of the embeddings' initialisation.
        prior: a name in :data:`syntaxformer.priors.PRIORS` for the encoding block ("gaussian",
            "none", "constituent").
        gaussian_w_init, gaussian_b_init: the Gaussian prior's initial w (> 0) and b (<= 0).
        constituent_variant: the constituent prior's variant ("paper" or "official").
        classifier_features: "concat" ([p̄; h̄], the paper) or "match" ([p̄; h̄; |p̄ − h̄|; p̄ ⊙ h̄]).
        residual_init: the output projections of the encoding and interaction layers' residual
            branches (attention output, FFN second linear): "xavier" like every other matrix, or
            "zero", so the untrained blocks pass their input through (up to the blocks' final
            LayerNorms) and the model starts as its embedding + comparison path (ours; the paper
            does not say how it initialises).
        pruned_heads: {layer: [heads]} removed from the encoding block.
    Raises:
        ValueError: unknown prior, variant, classifier_features or residual_init, heads not dividing hidden_size,
            or a Gaussian initial value out of range.
    """

    model_type = "gaussian-transformer-nli"

    def __init__(
        self,
        vocab_size: int = 10000,
        word_embedding_dim: int = 300,
        char_embedding_dim: int = 100,
        char_ngram_sizes=(3, 4, 5),
        char_ngram_buckets: int = 20000,
        freeze_word_embeddings: bool = False,
        hidden_size: int = 300,
        num_hidden_layers: int = 3,
        num_interaction_layers: int = 2,
        num_attention_heads: int = 6,
        intermediate_size: int = 1200,
        hidden_dropout_prob: float = 0.1,
        attention_probs_dropout_prob: float = 0.1,
        max_position_embeddings: int = 128,
        layer_norm_eps: float = 1e-6,
        pad_token_id: int = 0,
        initializer_range: float = 0.1,
        prior: str = "gaussian",
        gaussian_w_init: float = 0.01,
        gaussian_b_init: float = 0.0,
        constituent_variant: str = "paper",
        classifier_features: str = "concat",
        residual_init: str = "xavier",
        pruned_heads=None,
        **kwargs,
    ):
        check_prior(prior)
        check_constituent_options(constituent_variant)
        if classifier_features not in ("concat", "match"):
            raise ValueError(f"classifier_features must be concat or match, got {classifier_features!r}")
        check_residual_init(residual_init)
        check_attention_sizes(
            hidden_size,
            num_attention_heads,
            vocab_size=vocab_size,
            num_hidden_layers=num_hidden_layers,
            num_interaction_layers=num_interaction_layers,
            intermediate_size=intermediate_size,
            max_position_embeddings=max_position_embeddings,
        )
        if gaussian_w_init <= 0 or gaussian_b_init > 0:
            raise ValueError(f"the Gaussian prior needs w > 0 and b <= 0, got {gaussian_w_init}, {gaussian_b_init}")
        kwargs.setdefault("id2label", dict(enumerate(LABELS)))
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.vocab_size = vocab_size
        self.word_embedding_dim = word_embedding_dim
        self.char_embedding_dim = char_embedding_dim
        self.char_ngram_sizes = list(char_ngram_sizes)
        self.char_ngram_buckets = char_ngram_buckets
        self.freeze_word_embeddings = freeze_word_embeddings
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_interaction_layers = num_interaction_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.prior = prior
        self.gaussian_w_init = gaussian_w_init
        self.gaussian_b_init = gaussian_b_init
        self.constituent_variant = constituent_variant
        self.classifier_features = classifier_features
        self.residual_init = residual_init
        self.pruned_heads = normalise_pruned_heads(pruned_heads)


# ----------------------------------------------------------------------------------------------
# Blocks
# ----------------------------------------------------------------------------------------------


class PairEmbeddings(nn.Module):
    """The embedding block: ``LN(W [word(w); max-pooled char n-grams(w)]) (+ sinusoidal positions)``.

    The LayerNorm after the projection is ours (the paper does not say): it gives the projected
    words unit scale beside the positions' (amplitude 1), whatever the word vectors' scale.

    Args:
        config: reads vocab_size, word_embedding_dim, char_embedding_dim, char_ngram_buckets,
            hidden_size, max_position_embeddings, hidden_dropout_prob, pad_token_id,
            freeze_word_embeddings.
        positions: add sinusoidal positions (False: a bag of words, for the baseline).
    """

    def __init__(self, config, positions: bool = True):
        super().__init__()
        self.word_embeddings = nn.Embedding(
            config.vocab_size, config.word_embedding_dim, padding_idx=config.pad_token_id
        )
        self.word_embeddings.weight.requires_grad_(not config.freeze_word_embeddings)
        self.char_embeddings = nn.Embedding(config.char_ngram_buckets + 1, config.char_embedding_dim, padding_idx=0)
        self.projection = nn.Linear(config.word_embedding_dim + config.char_embedding_dim, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=getattr(config, "layer_norm_eps", 1e-6))
        self.use_positions = positions
        self.register_buffer(
            "positions", sinusoidal_positions(config.max_position_embeddings, config.hidden_size), persistent=False
        )
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def char_vectors(self, char_ids: torch.Tensor) -> torch.Tensor:
        """(B, N, K) n-gram ids (0 = padding) -> (B, N, c): the max over each word's n-gram vectors
        (0 for a position without n-grams, i.e. padding)."""
        vectors = self.char_embeddings(char_ids)  # (B, N, K, c)
        present = (char_ids > 0)[..., None]  # (B, N, K, 1)
        pooled = vectors.masked_fill(~present, float("-inf")).amax(dim=2)  # (B, N, c)
        return pooled.masked_fill(~present.any(dim=2), 0.0)

    def forward(self, input_ids: torch.Tensor, char_ids: torch.Tensor) -> torch.Tensor:
        """input_ids (B, N), char_ids (B, N, K) -> (B, N, d)."""
        x = torch.cat([self.word_embeddings(input_ids), self.char_vectors(char_ids)], dim=-1)  # (B, N, w + c)
        x = self.norm(self.projection(x))  # (B, N, d), unit scale: neither words nor positions drown the other
        if self.use_positions:
            n = x.shape[1]
            positions = self.positions
            if n > positions.shape[0]:
                positions = sinusoidal_positions(n, positions.shape[1]).to(positions.device)
            x = x + positions[:n].to(x.dtype)
        return self.dropout(x)


class CrossAttention(nn.Module):
    """Multi-head attention of queries from one sentence over keys/values of another (no causal
    mask); the kernel is ``ATTENTION_FUNCTIONS[config._attn_implementation]``."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.output = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor) -> torch.Tensor:
        """x (B, N, d) queries' sentence, memory (B, N, d) the other sentence, memory_mask (B, N) bool
        (True = real) -> (B, N, d)."""
        B, N, _ = x.shape

        def heads(t):
            return t.view(B, -1, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, N, d_k)

        attention = ATTENTION_FUNCTIONS[self.config._attn_implementation or "eager"]
        out, _ = attention(
            heads(self.query(x)),
            heads(self.key(memory)),
            heads(self.value(memory)),
            memory_mask,
            dropout_p=self.dropout_p if self.training else 0.0,
        )  # (B, H, N, d_k)
        return self.output(out.transpose(1, 2).reshape(B, N, -1))


class InteractionLayer(nn.Module):
    """One pre-LN interaction layer: ``x + Attn(LN(x), y)``, then ``+ FFN(LN(·))``."""

    def __init__(self, config):
        super().__init__()
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = CrossAttention(config)
        self.ffn_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.ffn = FeedForward(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        mark_zero_residual(self, config)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor) -> torch.Tensor:
        """x (B, N, d), memory (B, N, d), memory_mask (B, N) bool -> (B, N, d)."""
        x = x + self.dropout(self.attention(self.attention_norm(x), memory, memory_mask))
        return x + self.dropout(self.ffn(self.ffn_norm(x)))


def scaled_sum(v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The comparison block's pooling ``x̄ = Σ_i v_i / √l`` over real positions.

    Args:
        v: (B, N, d); mask: (B, N) bool, True = real (l = its row sum, >= 1).
    Returns:
        (B, d).
    """
    lengths = mask.sum(-1, keepdim=True).clamp_min(1).to(v.dtype)  # (B, 1)
    return (v * mask[..., None].to(v.dtype)).sum(1) / lengths.sqrt()


# ----------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------


@dataclass
class PairClassifierOutput(ModelOutput):
    """Output of a sentence-pair classifier.

    Attributes:
        loss: mean cross-entropy (nats) over the batch, when labels are given.
        logits: (B, labels) unnormalised log-probabilities.
    """

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None


class PairClassifierPreTrainedModel(PreTrainedModel):
    """Initialisation and Hugging Face plumbing shared by the sentence-pair classifiers: Xavier-uniform
    matrices, zero biases, LayerNorm (1, 0), embeddings N(0, initializer_range) (padding rows 0), the
    classifier's output layer 0 (initial loss ln 3), and :meth:`set_word_vectors` for pre-trained
    vectors."""

    _supports_sdpa = True
    main_input_name = "premise_ids"

    @classmethod
    def _can_set_attn_implementation(cls) -> bool:
        return True

    def _init_weights(self, module: nn.Module) -> None:
        # one rule per parameter, by the module that owns it: transformers 5 initialises each parameter
        # once (a later init call on it is skipped), so no rule may overwrite a child's parameters
        if zero_init_if_marked(module):  # the pair head's output layer, or a residual branch's output
            return
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=self.config.initializer_range)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, PairEmbeddings):
            with torch.no_grad():  # non-persistent buffer (transformers 5 leaves it uninitialised)
                module.positions.copy_(sinusoidal_positions(*module.positions.shape))

    def set_word_vectors(self, vectors: torch.Tensor, found: torch.Tensor) -> None:
        """Copy pre-trained vectors into the word embeddings.

        Args:
            vectors: (V, word_embedding_dim) rows by token id.
            found: (V,) bool, True where the row is a pre-trained vector; the other rows (special
                tokens, words without a vector) keep their random initialisation, rescaled to the
                pre-trained vectors' mean norm (so a frozen table has one scale).
        Raises:
            ValueError: shapes that do not match the embedding table.
        """
        table = self.embeddings.word_embeddings.weight
        if vectors.shape != table.shape or found.shape != table.shape[:1]:
            raise ValueError(f"word vectors {tuple(vectors.shape)} do not fit the table {tuple(table.shape)}")
        with torch.no_grad():
            if found.any():
                norm = vectors[found].norm(dim=-1).mean()
                rest = table[~found]
                table[~found] = rest / rest.norm(dim=-1, keepdim=True).clamp_min(1e-12) * norm
            table[found] = vectors[found].to(table.dtype)
            table[self.config.pad_token_id].zero_()

    @staticmethod
    def _loss(logits: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor | None:
        return None if labels is None else F.cross_entropy(logits, labels)


class GaussianTransformerForSequencePairClassification(PairClassifierPreTrainedModel):
    """The Gaussian Transformer for NLI (module docstring): embedding, encoding (M layers with the
    config's prior, shared by both sentences), interaction (N layers, both directions), comparison,
    classifier."""

    config_class = GaussianTransformerConfig
    base_model_prefix = "gaussian_transformer"

    def __init__(self, config: GaussianTransformerConfig):
        super().__init__(config)
        self.embeddings = PairEmbeddings(config)
        self.encoder = PreLNEncoder(config)
        self.encoder_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.interaction = nn.ModuleList(InteractionLayer(config) for _ in range(config.num_interaction_layers))
        self.interaction_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.comparison = nn.Sequential(
            nn.Linear(2 * config.hidden_size, config.intermediate_size),
            nn.GELU(),
            nn.Dropout(config.hidden_dropout_prob),
            nn.Linear(config.intermediate_size, config.hidden_size),
        )
        self.classifier = PairClassificationHead(
            config.hidden_size,
            config.hidden_size,
            config.num_labels,
            config.hidden_dropout_prob,
            features=config.classifier_features,
            activation="gelu",
            zero_init_output=True,
        )
        self.post_init()

    def encode(self, input_ids: torch.Tensor, mask: torch.Tensor, char_ids: torch.Tensor) -> torch.Tensor:
        """Embedding + encoding blocks: (B, N) ids, (B, N) bool mask, (B, N, K) n-grams -> (B, N, d)."""
        return self.encoder_norm(self.encoder(self.embeddings(input_ids, char_ids), mask).hidden)

    def interact(self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor) -> torch.Tensor:
        """Interaction block: x (B, N, d) attends to memory (B, N, d) in every layer -> x̃ (B, N, d)."""
        for layer in self.interaction:
            x = layer(x, memory, memory_mask)
        return self.interaction_norm(x)

    def forward(
        self,
        premise_ids: torch.Tensor,
        premise_mask: torch.Tensor,
        premise_char_ids: torch.Tensor,
        hypothesis_ids: torch.Tensor,
        hypothesis_mask: torch.Tensor,
        hypothesis_char_ids: torch.Tensor,
        labels: torch.Tensor | None = None,
        return_dict: bool = True,
    ) -> PairClassifierOutput | tuple:
        """Classify pairs.

        Args:
            premise_ids, hypothesis_ids: (B, N) word ids, padded to one length N (right padding).
            premise_mask, hypothesis_mask: (B, N), 1 = real word, 0 = padding; every row has a word.
            premise_char_ids, hypothesis_char_ids: (B, N, K) n-gram bucket ids, 0 = padding
                (:func:`syntaxformer.data.nli.char_ngram_ids`).
            labels: (B,) class ids into :data:`~syntaxformer.data.nli.LABELS`; gives ``loss``.
            return_dict: False returns a tuple of the non-None fields.
        Returns:
            :class:`PairClassifierOutput` with (B, labels) logits.
        """
        B = premise_ids.shape[0]
        mask = torch.cat([premise_mask, hypothesis_mask]).bool()  # (2B, N): premises, then hypotheses
        x = self.encode(
            torch.cat([premise_ids, hypothesis_ids]), mask, torch.cat([premise_char_ids, hypothesis_char_ids])
        )  # (2B, N, d)
        other = torch.cat([x[B:], x[:B]])  # (2B, N, d): each sentence's partner
        aligned = self.interact(x, other, torch.cat([mask[B:], mask[:B]]))  # (2B, N, d)
        v = self.comparison(torch.cat([x, aligned], dim=-1))  # (2B, N, d)
        pooled = scaled_sum(v, mask)  # (2B, d)
        logits = self.classifier(pooled[:B], pooled[B:])  # (B, labels)
        result = PairClassifierOutput(loss=self._loss(logits, labels), logits=logits)
        return result if return_dict else result.to_tuple()


__all__ = [
    "PRESETS",
    "GaussianTransformerConfig",
    "GaussianTransformerForSequencePairClassification",
    "PairEmbeddings",
    "CrossAttention",
    "InteractionLayer",
    "PairClassificationHead",
    "PairClassifierOutput",
    "PairClassifierPreTrainedModel",
    "scaled_sum",
]
