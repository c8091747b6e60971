"""The model registry: one entry per model name carries everything the package needs to know about it.

An entry (:class:`ModelEntry`) names the config class, the masked-LM class, the presets (config fields
of named sizes) and the ``induce`` recipes. :func:`register_model` adds it to :data:`REGISTRY` (and to
the :data:`MODELS` / :data:`PRESETS` views) and registers the classes with Hugging Face's Auto classes,
so ``load_model`` / ``AutoModelForMaskedLM.from_pretrained`` read saved folders of it. The commands
(``train``, ``induce``, ``parse``, ``show``) then work with the model without knowing its name: parsing
goes through the model's ``induce`` method and the typed structures of :mod:`syntaxformer.structures`.
Adding a model: its file in ``models/`` and one ``register_model`` line in ``models/__init__.py``
(ARCHITECTURE.md, "How to add a model").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from transformers import AutoConfig, AutoModelForMaskedLM, PretrainedConfig


@dataclass(frozen=True)
class ModelEntry:
    """One model of the registry.

    Attributes:
        name: the ``--model`` name (e.g. "tree-transformer").
        config_class: its ``PretrainedConfig`` subclass (with a unique ``model_type``).
        model_class: its masked-LM ``PreTrainedModel``; a model that induces structure has
            ``induce(input_ids, attention_mask)`` and ``induces_structure`` (:mod:`syntaxformer.structures`).
        presets: ``{preset: config fields}``.
        recipes: ``{recipe: TrainArguments fields (+ "overrides", "min_layer")}`` for ``induce``; may be empty.
    """

    name: str
    config_class: type
    model_class: type
    presets: dict = field(default_factory=dict)
    recipes: dict = field(default_factory=dict)


#: name -> entry
REGISTRY: dict[str, ModelEntry] = {}
#: name -> masked-LM class (a view of :data:`REGISTRY`)
MODELS: dict[str, type] = {}
#: name -> {preset: config fields} (a view of :data:`REGISTRY`)
PRESETS: dict[str, dict] = {}


def register_model(entry: ModelEntry) -> ModelEntry:
    """Add ``entry`` to the registry and to the Hugging Face Auto classes; returns it.

    Raises:
        ValueError: the name is taken by another entry.
    """
    if entry.name in REGISTRY and REGISTRY[entry.name] != entry:
        raise ValueError(f"model name {entry.name!r} is already registered")
    REGISTRY[entry.name] = entry
    MODELS[entry.name] = entry.model_class
    PRESETS[entry.name] = entry.presets
    AutoConfig.register(entry.config_class.model_type, entry.config_class, exist_ok=True)
    AutoModelForMaskedLM.register(entry.config_class, entry.model_class, exist_ok=True)
    return entry


def unregister_model(name: str) -> None:
    """Remove a model from the registry (its Auto-class registration stays; for tests)."""
    for table in (REGISTRY, MODELS, PRESETS):
        table.pop(name, None)


def make_config(model: str, preset: str, vocab_size: int, **overrides) -> PretrainedConfig:
    """Config of ``model`` at ``preset`` with ``vocab_size`` and any field overridden.

    Args:
        model: a name in :data:`REGISTRY` (e.g. "tree-transformer").
        preset: a key of its presets ("paper", "small", "mini", "tiny").
        vocab_size: vocabulary size.
        **overrides: config fields (e.g. ``prior="none"``, ``constituent_variant="official"``,
            ``attn_implementation="eager"``).
    Raises:
        ValueError: unknown model or preset (or an invalid field value, from the config).
    """
    if model not in REGISTRY:
        raise ValueError(f"unknown model {model!r}; expected one of {sorted(REGISTRY)}")
    entry = REGISTRY[model]
    if preset not in entry.presets:
        raise ValueError(f"unknown preset {preset!r} for {model}; expected one of {sorted(entry.presets)}")
    return entry.config_class(vocab_size=vocab_size, **{**entry.presets[preset], **overrides})
