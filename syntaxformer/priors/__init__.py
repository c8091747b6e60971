"""Structural priors on self-attention, one file each, and their registry.

:data:`PRIORS` maps ``config.prior`` to a :class:`~syntaxformer.priors.base.StructuralPrior` class
(``"none"``: no prior, the plain Transformer). The interface is in :mod:`syntaxformer.priors.base`; the
attention kernels that consume it (``ATTENTION_FUNCTIONS["eager" | "sdpa"]``) in
:mod:`syntaxformer.priors.attention`. Adding a prior: its file, one line below, its tests
(ARCHITECTURE.md).
"""
from __future__ import annotations

from .attention import ATTENTION_FUNCTIONS
from .base import MultiplicativePrior, PriorOutput, StructuralPrior
from .constituent import ConstituentAttention, ConstituentPrior
from .gaussian import GaussianPrior
from .multi_granularity import MultiGranularityPrior

#: ``config.prior`` -> the prior's class (None: no prior)
PRIORS: dict[str, type[StructuralPrior] | None] = {
    "none": None,
    "constituent": ConstituentAttention,
    "gaussian": GaussianPrior,
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


__all__ = ["ATTENTION_FUNCTIONS", "PRIORS", "ConstituentAttention", "ConstituentPrior", "GaussianPrior",
           "MultiGranularityPrior", "MultiplicativePrior",
           "PriorOutput", "StructuralPrior", "build_prior", "check_prior", "prior_attribute"]
