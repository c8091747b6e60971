"""Every kernel of the ``kernel`` config field against the literal math it replaces: values and gradients.

:data:`KERNELS` has one entry per comparison: the model family, the ``kernel`` value the part belongs to,
the part compared, a function computing it either way (``literal=True``: the written equations with
autograd; ``False``: the kernel) and the tolerances. Where a family has a table of kernels
(``LINK_CHAIN_KERNELS``, ``PARSE_STAGE_KERNELS``, ``ATTENTION_KERNELS``, ``CELL_KERNELS``), the entry
compares the table's entries themselves; a whole model is compared at ``kernel=...`` against
``kernel="reference"``. Inputs have padding, one-word and two-word sentences and rows of padding only
where the kernels take them; float64 ``gradcheck`` of the hand-written backwards in :data:`GRADCHECKS`.

The Triton entries run where :func:`~syntaxformer.kernels.triton_runs_on` the device: on a GPU, CUDA
tensors; without one, Triton's interpreter on CPU tensors (tests/conftest.py sets ``TRITON_INTERPRET=1``
before Triton's first import). What is not a comparison with the literal math (routing, dropout masks,
the config field) is in ``test_triton_paths.py`` and ``test_kernel_setting.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from helpers import dependency_attention, dependency_attention_inputs, tiny_tree_transformer

from syntaxformer.blocks.on_lstm import CELL_KERNELS, on_lstm_loop
from syntaxformer.kernels import triton_runs_on
from syntaxformer.kernels.constituent import (
    BilinearNeighbourScores,
    fused_link_chain,
    log_constituent_prior_vjp,
    neighbour_score_form,
    neighbour_scores_bilinear,
)
from syntaxformer.models import MODELS, make_config
from syntaxformer.models.structformer import ATTENTION_KERNELS
from syntaxformer.models.structformer import KERNELS as STRUCTFORMER_KERNELS
from syntaxformer.models.structformer_parse import PARSE_STAGE_KERNELS
from syntaxformer.models.tree_transformer import TreeTransformerConfig
from syntaxformer.priors.attention import eager_attention, sdpa_attention, triton_laplace_attention
from syntaxformer.priors.constituent import (
    LINK_CHAIN_KERNELS,
    OFFICIAL_EPS,
    ConstituentAttention,
    ConstituentPrior,
    cumulative_log_links,
    hierarchical_constraint,
    link_probability,
    log_constituent_prior,
    neighbour_log_probabilities,
    neighbour_scores,
    official_log_diagonal,
)

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
#: padding, a one-word sentence, full rows (the constituent prior's inputs)
LENGTHS = [9, 6, 1, 9, 4]
#: a tolerance: ``(atol, rtol)``; EXACT: bit for bit; SCALED: ``atol`` relative to the largest entry
EXACT = (0.0, 0.0)


def _scaled(atol: float, rtol: float):
    """Float32 rounding of sums over a batch and time: ``atol`` relative to the literal gradient's largest
    entry (a bias's gradient sums B·N terms of up to ~40 in the ON-LSTM models, so 1e-5 of it is ~4e-4)."""
    return lambda ref: (atol * max(1.0, ref.abs().max().item()), rtol)


@dataclass(frozen=True)
class KernelCase:
    """One comparison of :data:`KERNELS`.

    Attributes:
        family: the models' family ("constituent", "dependency", "on-lstm").
        kernel: the ``kernel`` value the part belongs to.
        part: what is compared (with its setting).
        compute: ``compute(literal: bool) -> (values, gradients)``, tuples of tensors (a gradient may
            be None: an input a path does not use), the same inputs either way.
        values, grads: tolerances (``(atol, rtol)``, :data:`EXACT`, a function of the literal tensor
            giving them, or a tuple of those, one per tensor).
        triton: needs Triton (skipped where it cannot run).
        calls: ``(module, autograd Function, applies)`` the kernel run must make (the kernels are used).
    """

    family: str
    kernel: str
    part: str
    compute: Callable[[bool], tuple[tuple, tuple]]
    values: object = (1e-5, 1e-5)
    grads: object = (1e-5, 1e-4)
    triton: bool = False
    calls: tuple = ()

    @property
    def id(self) -> str:
        return f"{self.family}-{self.kernel}-{self.part}"


def _mask(lengths, n):
    return (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]).to(DEVICE)


def _weighted_grads(outputs, inputs, seed=1):
    """The gradients of a seeded random weighting of ``outputs`` (the same weights either way)."""
    g = torch.Generator().manual_seed(seed)
    loss = sum((o * torch.randn(o.shape, generator=g, dtype=o.dtype).to(o.device)).sum() for o in outputs)
    return torch.autograd.grad(loss, inputs, allow_unused=True)


# ----------------------------------------------------------------------------------------------
# The constituent prior (Tree Transformer): LINK_CHAIN_KERNELS, the rows' closed-form gradient,
# eq. 5's bilinear form, the prior's attention, whole models
# ----------------------------------------------------------------------------------------------


def _fused_chain_from_scores(variant, with_prior, literal):
    """Eqs. 6-8 and P from given neighbour scores (large ones: std 2): the written equations against
    :func:`~syntaxformer.kernels.constituent.fused_link_chain`, whose forward is theirs bit for bit."""
    torch.manual_seed(0)
    n = 9
    gap_mask = _mask(LENGTHS, n).cpu()[:, :-1] & _mask(LENGTHS, n).cpu()[:, 1:]
    s_right, s_left = (torch.randn(len(LENGTHS), n - 1) * 2 for _ in range(2))
    prior = torch.rand(len(LENGTHS), n - 1) if with_prior else None
    inputs = [s_right.requires_grad_(), s_left.requires_grad_()] + ([prior.requires_grad_()] if with_prior else [])
    if literal:
        log_p_right, log_p_left = neighbour_log_probabilities(s_right, s_left, gap_mask)
        a = hierarchical_constraint(prior, link_probability(log_p_right, log_p_left, gap_mask, variant))
        cum = cumulative_log_links(a, gap_mask, variant)
    else:
        a, cum = fused_link_chain(s_right, s_left, gap_mask, prior, variant, eps=OFFICIAL_EPS)
    return (a, cum), _weighted_grads((a, cum), inputs)


def _link_chain(kernel, variant, with_prior, d, literal):
    """Eqs. 5-8 and P of ``LINK_CHAIN_KERNELS[kernel]`` from a layer input ``h`` (B·N = 45: eq. 5 as the
    bilinear form at d = 8, by the two projections at d = 80, two chunks of the Triton kernel's hidden
    size): values and the gradients of h, both projections' weights and biases and the prior."""
    g = torch.Generator().manual_seed(0)
    gap = _mask(LENGTHS, 9)[:, :-1] & _mask(LENGTHS, 9)[:, 1:]
    torch.manual_seed(0)
    query, key = torch.nn.Linear(d, d).to(DEVICE), torch.nn.Linear(d, d).to(DEVICE)
    hidden = torch.randn(5, 9, d, generator=g).to(DEVICE).requires_grad_()
    prior = torch.rand(5, 8, generator=g).to(DEVICE).requires_grad_() if with_prior else None
    inputs = [hidden, query.weight, query.bias, key.weight, key.bias] + ([prior] if with_prior else [])
    chain = LINK_CHAIN_KERNELS["reference" if literal else kernel]
    a, cum = chain(hidden, query, key, d / 2, gap, prior, variant)
    return (a, cum), _weighted_grads((a, cum), inputs)


def _log_rows_gradient(variant, diagonal, rows, literal):
    """The gradient of rows of ``log C`` with respect to ``P``: autograd, or the closed form the blockwise
    attention uses (``kernel="fused"`` and "triton")."""
    torch.manual_seed(1)
    cum = torch.cumsum(-torch.rand(3, 7) * 3, -1).requires_grad_()
    log_c = log_constituent_prior(cum, variant, diagonal, rows)
    grad_rows = torch.randn_like(log_c)
    if literal:
        return (), torch.autograd.grad(log_c, cum, grad_rows)
    return (), (log_constituent_prior_vjp(cum.detach(), grad_rows, variant, diagonal, rows),)


def _bilinear_scores(variant, literal):
    """Eq. 5 as one bilinear form of the normalised layer input (the size rule of both the reference and
    the fused link chain: B·N > d) against the two projections, float64, biases nonzero: the scores and
    the gradients of the module's parameters."""
    torch.manual_seed(6)
    module = ConstituentAttention(16, variant).double()
    for p in (module.query.bias, module.key.bias):
        torch.nn.init.normal_(p)
    h = torch.randn(3, 7, 16, dtype=torch.float64)
    hn = module.norm(h)
    if literal:
        scores = neighbour_scores(module.query(hn), module.key(hn), module.scale)
    else:
        scores = neighbour_scores_bilinear(hn, *neighbour_score_form(module.query, module.key, module.scale))
    return scores, _weighted_grads(scores, list(module.parameters()))


def _fused_layer(variant, literal):
    """A whole layer's prior (module, ``kernel="fused"`` against "reference") and the sdpa attention it
    feeds (the blockwise kernel, with or without the rows' closed-form gradient)."""
    torch.manual_seed(2)
    d, heads, n = 16, 2, 9
    key_mask = _mask(LENGTHS, n).cpu()
    leaves = [torch.randn(len(LENGTHS), n, d)] + [torch.randn(len(LENGTHS), heads, n, d // heads) for _ in range(3)]
    leaves = [x.requires_grad_() for x in leaves]
    torch.manual_seed(3)
    module = ConstituentAttention(d, variant, layer_index=1, kernel="reference" if literal else "fused")
    prior, a = module.prior_state(leaves[0], key_mask, None)
    assert (prior.log_rows_vjp is None) == literal
    out, _ = sdpa_attention(*leaves[1:], key_mask, prior)
    params = [module.query.weight, module.key.weight, module.norm.weight]
    loss = (out * key_mask[:, None, :, None]).square().sum() + a.sum()
    return (out, a), torch.autograd.grad(loss, leaves + params)


def _triton_attention(variant, diagonal, n, literal):
    """The prior's attention: the eager (literal) attention against the Triton kernel
    (:func:`~syntaxformer.priors.attention.triton_laplace_attention`); n = 70: keys padded to 128 lanes,
    queries in three tiles of 32. Outputs of padding queries (finite garbage either way) are not compared."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g).to(DEVICE).requires_grad_() for _ in range(3))
    cum = torch.cumsum(-0.5 * torch.rand(2, n, generator=g), -1).to(DEVICE).requires_grad_()
    key_mask = _mask([n, n - 4], n)
    log_diagonal = official_log_diagonal(diagonal) if diagonal is not None else None
    prior = ConstituentPrior(cum, variant, log_diagonal, "reference" if literal else "triton")
    if literal:
        out, _ = eager_attention(q, k, v, key_mask, prior)
    else:
        out = triton_laplace_attention(q, k, v, key_mask, prior)
    grads = _weighted_grads((out,), [q, k, v, cum])
    return (out * key_mask[:, None, :, None],), grads


def _model_loss_and_grads(model, ids, mask, labels, seed=0):
    torch.manual_seed(seed)
    loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    return (loss,), torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)


def _tree_transformer(kernel, literal):
    """A two-layer Tree Transformer (sdpa attention, no dropout) at ``kernel`` against "reference"."""
    torch.manual_seed(0)
    model = tiny_tree_transformer(
        kernel="reference" if literal else kernel,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation="sdpa",
    ).to(DEVICE)
    torch.manual_seed(0)
    ids = torch.randint(5, 50, (4, 8)).to(DEVICE)
    labels = torch.full_like(ids, -100)
    labels[:, 1] = ids[:, 1]
    return _model_loss_and_grads(model, ids, _mask([8, 5, 3, 8], 8), labels)


# ----------------------------------------------------------------------------------------------
# StructFormer: PARSE_STAGE_KERNELS, ATTENTION_KERNELS, the model
# ----------------------------------------------------------------------------------------------


def _parse_stage(inputs, literal):
    """Calibrated distances, ``p_D`` and the root mass of ``PARSE_STAGE_KERNELS``: the values and the
    gradients of the distances, heights and both temperatures (as log-parameters)."""
    distances, heights, lengths = inputs()
    n = heights.shape[1]
    mask = (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]).to(DEVICE)
    distances, heights = distances.to(DEVICE).requires_grad_(), heights.to(DEVICE).requires_grad_()
    log_scales = torch.tensor((0.3, -0.2), device=DEVICE, requires_grad=True)
    s_d, s_h = log_scales.exp()
    outputs = PARSE_STAGE_KERNELS["reference" if literal else "triton"](distances, heights, mask, s_d, s_h)
    return outputs, _weighted_grads(outputs, [distances, heights, log_scales])


def _random_batch():
    """Padding, a two-word and a one-word sentence, and a row of padding only (a fixed-shape batch's filler)."""
    g = torch.Generator().manual_seed(0)
    return 2 * torch.randn(5, 10, generator=g), 2 * torch.randn(5, 11, generator=g), [11, 7, 2, 1, 0]


def _positive_margin():
    """Gaps far above every height: single words are constituents without a parent, so the calibration
    margin is positive (its gradient routed to the boundary and the tallest word; test_triton_paths.py)."""
    g = torch.Generator().manual_seed(2)
    return 3 + torch.rand(3, 8, generator=g), 0.5 * torch.randn(3, 9, generator=g), [9, 6, 9]


def _clamped_parent_logits():
    """One sentence's height logits spread over more than 700 nats: e_j clamped at +-350 (no gradient there)."""
    heights = torch.tensor([[0.0, 800.0, -5.0, 3.0, 1.0, 900.0]])
    return torch.tensor([[0.5, -1.0, 2.0, 0.3, -0.7]]), heights, [6]


def _dependency_attention(setting, literal):
    lengths, shape, relations, weight_act = setting
    inputs, mask = dependency_attention_inputs(lengths, DEVICE, **shape, relations=len(relations))
    out = dependency_attention("reference" if literal else "triton", inputs, mask, relations, weight_act)
    return (out,), _weighted_grads((out,), inputs)


def _structformer(literal):
    """A tiny StructFormer in training mode (no hidden dropout) at ``kernel="triton"`` against "reference"."""
    torch.manual_seed(0)
    config = make_config(
        "structformer", "tiny", 40, kernel="reference" if literal else "triton", hidden_dropout_prob=0.0
    )
    model = MODELS["structformer"](config).to(DEVICE).train()
    ids = torch.randint(4, 40, (3, 9)).to(DEVICE)
    mask = _mask([9, 6, 3], 9).long()
    labels = ids.masked_fill(torch.rand(3, 9, generator=torch.Generator().manual_seed(3)).to(DEVICE) > 0.3, -100)
    return _model_loss_and_grads(model, ids, mask, labels)


# ----------------------------------------------------------------------------------------------
# The ON-LSTM cell: CELL_KERNELS, the models
# ----------------------------------------------------------------------------------------------


def _cell_loop(padded, weight_grad_once, literal):
    """``CELL_KERNELS``' loops over time, with and without padding, the recurrent weight's gradient per
    step or once: outputs, master gates, final state and the gradients of every input."""
    g = torch.Generator().manual_seed(0)
    batch, steps, width, chunk = 3, 6, 20, 4
    n_chunk = width // chunk
    gates_x = torch.randn(batch, steps, 2 * n_chunk + 4 * width, generator=g).to(DEVICE).requires_grad_()
    w_hh_t = (0.3 * torch.randn(width, 2 * n_chunk + 4 * width, generator=g)).to(DEVICE).requires_grad_()
    h0, c0 = (torch.randn(batch, width, generator=g).to(DEVICE).requires_grad_() for _ in range(2))
    mask = _mask([6, 4, 1], steps) if padded else None
    loop = CELL_KERNELS["reference" if literal else "triton"]
    outputs = loop(gates_x, w_hh_t, h0, c0, mask, 0 if padded else steps, n_chunk, chunk, weight_grad_once)
    return outputs, _weighted_grads(outputs, [gates_x, w_hh_t, h0, c0])


def _on_lstm_model(model_name, literal):
    """A tiny ON-LSTM (or the ON-LSTM + self-attention hybrid) in training mode, its dropouts on (they draw
    the same masks: the cell draws no random numbers), at ``kernel="triton"`` against "reference"."""
    torch.manual_seed(0)
    config = make_config(model_name, "tiny", 40, kernel="reference" if literal else "triton")
    model = MODELS[model_name](config).to(DEVICE).train()
    ids = torch.randint(4, 40, (3, 7)).to(DEVICE)
    return _model_loss_and_grads(model, ids, _mask([7, 5, 2], 7).long(), ids, seed=1)


_TRITON_PRIOR = "syntaxformer.kernels.triton_prior"
_ON_LSTM_LAYERS = make_config("on-lstm", "tiny", 40).num_layers
_HYBRID_LAYERS = make_config("on-lstm-san", "tiny", 40).num_on_lstm_layers

#: every kernel against the literal math (module docstring)
KERNELS = [
    *(
        KernelCase("constituent", "fused", f"chain from scores {variant} prior={with_prior}",
                   functools.partial(_fused_chain_from_scores, variant, with_prior), values=EXACT,
                   grads=(1e-5, 1e-5))
        for variant in ("paper", "official")
        for with_prior in (False, True)
    ),
    *(
        KernelCase("constituent", kernel, f"link chain {variant} prior={with_prior} d={d}",
                   functools.partial(_link_chain, kernel, variant, with_prior, d),
                   values=EXACT if kernel == "fused" else (1e-5, 1e-4), triton=kernel == "triton",
                   calls=((_TRITON_PRIOR, "TritonPriorChain", 1),) if kernel == "triton" else ())
        for kernel in ("fused", "triton")
        for variant in ("paper", "official")
        for with_prior in (False, True)
        for d in (8, 80)
    ),
    *(
        KernelCase("constituent", "fused", f"log C rows' gradient {variant} rows={rows}",
                   functools.partial(_log_rows_gradient, variant, diagonal, rows), grads=(1e-5, 1e-5))
        for variant, diagonal in (("paper", None), ("official", official_log_diagonal(2)))
        for rows in (None, (2, 5))
    ),
    *(
        KernelCase("constituent", "reference", f"eq. 5 bilinear form {variant}",
                   functools.partial(_bilinear_scores, variant), values=(1e-10, 0.0), grads=(1e-10, 0.0))
        for variant in ("paper", "official")
    ),
    *(
        KernelCase("constituent", "fused", f"layer prior and attention {variant}",
                   functools.partial(_fused_layer, variant), values=(1e-5, 1e-4))
        for variant in ("paper", "official")
    ),
    *(
        KernelCase("constituent", "triton", f"attention {variant} n={n}",
                   functools.partial(_triton_attention, variant, diagonal, n), triton=True,
                   calls=((_TRITON_PRIOR, "LaplacePriorAttention", 1),))
        for variant, diagonal, n in (("paper", None, 11), ("official", 2, 11), ("paper", None, 70))
    ),
    KernelCase("constituent", "fused", "model", functools.partial(_tree_transformer, "fused")),
    KernelCase("constituent", "triton", "model", functools.partial(_tree_transformer, "triton"), triton=True,
               calls=((_TRITON_PRIOR, "TritonPriorChain", 2), (_TRITON_PRIOR, "LaplacePriorAttention", 2))),
    *(
        KernelCase("dependency", "triton", f"parse stage {inputs.__name__.strip('_')}",
                   functools.partial(_parse_stage, inputs), values=(EXACT, (1e-12, 0.0), (1e-12, 0.0)),
                   grads=(1e-5, 1e-5), triton=True,
                   calls=(("syntaxformer.kernels.triton_dependency", "TritonDependencyDistribution", 1),))
        for inputs in (_random_batch, _positive_margin, _clamped_parent_logits)
    ),
    *(
        KernelCase("dependency", "triton", f"attention {'+'.join(setting[2])} {setting[3]}",
                   functools.partial(_dependency_attention, setting), values=(1e-6, 1e-5), grads=(1e-5, 1e-5),
                   triton=True,
                   calls=(("syntaxformer.kernels.triton_dependency_attention", "TritonDependencyAttention", 1),))
        for setting in (
            ([7, 4, 0], {}, ("head", "child"), "softmax"),  # padding and a row of padding only
            ([5, 3], dict(heads=3, n=5, d=8, seed=2), ("child",), "sigmoid"),
            ([5, 3], dict(heads=3, n=5, d=8, seed=2), ("child", "head"), "softmax"),
        )
    ),
    KernelCase("dependency", "triton", "model", _structformer, values=(1e-6, 1e-6), grads=(1e-6, 1e-4),
               triton=True,
               calls=(("syntaxformer.kernels.triton_dependency", "TritonDependencyDistribution", 1),
                      ("syntaxformer.kernels.triton_dependency_attention", "TritonDependencyAttention", 2))),
    *(
        KernelCase("on-lstm", "triton", f"cell loop padded={padded} weight_grad_once={once}",
                   functools.partial(_cell_loop, padded, once), values=(2e-6, 1e-5), grads=(2e-6, 1e-5),
                   triton=True, calls=(("syntaxformer.kernels.triton_on_lstm", "TritonOnLstmRecurrence", 1),))
        for padded in (False, True)
        for once in (False, True)
    ),
    *(
        KernelCase("on-lstm", "triton", f"model {name}", functools.partial(_on_lstm_model, name),
                   grads=_scaled(1e-5, 1e-4), triton=True,
                   calls=(("syntaxformer.kernels.triton_on_lstm", "TritonOnLstmRecurrence", layers),))
        for name, layers in (("on-lstm", _ON_LSTM_LAYERS), ("on-lstm-san", _HYBRID_LAYERS))
    ),
]  # fmt: skip


def _tolerance(spec, index: int, ref: torch.Tensor):
    if isinstance(spec, tuple) and spec and not isinstance(spec[0], float):
        spec = spec[index]
    return spec(ref) if callable(spec) else spec


def _assert_close(got, ref, spec, index: int, what: str) -> None:
    atol, rtol = _tolerance(spec, index, ref)
    torch.testing.assert_close(got, ref, atol=atol, rtol=rtol, msg=lambda m: f"{what} {index}: {m}")


def _count_applies(monkeypatch, calls) -> list[str]:
    """Count the kernel run's applies of each autograd Function of ``calls`` (module, class, _)."""
    import importlib

    seen: list[str] = []
    for module_name, name, _ in calls:
        function = getattr(importlib.import_module(module_name), name)

        def counted(*args, _apply=function.apply, _name=name):
            seen.append(_name)
            return _apply(*args)

        monkeypatch.setattr(function, "apply", counted)
    return seen


@pytest.mark.parametrize("case", KERNELS, ids=lambda case: case.id)
def test_the_kernel_equals_the_literal_math(case, monkeypatch):
    if case.triton and not triton_runs_on(DEVICE):
        pytest.skip("needs Triton: CUDA, or the interpreter (pip install triton; TRITON_INTERPRET=1)")
    ref_values, ref_grads = case.compute(True)
    seen = _count_applies(monkeypatch, case.calls)
    values, grads = case.compute(False)
    for _, name, count in case.calls:
        assert seen.count(name) == count, (name, seen)  # the kernels computed it
    assert len(values) == len(ref_values) and len(grads) == len(ref_grads)
    for i, (got, ref) in enumerate(zip(values, ref_values, strict=True)):
        _assert_close(got, ref, case.values, i, "value")
    for i, (got, ref) in enumerate(zip(grads, ref_grads, strict=True)):
        assert (got is None) == (ref is None), f"gradient {i}: used by one path only"
        if ref is not None:
            _assert_close(got, ref, case.grads, i, "gradient")
    assert any(g is not None and g.abs().sum() > 0 for g in ref_grads)  # the gradients are not all 0


def test_each_family_table_has_the_kernels_its_configs_take():
    """A model's ``kernel`` values are the keys of its families' tables (a value the table lacks would
    fail at construction, not in the config)."""
    assert tuple(LINK_CHAIN_KERNELS) == ("reference", "fused", "triton")
    assert tuple(PARSE_STAGE_KERNELS) == tuple(ATTENTION_KERNELS) == STRUCTFORMER_KERNELS == ("reference", "triton")
    assert tuple(CELL_KERNELS) == ("reference", "triton") and CELL_KERNELS["reference"] is on_lstm_loop
    for kernel in LINK_CHAIN_KERNELS:
        assert TreeTransformerConfig(kernel=kernel).kernel == kernel


#: hand-written backwards against finite differences, float64: (name, function, inputs)
GRADCHECKS = [
    (
        "BilinearNeighbourScores",
        BilinearNeighbourScores.apply,
        lambda g: (
            torch.randn(2, 5, 4, dtype=torch.float64, generator=g),
            torch.randn(2, 5, 4, dtype=torch.float64, generator=g),
            torch.randn(4, 2, dtype=torch.float64, generator=g),
            torch.tensor(0.3, dtype=torch.float64),
        ),
    ),
]


@pytest.mark.parametrize(("name", "function", "inputs"), GRADCHECKS, ids=[c[0] for c in GRADCHECKS])
def test_a_hand_written_backward_passes_gradcheck(name, function, inputs):
    args = [a.requires_grad_() for a in inputs(torch.Generator().manual_seed(6))]
    assert torch.autograd.gradcheck(function, args)
