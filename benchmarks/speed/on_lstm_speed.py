"""ON-LSTM recurrence speed against ``torch.nn.LSTM`` of the same widths and layers.

For one batch of ``--batch`` sentences of ``--length`` tokens (no padding), the tokens per second
of the recurrent stack (embeddings and output layer left out: they are the same for both) are
measured in the same run, interleaved (one call of each in turn, ``--repeats`` rounds, median):

* ``lstm``            -- ``torch.nn.LSTM`` layers, batch first, one per width (PyTorch's fused
  kernel: oneDNN on CPU, cuDNN on CUDA);
* ``on-lstm``         -- :class:`syntaxformer.models.on_lstm.OnLstmLayer` as the model runs it: the
  input projections of all steps in one matmul, the loop over time in eager PyTorch;
* ``on-lstm/step-dW`` / ``on-lstm/once-dW`` -- the two ways of the recurrent weight's gradient,
  forced: autograd's ``[H, G]`` product accumulated at every step, or one matmul after the loop
  (:mod:`syntaxformer.kernels.on_lstm`); ``on-lstm`` picks by the weight's size (``WEIGHT_GRAD_ONCE_MIN``). The
  forward pass is the same code in all three.

Each is timed for the forward pass alone (inference mode) and for forward + backward (the gradient
of the sum of the outputs; training mode, dropouts 0). The widths are a preset's layer sizes
(``paper``: 400 -> 1150 -> 1150 -> 400). Ratios are ON-LSTM tokens/s over LSTM tokens/s.

Usage: ``python -m benchmarks.speed.on_lstm_speed --preset mini --threads 2 --json on-lstm-speed.json``
       ``python -m benchmarks.speed.on_lstm_speed --preset paper --device cuda --batch 20 --length 70``
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import statistics
import time

import torch
from torch import nn

from syntaxformer.models.on_lstm import PRESETS, OnLstmConfig, OnLstmLayer, on_lstm_loop


class LstmStack(nn.Module):
    """``torch.nn.LSTM`` layers of the given widths, batch first (the baseline)."""

    def __init__(self, sizes: list[int]):
        super().__init__()
        self.layers = nn.ModuleList(nn.LSTM(sizes[l], sizes[l + 1], batch_first=True) for l in range(len(sizes) - 1))

    def forward(self, x):
        for layer in self.layers:
            x, _ = layer(x)
        return x


class OnLstmStack(nn.Module):
    """:class:`OnLstmLayer` s of the given widths (no dropout), with the given loop over time."""

    def __init__(self, sizes: list[int], chunk_size: int, loop=on_lstm_loop):
        super().__init__()
        self.layers = nn.ModuleList(
            OnLstmLayer(sizes[l], sizes[l + 1], chunk_size, wdrop=0.0) for l in range(len(sizes) - 1)
        )
        for layer in self.layers:
            layer.loop = loop

    def forward(self, x):
        for layer in self.layers:
            x, _, _ = layer(x, None)
        return x


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_call(model: nn.Module, x: torch.Tensor, backward: bool) -> float:
    """Seconds of one forward (inference mode) or forward + backward call."""
    _sync(x.device)
    start = time.perf_counter()
    if backward:
        model.train()
        model(x).sum().backward()
    else:
        model.eval()
        with torch.inference_mode():
            model(x)
    _sync(x.device)
    return time.perf_counter() - start


def measure(args) -> dict:
    """Median seconds per call of every row, forward and forward+backward; the report dict."""
    device = torch.device(args.device)
    config = OnLstmConfig(vocab_size=10, **PRESETS[args.preset])
    sizes = [config.embedding_size] + config.layer_sizes
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(args.seed)
    models = {
        "lstm": LstmStack(sizes),
        "on-lstm": OnLstmStack(sizes, config.chunk_size),
        "on-lstm/step-dW": OnLstmStack(
            sizes, config.chunk_size, functools.partial(on_lstm_loop, weight_grad_once=False)
        ),
        "on-lstm/once-dW": OnLstmStack(
            sizes, config.chunk_size, functools.partial(on_lstm_loop, weight_grad_once=True)
        ),
    }
    for m in models.values():
        m.to(device=device, dtype=dtype)
    x = torch.randn(args.batch, args.length, sizes[0], device=device, dtype=dtype, requires_grad=True)
    tokens = args.batch * args.length
    report = {
        "preset": args.preset,
        "layer_sizes": sizes[1:],
        "chunk_size": config.chunk_size,
        "batch": args.batch,
        "length": args.length,
        "tokens_per_call": tokens,
        "device": str(device),
        "dtype": args.dtype,
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "torch": torch.__version__,
        "machine": platform.processor() or platform.machine(),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "rows": {},
    }
    for backward in (False, True):
        mode = "forward+backward" if backward else "forward"
        times = {name: [] for name in models}
        for _ in range(args.warmup):
            for name, m in models.items():
                time_call(m, x, backward)
        for _ in range(args.repeats):
            for name, m in models.items():
                times[name].append(time_call(m, x, backward))
        base = statistics.median(times["lstm"])
        for name in models:
            t = statistics.median(times[name])
            report["rows"].setdefault(name, {})[mode] = {
                "seconds": t,
                "tokens_per_second": tokens / t,
                "ratio_to_lstm": base / t,
            }
    return report


def print_table(report: dict) -> None:
    print(
        f"# preset {report['preset']} (widths {report['layer_sizes']}, chunk {report['chunk_size']}), "
        f"batch {report['batch']} x length {report['length']}, {report['device']} "
        f"{report['device_name'] or ''} {report['dtype']}, {report['threads']} threads, "
        f"median of {report['repeats']}"
    )
    print(f"{'row':<20} {'fwd tok/s':>12} {'fwd ratio':>10} {'fwd+bwd tok/s':>14} {'fwd+bwd ratio':>14}")
    for name, row in report["rows"].items():
        f, fb = row["forward"], row["forward+backward"]
        print(
            f"{name:<20} {f['tokens_per_second']:>12,.0f} {f['ratio_to_lstm']:>10.3f} "
            f"{fb['tokens_per_second']:>14,.0f} {fb['ratio_to_lstm']:>14.3f}"
        )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="mini", choices=sorted(PRESETS))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--length", type=int, default=25)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64", "bfloat16"])
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the report here")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    report = measure(args)
    print_table(report)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
