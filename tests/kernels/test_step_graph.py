"""Faster steps on an accelerator, checked on the CPU: a compiled step (``torch.compile(fullgraph=True)``
with the ``aot_eager`` backend: inductor works here too but takes about a minute to compile a tiny model on
the CI's two cores) equals the eager step for a tiny model (float64, dropout off: losses and parameters to 1e-10) and runs
with dropout on; a step graph that cannot run
falls back to the eager step with one log line, the parameters those of the eager run; TF32 changes nothing
on the CPU. The CUDA graphs themselves are checked in tests/kernels/test_cuda.py (on a GPU)."""

from __future__ import annotations

import logging

import pytest
import torch

from syntaxformer.errors import InputError
from syntaxformer.tasks.language_model import Trainer
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.training.step import CompiledStep, EagerStep, make_step_runner, shape_key, use_tf32

torch.set_num_threads(1)

STEPS = 3


def _trainer(tmp_path, name: str, dropout: float = 0.0, **options) -> Trainer:
    args = TrainArguments(
        out=str(tmp_path / name),
        preset="tiny",
        max_steps=STEPS,
        batch_size=8,
        fixed_shapes=True,
        threads=1,
        quiet=True,
        overrides=dict(
            hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, constituent_variant="official"
        ),
        **options,
    )
    trainer = Trainer(args)
    trainer.build()
    trainer.model.double()  # float64: Adam's update divides tiny gradients by their own size
    return trainer


def _steps(trainer: Trainer) -> list[torch.Tensor]:
    """:data:`STEPS` device steps on the first batches (of one shape after the first); their losses."""
    losses = []
    for indices in trainer.sampler.batches(0)[:STEPS]:
        loss, _ = trainer.device_step(trainer.make_batch(indices))
        trainer.state.step += 1
        losses.append(loss)
    return losses


def test_a_compiled_step_equals_the_eager_step(tmp_path):
    eager, compiled = _trainer(tmp_path, "eager"), _trainer(tmp_path, "compiled")
    compiled.step_runner = CompiledStep(compiled, backend="aot_eager")
    eager_losses, compiled_losses = _steps(eager), _steps(compiled)
    assert isinstance(compiled.step_runner, CompiledStep)  # no fallback
    for a, b in zip(eager_losses, compiled_losses):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-10)
    for a, b in zip(eager.model.parameters(), compiled.model.parameters()):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-10)


class Broken:
    """A step runner whose compilation fails."""

    name = "compile"

    def __call__(self, batch):
        raise RuntimeError("cannot compile this\nsecond line")


def test_a_failing_step_graph_falls_back_to_the_eager_step_with_one_log_line(tmp_path, caplog):
    eager = _trainer(tmp_path, "eager")
    broken = _trainer(tmp_path, "broken")
    broken.step_runner = Broken()
    with caplog.at_level(logging.WARNING, logger="syntaxformer.training.loop"):
        eager_losses, broken_losses = _steps(eager), _steps(broken)
    lines = [r.getMessage() for r in caplog.records if "step-graph" in r.getMessage()]
    assert lines == ["--step-graph compile failed, the eager step instead: RuntimeError: cannot compile this"]
    assert isinstance(broken.step_runner, EagerStep)
    assert all(torch.equal(a, b) for a, b in zip(eager_losses, broken_losses))
    assert all(torch.equal(a, b) for a, b in zip(eager.model.parameters(), broken.model.parameters()))


def test_cuda_graphs_without_cuda_are_the_eager_step_with_one_log_line(tmp_path, caplog):
    trainer = _trainer(tmp_path, "cpu", step_graph="cuda-graph")
    with caplog.at_level(logging.WARNING, logger="syntaxformer.training.step"):
        assert isinstance(make_step_runner(trainer, "cuda-graph"), EagerStep)
        assert isinstance(make_step_runner(trainer, "none"), EagerStep)
    assert [r.getMessage() for r in caplog.records if "step-graph" in r.getMessage()] == [
        "--step-graph cuda-graph: the eager step instead (no CUDA device: the run is on cpu)"
    ]
    with pytest.raises(InputError, match="--step-graph must be one of"):
        make_step_runner(trainer, "graphs")


def test_the_shape_key_names_every_tensor_shape(tmp_path):
    trainer = _trainer(tmp_path, "keys")
    batches = trainer.sampler.batches(0)
    keys = {shape_key(trainer.make_batch(indices)) for indices in batches[:10]}
    for key in keys:
        names = [k[0] for k in key]
        assert names == ["attention_mask", "input_ids", "labels", "masked_positions"]
        assert key[0][2][0] == 8  # every batch has 8 rows


def test_tf32_changes_nothing_on_the_cpu():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    assert use_tf32(torch.device("cpu"), True) is False and use_tf32(torch.device("cuda"), False) is False
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before


def test_a_compiled_step_runs_with_dropout(tmp_path):
    """With dropout 0.1 (hidden and attention; CPU masks under compile from ``rand``): the compiled step runs (no fallback) and
    its losses are those of a step with dropout (not the dropout-off ones), finite."""
    off = _trainer(tmp_path, "off")
    off.step_runner = CompiledStep(off, backend="aot_eager")
    on = _trainer(tmp_path, "on", dropout=0.1)
    on.step_runner = CompiledStep(on, backend="aot_eager")
    off_losses, on_losses = _steps(off), _steps(on)
    assert isinstance(on.step_runner, CompiledStep)  # no fallback to the eager step
    assert all(torch.isfinite(loss) for loss in on_losses)
    assert all(not torch.equal(a, b) for a, b in zip(off_losses, on_losses))


def test_the_loops_autocast_cache_decides_bf16_autocasts_cast_cache(tmp_path):
    """bf16 autocast caches cast weights unless the loop's ``autocast_cache`` says not to (what a CUDA-graph
    step sets: tests/kernels/test_cuda.py)."""
    trainer = _trainer(tmp_path, "bf16", bf16=True)
    with trainer.autocast():
        assert torch.is_autocast_enabled("cpu") and torch.is_autocast_cache_enabled()
    trainer.autocast_cache = False
    with trainer.autocast():
        assert torch.is_autocast_enabled("cpu") and not torch.is_autocast_cache_enabled()
