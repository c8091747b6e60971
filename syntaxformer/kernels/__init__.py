"""Kernels: the fast paths of the models' and priors' literal math, apart from the reading path.

Each model and prior reads top to bottom as its equations (:mod:`syntaxformer.priors`,
:mod:`syntaxformer.blocks`, :mod:`syntaxformer.models`); the same functions computed faster live here,
one module per family, each tested against the literal path (``tests/kernels/test_kernel_table.py``).
A model chooses among them with one config field, ``kernel`` (``"reference"``: the literal path,
``"fused"``: hand-written PyTorch kernels, ``"triton"``: Triton kernels;
:mod:`syntaxformer.models.kernel_choice`), resolved once, when a module is built, through a table per
family that lives beside the literal math (:data:`syntaxformer.priors.constituent.LINK_CHAIN_KERNELS`,
:data:`syntaxformer.blocks.on_lstm.CELL_KERNELS`,
:data:`syntaxformer.models.structformer_parse.PARSE_STAGE_KERNELS`,
:data:`syntaxformer.models.structformer.ATTENTION_KERNELS`): a Triton entry there checks
:func:`triton_runs_on` and what its kernels take, and otherwise computes as its fallback. Hugging Face's
``attn_implementation`` chooses the attention:

* :mod:`syntaxformer.kernels.attention` -- the ``"sdpa"`` attention (``attn_implementation``): PyTorch's
  fused attention without a multiplicative prior, the blockwise prior attention with a hand-written
  backward with one (literal reference: :func:`syntaxformer.priors.attention.eager_attention`);
* :mod:`syntaxformer.kernels.constituent` -- the constituent prior's neighbour scores as one bilinear
  form (for many tokens, in every setting), its link chain fused and the closed-form gradient of
  ``log C`` (``kernel="fused"``; literal: :mod:`syntaxformer.priors.constituent`);
* :mod:`syntaxformer.kernels.triton_prior` -- the constituent prior's link chain and the attention it
  multiplies as Triton kernels (``kernel="triton"``; CUDA, or Triton's interpreter), imported
  only where :func:`triton_runs_on` (literal: the same as the two above); likewise
  :mod:`syntaxformer.kernels.triton_on_lstm` (the ON-LSTM cell, ``kernel="triton"`` of the ON-LSTM and
  ON-LSTM-SAN; literal: :mod:`syntaxformer.blocks.on_lstm`) and
  :mod:`syntaxformer.kernels.triton_dependency` (StructFormer's calibrated distances and dependency
  distribution, ``kernel="triton"``; literal: :mod:`syntaxformer.models.structformer_parse`) and
  :mod:`syntaxformer.kernels.triton_dependency_attention` (the attention that distribution constrains,
  the same setting; literal: :mod:`syntaxformer.models.structformer`);
* :mod:`syntaxformer.kernels.on_lstm` -- the ON-LSTM's recurrent-weight gradient once after the loop
  (by the weight's size; literal: :func:`syntaxformer.blocks.on_lstm.on_lstm_loop` with ``torch.addmm``);
* :mod:`syntaxformer.kernels.dropout` -- the cheap CPU dropout mask generator (every dropout of the
  package that is not a recurrent model's own);
* :mod:`syntaxformer.kernels.denormals` -- flush-to-zero of the attention paths (DESIGN.md §5).
* :mod:`syntaxformer.kernels.triton_args` -- what the Triton kernels are given: masks as int8 (a view where it
  can), the precision of their products.

The layer sits below ``blocks``, ``priors`` and ``models`` and imports only ``runtime`` and torch
(ARCHITECTURE.md); kernels take tensors and functions, never a prior or a model.
"""

import importlib.util
import os

import torch

from .attention import (
    BLOCK_ELEMENTS,
    SAVE_ATTENTION_ELEMENTS,
    BlockwisePriorAttention,
    blockwise_prior_attention,
    padding_bias,
    query_blocks,
    sdpa_without_prior,
)
from .constituent import (
    BilinearNeighbourScores,
    FusedLinkChain,
    fused_link_chain,
    log_constituent_prior_vjp,
    neighbour_score_form,
    neighbour_scores_bilinear,
)
from .denormals import exp_flushed, flush_, flush_if_needed_, needs_explicit_flush
from .dropout import LANE_BITS, check_probability, drop_mask, drop_probability, keep_mask, keep_scale
from .on_lstm import WEIGHT_GRAD_ONCE_MIN, RecurrentMatmul, WeightGradientOnce, weight_gradient_once_product

#: Triton is installed (looked up once, at import: ``torch.compile`` does not trace ``find_spec``)
_TRITON_INSTALLED = importlib.util.find_spec("triton") is not None


def triton_runs_on(device: torch.device | str) -> bool:
    """Whether the Triton kernels (``triton_prior``, ``triton_on_lstm``, ``triton_dependency``,
    ``triton_dependency_attention``) run for tensors on ``device``: Triton is installed (CUDA builds of
    PyTorch install it) and ``device`` is CUDA, or a CPU under Triton's interpreter (the environment
    variable ``TRITON_INTERPRET=1``, set before the first import). Not under ``torch.compile``: the compiler makes its own kernels from the written
    operators (and PyTorch 2.11's does not trace these kernels' launches in an ``autograd.Function``)."""
    if not _TRITON_INSTALLED or torch.compiler.is_compiling():
        return False
    kind = torch.device(device).type
    return kind == "cuda" or (kind == "cpu" and os.environ.get("TRITON_INTERPRET") == "1")


__all__ = [
    "BLOCK_ELEMENTS",
    "LANE_BITS",
    "SAVE_ATTENTION_ELEMENTS",
    "WEIGHT_GRAD_ONCE_MIN",
    "BilinearNeighbourScores",
    "BlockwisePriorAttention",
    "FusedLinkChain",
    "RecurrentMatmul",
    "WeightGradientOnce",
    "blockwise_prior_attention",
    "check_probability",
    "drop_mask",
    "drop_probability",
    "exp_flushed",
    "flush_",
    "flush_if_needed_",
    "fused_link_chain",
    "keep_mask",
    "keep_scale",
    "log_constituent_prior_vjp",
    "needs_explicit_flush",
    "neighbour_score_form",
    "neighbour_scores_bilinear",
    "padding_bias",
    "query_blocks",
    "sdpa_without_prior",
    "triton_runs_on",
    "weight_gradient_once_product",
]
