"""Where a training step's device time goes, by the line of this package that launched it:

    python -m benchmarks.speed.gpu_profile --device cuda --out gpu-profile.json
    python -m benchmarks.speed.gpu_profile --device cpu --smoke          # the script runs (CPU times)

For the Tree Transformer ``paper`` preset with the constituent prior (PyTorch's kernels and, on CUDA, the
Triton ones) and with ``prior="none"`` (batches of 64 x 27, as ``gpu_step.py``), and StructFormer ``paper``
(150 x 27), the eager step with TF32 and the fixed-size target list (the kernels a CUDA
graph replays are these), profiled by ``torch.profiler`` over ``--steps`` steps after 3 warm-up steps
with Python stacks. Each operator's own device time (its kernels; CPU time off CUDA) and count are
summed by the innermost frame in ``syntaxformer/`` that called it (``file:line function``), per step.
The rows say which functions a fused kernel should replace: on an H100 the graphed step with the prior
takes 1.69 times the plain Transformer's (docs/results/speed.md), most of it small kernels.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.speed.gpu_step import CASES, code_record, eager_runner, sized, step_loop, synthetic_batch, tf32

PACKAGE = "syntaxformer/"
#: the (model, preset, prior) of the cases profiled
PROFILED = {
    ("tree-transformer", "paper", "constituent"),
    ("tree-transformer", "paper", "none"),
    ("tree-transformer", "paper", "constituent-triton"),
    ("structformer", "paper", None),
}


def package_frame(event) -> str | None:
    """The innermost Python frame in the package above ``event`` (the profiler records each Python call
    as an event named ``path(line): function``, the operators it ran below it), or None."""
    node = event
    while node is not None:
        if PACKAGE in node.name and "(" in node.name:
            return node.name[node.name.index(PACKAGE) :]
        node = node.cpu_parent
    return None


def launching_frame(event, forward: dict[int, str]) -> str:
    """The package frame an operator ran for: the nearest one above it; in the backward (no Python
    frame above, but an autograd node), the forward operator's of the same autograd sequence number,
    marked ``(backward)``."""
    frame = package_frame(event)
    if frame is not None:
        return frame
    node = event
    while node is not None:
        # an autograd node (``autograd::engine::evaluate_function: MulBackward0``, ``MulBackward0``) carries the
        # sequence number of the forward operator it differentiates
        if not node.name.startswith("aten::") and node.sequence_nr in forward:
            return forward[node.sequence_nr] + " (backward)"
        node = node.cpu_parent
    node = event  # outside the package (the optimiser, clipping): the innermost Python frame
    while node is not None and not (".py(" in node.name and "): " in node.name):
        node = node.cpu_parent
    return node.name.split("site-packages/")[-1] if node is not None else "(no Python frame)"


def profile_case(case, device: torch.device, steps: int, smoke: bool) -> dict:
    """Per-frame own time (ms per step) and operator count per step of ``case``'s eager step."""
    model, preset, prior, rows, length, overrides = sized(case, smoke)
    loop = step_loop(model, preset, overrides, device)
    batch = synthetic_batch(model, rows, length, device, fixed=True)
    step = eager_runner(loop)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with tf32(device, True):
        for _ in range(3):
            step(batch)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        with profile(activities=activities, with_stack=True) as prof:
            for _ in range(steps):
                step(batch)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
    events = prof.events()
    forward = {}  # autograd sequence number -> the forward operator's package frame
    for event in events:
        if event.sequence_nr >= 0 and event.sequence_nr not in forward:
            frame = package_frame(event)
            if frame is not None:
                forward[event.sequence_nr] = frame
    time_us, count = defaultdict(float), defaultdict(int)
    for event in events:
        own = event.self_device_time_total if device.type == "cuda" else event.self_cpu_time_total
        if event.name.startswith("aten::") and own > 0:
            frame = launching_frame(event, forward)
            time_us[frame] += own
            count[frame] += 1
    total = sum(time_us.values())
    regions = sorted(time_us, key=time_us.get, reverse=True)
    return dict(
        model=model,
        preset=preset,
        prior=prior,
        batch=f"{rows} x {length}",
        ms_per_step=round(total / steps / 1000, 3),
        ops_per_step=round(sum(count.values()) / steps, 1),
        regions=[
            dict(frame=f, ms_per_step=round(time_us[f] / steps / 1000, 4), ops_per_step=round(count[f] / steps, 1))
            for f in regions
        ],
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--smoke", action="store_true", help="tiny preset and batches (checks the script)")
    p.add_argument("--top", type=int, default=25, help="frames kept per case")
    p.add_argument("--commit", default=None, help="the code's commit, recorded in place of git's")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    device = torch.device(args.device)
    record = dict(
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        torch=torch.__version__,
        code=code_record(args.commit),
        time="device" if device.type == "cuda" else "cpu",
        steps=args.steps,
        cases=[],
    )
    # the Tree Transformer paper preset with the prior (PyTorch kernels, then Triton's) and without it; StructFormer
    for case in [c for c in CASES if c[:3] in PROFILED]:
        row = profile_case(case, device, args.steps, args.smoke)
        row["regions"] = row["regions"][: args.top]
        record["cases"].append(row)
        print(
            row["model"],
            row["prior"] or "-",
            row["ms_per_step"],
            "ms/step",
            row["ops_per_step"],
            "ops/step",
            flush=True,
        )
        for r in row["regions"][:12]:
            print(f"  {r['ms_per_step']:8.3f} ms {r['ops_per_step']:7.1f} ops  {r['frame']}")
    text = json.dumps(record, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
