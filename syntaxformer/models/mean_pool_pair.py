"""The strong simple baseline of the inference study: mean-pooled word vectors + an MLP (DESIGN.md §6).

A bag of words: each sentence is the mean of its words' embeddings (the Gaussian Transformer's
embedding block without positions: word vector ⊕ max-pooled character n-grams, projected), and the
classifier (:class:`~syntaxformer.blocks.pair_head.PairClassificationHead`, ``"match"`` join) reads
``[u; v; |u − v|; u ⊙ v]`` (InferSent's features, Conneau et al. 2017)::

    u = mean_i W [word(p_i); char(p_i)],   v = the same for h,   logits = FFN([u; v; |u − v|; u ⊙ v])

No attention, no order. Same inputs, outputs, initialisation and word-vector options as the
Gaussian Transformer, so the study trains both with one recipe.
"""

from __future__ import annotations

import torch
from transformers import PretrainedConfig

from ..blocks.pair_head import PairClassificationHead
from ..data.nli import LABELS
from .gaussian_transformer import PairClassifierOutput, PairClassifierPreTrainedModel, PairEmbeddings

#: config fields of the named sizes (the same names as the Gaussian Transformer's)
PRESETS = {
    "paper": dict(hidden_size=300, word_embedding_dim=300, char_embedding_dim=100),
    "small": dict(hidden_size=64, word_embedding_dim=100, char_embedding_dim=50),
    "tiny": dict(hidden_size=32, word_embedding_dim=16, char_embedding_dim=8, char_ngram_buckets=1000),
}


class MeanPoolPairConfig(PretrainedConfig):
    """Configuration of the mean-pooled-embeddings baseline.

    Args: as :class:`~syntaxformer.models.gaussian_transformer.GaussianTransformerConfig` for the
    embedding block (vocab_size, word_embedding_dim, char_embedding_dim, char_ngram_sizes,
    char_ngram_buckets, freeze_word_embeddings, hidden_size, hidden_dropout_prob,
    max_position_embeddings, initializer_range, pad_token_id); the classifier's hidden layer has
    ``hidden_size`` units.
    """

    model_type = "mean-pool-pair"

    def __init__(
        self,
        vocab_size: int = 10000,
        word_embedding_dim: int = 300,
        char_embedding_dim: int = 100,
        char_ngram_sizes=(3, 4, 5),
        char_ngram_buckets: int = 20000,
        freeze_word_embeddings: bool = False,
        hidden_size: int = 300,
        hidden_dropout_prob: float = 0.1,
        max_position_embeddings: int = 128,
        pad_token_id: int = 0,
        initializer_range: float = 0.1,
        **kwargs,
    ):
        kwargs.setdefault("id2label", dict(enumerate(LABELS)))
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.vocab_size = vocab_size
        self.word_embedding_dim = word_embedding_dim
        self.char_embedding_dim = char_embedding_dim
        self.char_ngram_sizes = list(char_ngram_sizes)
        self.char_ngram_buckets = char_ngram_buckets
        self.freeze_word_embeddings = freeze_word_embeddings
        self.hidden_size = hidden_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.initializer_range = initializer_range


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over real positions: x (B, N, d), mask (B, N) bool (>= 1 real per row) -> (B, d)."""
    weights = mask[..., None].to(x.dtype)  # (B, N, 1)
    return (x * weights).sum(1) / weights.sum(1).clamp_min(1.0)


class MeanPoolForSequencePairClassification(PairClassifierPreTrainedModel):
    """Mean-pooled embeddings + MLP over ``[u; v; |u − v|; u ⊙ v]`` (module docstring)."""

    config_class = MeanPoolPairConfig
    base_model_prefix = "mean_pool_pair"

    def __init__(self, config: MeanPoolPairConfig):
        super().__init__(config)
        self.embeddings = PairEmbeddings(config, positions=False)
        self.classifier = PairClassificationHead(
            config.hidden_size,
            config.hidden_size,
            config.num_labels,
            config.hidden_dropout_prob,
            features="match",
            activation="gelu",
            zero_init_output=True,
        )
        self.post_init()

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
        """The inputs and outputs of
        :meth:`~syntaxformer.models.gaussian_transformer.GaussianTransformerForSequencePairClassification.forward`."""
        u = masked_mean(self.embeddings(premise_ids, premise_char_ids), premise_mask.bool())  # (B, d)
        v = masked_mean(self.embeddings(hypothesis_ids, hypothesis_char_ids), hypothesis_mask.bool())  # (B, d)
        logits = self.classifier(u, v)  # (B, labels)
        result = PairClassifierOutput(loss=self._loss(logits, labels), logits=logits)
        return result if return_dict else result.to_tuple()


__all__ = ["PRESETS", "MeanPoolPairConfig", "MeanPoolForSequencePairClassification", "masked_mean"]
