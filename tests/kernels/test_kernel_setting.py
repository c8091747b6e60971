"""The ``kernel`` config field (:mod:`syntaxformer.models.kernel_choice`): the values each model takes,
the old per-family fields still taken and mapped (saved configs, ``--set`` spellings), a saved config
writing ``kernel`` only, and each module resolving the field once into the function its forward calls."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig

import syntaxformer
from syntaxformer.blocks.on_lstm import CELL_KERNELS, OnLstmLayer
from syntaxformer.errors import InputError
from syntaxformer.models import MODELS, make_config, make_encoder_config
from syntaxformer.models.kernel_choice import OLD_KERNEL_FIELDS, accepted_fields, resolve_kernel
from syntaxformer.models.structformer import ATTENTION_KERNELS
from syntaxformer.models.structformer_parse import PARSE_STAGE_KERNELS
from syntaxformer.priors.attention import triton_laplace_attention
from syntaxformer.priors.constituent import (
    LINK_CHAIN_KERNELS,
    ConstituentAttention,
    ConstituentPrior,
    official_log_diagonal,
)
from syntaxformer.training.model_config import resolve_model_config

#: model -> (its old field, the kernels it takes)
MODEL_KERNELS = {
    "tree-transformer": ("constituent_fused", ("reference", "fused", "triton")),
    "structformer": ("dependency_kernel", ("reference", "triton")),
    "on-lstm": ("cell_kernel", ("reference", "triton")),
    "on-lstm-san": ("cell_kernel", ("reference", "triton")),
}


@pytest.mark.parametrize("model", sorted(MODEL_KERNELS))
def test_each_model_takes_its_kernels_and_refuses_the_others(model):
    old_field, kernels = MODEL_KERNELS[model]
    assert make_config(model, "tiny", 40).kernel == "reference"
    for kernel in kernels:
        config = make_config(model, "tiny", 40, kernel=kernel)
        assert config.kernel == kernel and old_field not in config.to_dict()
    if "fused" not in kernels:  # no fused form: refused, naming the values taken
        with pytest.raises(ValueError, match=r"no 'fused' kernel; expected one of \('reference', 'triton'\)"):
            make_config(model, "tiny", 40, kernel="fused")
    with pytest.raises(ValueError, match="unknown kernel 'cuda'"):
        make_config(model, "tiny", 40, kernel="cuda")


@pytest.mark.parametrize("model", sorted(MODEL_KERNELS))
def test_old_fields_still_load_and_map(model, tmp_path):
    """The old field of each model, as a keyword and in a saved ``config.json``: mapped to ``kernel``,
    not kept; a conflict with ``kernel`` and a value the old field never took are refused."""
    old_field, kernels = MODEL_KERNELS[model]
    for old_value, kernel in OLD_KERNEL_FIELDS[old_field].items():
        config = make_config(model, "tiny", 40, **{old_field: old_value})
        assert config.kernel == kernel and not hasattr(config, old_field)
        assert make_config(model, "tiny", 40, kernel=kernel, **{old_field: old_value}).kernel == kernel  # agree
        config.save_pretrained(tmp_path)
        saved = json.loads((tmp_path / "config.json").read_text())
        assert saved["kernel"] == kernel and old_field not in saved  # a saved config writes kernel only
        saved.pop("kernel")
        saved[old_field] = old_value  # a config saved before the field
        (tmp_path / "config.json").write_text(json.dumps(saved))
        assert AutoConfig.from_pretrained(tmp_path).kernel == kernel
    old_value = next(v for v, k in OLD_KERNEL_FIELDS[old_field].items() if k == "triton")
    with pytest.raises(ValueError, match=f"kernel='reference' and {old_field} \\(kernel='triton'\\) disagree"):
        make_config(model, "tiny", 40, kernel="reference", **{old_field: old_value})
    with pytest.raises(ValueError, match=f"unknown {old_field} 'cuda'"):
        make_config(model, "tiny", 40, **{old_field: "cuda"})


def test_the_shipped_configs_load_with_their_old_fields():
    for folder in sorted((Path(syntaxformer.__file__).parent / "pretrained").glob("*/config.json")):
        saved = json.loads(folder.read_text())
        if saved.get("model_type") in ("syntaxformer-translation", "compound-pcfg", "neural-pcfg"):
            continue  # a translation model, a grammar: no kernel field
        old = [field for field in OLD_KERNEL_FIELDS if field in saved]
        config = AutoConfig.from_pretrained(folder.parent)
        assert config.kernel == "reference", folder
        assert all(OLD_KERNEL_FIELDS[field][saved[field]] == "reference" for field in old)


def test_overrides_take_kernel_and_the_old_spellings():
    """``train --set`` / ``induce --set`` (and ``logic --set``): ``kernel=...`` and the model's old field."""
    assert resolve_model_config("tree-transformer", "tiny", 40, overrides={"kernel": "fused"}).kernel == "fused"
    assert (
        resolve_model_config("tree-transformer", "tiny", 40, overrides={"constituent_fused": "triton"}).kernel
        == "triton"
    )
    assert (
        resolve_model_config("structformer", "tiny", 40, overrides={"dependency_kernel": "triton"}).kernel == "triton"
    )
    with pytest.raises(InputError, match="no config field cell_kernel"):  # another model's old field
        resolve_model_config("tree-transformer", "tiny", 40, overrides={"cell_kernel": "triton"})
    with pytest.raises(InputError, match="the ON-LSTM has no 'fused' kernel"):
        resolve_model_config("on-lstm", "tiny", 40, overrides={"kernel": "fused"})
    encoder = make_encoder_config("on-lstm", "tiny", 40, 0, cell_kernel="triton")
    assert encoder.kernel == "triton" and "cell_kernel" in accepted_fields(encoder)
    assert accepted_fields(make_config("structformer", "tiny", 40)) >= {"kernel", "dependency_kernel"}


def test_resolve_kernel_takes_the_old_field_out_of_the_keywords():
    kwargs = {"cell_kernel": "triton", "other": 1}
    assert resolve_kernel(None, ("reference", "triton"), "cell_kernel", kwargs, "m") == "triton"
    assert kwargs == {"other": 1}
    assert resolve_kernel(None, ("reference",), "cell_kernel", {}, "m") == "reference"


def _loops(model) -> list:
    return [layer.loop for layer in model.modules() if isinstance(layer, OnLstmLayer)]


def test_each_module_resolves_the_kernel_once():
    for kernel, chain in LINK_CHAIN_KERNELS.items():
        assert ConstituentAttention(8, kernel=kernel).link_chain is chain
    with pytest.raises(ValueError, match="unknown kernel 'cuda'"):
        ConstituentAttention(8, kernel="cuda")
    for kernel in ("reference", "triton"):
        model = MODELS["structformer"](make_config("structformer", "tiny", 40, kernel=kernel))
        assert model.structformer.dependency_stage is PARSE_STAGE_KERNELS[kernel]
        assert all(layer.attention.attend is ATTENTION_KERNELS[kernel] for layer in model.structformer.encoder.layers)
        lstm = MODELS["on-lstm"](make_config("on-lstm", "tiny", 40, kernel=kernel))
        assert _loops(lstm) == [CELL_KERNELS[kernel]] * lstm.config.num_layers
        hybrid = MODELS["on-lstm-san"](make_config("on-lstm-san", "tiny", 40, kernel=kernel, prior="constituent"))
        assert _loops(hybrid) == [CELL_KERNELS[kernel]] * hybrid.config.num_on_lstm_layers
        priors = [m for m in hybrid.modules() if isinstance(m, ConstituentAttention)]  # the hybrid's prior too
        assert priors and all(prior.link_chain is LINK_CHAIN_KERNELS[kernel] for prior in priors)
    tree = MODELS["tree-transformer"](make_config("tree-transformer", "tiny", 40, kernel="fused"))
    assert all(
        m.link_chain is LINK_CHAIN_KERNELS["fused"] for m in tree.modules() if isinstance(m, ConstituentAttention)
    )


def test_the_constituent_prior_offers_what_its_kernel_uses():
    """ "reference": autograd through the rows of ``log C`` and the blockwise attention; "fused": the rows'
    closed-form gradient; "triton": that, the Laplace form ``(eps, diagonal)`` of ``C`` and the Triton
    attention as the prior's own."""
    cum = torch.zeros(1, 1)
    reference, fused = ConstituentPrior(cum), ConstituentPrior(cum, kernel="fused")
    assert reference.log_rows_vjp is None and reference.laplace_form is None and reference.attention is None
    assert fused.log_rows_vjp is not None and fused.laplace_form is None and fused.attention is None
    official = ConstituentPrior(cum, "official", official_log_diagonal(0), kernel="triton")
    assert official.attention is triton_laplace_attention and official.log_rows_vjp is not None
    assert official.laplace_form == (1e-9, math.exp(official_log_diagonal(0)))
    assert ConstituentPrior(cum, "paper", kernel="triton").laplace_form == (0.0, 1.0)
