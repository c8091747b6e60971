"""TEMPORARY adapter (removed when the logic task reads the registry directly): the old sentence-encoder
API over the registry of architectures (:mod:`syntaxformer.models.registry`, the ``encoder`` use)."""

from __future__ import annotations

from types import SimpleNamespace

from syntaxformer.blocks.pooling import POOLINGS, pool_last, pool_max, pool_mean
from syntaxformer.models import ENCODERS as _ARCHITECTURES
from syntaxformer.models import build_encoder, encoder_use, make_encoder_config


def encoder_entry(name: str) -> SimpleNamespace:
    """The encoder use of ``name`` with its config class. Raises ValueError for an unknown name."""
    use = encoder_use(name)
    return SimpleNamespace(name=name, config_class=_ARCHITECTURES[name].config_class, **vars(use))


ENCODERS = dict({name: encoder_entry(name) for name in _ARCHITECTURES})
encoder_config = make_encoder_config

__all__ = [
    "POOLINGS",
    "pool_last",
    "pool_mean",
    "pool_max",
    "ENCODERS",
    "encoder_entry",
    "encoder_config",
    "build_encoder",
]
