"""Which per-sentence structure a model reads, by its prior (structural-position: dependency trees;
multi-granularity with ``tree`` heads: phrases), and the evaluation commands' rule that ``--trees`` /
``--phrases`` are given exactly when the model reads them."""

from __future__ import annotations

import inspect

from syntaxformer.data.phrases import check_phrases_option
from syntaxformer.data.trees import check_trees_option
from syntaxformer.errors import InputError
from syntaxformer.priors import PRIORS, needs_structure_inputs
from syntaxformer.priors.multi_granularity import MultiGranularityPrior, parse_granularities


def model_reads_trees(model) -> bool:
    """Whether ``model`` reads a dependency tree per sentence: its config's ``prior`` needs structure
    inputs (:func:`syntaxformer.priors.needs_structure_inputs`) and its forward takes ``structure_inputs``."""

    prior = getattr(getattr(model, "config", None), "prior", None)
    return (
        isinstance(prior, str)
        and prior in PRIORS
        and needs_structure_inputs(prior)
        and "structure_inputs" in inspect.signature(model.forward).parameters
    )


def check_model_trees(model, trees: str | None) -> None:
    """The evaluation commands' rule (``perplexity``, ``probe``): ``--trees`` is required exactly when
    the model reads trees (:func:`model_reads_trees`). Checked before any work.

    Raises:
        InputError (one line): a model that reads trees without ``trees``; ``trees`` for a model that
            reads none (the report would name trees the model never saw); a bad ``trees`` value.
    """
    check_trees_option(trees)
    prior = getattr(getattr(model, "config", None), "prior", None)
    reads = model_reads_trees(model)
    if reads and trees is None:
        raise InputError(
            f"this model's prior {prior} needs a dependency tree per sentence: pass --trees gold "
            "or --trees induced:MODEL_DIR"
        )
    if trees is not None and not reads:
        raise InputError(
            f"--trees {trees}: this {type(model).__name__} (prior {prior}) reads no trees; "
            "leave --trees out (only a prior such as structural-position reads them)"
        )


def tree_level(config: dict) -> int:
    """The level ``--phrases`` cuts trees at: ``mgsa_tree_level`` of ``config`` (the run's overrides, or
    a fine-tuned folder's ``config.json``), else the prior's default (1)."""
    return int(config.get("mgsa_tree_level", MultiGranularityPrior.config_defaults["mgsa_tree_level"]))


def model_reads_phrases(model) -> bool:
    """Whether ``model`` reads a phrase partition per sentence: its config's ``prior`` is
    ``multi-granularity`` with at least one ``"tree"`` head (``mgsa_granularities``)."""
    config = getattr(model, "config", None)
    return getattr(config, "prior", None) == "multi-granularity" and "tree" in parse_granularities(
        getattr(config, "mgsa_granularities", None), config.num_attention_heads
    )


def model_tree_level(model) -> int:
    """The level the evaluation cuts trees at for ``model``: its config's ``mgsa_tree_level`` (:func:`tree_level`)."""
    return tree_level(model.config.to_dict())


def check_model_phrases(model, phrases: str | None) -> None:
    """The evaluation commands' rule (``perplexity``, ``probe``): ``--phrases`` is required exactly when
    the model reads phrases (:func:`model_reads_phrases`). Checked before any work.

    Raises:
        InputError (one line): a model with ``tree`` heads without ``phrases``; ``phrases`` for a model
            without ``tree`` heads; a bad ``phrases`` value.
    """
    check_phrases_option(phrases)
    reads = model_reads_phrases(model)
    if reads and phrases is None:
        raise InputError(
            "this model's multi-granularity prior has 'tree' heads, which need a phrase partition "
            "per sentence: pass --phrases gold or --phrases induced:MODEL_DIR"
        )
    if phrases is not None and not reads:
        prior = getattr(getattr(model, "config", None), "prior", None)
        raise InputError(
            f"--phrases {phrases}: this {type(model).__name__} (prior {prior}) has no 'tree' heads "
            "and reads no phrases; leave --phrases out"
        )


__all__ = [
    "model_reads_trees",
    "check_model_trees",
    "tree_level",
    "model_reads_phrases",
    "model_tree_level",
    "check_model_phrases",
]
