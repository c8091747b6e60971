"""The one place a language model's config is resolved from the options of a run.

A run names a model of the registry, a preset, maybe a structural prior (``--prior``) and config
overrides (``--set FIELD=VALUE``). :func:`resolve_model_config` turns them into the config the model
is built from, in this order (a later source wins):

1. the preset's fields (:func:`~syntaxformer.models.make_config`);
2. the fields the model's training objective sets
   (:attr:`~syntaxformer.training.objectives.Objective.config_defaults`, e.g. the causal LM's
   ``parse_prefix_token_id``), only those the model's config has;
3. the prior's own fields (:attr:`~syntaxformer.priors.base.StructuralPrior.config_defaults`) that the
   model's config lacks, so that they are written into ``config.json``;
4. ``prior`` and the overrides (:func:`requested_fields`).

The trainer builds its model from it, ``induce`` checks its settings with it before training, and
:class:`~syntaxformer.training.arguments.TrainArguments` checks the structure a run reads against
the requested fields (:func:`requested_fields`, the part of the config a run states itself).
"""

from __future__ import annotations

from transformers import PretrainedConfig

from syntaxformer.errors import InputError
from syntaxformer.models import MODELS, make_config
from syntaxformer.models.kernel_choice import accepted_fields
from syntaxformer.priors import PRIORS
from syntaxformer.training.objectives import objective_class


def requested_fields(prior: str | None, overrides: dict) -> dict:
    """The config fields a run states itself: ``overrides`` with ``prior`` (``--prior``) as field
    ``prior`` when given.

    Raises:
        InputError: ``prior`` and an override ``prior`` that disagree.
    """
    if prior is not None and overrides.get("prior", prior) != prior:
        raise InputError(f"--prior {prior} and the override prior={overrides['prior']} disagree: give one")
    return {**overrides, **({"prior": prior} if prior is not None else {})}


def resolved_fields(model: str, preset: str, vocab_size: int, prior: str | None, overrides: dict) -> dict:
    """The fields :func:`resolve_model_config` gives ``make_config`` on top of the preset (steps 2-4
    of the module docstring).

    Raises:
        ValueError: an unknown model or preset, ``prior`` for a model without a prior option, or an
            override that is neither a field of the model's config (its old kernel field included:
            :func:`~syntaxformer.models.kernel_choice.accepted_fields`) nor of its prior.
    """
    fields = requested_fields(prior, overrides)
    config = make_config(model, preset, vocab_size)
    known = config.to_dict()
    defaults = objective_class(MODELS[model]).config_defaults
    fields = {**{k: v for k, v in defaults.items() if k in known}, **fields}
    if prior is not None and "prior" not in known:
        raise ValueError(f"--prior {prior}: this model has no structural-prior option")
    prior_class = PRIORS.get(fields.get("prior", known.get("prior")))  # None: unknown (the config says so) or "none"
    prior_fields = {k: v for k, v in getattr(prior_class, "config_defaults", {}).items() if k not in known}
    unknown = sorted(set(overrides) - accepted_fields(config) - set(prior_fields))  # old kernel fields included
    if unknown:
        raise ValueError(f"no config field {', '.join(unknown)}")
    return {**prior_fields, **fields}  # the prior's fields are written into the config


def resolve_model_config(
    model: str, preset: str, vocab_size: int, prior: str | None = None, overrides: dict | None = None
) -> PretrainedConfig:
    """The config of language model ``model`` (a name of :data:`~syntaxformer.models.MODELS`) at
    ``preset`` with ``vocab_size`` tokens, ``prior`` and config ``overrides`` (module docstring).

    Raises:
        InputError: a model, preset, prior or override that cannot be built (one line naming the model
            and preset); a prior checks its own fields when the model is built, not here.
    """
    try:
        fields = resolved_fields(model, preset, vocab_size, prior, dict(overrides or {}))
        return make_config(model, preset, vocab_size, **fields)
    except (ValueError, TypeError) as e:
        raise InputError(f"cannot build {model} / {preset}: {e}") from e


__all__ = ["requested_fields", "resolved_fields", "resolve_model_config"]
