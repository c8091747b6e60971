"""The attention kernels on a CUDA device: skipped where there is none (CI has none).

Run on a GPU machine with ``python -m pytest tests/kernels/test_cuda.py``. What they check: the sdpa kernel
(both of its modes) agrees with the eager reference on CUDA, values and gradients; its dropout masks
are redrawn identically from the CUDA generator in the backward; a bf16 mixed-precision training step
of the model runs and agrees with float32; a training step does not synchronise; whole-step graphs
(``step_graph`` cuda-graph, also under bf16 autocast and with the Triton kernels, and compile, in
float64) equal eager steps, and a replayed captured step does not synchronise; ``tf32`` is set only when asked.
"""

import pytest
import torch

from syntaxformer.kernels.attention import BlockwisePriorAttention, padding_bias, query_blocks
from syntaxformer.kernels.dropout import keep_mask
from syntaxformer.models import MODELS, make_config
from syntaxformer.priors.attention import eager_attention
from syntaxformer.priors.constituent import ConstituentPrior, official_log_diagonal

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none here)")
CUDA = torch.device("cuda")


def inputs(batch=2, heads=3, n=37, d_k=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, n, d_k, generator=g).to(CUDA) for _ in range(3))
    cum = torch.cumsum(-0.5 * torch.rand(batch, n, generator=g), -1).to(CUDA)
    key_mask = torch.ones(batch, n, dtype=torch.bool, device=CUDA)
    key_mask[1, n - 5 :] = False
    return q, k, v, cum, key_mask


@pytest.mark.parametrize("variant", ["paper", "official"])
@pytest.mark.parametrize("block_elements", [None, 1000])  # kept attention; 15 blocks of 2 rows
def test_sdpa_kernel_equals_eager_on_cuda(variant, block_elements):
    q, k, v, cum, key_mask = inputs()
    diag = official_log_diagonal(1) if variant == "official" else None
    results = []
    for fused in (False, True):
        leaves = [t.clone().requires_grad_() for t in (q, k, v, cum)]
        if fused:
            out = BlockwisePriorAttention.apply(
                *leaves,
                padding_bias(key_mask, torch.float32),
                0.0,
                True,
                ConstituentPrior(leaves[3], variant, diag).log_rows,
                block_elements,
            )
        else:
            out, _ = eager_attention(*leaves[:3], key_mask, ConstituentPrior(leaves[3], variant, diag))
        (out * torch.linspace(-1, 1, 16, device=CUDA)).sum().backward()
        results.append([out] + [t.grad for t in leaves])
    for a, b in zip(*results):
        assert torch.allclose(a, b, atol=1e-4), (a - b).abs().max()


def test_dropout_masks_redrawn_from_the_cuda_generator():
    q, k, v, cum, key_mask = inputs()
    p, block_elements = 0.3, 1000
    blocks = query_blocks(2, 3, 37, 37, block_elements)
    leaves = [t.clone().requires_grad_() for t in (q, k, v, cum)]
    torch.manual_seed(5)
    out = BlockwisePriorAttention.apply(
        *leaves, padding_bias(key_mask, torch.float32), p, True, ConstituentPrior(leaves[3]).log_rows, block_elements
    )
    state = torch.cuda.get_rng_state()
    out.pow(2).sum().backward()
    assert torch.equal(torch.cuda.get_rng_state(), state)
    torch.manual_seed(5)
    mask = torch.cat([keep_mask((2, 3, b - a, 37), p, CUDA) for a, b in blocks], 2)
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v, cum)]
    _, attn = eager_attention(*ref_leaves[:3], key_mask, ConstituentPrior(ref_leaves[3]), output_attentions=True)
    ((attn * mask / (1 - p)) @ ref_leaves[2]).pow(2).sum().backward()
    for a, b in zip(leaves, ref_leaves):
        assert torch.allclose(a.grad, b.grad, atol=1e-4)


#: bf16 against float32 gradients, per parameter: ``||g_bf16 - g_fp32||_2 <= BF16_RTOL * ||g_fp32||_2``. bf16 keeps
#: 8 bits of mantissa (relative rounding 2^-8 = 0.4 %); this step under CPU autocast differs by at most 1.4 %.
BF16_RTOL = 0.05
#: The key biases' gradient is zero in exact arithmetic (softmax ignores a constant per query, q·b_k);
#: float32 and bf16 leave rounding noise only, bounded in norm by this.
ZERO_GRADIENT_ATOL = 1e-4


def bf16_against_float32(device: torch.device) -> None:
    """One masked-LM forward and backward of a tiny Tree Transformer in float32 and under bf16
    autocast on ``device`` (``"cuda"``; the same check runs on ``"cpu"`` for a CPU autocast): the
    losses within 0.05 nats, every gradient within :data:`BF16_RTOL` of float32's (the key biases,
    whose gradient is zero, within :data:`ZERO_GRADIENT_ATOL`)."""
    torch.manual_seed(0)
    model = MODELS["tree-transformer"](make_config("tree-transformer", "tiny", 50)).to(device).eval()
    ids = torch.randint(5, 50, (4, 33), device=device)
    losses, grads = {}, {}
    for dtype in (torch.float32, torch.bfloat16):
        model.zero_grad()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            losses[dtype] = model(ids, labels=ids).loss
        losses[dtype].backward()
        grads[dtype] = {name: p.grad.float().clone() for name, p in model.named_parameters() if p.grad is not None}
    assert abs(losses[torch.float32].item() - losses[torch.bfloat16].item()) < 0.05
    exact, low = grads[torch.float32], grads[torch.bfloat16]
    assert exact.keys() == low.keys() and len(exact) == len(list(model.parameters()))
    total = torch.sqrt(sum(g.pow(2).sum() for g in exact.values()))
    zero = {name for name, g in exact.items() if g.norm() <= 1e-6 * total}
    assert zero == {name for name in exact if name.endswith("key.bias")}  # the attention and constituent keys
    for name, g in exact.items():
        error = (low[name] - g).norm()
        if name in zero:
            assert error <= ZERO_GRADIENT_ATOL, (name, float(error))
        else:
            assert error <= BF16_RTOL * g.norm(), (name, float(error / g.norm()))


def test_bf16_training_step_close_to_float32():
    bf16_against_float32(CUDA)


@pytest.mark.parametrize("model", ["tree-transformer", "structformer", "on-lstm"])
def test_a_training_step_does_not_synchronise_on_cuda(tmp_path, model):
    """The step's device work (``TrainingLoop.device_step``) under CUDA's sync debug mode "error": no
    operation waits for the device (the loss is read at log intervals only)."""
    from syntaxformer.tasks.language_model import Trainer
    from syntaxformer.training.arguments import TrainArguments

    args = TrainArguments(
        out=str(tmp_path), model=model, preset="tiny", max_steps=3, batch_size=8, device="cuda", quiet=True
    )
    trainer = Trainer(args)
    trainer.build()
    batches = trainer.sampler.batches(0)
    trainer.device_step(trainer.make_batch(batches[0]).to(CUDA))  # first step: lazy initialisation
    batch = trainer.make_batch(batches[1]).to(CUDA)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss, _ = trainer.device_step(batch)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(loss)


def _graph_trainer(tmp_path, name: str, config: dict | None = None, **options):
    """A tiny Tree Transformer's trainer on CUDA with fixed batch shapes and no dropout (so a graphed step
    can equal an eager one; ``config`` fields override, ``options`` the training arguments: ``model``,
    ``pad_to_multiple``...), built (its step runner chosen as the loop's ``_begin`` does)."""
    from syntaxformer.tasks.language_model import Trainer
    from syntaxformer.training.arguments import TrainArguments
    from syntaxformer.training.step import make_step_runner

    arguments = dict(
        out=str(tmp_path / name),
        preset="tiny",
        max_steps=5,
        batch_size=8,
        fixed_shapes=True,
        pad_to_multiple=128,  # every batch one shape: (8, 128) (max_length 128)
        device="cuda",
        quiet=True,
        overrides={"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, **(config or {})},
    )
    args = TrainArguments(**{**arguments, **options})
    trainer = Trainer(args)
    trainer.build()
    trainer.step_runner = make_step_runner(trainer, args.step_graph)
    return trainer


def _graph_steps(trainer, steps: int, sync_check_from: int | None = None) -> list[torch.Tensor]:
    """``steps`` device steps on the first batches (pinned, moved without waiting); from step
    ``sync_check_from`` on under CUDA's sync debug mode "error"; their losses."""
    losses = []
    for i, indices in enumerate(trainer.sampler.batches(0)[:steps]):
        batch = trainer.make_batch(indices).pinned().to(CUDA)
        checked = sync_check_from is not None and i >= sync_check_from
        if checked:
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
        try:
            loss, _ = trainer.device_step(batch)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        trainer.state.step += 1
        losses.append(loss)
    torch.cuda.synchronize()
    return losses


def _assert_graphed_steps_equal_eager_ones(eager, graphed, atol: float = 1e-5) -> None:
    """Five steps of each trainer (a CUDA graph captured after one eager warm-up step, one graph for the
    one batch shape; no fallback to the eager step): the same losses and parameters, to ``atol``."""
    from syntaxformer.training.step import CudaGraphStep, EagerStep

    captured = isinstance(graphed.step_runner, CudaGraphStep)
    if captured:
        graphed.step_runner.warmup = 1
    eager_losses, graphed_losses = _graph_steps(eager, 5), _graph_steps(graphed, 5)
    assert not isinstance(graphed.step_runner, EagerStep)  # no fallback to the eager step
    if captured:
        assert len(graphed.step_runner._graphs) == 1
    for a, b in zip(eager_losses, graphed_losses):
        torch.testing.assert_close(b, a, rtol=0, atol=atol)
    for a, b in zip(eager.model.parameters(), graphed.model.parameters()):
        torch.testing.assert_close(b, a, rtol=0, atol=atol)


def test_five_graphed_steps_equal_five_eager_ones(tmp_path):
    """cuda-graph: the very kernels of the eager step, replayed."""
    eager, graphed = _graph_trainer(tmp_path, "eager"), _graph_trainer(tmp_path, "graphed", step_graph="cuda-graph")
    _assert_graphed_steps_equal_eager_ones(eager, graphed)


def test_five_compiled_steps_equal_five_eager_ones(tmp_path):
    """compile (torch.compile, CUDA graphs): the compiler's own kernels, so float64, where Adam's division of
    near-zero gradients by their own size does not turn rounding into updates (to 1e-10, as on the CPU)."""
    eager, compiled = _graph_trainer(tmp_path, "eager"), _graph_trainer(tmp_path, "compiled", step_graph="compile")
    eager.model.double()
    compiled.model.double()
    _assert_graphed_steps_equal_eager_ones(eager, compiled, atol=1e-10)


def test_five_graphed_bf16_steps_equal_five_eager_bf16_ones(tmp_path):
    """bf16 autocast under a captured step (its cast cache off): the losses and parameters of five eager
    bf16 steps, as closely as the float32 ones."""
    eager = _graph_trainer(tmp_path, "eager", bf16=True)
    graphed = _graph_trainer(tmp_path, "graphed", bf16=True, step_graph="cuda-graph")
    assert graphed.autocast_cache is False
    _assert_graphed_steps_equal_eager_ones(eager, graphed)


def test_graphed_steps_with_the_triton_kernels_equal_eager_ones(tmp_path):
    """The constituent prior's Triton kernels under capture, attention dropout on (Triton's masks, seeded
    by a draw of CUDA's generator, which a replay advances as the eager step does): five graphed steps
    give the losses and parameters of five eager ones."""
    config = {"kernel": "triton", "attention_probs_dropout_prob": 0.1}
    eager = _graph_trainer(tmp_path, "eager", config)
    graphed = _graph_trainer(tmp_path, "graphed", config, step_graph="cuda-graph")
    _assert_graphed_steps_equal_eager_ones(eager, graphed)


def test_graphed_structformer_steps_with_the_triton_kernels_equal_eager_ones(tmp_path):
    """StructFormer's parse-stage and attention kernels (``kernel="triton"``) under capture:
    sentences cut and padded to the kernels' longest (MAX_TOKENS: one batch shape), five graphed steps give
    the losses and parameters of five eager ones."""
    from syntaxformer.kernels.triton_dependency_attention import MAX_TOKENS

    options = dict(model="structformer", max_length=MAX_TOKENS, pad_to_multiple=MAX_TOKENS)
    config = {"kernel": "triton"}
    eager = _graph_trainer(tmp_path, "eager", config, **options)
    graphed = _graph_trainer(tmp_path, "graphed", config, step_graph="cuda-graph", **options)
    _assert_graphed_steps_equal_eager_ones(eager, graphed)


def test_graphed_steps_with_hidden_dropout_equal_eager_ones(tmp_path):
    """The hidden states' dropout on CUDA (PyTorch's fused F.dropout, its Philox offsets graph-safe) under
    capture: each replay draws the masks of the eager step of the same seed and step."""
    config = {"hidden_dropout_prob": 0.1}
    eager = _graph_trainer(tmp_path, "eager", config)
    graphed = _graph_trainer(tmp_path, "graphed", config, step_graph="cuda-graph")
    assert eager.model.config.hidden_dropout_prob == graphed.model.config.hidden_dropout_prob == 0.1
    _assert_graphed_steps_equal_eager_ones(eager, graphed)


def test_captured_steps_do_not_synchronise(tmp_path):
    """After the warm-up and the capture, a replayed whole step (copy of the batch into the graph's
    inputs, learning rate, replay, schedule) under CUDA's sync debug mode "error"."""
    trainer = _graph_trainer(tmp_path, "sync", step_graph="cuda-graph")
    trainer.step_runner.warmup = 1
    losses = _graph_steps(trainer, 5, sync_check_from=2)  # step 0 eager, step 1 captured
    assert len(trainer.step_runner._graphs) == 1 and all(torch.isfinite(loss) for loss in losses)
    assert len({float(loss) for loss in losses}) == 5  # each replay's own loss (a copy, not the static one)


def test_tf32_is_set_on_cuda_only_when_asked():
    from syntaxformer.training.step import use_tf32

    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        assert use_tf32(CUDA, False) is False and torch.backends.cuda.matmul.allow_tf32 == before[0]
        assert use_tf32(CUDA, True) is True and torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
