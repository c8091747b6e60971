"""The training step on an accelerator: steps/s, tokens/s, FLOPs per step and the share of the device's
matrix-product peak, for the papers' presets, eager against the fast step, measured in one run.

    python -m benchmarks.speed.gpu_step --device cuda --out docs/benchmarks/gpu-step.json
    python -m benchmarks.speed.gpu_step --device cpu --smoke --variants eager   # tiny presets: the script runs

Rows (one per model, preset, prior, batch and variant): the Tree Transformer ``paper`` preset (official
variant) with the constituent prior and with ``prior="none"`` (the plain Transformer), batches of 64 x 27;
the ``small`` preset with batches of 512 x 27; StructFormer ``paper`` with about 4,096 tokens (150 x 27);
the ON-LSTM ``paper`` preset with 20 x 70 (next-token targets). Batches are synthetic (token ids drawn
once, 15% of positions masked for the masked LMs), the optimiser is Adam (fused on CUDA and CPU) with
clipping 1.5, as a training step of :class:`syntaxformer.training.loop.TrainingLoop`.

Variants: ``eager`` (today's step, float32) and ``fast`` (TF32 matrix products and the model compiled by
``torch.compile``: ``mode="reduce-overhead"``, CUDA graphs, on CUDA; the default mode elsewhere). A
variant that fails records its error instead of numbers. FLOPs per step come from
``torch.utils.flop_counter.FlopCounterMode`` over one forward and backward; the peak is a bfloat16
matrix product of 8192 x 8192 timed on the same device in the same run; ``peak_share`` = FLOPs per step
x steps/s / peak. The record names the device, torch and the code (``syntaxformer.runtime.code_version``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from syntaxformer.models import MODELS, make_config
from syntaxformer.runtime import code_version

VOCAB = 10_000

#: (model, preset, prior, batch rows, tokens per row, config overrides)
CASES = [
    ("tree-transformer", "paper", "constituent", 64, 27, {"constituent_variant": "official"}),
    ("tree-transformer", "paper", "none", 64, 27, {"prior": "none"}),
    ("tree-transformer", "small", "constituent", 512, 27, {"constituent_variant": "official"}),
    ("structformer", "paper", None, 150, 27, {}),
    ("on-lstm", "paper", None, 20, 70, {}),
]


def synthetic_batch(model: str, rows: int, length: int, device: torch.device, seed: int = 0) -> dict:
    """Keyword inputs of one training batch: ``input_ids`` ``(rows, length)`` and ``labels`` (masked LMs:
    15% of positions, with ``masked_only`` and ``masked_positions``; the ON-LSTM: every next token)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, VOCAB, (rows, length), generator=g)
    batch = dict(input_ids=ids, attention_mask=torch.ones_like(ids))
    if model == "on-lstm":
        batch["labels"] = ids.clone()
    else:
        chosen = torch.rand(rows, length, generator=g) < 0.15
        batch["labels"] = ids.masked_fill(~chosen, -100)
        batch["masked_only"] = True
        batch["masked_positions"] = chosen.flatten().nonzero().squeeze(1)
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def make_step(net: torch.nn.Module, forward, batch: dict):
    """One training step: forward, backward, clip 1.5, fused Adam; returns the step function."""
    fused = next(net.parameters()).device.type in ("cuda", "cpu")
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=fused)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = forward(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.5)
        optimizer.step()
        return loss.detach()

    return step


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(step, device: torch.device, steps: int, warmup: int) -> float:
    """Steps per second over ``steps`` steps after ``warmup`` (the device waited for at both ends)."""
    for _ in range(warmup):
        step()
    _synchronize(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    _synchronize(device)
    return steps / (time.perf_counter() - t0)


def matmul_peak(device: torch.device, n: int = 8192, repeats: int = 10) -> float:
    """FLOP/s of an ``n x n`` bfloat16 matrix product on ``device`` (the peak the shares are of)."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    a @ b
    _synchronize(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _synchronize(device)
    return 2 * n**3 * repeats / (time.perf_counter() - t0)


def flops_per_step(net: torch.nn.Module, batch: dict) -> int:
    """FLOPs of one forward and backward (``FlopCounterMode``: matrix products and attention)."""
    with FlopCounterMode(display=False) as counter:
        net(**batch).loss.backward()
    net.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def measure(case, variant: str, device: torch.device, args, peak: float) -> dict:
    """One row: build the model, time its step in ``variant``, count its FLOPs."""
    model, preset, prior, rows, length, overrides = case
    preset = "tiny" if args.smoke else preset
    row = dict(model=model, preset=preset, prior=prior, batch=f"{rows} x {length}", variant=variant)
    torch.backends.cuda.matmul.allow_tf32 = variant == "fast"
    torch.manual_seed(0)
    net = MODELS[model](make_config(model, preset, vocab_size=VOCAB, **overrides)).to(device).train()
    batch = synthetic_batch(model, rows, length, device)
    try:
        forward = net
        if variant == "fast":
            forward = torch.compile(net, mode="reduce-overhead" if device.type == "cuda" else "default")
        sps = time_steps(make_step(net, forward, batch), device, args.steps, args.warmup)
    except Exception as e:  # a variant that cannot run is recorded, not fatal
        return {**row, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
    flops = flops_per_step(net, batch)
    return {
        **row,
        "steps_per_second": round(sps, 3),
        "tokens_per_second": round(sps * rows * length, 1),
        "flops_per_step": flops,
        "peak_share": round(flops * sps / peak, 5),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--smoke", action="store_true", help="tiny presets and small batches (checks the script)")
    p.add_argument("--variants", nargs="+", default=["eager", "fast"], choices=["eager", "fast"])
    p.add_argument("--out", default=None, help="the JSON record (default: print only)")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    peak = matmul_peak(device, n=512 if args.smoke else 8192)
    cases = [(m, pr, pi, min(r, 8), min(n, 12), o) for m, pr, pi, r, n, o in CASES] if args.smoke else CASES
    rows = [measure(case, variant, device, args, peak) for case in cases for variant in args.variants]
    record = dict(
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        torch=torch.__version__,
        code=code_version(),
        matmul_peak_flops=round(peak),
        steps=args.steps,
        warmup=args.warmup,
        rows=rows,
    )
    text = json.dumps(record, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
