"""The registry of architectures: one entry per architecture says what it can be used as, with its
presets per use. Every command reads it; nothing outside a model's own file and its registry line
names a model.

An :class:`Architecture` has a name (the ``--architecture`` value), a config class and up to
three **uses**:

* ``language_model`` (:class:`LanguageModelUse`): a masked or causal LM (the class attribute
  ``objective`` says which, :mod:`syntaxformer.training.objectives`) with its presets (its ``induce``
  recipes: :mod:`syntaxformer.recipes`); ``train``, ``induce``, ``parse``, ``show``, ``heads``, ``prune``, ``probe``, ``perplexity``
  and ``compare`` build and load it. A model that induces structure has ``induce(input_ids,
  attention_mask)`` and ``induces_structure`` (:mod:`syntaxformer.structures`);
* ``encoder`` (:class:`EncoderUse`): a base model whose ``forward(input_ids, attention_mask)`` returns
  ``last_hidden_state`` ``(B, N, D)``, pooled to one vector per sentence
  (:data:`~syntaxformer.blocks.pooling.POOLINGS`) by a sentence-pair classifier (``logic``);
* ``pair_classifier`` (:class:`PairClassifierUse`): a whole sentence-pair classifier (``nli``).

:func:`register` adds an entry to :data:`REGISTRY`, keeps the views (:data:`MODELS`, :data:`PRESETS`,
:data:`ENCODERS`, :data:`PAIR_MODELS`) in step and registers the classes with Hugging Face's Auto
classes, so saved folders load with ``AutoModelForMaskedLM`` (and ``AutoModelForCausalLM`` for a causal LM) /
``AutoModelForSequenceClassification``.
Each use has one default architecture (``Architecture.default_for``; :func:`default_architecture`),
the commands' default. A language model declares what its ``forward`` accepts beyond the inputs and
labels (:class:`Capabilities`: ``masked_only``, ``structure_inputs``, ``head_mask``, ...);
:func:`register` checks the declaration against the class once, and the commands ask
:func:`capabilities_of` instead of reading signatures. Adding a model: its file in ``models/`` and one :func:`register` line in
``models/__init__.py`` (ARCHITECTURE.md, "How to add a model").
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    PretrainedConfig,
)

from syntaxformer.blocks.pooling import POOLINGS

#: the uses an architecture can declare (the field names of :class:`Architecture`)
USES = ("language_model", "encoder", "pair_classifier")


def _hidden_size(config: PretrainedConfig) -> int:
    return config.hidden_size


@dataclass(frozen=True)
class Capabilities:
    """What a language model accepts beyond ``input_ids``, ``attention_mask`` and ``labels``, declared in
    its :class:`LanguageModelUse` (default: nothing) and checked by :func:`register`.

    Attributes:
        masked_only: ``forward(masked_only=True, masked_positions=(M,) or None)`` computes the logits at
            the labelled positions only (``(M, V)``; the trainer's and perplexity's cheap path).
        structure_inputs: ``forward(structure_inputs={...})`` hands per-sentence structure (``--trees``,
            ``--phrases``) to the priors that read it.
        head_mask: ``forward(head_mask=(H,) or (L, H))`` multiplies each head's output (head gates).
        output_hidden_states: ``forward(output_hidden_states=True)`` returns every layer's output (probing).
        output_priors: ``forward(output_priors=True)`` returns per-layer priors (``show``'s figures).
        constituent_variant: the config takes ``constituent_variant`` (``induce --variant``).
    """

    masked_only: bool = False
    structure_inputs: bool = False
    head_mask: bool = False
    output_hidden_states: bool = False
    output_priors: bool = False
    constituent_variant: bool = False

    def declared(self) -> tuple[str, ...]:
        """The names of the capabilities declared (true), in field order."""
        return tuple(f.name for f in fields(self) if getattr(self, f.name))


#: capability -> the ``forward`` keywords it needs (the others name a config field: :data:`CONFIG_CAPABILITIES`)
FORWARD_KEYWORDS = {
    "masked_only": ("masked_only", "masked_positions"),
    "structure_inputs": ("structure_inputs",),
    "head_mask": ("head_mask",),
    "output_hidden_states": ("output_hidden_states",),
    "output_priors": ("output_priors",),
}
#: capability -> the config ``__init__`` keyword it needs
CONFIG_CAPABILITIES = {"constituent_variant": "constituent_variant"}


@dataclass(frozen=True)
class LanguageModelUse:
    """An architecture used as a language model (masked or causal: the class's ``objective``).

    Attributes:
        model_class: the LM's ``PreTrainedModel``.
        presets: ``{preset: config fields}`` (e.g. ``paper``, ``small``, ``mini``, ``tiny``).
        capabilities: what ``model_class`` accepts (:class:`Capabilities`; default: nothing beyond the
            inputs and labels).
    """

    model_class: type
    presets: dict
    capabilities: Capabilities = Capabilities()


@dataclass(frozen=True)
class EncoderUse:
    """An architecture used as a sentence encoder (the logic task's pair classifier encodes both sentences).

    Attributes:
        model_class: the base model: ``model_class(config)(input_ids, attention_mask)`` returns an
            output with ``last_hidden_state`` ``(B, N, D)``.
        presets: ``{preset: config fields}`` (``base``: the logic study's size; ``tiny``: tests).
        pooling: the default pooling, a key of :data:`~syntaxformer.blocks.pooling.POOLINGS`.
        fixed: config fields every preset gets (e.g. ``prior="none"``).
        width: ``config -> D``, the width of ``last_hidden_state`` (default ``config.hidden_size``).
        lr: the peak learning rate of the logic task's default recipe for this encoder (chosen on
            validation accuracy, records/logic/recipe-choice.json); default 1e-3, the public ON-LSTM code's.
        max_steps: the steps (of 128 pairs) of the logic task's default recipe; default 4,000 (4.2 epochs).
        precision: the logic training's matrix-product precision (``fp32``, or ``bf16``:
            ``torch.autocast`` to bfloat16); default ``fp32``.
    """

    model_class: type
    presets: dict
    pooling: str = "mean"
    fixed: dict = field(default_factory=dict)
    width: Callable[[PretrainedConfig], int] = _hidden_size
    lr: float = 1e-3
    max_steps: int = 4000
    precision: str = "fp32"


@dataclass(frozen=True)
class PairClassifierUse:
    """An architecture used as a whole sentence-pair classifier (``syntaxformer nli``).

    Attributes:
        model_class: the classifier's ``PreTrainedModel`` (``premise_ids``, ``hypothesis_ids``, ... ->
            logits ``(B, labels)``).
        presets: ``{preset: config fields}``.
    """

    model_class: type
    presets: dict


@dataclass(frozen=True)
class Architecture:
    """One architecture of the registry.

    Attributes:
        name: the ``--architecture`` name (e.g. "tree-transformer").
        config_class: its ``PretrainedConfig`` subclass (with a unique ``model_type``).
        language_model, encoder, pair_classifier: the uses it declares (None = not usable as that).
        default_for: the uses whose commands default to this architecture (one per use).
    """

    name: str
    config_class: type
    language_model: LanguageModelUse | None = None
    encoder: EncoderUse | None = None
    pair_classifier: PairClassifierUse | None = None
    default_for: tuple[str, ...] = ()

    def uses(self) -> tuple[str, ...]:
        """The uses this architecture declares, in :data:`USES` order."""
        return tuple(use for use in USES if getattr(self, use) is not None)


#: name -> architecture
REGISTRY: dict[str, Architecture] = {}
#: name -> language-model class (a view of :data:`REGISTRY`: the architectures used as language models)
MODELS: dict[str, type] = {}
#: name -> {preset: config fields} of the language model (a view of :data:`REGISTRY`)
PRESETS: dict[str, dict] = {}
#: name -> architecture, those usable as a sentence encoder (a view of :data:`REGISTRY`)
ENCODERS: dict[str, Architecture] = {}
#: name -> architecture, those usable as a sentence-pair classifier (a view of :data:`REGISTRY`)
PAIR_MODELS: dict[str, Architecture] = {}


def _views(arch: Architecture) -> list[tuple[dict, object]]:
    """``(view, value)`` for every view ``arch`` belongs to."""
    views = []
    if arch.language_model is not None:
        views += [(MODELS, arch.language_model.model_class), (PRESETS, arch.language_model.presets)]
    if arch.encoder is not None:
        views.append((ENCODERS, arch))
    if arch.pair_classifier is not None:
        views.append((PAIR_MODELS, arch))
    return views


def register(arch: Architecture) -> Architecture:
    """Add ``arch`` to the registry, its views and the Hugging Face Auto classes; returns it.

    Raises:
        ValueError: the name is taken by another entry; no use declared; an unknown use in
            ``default_for`` or one already defaulted by another architecture; an unknown pooling; a
            declared capability the language model's ``forward`` (or its config) does not take
            (:func:`check_capabilities`).
    """
    if arch.language_model is not None:
        check_capabilities(
            arch.name, arch.language_model.model_class, arch.config_class, arch.language_model.capabilities
        )
    if arch.name in REGISTRY and REGISTRY[arch.name] != arch:
        raise ValueError(f"architecture name {arch.name!r} is already registered")
    if not arch.uses():
        raise ValueError(f"architecture {arch.name!r} declares no use (one of {USES})")
    for use in arch.default_for:
        if use not in arch.uses():
            raise ValueError(f"architecture {arch.name!r} is the default {use} but does not declare it")
        other = _default_or_none(use)
        if other not in (None, arch.name):
            raise ValueError(f"the default {use} is already {other!r}")
    if arch.encoder is not None and arch.encoder.pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {arch.encoder.pooling!r}; expected one of {sorted(POOLINGS)}")
    REGISTRY[arch.name] = arch
    for view, value in _views(arch):
        view[arch.name] = value
    AutoConfig.register(arch.config_class.model_type, arch.config_class, exist_ok=True)
    if arch.language_model is not None:  # the one Auto class syntaxformer.parsing.load_model reads
        AutoModelForMaskedLM.register(arch.config_class, arch.language_model.model_class, exist_ok=True)
        if getattr(arch.language_model.model_class, "objective", None) == "causal-lm":  # where HF looks for one
            AutoModelForCausalLM.register(arch.config_class, arch.language_model.model_class, exist_ok=True)
    if arch.pair_classifier is not None:
        AutoModelForSequenceClassification.register(arch.config_class, arch.pair_classifier.model_class, exist_ok=True)
    return arch


def check_capabilities(name: str, model_class: type, config_class: type, declared: Capabilities) -> None:
    """Check a declaration against the classes: every keyword of a declared capability
    (:data:`FORWARD_KEYWORDS`) is a parameter of ``model_class.forward``, every declared config field
    (:data:`CONFIG_CAPABILITIES`) one of ``config_class.__init__``. The one place that reads signatures.

    Raises:
        ValueError: naming the architecture, the capability and the missing keyword.
    """
    forward = inspect.signature(model_class.forward).parameters
    config = inspect.signature(config_class.__init__).parameters
    for capability in declared.declared():
        if capability in CONFIG_CAPABILITIES:
            where, params, needed = f"{config_class.__name__}.__init__", config, (CONFIG_CAPABILITIES[capability],)
        else:
            where, params, needed = f"{model_class.__name__}.forward", forward, FORWARD_KEYWORDS[capability]
        for keyword in needed:
            if keyword not in params:
                raise ValueError(
                    f"architecture {name!r} declares the capability {capability!r}, but {where} takes no {keyword!r}"
                )


def capabilities_of(model) -> Capabilities:
    """What a language model accepts, as declared: the registry entry of its class (or of the nearest
    registered base class); else the object's own ``capabilities`` attribute (a wrapper of a model,
    e.g. the head-gate wrapper, declares its own); else nothing (:class:`Capabilities` ()).

    Args:
        model: a model instance or class.
    Returns:
        Its :class:`Capabilities`.
    """
    cls = model if isinstance(model, type) else type(model)
    entries = {
        arch.language_model.model_class: arch.language_model for arch in REGISTRY.values() if arch.language_model
    }
    for klass in cls.__mro__:
        if klass in entries:
            return entries[klass].capabilities
    own = getattr(model, "capabilities", None)
    return own if isinstance(own, Capabilities) else Capabilities()


def unregister(name: str) -> None:
    """Remove an architecture from the registry and its views (its Auto-class registration stays; for tests)."""
    for table in (REGISTRY, MODELS, PRESETS, ENCODERS, PAIR_MODELS):
        table.pop(name, None)


def _default_or_none(use: str) -> str | None:
    return next((name for name, arch in REGISTRY.items() if use in arch.default_for), None)


def default_architecture(use: str) -> str:
    """The name of the architecture the commands use for ``use`` when none is named.

    Raises:
        ValueError: an unknown use, or none registered as its default.
    """
    if use not in USES:
        raise ValueError(f"unknown use {use!r}; expected one of {USES}")
    name = _default_or_none(use)
    if name is None:
        raise ValueError(f"no architecture is registered as the default {use}")
    return name


def make_config(model: str, preset: str, vocab_size: int, **overrides) -> PretrainedConfig:
    """Config of language model ``model`` at ``preset`` with ``vocab_size`` and any field overridden.

    Args:
        model: a name in :data:`MODELS` (e.g. "tree-transformer").
        preset: a key of its presets ("paper", "small", "mini", "tiny").
        vocab_size: vocabulary size.
        **overrides: config fields (e.g. ``prior="none"``, ``constituent_variant="official"``,
            ``attn_implementation="eager"``).
    Raises:
        ValueError: unknown model or preset (or an invalid field value, from the config).
    """
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; expected one of {sorted(MODELS)}")
    presets = PRESETS[model]
    if preset not in presets:
        raise ValueError(f"unknown preset {preset!r} for {model}; expected one of {sorted(presets)}")
    return REGISTRY[model].config_class(vocab_size=vocab_size, **{**presets[preset], **overrides})


def encoder_use(name: str) -> EncoderUse:
    """The encoder use of ``name``. Raises ValueError for a name without one (listing those with one)."""
    if name not in ENCODERS:
        raise ValueError(f"unknown encoder {name!r}; expected one of {sorted(ENCODERS)}")
    return ENCODERS[name].encoder


def make_encoder_config(name: str, preset: str, vocab_size: int, pad_token_id: int, **overrides) -> PretrainedConfig:
    """The config of encoder ``name`` at ``preset``: its preset fields, then the fixed fields, then
    ``overrides``, with the vocabulary size and padding id.

    Raises:
        ValueError: unknown encoder or preset (listing the known ones), or a field the config refuses.
    """
    use = encoder_use(name)
    if preset not in use.presets:
        raise ValueError(f"unknown preset {preset!r} for encoder {name}; expected one of {sorted(use.presets)}")
    fields = {**use.presets[preset], **use.fixed, **overrides}
    return REGISTRY[name].config_class(vocab_size=vocab_size, pad_token_id=pad_token_id, **fields)


def build_encoder(name: str, config: PretrainedConfig):
    """The base model of encoder ``name`` from ``config`` (freshly initialised, an ``nn.Module``)."""
    return encoder_use(name).model_class(config)


__all__ = [
    "USES",
    "Capabilities",
    "FORWARD_KEYWORDS",
    "CONFIG_CAPABILITIES",
    "check_capabilities",
    "capabilities_of",
    "LanguageModelUse",
    "EncoderUse",
    "PairClassifierUse",
    "Architecture",
    "REGISTRY",
    "MODELS",
    "PRESETS",
    "ENCODERS",
    "PAIR_MODELS",
    "register",
    "unregister",
    "default_architecture",
    "make_config",
    "encoder_use",
    "make_encoder_config",
    "build_encoder",
]
