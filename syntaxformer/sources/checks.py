"""Which per-sentence structure a model reads, as its prior declares it
(:attr:`~syntaxformer.priors.base.StructuralPrior.structure_input`: ``"trees"`` or ``"phrases"``, decided
for the model's config by ``reads_structure``), and the evaluation commands' rule that ``--trees`` /
``--phrases`` are given exactly when the model reads them."""

from __future__ import annotations

from syntaxformer.data.structure_source import StructureSource
from syntaxformer.errors import InputError
from syntaxformer.models import capabilities_of
from syntaxformer.priors import PRIORS, structure_reader, structure_readers


def model_structure_input(model) -> str | None:
    """The structure ``model`` reads (``"trees"``, ``"phrases"``) or None: its config's prior declares
    one for that config (:func:`syntaxformer.priors.structure_reader`) and the model takes
    ``structure_inputs`` (:func:`~syntaxformer.models.capabilities_of`)."""
    config = getattr(model, "config", None)
    if not isinstance(getattr(config, "prior", None), str) or config.prior not in PRIORS:
        return None
    reader = structure_reader(config.to_dict())
    if reader is None or not capabilities_of(model).structure_inputs:
        return None
    return reader.structure_input


def model_reads_trees(model) -> bool:
    """Whether ``model`` reads a dependency tree per sentence (:func:`model_structure_input`)."""
    return model_structure_input(model) == "trees"


def model_reads_phrases(model) -> bool:
    """Whether ``model`` reads a phrase partition per sentence (:func:`model_structure_input`)."""
    return model_structure_input(model) == "phrases"


def check_model_structure(model, kind: str, source: str | StructureSource | None) -> StructureSource | None:
    """The evaluation commands' rule (``perplexity``, ``probe``) for the structure ``kind`` (``"trees"``
    or ``"phrases"``): its option is required exactly when the model reads that structure. Checked
    before any work; the messages are the reading prior's (``structure_messages``).

    Returns:
        ``source`` parsed (:meth:`StructureSource.parse`).
    Raises:
        InputError (one line): a bad ``source``; a model that reads ``kind`` without ``source``;
            ``source`` for a model that reads none (the report would name structure the model never saw).
    """
    source = StructureSource.parse(source, f"--{kind}")
    prior = getattr(getattr(model, "config", None), "prior", None)
    reads = model_structure_input(model) == kind
    if reads and source is None:
        raise InputError(PRIORS[prior].structure_messages["eval-missing"].format(prior=prior))
    if source is not None and not reads:
        reader = next(iter(structure_readers(kind).values()))
        message = reader.structure_messages["eval-unread"]
        raise InputError(message.format(value=source, model=type(model).__name__, prior=prior))
    return source


def check_model_trees(model, trees: str | StructureSource | None) -> StructureSource | None:
    """:func:`check_model_structure` for ``--trees``."""
    return check_model_structure(model, "trees", trees)


def check_model_phrases(model, phrases: str | StructureSource | None) -> StructureSource | None:
    """:func:`check_model_structure` for ``--phrases``."""
    return check_model_structure(model, "phrases", phrases)


def tree_level(config: dict) -> int:
    """The level ``--phrases`` cuts trees at for a model with ``config`` (the run's overrides, or a
    fine-tuned folder's ``config.json``): its prior's ``tree_level`` (1 without a prior)."""
    cls = PRIORS.get(config.get("prior")) if isinstance(config.get("prior"), str) else None
    return 1 if cls is None else cls.tree_level(config)


def model_tree_level(model) -> int:
    """The level the evaluation cuts trees at for ``model`` (:func:`tree_level` of its config)."""
    return tree_level(model.config.to_dict())


__all__ = [
    "model_structure_input",
    "model_reads_trees",
    "model_reads_phrases",
    "check_model_structure",
    "check_model_trees",
    "check_model_phrases",
    "tree_level",
    "model_tree_level",
]
