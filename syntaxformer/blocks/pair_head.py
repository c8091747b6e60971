"""The sentence-pair classification head: join two sentence vectors, classify the pair with an MLP.

Two sentence vectors ``u``, ``v`` ``(B, D)`` (premise and hypothesis, or left and right formula) are
joined into one feature vector (:func:`pair_features`) and fed to::

    Dropout -> Linear(k·D, h) -> activation -> Dropout -> Linear(h, C)

The joins (``k`` vectors of width D each, :data:`PAIR_FEATURES`):

* ``"bowman"``: ``[u; v; u ⊙ v; |u − v|]`` (k = 4): Bowman, Potts & Manning (2015), Mou et al. (2016,
  "Natural language inference by tree-based convolution and heuristic matching"), and the ON-LSTM
  paper's logical-inference classifier (Shen et al. 2019, §6.4; public code ``proplog.py``);
* ``"match"``: ``[u; v; |u − v|; u ⊙ v]`` (k = 4): the same four vectors in InferSent's order (Conneau
  et al. 2017), the Gaussian Transformer's ``classifier_features="match"`` (Guo, Zhang & Liu 2019);
* ``"concat"``: ``[u; v]`` (k = 2): the Gaussian Transformer's classifier ``FFN([p̄; h̄])``.

The activation is ``"elu"`` (the logic classifier's, as the public ``proplog.py``) or ``"gelu"`` (the
Gaussian Transformer's FFNs). With ``zero_init_output=True`` the output layer carries ``zero_init =
True``, the mark that the models' ``_init_weights`` rule
(:func:`syntaxformer.models.encoder.zero_init_if_marked`) reads to set its weight and bias to zero
(the untrained classifier then predicts the uniform distribution, loss ln C); the head itself
initialises nothing beyond PyTorch's defaults.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

#: the feature joins: name -> number k of D-wide vectors joined
PAIR_FEATURES = {"bowman": 4, "match": 4, "concat": 2}
#: the MLP's activations
ACTIVATIONS = {"elu": nn.ELU, "gelu": nn.GELU}


def pair_features(u: Tensor, v: Tensor, kind: str) -> Tensor:
    """Join two sentence vectors (module docstring).

    Args:
        u, v: ``(B, D)`` each (the left / premise and the right / hypothesis sentence).
        kind: ``"bowman"`` ``[u; v; u ⊙ v; |u − v|]``, ``"match"`` ``[u; v; |u − v|; u ⊙ v]`` or
            ``"concat"`` ``[u; v]``.
    Returns:
        ``(B, k·D)``, k = :data:`PAIR_FEATURES` ``[kind]``.
    Raises:
        ValueError: an unknown ``kind``.
    """
    if kind == "bowman":
        return torch.cat([u, v, u * v, (u - v).abs()], dim=-1)
    if kind == "match":
        return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)
    if kind == "concat":
        return torch.cat([u, v], dim=-1)
    raise ValueError(f"unknown pair features {kind!r}; expected one of {sorted(PAIR_FEATURES)}")


class PairClassificationHead(nn.Module):
    """``Dropout -> Linear(k·D, h) -> activation -> Dropout -> Linear(h, C)`` over
    :func:`pair_features` (module docstring).

    The two linear layers are ``dense`` and ``out`` (state-dict keys ``dense.weight``, ``dense.bias``,
    ``out.weight``, ``out.bias``), built in that order with PyTorch's default initialisation; one
    parameterless ``dropout`` module serves both dropouts.

    Args:
        width: D, the width of each sentence vector.
        hidden: h, the hidden width.
        num_labels: C, the classes.
        dropout: dropout probability before each linear layer (0-1).
        features: a key of :data:`PAIR_FEATURES`.
        activation: a key of :data:`ACTIVATIONS`.
        zero_init_output: mark ``out`` with ``zero_init = True`` (module docstring).
    Raises:
        ValueError: an unknown ``features`` or ``activation``.
    """

    def __init__(
        self,
        width: int,
        hidden: int,
        num_labels: int,
        dropout: float,
        features: str = "bowman",
        activation: str = "elu",
        zero_init_output: bool = False,
    ):
        super().__init__()
        if features not in PAIR_FEATURES:
            raise ValueError(f"unknown pair features {features!r}; expected one of {sorted(PAIR_FEATURES)}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; expected one of {sorted(ACTIVATIONS)}")
        self.features = features
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(PAIR_FEATURES[features] * width, hidden)
        self.activation = ACTIVATIONS[activation]()
        self.out = nn.Linear(hidden, num_labels)
        if zero_init_output:
            self.out.zero_init = True

    def classify(self, features: Tensor) -> Tensor:
        """The MLP alone: joined features ``(B, k·D)`` -> ``(B, C)`` logits."""
        return self.out(self.dropout(self.activation(self.dense(self.dropout(features)))))

    def forward(self, u: Tensor, v: Tensor) -> Tensor:
        """Logits of B pairs: ``u``, ``v`` ``(B, D)`` -> ``(B, C)`` (unnormalised; softmax gives probabilities)."""
        return self.classify(pair_features(u, v, self.features))


__all__ = ["PAIR_FEATURES", "ACTIVATIONS", "pair_features", "PairClassificationHead"]
