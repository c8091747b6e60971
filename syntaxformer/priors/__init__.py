"""Structural priors on self-attention, one file each, and their registry.

:data:`PRIORS` maps ``config.prior`` to a :class:`~syntaxformer.priors.base.StructuralPrior` class
(``"none"``: no prior, the plain Transformer). The interface is in :mod:`syntaxformer.priors.base`; the
attention that consumes it (``ATTENTION_FUNCTIONS["eager" | "sdpa"]``) in
:mod:`syntaxformer.priors.attention` (its fast paths in :mod:`syntaxformer.kernels`). Adding a prior: its file, one line below, its tests
(ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from .attention import ATTENTION_FUNCTIONS
from .base import MultiplicativePrior, PriorOutput, StructuralPrior
from .constituent import ConstituentAttention, ConstituentPrior
from .gaussian import GaussianPrior
from .multi_granularity import MultiGranularityPrior
from .structural_position import StructuralPositionFusion, StructuralPositionPrior

#: ``config.prior`` -> the prior's class (None: no prior)
PRIORS: dict[str, type[StructuralPrior] | None] = {
    "none": None,
    "constituent": ConstituentAttention,
    "gaussian": GaussianPrior,
    "structural-position": StructuralPositionPrior,
    "multi-granularity": MultiGranularityPrior,
}


def check_prior(name: str) -> None:
    """Raises ValueError naming the registered priors when ``name`` is not one of them."""
    if name not in PRIORS:
        raise ValueError(f"unknown prior {name!r}; expected one of {tuple(PRIORS)}")


def prior_attribute(name: str) -> str | None:
    """The attribute a layer keeps the prior under (the registry name, ``-`` -> ``_``); None for "none"."""
    check_prior(name)
    return None if PRIORS[name] is None else name.replace("-", "_")


def build_prior(config, layer_index: int) -> StructuralPrior | None:
    """The prior module of 0-based layer ``layer_index`` for ``config.prior`` (None for "none").

    Raises:
        ValueError: ``config.prior`` is not in :data:`PRIORS`.
    """
    check_prior(config.prior)
    cls = PRIORS[config.prior]
    return None if cls is None else cls.from_config(config, layer_index)


def build_position_fusion(config):
    """The module the model's embeddings fuse positions with, when ``config.prior``'s class offers one
    (a classmethod ``position_fusion(config) -> nn.Module``, e.g. the structural-position prior's
    absolute-depth fusion); None otherwise. Its ``forward(positions (N, d), words (B, N, d), inputs)``
    returns the (B, N, d) positions to add to the word embeddings."""
    check_prior(config.prior)
    factory = getattr(PRIORS[config.prior], "position_fusion", None)
    return None if factory is None else factory(config)


def structure_reader(config: Mapping) -> type[StructuralPrior] | None:
    """The class of ``config``'s prior (``config["prior"]``; a mapping of config fields) when a model
    with ``config`` reads per-sentence structure (its :attr:`~StructuralPrior.structure_input`, as
    :meth:`~StructuralPrior.reads_structure` decides for ``config``); None otherwise, or for a prior
    not in :data:`PRIORS`.

    Raises:
        InputError: config fields the prior cannot read (its ``reads_structure``).
    """
    cls = PRIORS.get(config.get("prior")) if isinstance(config.get("prior"), str) else None
    return cls if cls is not None and cls.structure_input is not None and cls.reads_structure(config) else None


def structure_readers(kind: str) -> dict[str, type[StructuralPrior]]:
    """The registered priors that may read the structure ``kind`` (``"trees"`` or ``"phrases"``), by
    name, in registry order (their :attr:`~StructuralPrior.structure_messages` word the checks)."""
    return {
        name: cls for name, cls in PRIORS.items() if cls is not None and getattr(cls, "structure_input", None) == kind
    }


def needs_structure_inputs(name: str) -> bool:
    """Whether the prior ``name`` reads per-sentence structure (its class sets ``needs_inputs``)."""
    check_prior(name)
    return bool(getattr(PRIORS[name], "needs_inputs", ()))


__all__ = [
    "ATTENTION_FUNCTIONS",
    "PRIORS",
    "ConstituentAttention",
    "ConstituentPrior",
    "GaussianPrior",
    "MultiGranularityPrior",
    "MultiplicativePrior",
    "PriorOutput",
    "StructuralPositionFusion",
    "StructuralPositionPrior",
    "StructuralPrior",
    "build_position_fusion",
    "build_prior",
    "check_prior",
    "needs_structure_inputs",
    "prior_attribute",
    "structure_reader",
    "structure_readers",
]
