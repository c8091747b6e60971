"""A sentence-pair classifier: encode both sentences with one encoder, classify the pair from
``[u; v; u ⊙ v; |u − v|]`` with an MLP; a Hugging Face model.

Bowman, Potts & Manning (2015) and the ON-LSTM paper's logical-inference experiment (Shen et al.
2019, §6.4; public code yikangshen/Ordered-Neurons ``proplog.py``, read, not copied): the two
sentence vectors ``u``, ``v`` ``(B, D)`` are joined as ``[u; v; u ⊙ v; |u − v|]`` ``(B, 4D)`` and fed to
``Dropout -> Linear(4D, h) -> ELU -> Dropout -> Linear(h, C)`` (the public classifier; ``h`` = D by
default, as the public ``nhid``): the project's pair head
(:class:`~syntaxformer.blocks.pair_head.PairClassificationHead`, ``"bowman"`` join, ELU), the one the
NLI models use too. Both sentences go through the encoder in one batch of ``2B`` (first the B left
sentences, then the B right ones), as the public code does.

The encoder is any entry of :data:`syntaxformer.models.ENCODERS`, pooled to one vector per
sentence (:data:`~syntaxformer.blocks.pooling.POOLINGS`). :class:`PairClassifierConfig` and
:class:`PairClassifier` are a ``PretrainedConfig`` / ``PreTrainedModel`` pair (``model_type``
:data:`MODEL_TYPE`, registered with ``AutoConfig`` and ``AutoModelForSequenceClassification``):
``save_pretrained`` writes ``config.json`` and ``model.safetensors``. Folders of the earlier format
(``pair_classifier.json`` and ``model.safetensors`` with the MLP's keys ``mlp.1.*`` / ``mlp.4.*``) still
load, to the same weights (:data:`LEGACY_KEYS`).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import Tensor, nn
from transformers import AutoConfig, AutoModelForSequenceClassification, PretrainedConfig, PreTrainedModel

from syntaxformer.blocks.pair_head import PairClassificationHead
from syntaxformer.blocks.pooling import POOLINGS
from syntaxformer.errors import InputError
from syntaxformer.models import ENCODERS, build_encoder, default_architecture, encoder_use

MODEL_TYPE = "syntaxformer-pair-classifier"
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
#: the config file of the earlier format (a dataclass as JSON: this config's fields, no ``model_type``)
LEGACY_CONFIG_NAME = "pair_classifier.json"
#: state-dict key prefixes of the earlier format -> today's (the MLP was ``nn.Sequential(Dropout,
#: Linear, ELU, Dropout, Linear)`` named ``mlp``)
LEGACY_KEYS = {"mlp.1.": "classifier.dense.", "mlp.4.": "classifier.out."}
#: keyword arguments ``AutoModelForSequenceClassification.from_pretrained`` passes on (Hub plumbing),
#: which a local folder does not need
_AUTO_KWARGS = frozenset(
    {
        "_from_auto",
        "trust_remote_code",
        "adapter_kwargs",
        "cache_dir",
        "force_download",
        "local_files_only",
        "proxies",
        "revision",
        "token",
    }
)


class PairClassifierConfig(PretrainedConfig):
    """Configuration of :class:`PairClassifier`.

    Args:
        encoder: a name in :data:`~syntaxformer.models.ENCODERS`.
        encoder_config: the encoder's config as a dict (``PretrainedConfig.to_dict()``).
        num_labels: classes C (None: ``len(id2label)``, as in a saved ``config.json``).
        pooling: a key of :data:`~syntaxformer.blocks.pooling.POOLINGS`.
        mlp_hidden: the MLP's hidden width h.
        dropout: dropout before each of the MLP's two linear layers (public 0.2).
        preset: the encoder preset it was built from (a record only).
        labels: the class names, in index order (a record; also ``id2label`` when given).
    """

    model_type = MODEL_TYPE

    def __init__(
        self,
        encoder: str = default_architecture("encoder"),
        encoder_config: dict | None = None,
        num_labels: int | None = None,
        pooling: str = "last",
        mlp_hidden: int = 0,
        dropout: float = 0.2,
        preset: str | None = None,
        labels: list | None = None,
        **kwargs,
    ):
        labels = list(labels or [])
        if labels and "id2label" not in kwargs:
            kwargs["id2label"] = dict(enumerate(labels))
        if num_labels is not None:  # else from id2label (a saved config.json), or Hugging Face's default 2
            kwargs["num_labels"] = num_labels
        super().__init__(**kwargs)
        self.encoder = encoder
        self.encoder_config = dict(encoder_config or {})
        self.pooling = pooling
        self.mlp_hidden = mlp_hidden
        self.dropout = dropout
        self.preset = preset
        self.labels = labels


def rename_legacy_keys(state_dict: dict, prefix: str = "") -> dict:
    """``state_dict`` with the earlier format's MLP keys (:data:`LEGACY_KEYS`, after ``prefix``)
    renamed in place to today's; other keys untouched. Returns ``state_dict``."""
    for key in list(state_dict):
        for old, new in LEGACY_KEYS.items():
            if key.startswith(prefix + old):
                state_dict[prefix + new + key[len(prefix + old) :]] = state_dict.pop(key)
    return state_dict


class PairClassifier(PreTrainedModel):
    """Encoder + pooling + the pair head (module docstring).

    Initialisation: the encoder's own (it is built, and initialised, by
    :func:`~syntaxformer.models.build_encoder`), the head's PyTorch defaults from construction;
    :meth:`_init_weights` changes nothing, so ``post_init`` leaves the weights and the random-number
    stream as the construction left them. ``load_state_dict`` accepts the earlier format's keys.

    Args:
        config: a :class:`PairClassifierConfig`.
    Raises:
        ValueError: unknown encoder or pooling.
    """

    config_class = PairClassifierConfig
    base_model_prefix = "pair_classifier"
    main_input_name = "input_ids"

    def __init__(self, config: PairClassifierConfig):
        super().__init__(config)
        if config.pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {config.pooling!r}; expected one of {sorted(POOLINGS)}")
        use = encoder_use(config.encoder)
        self.encoder = build_encoder(
            config.encoder, ENCODERS[config.encoder].config_class.from_dict(config.encoder_config)
        )
        self.pool = POOLINGS[config.pooling]
        width = use.width(self.encoder.config)
        self.classifier = PairClassificationHead(
            width, config.mlp_hidden, config.num_labels, config.dropout, features="bowman", activation="elu"
        )
        self.register_load_state_dict_pre_hook(
            lambda module, state_dict, prefix, *_: rename_legacy_keys(state_dict, prefix)
        )
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """No rule: the encoder initialised itself, the head keeps PyTorch's defaults (class docstring)."""

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
        return self.classifier(u, v)  # (B, C)

    def loss(self, input_ids: Tensor, attention_mask: Tensor, labels: Tensor) -> Tensor:
        """Mean cross-entropy (nats) of the B pairs' labels ``(B,)`` (class indices)."""
        return F.cross_entropy(self(input_ids, attention_mask), labels)

    # ------------------------------------------------------------------------------ load

    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name_or_path: str | Path,
        *model_args,
        config: PairClassifierConfig | None = None,
        device: str | torch.device = "cpu",
        **kwargs,
    ) -> PairClassifier:
        """Load a local folder written by ``save_pretrained`` (``config.json``) or by the earlier format
        (``pair_classifier.json``), in evaluation mode on ``device``.

        The model is built as for training (``cls(config)``, which draws its initial weights from
        torch's global generator) and all weights are then read from ``model.safetensors``, so every
        parameter and buffer is the saved one or the constructor's; the earlier format's keys are
        renamed (:data:`LEGACY_KEYS`). ``AutoModelForSequenceClassification.from_pretrained`` comes
        here too; its Hub arguments are ignored (local folders only).

        Raises:
            InputError: the folder lacks a config or ``model.safetensors``, names an encoder or pooling
                this installation does not know, or its weights do not fit the config.
            TypeError: a keyword argument other than ``config``, ``device`` and the Auto class's.
        """
        unknown = sorted(set(kwargs) - _AUTO_KWARGS)
        if model_args or unknown:
            raise TypeError(f"PairClassifier.from_pretrained: unsupported arguments {unknown or model_args}")
        folder = Path(pretrained_model_name_or_path)
        config = config if config is not None else read_pair_config(folder)
        if not (folder / WEIGHTS_NAME).is_file():
            raise InputError(f"not a pair-classifier folder: no {WEIGHTS_NAME}", folder)
        try:
            model = cls(config)
        except ValueError as e:
            raise InputError(str(e), folder / CONFIG_NAME) from None
        try:
            model.load_state_dict(load_file(str(folder / WEIGHTS_NAME), device=str(device)), strict=True)
        except RuntimeError as e:
            raise InputError(f"weights do not fit the config: {e}".splitlines()[0], folder / WEIGHTS_NAME) from None
        return model.to(device).eval()


def read_pair_config(folder: str | Path) -> PairClassifierConfig:
    """The :class:`PairClassifierConfig` of a model folder: ``config.json``, else the earlier format's
    ``pair_classifier.json``.

    Raises:
        InputError: neither file, or a ``config.json`` of another model type.
    """
    folder = Path(folder)
    if (folder / CONFIG_NAME).is_file():
        if json.loads((folder / CONFIG_NAME).read_text()).get("model_type") != MODEL_TYPE:
            raise InputError(f"not a pair-classifier folder: config.json's model_type is not {MODEL_TYPE}", folder)
        return PairClassifierConfig.from_pretrained(folder)
    if (folder / LEGACY_CONFIG_NAME).is_file():
        return PairClassifierConfig(**json.loads((folder / LEGACY_CONFIG_NAME).read_text()))
    raise InputError(
        f"not a pair-classifier folder: no {CONFIG_NAME} (train one with `syntaxformer logic train`)", folder
    )


AutoConfig.register(MODEL_TYPE, PairClassifierConfig, exist_ok=True)
AutoModelForSequenceClassification.register(PairClassifierConfig, PairClassifier, exist_ok=True)

__all__ = [
    "MODEL_TYPE",
    "PairClassifierConfig",
    "PairClassifier",
    "read_pair_config",
    "rename_legacy_keys",
    "CONFIG_NAME",
    "LEGACY_CONFIG_NAME",
    "LEGACY_KEYS",
    "WEIGHTS_NAME",
]
