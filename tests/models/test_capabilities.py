"""Capabilities are declared in the registry, not guessed: register() checks a declaration against the
model's forward (and config), and the commands ask capabilities_of()."""

import inspect
from dataclasses import fields

import pytest
import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

from syntaxformer.analysis.pruning import HeadMasked
from syntaxformer.blocks.hard_concrete import HeadGates
from syntaxformer.models import (
    MODELS,
    REGISTRY,
    Architecture,
    Capabilities,
    LanguageModelUse,
    capabilities_of,
    make_config,
    register,
    unregister,
)
from syntaxformer.models.encoder import head_layout
from syntaxformer.models.registry import CONFIG_CAPABILITIES, FORWARD_KEYWORDS
from syntaxformer.models.tree_transformer import TreeTransformerForMaskedLM
from syntaxformer.tasks.finetune import GatedMaskedLM

NAME = "toy-capabilities"


class ToyConfig(PretrainedConfig):
    model_type = "syntaxformer-toy-capabilities"


class ToyWithoutPositions(PreTrainedModel):
    """Takes ``masked_only`` but not ``masked_positions``; ``**kwargs`` names no keyword."""

    config_class = ToyConfig

    def forward(self, input_ids, attention_mask=None, labels=None, masked_only=False, **kwargs):
        raise NotImplementedError


def _refused(declared: Capabilities) -> str:
    arch = Architecture(NAME, ToyConfig, language_model=LanguageModelUse(ToyWithoutPositions, {}, declared))
    with pytest.raises(ValueError) as error:
        register(arch)
    assert NAME not in REGISTRY and NAME not in MODELS  # nothing was registered
    return str(error.value)


def test_register_refuses_a_declared_keyword_the_forward_does_not_take():
    assert _refused(Capabilities(masked_only=True)) == (
        "architecture 'toy-capabilities' declares the capability 'masked_only', "
        "but ToyWithoutPositions.forward takes no 'masked_positions'"
    )
    assert _refused(Capabilities(structure_inputs=True)) == (  # **kwargs is no declared keyword
        "architecture 'toy-capabilities' declares the capability 'structure_inputs', "
        "but ToyWithoutPositions.forward takes no 'structure_inputs'"
    )
    assert _refused(Capabilities(constituent_variant=True)) == (
        "architecture 'toy-capabilities' declares the capability 'constituent_variant', "
        "but ToyConfig.__init__ takes no 'constituent_variant'"
    )


def test_a_model_declaring_nothing_registers_with_one_line_and_has_no_capability():
    arch = register(Architecture(NAME, ToyConfig, language_model=LanguageModelUse(ToyWithoutPositions, {})))
    try:
        assert arch.language_model.capabilities == Capabilities()
        assert capabilities_of(ToyWithoutPositions) == Capabilities()  # masked_only is not guessed
    finally:
        unregister(NAME)


def _signature_says(model_class, config_class) -> dict:
    forward = inspect.signature(model_class.forward).parameters
    config = inspect.signature(config_class.__init__).parameters
    says = {name: all(k in forward for k in keywords) for name, keywords in FORWARD_KEYWORDS.items()}
    says.update({name: keyword in config for name, keyword in CONFIG_CAPABILITIES.items()})
    return says


def test_the_shipped_capabilities_are_what_the_signatures_say():
    declared = {
        name: arch.language_model.capabilities.declared()
        for name, arch in REGISTRY.items()
        if arch.language_model is not None and arch.name in MODELS
    }
    assert declared == {
        "tree-transformer": (
            "masked_only",
            "structure_inputs",
            "head_mask",
            "output_hidden_states",
            "output_priors",
            "constituent_variant",
        ),
        "structformer": ("masked_only", "head_mask", "output_hidden_states"),
        "on-lstm": ("output_hidden_states",),
        "on-lstm-san": ("masked_only", "head_mask", "output_hidden_states"),
        "neural-pcfg": (),
        "compound-pcfg": (),
    }
    assert {f.name for f in fields(Capabilities)} == set(FORWARD_KEYWORDS) | set(CONFIG_CAPABILITIES)
    for name in declared:
        arch = REGISTRY[name]
        caps = arch.language_model.capabilities
        assert {f.name: getattr(caps, f.name) for f in fields(caps)} == _signature_says(
            arch.language_model.model_class, arch.config_class
        ), name


def test_capabilities_of_finds_the_registry_entry_then_a_wrappers_own():
    tree_transformer = REGISTRY["tree-transformer"].language_model.capabilities
    model = MODELS["tree-transformer"](make_config("tree-transformer", "tiny", 12))
    assert capabilities_of(model) == capabilities_of(TreeTransformerForMaskedLM) == tree_transformer

    class Subclass(TreeTransformerForMaskedLM):
        pass

    assert capabilities_of(Subclass) == tree_transformer  # the nearest registered base class
    gated = GatedMaskedLM(model, HeadGates(head_layout(model).kept()))
    assert capabilities_of(gated) == Capabilities(masked_only=True)  # the wrapper's own declaration
    assert capabilities_of(HeadMasked(model, torch.ones(3, 2))) == Capabilities(masked_only=True)

    class Unknown(nn.Module):
        capabilities = "masked_only"  # not a declaration

        def forward(self, input_ids, masked_only=False, masked_positions=None, structure_inputs=None):
            raise NotImplementedError

    assert capabilities_of(Unknown()) == Capabilities()


def test_induce_variant_follows_the_declared_config_capability():
    from syntaxformer.errors import InputError
    from syntaxformer.workflows.induce import resolve_recipe

    _, overrides, _ = resolve_recipe("tree-transformer", "default", variant="paper")
    assert overrides["constituent_variant"] == "paper"
    with pytest.raises(InputError) as error:
        resolve_recipe("structformer", "default", variant="paper")
    assert str(error.value) == "--variant: structformer has no constituent variant"
