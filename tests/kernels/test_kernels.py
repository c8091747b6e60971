"""The kernels stand apart from the reading path (ARCHITECTURE.md, ``kernels/``): no autograd Function is
defined in the models, priors or blocks, no module outside ``syntaxformer.kernels`` imports a private
name from it, the fused constituent kernel's forward is the literal chain's, bit for bit, and masks reach
the Triton kernels as int8 without a copy where they can."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import torch

import syntaxformer
from syntaxformer.kernels.constituent import fused_link_chain, log_constituent_prior_vjp
from syntaxformer.kernels.triton_args import int8_mask
from syntaxformer.priors.constituent import (
    OFFICIAL_EPS,
    cumulative_log_links,
    hierarchical_constraint,
    link_probability,
    neighbour_log_probabilities,
)

PACKAGE = Path(syntaxformer.__file__).parent


def _modules(*folders: str):
    for folder in folders:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def test_no_autograd_function_is_defined_on_the_reading_path():
    defined = [
        f"{path.relative_to(PACKAGE)}:{node.name}"
        for path, tree in _modules("models", "priors", "blocks")
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and any(ast.unparse(base).endswith("Function") for base in node.bases)
    ]
    assert defined == []


def test_no_module_outside_kernels_imports_a_private_kernel_name():
    private = []
    for path, tree in _modules("."):
        if path.is_relative_to(PACKAGE / "kernels"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and "kernels" in (node.module or ""):
                private += [f"{path.relative_to(PACKAGE)}:{a.name}" for a in node.names if a.name.startswith("_")]
    assert private == []


@pytest.mark.parametrize("variant", ["paper", "official"])
@pytest.mark.parametrize("with_prior", [False, True])
def test_the_fused_chain_forward_is_the_literal_chain_bit_for_bit(variant, with_prior):
    torch.manual_seed(3)
    lengths = torch.tensor([9, 6, 1, 9, 4])
    mask = torch.arange(9)[None, :] < lengths[:, None]
    gap_mask = mask[:, :-1] & mask[:, 1:]
    s_right, s_left = torch.randn(5, 8) * 2, torch.randn(5, 8) * 2
    prior = torch.rand(5, 8) if with_prior else None
    log_p_right, log_p_left = neighbour_log_probabilities(s_right, s_left, gap_mask)
    a = hierarchical_constraint(prior, link_probability(log_p_right, log_p_left, gap_mask, variant))
    fused_a, fused_cum = fused_link_chain(s_right, s_left, gap_mask, prior, variant, eps=OFFICIAL_EPS)
    assert torch.equal(fused_a, a)
    assert torch.equal(fused_cum, cumulative_log_links(a, gap_mask, variant))


def test_the_kernels_default_epsilon_is_the_official_variants():
    for fn in (fused_link_chain, log_constituent_prior_vjp):
        assert inspect.signature(fn).parameters["eps"].default == OFFICIAL_EPS


def test_a_contiguous_bool_mask_is_read_as_int8_in_place_and_others_are_converted():
    mask = torch.tensor([[True, False, True], [False, False, True]])
    viewed = int8_mask(mask)
    assert viewed.dtype == torch.int8 and viewed.data_ptr() == mask.data_ptr()  # the same bytes, no copy
    assert viewed.tolist() == [[1, 0, 1], [0, 0, 1]]
    for other in (mask.t(), mask.long() * 3):  # not contiguous; not bool (nonzero = True)
        converted = int8_mask(other)
        assert converted.dtype == torch.int8 and converted.is_contiguous()
        assert converted.data_ptr() != other.data_ptr() and converted.bool().tolist() == other.bool().tolist()
