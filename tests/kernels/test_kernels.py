"""The kernels stand apart from the reading path (ARCHITECTURE.md, ``kernels/``): no autograd Function is
defined in the models, priors or blocks, no module outside ``syntaxformer.kernels`` imports a private
name from it, the kernels' epsilon is the official variant's, the closed-form gradient of ``log C`` is
right by hand, and masks reach the Triton kernels as int8 without a copy where they can. Every kernel
against the literal math: ``test_kernel_table.py``."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import torch

import syntaxformer
from syntaxformer.kernels.constituent import fused_link_chain, log_constituent_prior_vjp
from syntaxformer.kernels.triton_args import int8_mask
from syntaxformer.priors.constituent import OFFICIAL_EPS

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


def test_vjp_by_hand():
    # P = (0, -1): x_01 = -1; paper log C_01 = P_1 - P_0 => d/dP_0 = -g_01, d/dP_1 = +g_01 (and g_10 alike)
    cum = torch.tensor([[0.0, -1.0]])
    grad_rows = torch.tensor([[[0.0, 2.0], [3.0, 0.0]]])
    got = log_constituent_prior_vjp(cum, grad_rows, "paper")
    torch.testing.assert_close(got, torch.tensor([[-5.0, 5.0]]))


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
