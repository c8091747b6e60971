"""Analyses of trained models: attention heads (:mod:`syntaxformer.analysis.heads`, DESIGN.md §3.5)."""

from syntaxformer.analysis.heads import (  # noqa: F401
    DIRECTIONS,
    MIN_RELATION_PAIRS,
    POSITIONAL_THRESHOLD,
    RELATIONS,
    SYNTACTIC_MARGIN,
    DependencyCounts,
    RoleCounts,
    analyse_heads,
    head_importance,
    max_attention,
    normalise_by_layer,
    relation_baselines,
    word_attention,
    write_heads_outputs,
)

__all__ = [
    "DIRECTIONS",
    "MIN_RELATION_PAIRS",
    "POSITIONAL_THRESHOLD",
    "RELATIONS",
    "SYNTACTIC_MARGIN",
    "DependencyCounts",
    "RoleCounts",
    "analyse_heads",
    "head_importance",
    "max_attention",
    "normalise_by_layer",
    "relation_baselines",
    "word_attention",
    "write_heads_outputs",
]
