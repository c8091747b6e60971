"""Operators per training step: how many kernels each kernel setting asks a device to launch.

    python -m benchmarks.speed.op_count --rows 20 --out records/benchmarks/op-count.json  # paper presets, CPU
    python -m benchmarks.speed.op_count --smoke                                        # tiny presets

On a GPU the graphed step of a small model is bound by the number of kernels it launches, not by its
arithmetic (docs/results/speed.md). This counts, for one eager training step of each case of
``gpu_step.py`` (the same models, presets, batches, optimiser and clipping), the ATen operators that
reach the dispatcher below autograd and compute (forward, backward, clipping and the Adam update: each
is one or a few kernels on a GPU; views and allocations, which launch none, are counted apart) plus the
Triton kernels launched. It runs on the CPU: the Triton kernels run in Triton's
interpreter (``TRITON_INTERPRET=1``, set here before Triton's import), their launches counted as one
each and the interpreter's own tensor work not counted. A count, not a time: the GPU speed of the same
settings is ``gpu_step.py``'s to measure. ``--rows`` counts every case at that many sentences (the
interpreter's time grows with the batch, a program per sentence and head; the operators depend on it
only through the paths' choices by size, e.g. the constituent prior's bilinear form when B·N > d_model,
which 20 sentences of 27 tokens pass at every preset, as the papers' batches do).

The record (``--out``): ``code``, ``torch``, ``triton`` and per case ``model``, ``preset``, ``prior``
(the kernel setting's label, as ``gpu_step.py``'s), ``batch``, ``aten_ops`` (computing operators),
``views_and_allocations``, ``triton_kernels`` and ``ops_per_step`` (computing operators + Triton kernels).
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton's first import (torch's included)

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from benchmarks.speed.gpu_step import CASES, code_record, eager_runner, sized, step_loop, synthetic_batch  # noqa: E402

#: operators that launch no kernel: allocations (views are known by their schema)
ALLOCATIONS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


class OperatorCount(TorchDispatchMode):
    """Counts the ATen operators dispatched while it is on (``"aten"``: those that compute; ``"views"``:
    views and allocations) and Triton launches (:meth:`launch`); the operators a Triton launch runs
    inside the interpreter are not counted."""

    def __init__(self):
        super().__init__()
        self.counts: Counter = Counter()
        self.paused = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.paused:
            computes = not func.is_view and func.overloadpacket.__name__ not in ALLOCATIONS
            self.counts["aten" if computes else "views"] += 1
        return func(*args, **(kwargs or {}))

    def launch(self, run, *args, **kwargs):
        """Run an interpreted Triton grid, counted as one kernel."""
        if self.paused:
            return run(*args, **kwargs)
        self.counts["triton"] += 1
        self.paused = True
        try:
            return run(*args, **kwargs)
        finally:
            self.paused = False


def count_case(case, smoke: bool, rows: int | None = None) -> dict:
    """One eager step of ``case`` (at ``rows`` sentences, or the case's own batch) after a warm-up step, counted."""
    from triton.runtime import interpreter

    model, preset, prior, case_rows, length, overrides = sized(case, smoke)
    rows = rows or case_rows
    device = torch.device("cpu")
    loop = step_loop(model, preset, overrides, device)
    batch = synthetic_batch(model, rows, length, device, fixed=True)
    step = eager_runner(loop)
    step(batch)
    counter = OperatorCount()
    grid_call = interpreter.GridExecutor.__call__
    interpreter.GridExecutor.__call__ = lambda self, *a, **k: counter.launch(grid_call, self, *a, **k)
    try:
        with counter:
            step(batch)
    finally:
        interpreter.GridExecutor.__call__ = grid_call
    aten, launches = counter.counts["aten"], counter.counts["triton"]
    return dict(
        model=model,
        preset=preset,
        prior=prior,
        batch=f"{rows} x {length}",
        aten_ops=aten,
        views_and_allocations=counter.counts["views"],
        triton_kernels=launches,
        ops_per_step=aten + launches,
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny presets and batches (checks the script)")
    p.add_argument("--rows", type=int, default=None, help="sentences per batch for every case (default: each case's)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    import triton

    torch.manual_seed(0)
    record = dict(
        what="operators per eager training step (ATen operators below autograd that compute, not views or "
        "allocations, + Triton kernel launches), CPU, Triton kernels in Triton's interpreter; batches, optimiser "
        "and clipping as gpu_step.py",
        device="cpu",
        torch=torch.__version__,
        triton=triton.__version__,
        code=code_record(None),
        smoke=args.smoke,
        rows=[],
    )
    for case in CASES:
        row = count_case(case, args.smoke, args.rows)
        record["rows"].append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
