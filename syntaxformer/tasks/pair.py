"""A sentence-pair classifier: encode both sentences with one encoder, classify the pair from
``[u; v; u ⊙ v; |u − v|]`` with an MLP.

Bowman, Potts & Manning (2015) and the ON-LSTM paper's logical-inference experiment (Shen et al.
2019, §6.4; public code yikangshen/Ordered-Neurons ``proplog.py``, read, not copied): the two
sentence vectors ``u``, ``v`` ``(B, D)`` are joined as ``[u; v; u ⊙ v; |u − v|]`` ``(B, 4D)`` and fed to
``Dropout -> Linear(4D, h) -> ELU -> Dropout -> Linear(h, C)`` (the public classifier; ``h`` = D by
default, as the public ``nhid``). Both sentences go through the encoder in one batch of ``2B``
(first the B left sentences, then the B right ones), as the public code does.

The encoder is any entry of :data:`syntaxformer.tasks.encoders.ENCODERS`, pooled to one vector per
sentence (:data:`~syntaxformer.tasks.encoders.POOLINGS`). Saved as ``pair_classifier.json`` (this
config, with the encoder's config as a dict) and ``model.safetensors`` (all weights).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_model, save_model
from torch import Tensor, nn

from syntaxformer.errors import InputError
from syntaxformer.tasks.encoders import POOLINGS, build_encoder, encoder_entry

CONFIG_NAME = "pair_classifier.json"
WEIGHTS_NAME = "model.safetensors"


@dataclass
class PairClassifierConfig:
    """Configuration of :class:`PairClassifier`.

    Attributes:
        encoder: a name in :data:`~syntaxformer.tasks.encoders.ENCODERS`.
        encoder_config: the encoder's config as a dict (``PretrainedConfig.to_dict()``).
        num_labels: classes C.
        pooling: a key of :data:`~syntaxformer.tasks.encoders.POOLINGS`.
        mlp_hidden: the MLP's hidden width h.
        dropout: dropout before each of the MLP's two linear layers (public 0.2).
        preset: the encoder preset it was built from (a record only).
        labels: the class names, in index order (a record only).
    """

    encoder: str
    encoder_config: dict
    num_labels: int
    pooling: str
    mlp_hidden: int
    dropout: float = 0.2
    preset: str | None = None
    labels: list = field(default_factory=list)


def pair_features(u: Tensor, v: Tensor) -> Tensor:
    """``[u; v; u ⊙ v; |u − v|]``: ``(B, D)`` twice -> ``(B, 4D)`` (Bowman et al. 2015; Mou et al. 2016)."""
    return torch.cat([u, v, u * v, (u - v).abs()], dim=-1)


class PairClassifier(nn.Module):
    """Encoder + pooling + the pair MLP (module docstring).

    Args:
        config: a :class:`PairClassifierConfig`.
    Raises:
        ValueError: unknown encoder or pooling.
    """

    def __init__(self, config: PairClassifierConfig):
        super().__init__()
        if config.pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {config.pooling!r}; expected one of {sorted(POOLINGS)}")
        entry = encoder_entry(config.encoder)
        self.config = config
        self.encoder = build_encoder(config.encoder, entry.config_class.from_dict(config.encoder_config))
        self.pool = POOLINGS[config.pooling]
        width = entry.width(self.encoder.config)
        self.mlp = nn.Sequential(
            nn.Dropout(config.dropout),
            nn.Linear(4 * width, config.mlp_hidden),
            nn.ELU(),
            nn.Dropout(config.dropout),
            nn.Linear(config.mlp_hidden, config.num_labels),
        )

    def encode(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """Sentence vectors: input_ids, attention_mask ``(S, N)`` (1 = token, right padding) -> ``(S, D)``."""
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # (S, N, D)
        return self.pool(hidden, attention_mask)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """Class logits of B pairs.

        Args:
            input_ids, attention_mask: ``(2B, N)``: rows ``0 .. B-1`` the left sentences, rows
                ``B .. 2B-1`` the right ones, in the same pair order.
        Returns:
            ``(B, C)`` logits (unnormalised; softmax gives probabilities).
        """
        vectors = self.encode(input_ids, attention_mask)  # (2B, D)
        u, v = vectors.chunk(2, dim=0)  # (B, D) each
        return self.mlp(pair_features(u, v))  # (B, C)

    def loss(self, input_ids: Tensor, attention_mask: Tensor, labels: Tensor) -> Tensor:
        """Mean cross-entropy (nats) of the B pairs' labels ``(B,)`` (class indices)."""
        return F.cross_entropy(self(input_ids, attention_mask), labels)

    # ------------------------------------------------------------------------------ save / load

    def save_pretrained(self, folder: str | Path, safe_serialization: bool = True) -> None:
        """Write ``pair_classifier.json`` and ``model.safetensors`` into ``folder`` (created).
        (``safe_serialization`` is accepted for the trainer's call; weights are always safetensors.)"""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / CONFIG_NAME).write_text(json.dumps(asdict(self.config), indent=2) + "\n")
        save_model(self, str(folder / WEIGHTS_NAME))

    @classmethod
    def from_pretrained(cls, folder: str | Path, device: str | torch.device = "cpu") -> PairClassifier:
        """Load a folder written by :meth:`save_pretrained` (evaluation mode, on ``device``).

        Raises:
            InputError: the folder lacks ``pair_classifier.json`` or ``model.safetensors``, or names an
                encoder this installation does not know.
        """
        folder = Path(folder)
        for name in (CONFIG_NAME, WEIGHTS_NAME):
            if not (folder / name).is_file():
                raise InputError(
                    f"not a pair-classifier folder: no {name} (train one with `syntaxformer logic train`)", folder
                )
        config = PairClassifierConfig(**json.loads((folder / CONFIG_NAME).read_text()))
        try:
            model = cls(config)
        except ValueError as e:
            raise InputError(str(e), folder / CONFIG_NAME) from None
        load_model(model, str(folder / WEIGHTS_NAME), device=str(device))
        return model.to(device).eval()


__all__ = ["PairClassifierConfig", "PairClassifier", "pair_features", "CONFIG_NAME", "WEIGHTS_NAME"]
