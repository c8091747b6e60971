"""A plain LSTM sentence encoder (``torch.nn.LSTM``): the sequence baseline of the logic task.

Hochreiter & Schmidhuber (1997). Word embeddings (dropout) -> an LSTM stack -> the outputs, the
ON-LSTM paper's LSTM baseline of the logic task (Shen et al. 2019, §6.4) with the encoder sizes of
the public ON-LSTM logic code (yikangshen/Ordered-Neurons, ``proplog.py``). Hugging Face style (config + ``PreTrainedModel``) so that it is built, saved
and described like the other encoders; it has no language-model head: its registry entry
(:mod:`syntaxformer.models.registry`) declares only the ``encoder`` use.

Batch first, right padding (``attention_mask`` 1 = token): the sequences are packed
(``pack_padded_sequence``), so padding never reaches a real output; outputs at padding are 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from transformers import PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from .encoder import check_positive_sizes

#: the registry name (models/__init__.py)
NAME = "lstm"

#: sentence-encoder presets (``logic``): ``base`` = the public ON-LSTM logic code's LSTM baseline
#: (embedding 128, one layer of 400 units, dropout 0.2); ``tiny``: tests
ENCODER_PRESETS = {
    "base": dict(embedding_size=128, hidden_size=400, num_layers=1, dropout=0.2),
    "tiny": dict(embedding_size=16, hidden_size=24, num_layers=1, dropout=0.1),
}


class LstmConfig(PretrainedConfig):
    """Configuration of :class:`LstmModel`.

    Args:
        vocab_size: number of tokens.
        embedding_size: word embedding width.
        hidden_size: LSTM width (every layer).
        num_layers: stacked LSTM layers.
        dropout: dropout on the embeddings and between layers (``torch.nn.LSTM``'s ``dropout``).
        init_range: embeddings drawn from U(-init_range, init_range) (the public code's 0.1).
        pad_token_id: padding token (padding found from it when no ``attention_mask`` is given).
    Raises:
        ValueError: a size or count that is not a positive whole number (named), or a dropout outside
            [0, 1).
    """

    model_type = "lstm-encoder"
    attribute_map = {"num_hidden_layers": "num_layers"}

    def __init__(
        self,
        vocab_size: int = 100,
        embedding_size: int = 128,
        hidden_size: int = 400,
        num_layers: int = 1,
        dropout: float = 0.2,
        init_range: float = 0.1,
        pad_token_id: int = 0,
        **kwargs,
    ):
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        check_positive_sizes(
            vocab_size=vocab_size, embedding_size=embedding_size, hidden_size=hidden_size, num_layers=num_layers
        )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.vocab_size, self.embedding_size, self.hidden_size = vocab_size, embedding_size, hidden_size
        self.num_layers, self.dropout, self.init_range = num_layers, dropout, init_range


@dataclass
class LstmOutput(ModelOutput):
    """Output of :class:`LstmModel`: ``last_hidden_state`` ``(B, N, H)`` the top layer's outputs
    (0 at padding)."""

    last_hidden_state: torch.FloatTensor | None = None


class LstmModel(PreTrainedModel):
    """Embeddings -> dropout -> ``torch.nn.LSTM`` (batch first, packed). Initialisation: embeddings
    U(-init_range, init_range); LSTM weights and biases PyTorch's default U(-1/sqrt(H), 1/sqrt(H))."""

    config_class = LstmConfig
    base_model_prefix = "lstm"

    def __init__(self, config: LstmConfig):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_size)
        self.drop = nn.Dropout(config.dropout)
        self.lstm = nn.LSTM(
            config.embedding_size,
            config.hidden_size,
            config.num_layers,
            batch_first=True,
            dropout=config.dropout if config.num_layers > 1 else 0.0,
        )
        self.post_init()

    def _init_weights(self, module):
        # `nn.init` functions only (transformers 5 guards them so that they skip loaded tensors)
        if isinstance(module, nn.Embedding):
            nn.init.uniform_(module.weight, -self.config.init_range, self.config.init_range)
        elif isinstance(module, nn.LSTM):
            bound = 1.0 / math.sqrt(module.hidden_size)
            for weight in module.parameters():
                nn.init.uniform_(weight, -bound, bound)

    def get_input_embeddings(self):
        return self.embeddings

    def set_input_embeddings(self, value):
        self.embeddings = value

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> LstmOutput:
        """input_ids ``(B, N)``; attention_mask ``(B, N)`` 1 = token, 0 = padding (right padding;
        default ``input_ids != pad_token_id``). Returns :class:`LstmOutput`."""
        if attention_mask is None:
            attention_mask = (input_ids != self.config.pad_token_id).long()
        lengths = attention_mask.sum(-1).clamp(min=1).cpu()  # (B,)
        x = self.drop(self.embeddings(input_ids))  # (B, N, E)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=input_ids.shape[1])  # (B, N, H)
        return LstmOutput(last_hidden_state=out)


__all__ = ["LstmConfig", "LstmModel", "LstmOutput"]
