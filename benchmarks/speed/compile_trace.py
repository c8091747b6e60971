"""``torch.compile``'s front end on CUDA, without a GPU: does the compiled step trace?

    PYTHONPATH=. CUDA_PYTHON -m benchmarks.speed.compile_trace --out records/benchmarks/compile-trace-2.11.json

The compiled step (``--step-graph compile``, :class:`~syntaxformer.training.step.CompiledStep`;
gpu_step.py's ``compiled`` variant) compiles the loss with ``fullgraph=True``: one construct the
compiler's tracer (dynamo) does not take and the step falls back to the eager one. Which constructs it
takes depends on the device (the code takes other branches on CUDA: its dropout masks, the Triton
kernels) and on PyTorch's version (the GPU machines run their own). This runs each case of
``gpu_step.py`` (the paper presets' batch shapes, dropout as the presets set it) and the trainer's own
step (``syntaxformer train``'s tiny preset with ``--fixed-shapes``) through that tracer on CUDA tensors
that are fake (``FakeTensorMode``: shapes, dtypes and the device, no memory): the model's weights and the
batch are made fake CUDA tensors and the compiled step's loss (:meth:`CompiledStep.loss`, backend
``"eager"``) is called once.

It needs a CUDA build of PyTorch (a CPU build cannot make even a fake CUDA tensor); no GPU and no
driver. PyPI's Linux wheels are CUDA builds, so the GPU machines' version goes in a venv of its own::

    python3 -m venv /tmp/torch-2.11 && /tmp/torch-2.11/bin/pip install torch==2.11.0 "transformers==5.17.*" \\
        tokenizers safetensors nltk conllu numpy matplotlib tqdm scikit-learn
    PYTHONPATH=. /tmp/torch-2.11/bin/python -m benchmarks.speed.compile_trace --out records/benchmarks/compile-trace-2.11.json

What it checks and what it does not: the Python-level trace of the forward (the autograd functions'
backwards included, as the compiled step traces them), which is where every failure of the compiled step
on CUDA so far came from ("Unsupported method call", an ``autograd.Function`` calling autograd in its
backward, a side effect in a backward, Triton launches). Not AOTAutograd's joint graph or Inductor's CUDA
code: autograd's engine asks the CUDA driver for a context, so those need a GPU (``tests/kernels/test_cuda.py``
there). The record (``--out``): ``torch``, ``transformers``, ``code`` and one row per case (``model``,
``preset``, ``prior``, ``batch``) with ``traced`` true, or false with the tracer's ``error`` (its first
line and explanation) and ``where`` (the innermost line of this package it was tracing). Exits 1 if any
case fails to trace.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from benchmarks.speed.gpu_step import CASES, code_record, row_of, step_loop, synthetic_batch
from syntaxformer.training.step import CompiledStep

CUDA = torch.device("cuda")
PACKAGE = str(Path(__file__).resolve().parents[2] / "syntaxformer")
FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def fake_cuda(value):
    """``value`` as a fake CUDA tensor of its shape, strides and dtype (under a fake mode); a dict's
    tensors likewise; anything else itself."""
    if isinstance(value, dict):
        return {k: fake_cuda(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=CUDA)
    return value


def traced(loop, batch) -> dict:
    """Trace ``loop``'s compiled loss of ``batch`` with ``loop.model`` and the batch made fake CUDA tensors:
    ``{"traced": True}`` or ``{"traced": False, "error": ..., "where": ...}``."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        loop.model._apply(fake_cuda)
        batch = type(batch)(**{name: fake_cuda(value) for name, value in batch.values().items()})
    loop.device = CUDA
    torch._dynamo.reset()
    try:
        with mode:
            CompiledStep(loop, backend="eager").loss(batch)
    except Exception as error:  # noqa: BLE001 - the tracer's refusal is the result
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        message = " ".join([f"{type(error).__name__}: {lines[0] if lines else ''}", *lines[1:2]])
        # the tracer's own stack of user code is in its message ("from user code: File ..., line ...")
        frames = [(f, n) for f, n in FRAME.findall(str(error)) if f.startswith(PACKAGE)]
        where = f"{Path(frames[-1][0]).relative_to(Path(PACKAGE).parent)}:{frames[-1][1]}" if frames else None
        return {"traced": False, "error": message[:400], "where": where}
    return {"traced": True}


def trainer_loop(out: str):
    """The trainer of ``syntaxformer train --preset tiny --fixed-shapes --batch-size 8`` (the embedded corpus,
    the preset's dropouts) on the CPU writing into ``out``, and its first batch."""
    from syntaxformer.tasks.language_model import Trainer
    from syntaxformer.training.arguments import TrainArguments

    args = TrainArguments(
        out=out, preset="tiny", max_steps=1, batch_size=8, fixed_shapes=True, device="cpu", quiet=True
    )
    trainer = Trainer(args)
    trainer.build()
    return trainer, trainer.make_batch(trainer.sampler.batches(0)[0])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--commit", default=None, help="the code's commit, recorded in place of git's")
    p.add_argument("--out", default=None, help="the JSON record (default: print only)")
    args = p.parse_args(argv)
    if torch.version.cuda is None:
        print("compile_trace: needs a CUDA build of PyTorch (no GPU needed); see the module docstring", file=sys.stderr)
        return 2
    import transformers

    record = dict(
        what="the compiled step's loss traced by torch.compile's front end (fullgraph, backend eager) on fake "
        "CUDA tensors, for each case of gpu_step.py and the trainer's tiny step",
        torch=torch.__version__,
        transformers=transformers.__version__,
        code=code_record(args.commit),
        rows=[],
    )
    for case in CASES:
        model, preset, _, rows, length, overrides = case
        loop = step_loop(model, preset, overrides, torch.device("cpu"))
        batch = synthetic_batch(model, rows, length, torch.device("cpu"), fixed=True)
        row = {k: v for k, v in row_of(case, "compiled").items() if k != "variant"}
        record["rows"].append({**row, **traced(loop, batch)})
        print(json.dumps(record["rows"][-1]), flush=True)
    with tempfile.TemporaryDirectory(prefix="compile-trace-") as out:
        trainer, batch = trainer_loop(out)
        row = dict(model="trainer", preset="tiny", prior=None, batch=" x ".join(map(str, batch.input_ids.shape)))
        record["rows"].append({**row, **traced(trainer, batch)})
    print(json.dumps(record["rows"][-1]), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    return 0 if all(row["traced"] for row in record["rows"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
