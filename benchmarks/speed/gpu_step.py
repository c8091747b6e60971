"""The training step on an accelerator: steps/s, tokens/s, FLOPs per step and the share of the device's
matrix-product peak, for the papers' presets, the eager step against the fast steps, measured in one run.

    python -m benchmarks.speed.gpu_step --device cuda --out records/benchmarks/gpu-step.json
    python -m benchmarks.speed.gpu_step --device cpu --smoke --variants eager compiled graph   # the script runs

Rows (one per model, preset, prior, batch and variant): the Tree Transformer ``paper`` preset (official
variant) with the constituent prior and with ``prior="none"`` (the plain Transformer), batches of 64 x 27;
the ``small`` preset with batches of 512 x 27; StructFormer ``paper`` with about 4,096 tokens (150 x 27);
the ON-LSTM ``paper`` preset with 20 x 70 (next-token targets); the Tree Transformer ``paper`` preset again
with the prior's fused kernels (``kernel="fused"``; prior ``constituent-fused`` in the record), and the
``paper`` and ``small`` presets with its Triton kernels (``kernel="triton"``; prior
``constituent-triton``; on CUDA; elsewhere they compute as the fused kernels), and the ON-LSTM ``paper``
preset with its cell as a Triton kernel (``kernel="triton"``; prior ``cell-triton``), and StructFormer
``paper`` with its parse stage and attention as Triton kernels (``kernel="triton"``; prior
``dependency-triton``). The config field ``kernel``: :mod:`syntaxformer.models.kernel_choice`.
Batches are synthetic (token ids drawn
once, 15% of positions masked for the masked LMs); the optimiser is Adam (fused on CUDA and CPU) with
clipping 1.5; dropout is seeded before every step, as in
:meth:`syntaxformer.training.loop.TrainingLoop.device_step`.

Variants (``--variants``; the rows run variant by variant, in the order given):

* ``eager``: the step as the trainer runs it by default: float32 (PyTorch's own TF32 settings), the
  masked positions an index list of the batch's own length.
* ``compiled``: TF32 (:func:`syntaxformer.training.step.use_tf32`), the masked positions a list of
  fixed size (:func:`~syntaxformer.training.objectives.mask_capacity` entries,
  :func:`~syntaxformer.blocks.mlm_head.padded_positions`), and the loss compiled by ``torch.compile``
  (:class:`syntaxformer.training.step.CompiledStep`, as ``--step-graph compile``: ``fullgraph``,
  ``mode="reduce-overhead"`` (CUDA graphs) on CUDA, ``torch._dynamo.config.patch(trace_autograd_ops=True)``,
  ``torch.compiler.cudagraph_mark_step_begin()`` each step; on the CPU the backend ``--cpu-backend``).
  Compiled, a model runs its written operators, which the compiler fuses: no Triton kernels of the
  package, the literal prior attention (so a Triton case's compiled row is its default case's).
* ``graph``: TF32, the fixed-size list, and the whole step (forward, backward, clipping, the fused
  ``capturable`` Adam update) captured by ``torch.cuda.graph`` and replayed
  (:class:`syntaxformer.training.step.CudaGraphStep`, as ``--step-graph cuda-graph``). CUDA only:
  elsewhere its rows are recorded as skipped.
* ``graph-bf16``: ``graph`` with the loss under bfloat16 autocast (its cast cache off, as the trainer's
  ``--bf16 --step-graph cuda-graph``): the matrix products in bf16, parameters and Adam in float32.

``--cases`` measures some of the cases only (indices into :data:`CASES`); ``--baselines-only VARIANT ...``
measures those variants only for the default kernel settings (:data:`BASELINE_PRIORS`, the cases the
targets divide by). Every variant fails soft: a row whose model, compilation, capture or step raises (or that runs past
``--row-limit-s``, or past the run's ``--budget-s``) records ``error`` instead of numbers, and the run
goes on; once ``--budget-s`` has passed, the rows left record ``skipped``. With ``--out`` the record is rewritten after every row, so a
run killed from outside still leaves the rows it finished.

FLOPs per step come from ``torch.utils.flop_counter.FlopCounterMode`` over one eager forward and
backward of the eager batch (the useful work of a step: the fixed-size list's padding targets are not
counted), the same in every variant; the peak is a bfloat16 matrix product of 8192 x 8192 timed on the
same device in the same run; ``peak_share`` = FLOPs per step x steps/s / peak. ``warmup_seconds`` is the
time of the warm-up steps (compilation and capture included). The record names the device, torch and
the code (``syntaxformer.runtime.code_version``; ``--commit`` names it where the tree's ``.git`` is absent or stale).
"""

from __future__ import annotations

import argparse
import gc
import json
import signal
import subprocess
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from syntaxformer.blocks.mlm_head import labelled_positions, padded_positions
from syntaxformer.models import MODELS, make_config
from syntaxformer.runtime import code_version
from syntaxformer.training.batch import TokenBatch
from syntaxformer.training.objectives import mask_capacity
from syntaxformer.training.step import CUDA_GRAPH_WARMUP, CompiledStep, CudaGraphStep, use_tf32

VOCAB = 10_000
MASK_RATE = 0.15
CLIP = 1.5
#: the step variants, in their default order
VARIANTS = ("eager", "graph", "compiled", "graph-bf16")

#: the ``prior`` labels of the default kernel settings: the eager rows the targets are measured against
BASELINE_PRIORS = (None, "constituent", "none")

#: (model, preset, prior, batch rows, tokens per row, config overrides)
CASES = [
    ("tree-transformer", "paper", "constituent", 64, 27, {"constituent_variant": "official"}),
    ("tree-transformer", "paper", "none", 64, 27, {"prior": "none"}),
    ("tree-transformer", "small", "constituent", 512, 27, {"constituent_variant": "official"}),
    ("structformer", "paper", None, 150, 27, {}),
    ("on-lstm", "paper", None, 20, 70, {}),
    # the prior's fused kernels (eq. 5 as one bilinear form, eqs. 6-8 with a hand-written backward, the
    # closed-form gradient of log C): fewer, larger kernels than the literal math's
    (
        "tree-transformer",
        "paper",
        "constituent-fused",
        64,
        27,
        {"constituent_variant": "official", "kernel": "fused"},
    ),
    # the prior's link chain and attention as Triton kernels (CUDA): a handful of kernels per layer
    (
        "tree-transformer",
        "paper",
        "constituent-triton",
        64,
        27,
        {"constituent_variant": "official", "kernel": "triton"},
    ),
    (
        "tree-transformer",
        "small",
        "constituent-triton",
        512,
        27,
        {"constituent_variant": "official", "kernel": "triton"},
    ),
    # the ON-LSTM's cell as one Triton kernel each way per step (CUDA)
    ("on-lstm", "paper", "cell-triton", 20, 70, {"kernel": "triton"}),
    # StructFormer's parse stage (calibration and the dependency distribution) as one Triton kernel each way
    ("structformer", "paper", "dependency-triton", 150, 27, {"kernel": "triton"}),
]


def synthetic_batch(model: str, rows: int, length: int, device: torch.device, fixed: bool, seed: int = 0) -> TokenBatch:
    """One training batch, ``(rows, length)``: the masked LMs' labels at 15% of positions, their
    ``masked_positions`` the labelled positions (``fixed``: padded to :func:`mask_capacity` entries);
    the ON-LSTM's labels every token (the model shifts them), no list. The same ids and labels for any
    ``fixed``."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, VOCAB, (rows, length), generator=g)
    if model == "on-lstm":
        labels, positions = ids.clone(), None
    else:
        chosen = torch.rand(rows, length, generator=g) < MASK_RATE
        labels = ids.masked_fill(~chosen, -100)
        size = mask_capacity(rows, length, MASK_RATE)
        positions = padded_positions(labels, size) if fixed else labelled_positions(labels)
    batch = TokenBatch(ids, torch.ones_like(ids), labels, masked_positions=positions)
    return batch.to(device)


class StepLoop:
    """What the step runners of :mod:`syntaxformer.training.step` read of a training loop (``device``,
    ``optimizer``, :meth:`training_loss_of`, :meth:`backward_and_update`, :meth:`seed_dropout`), for one
    model: fused Adam (lr 1e-4, betas 0.9 / 0.98, eps 1e-9), clipping 1.5, the model's loss of a
    :class:`TokenBatch` (``masked_only`` with its ``masked_positions`` where it has them)."""

    def __init__(self, model: torch.nn.Module, device: torch.device):
        self.model, self.device, self.step = model, device, 0
        self.bf16 = False  # bfloat16 autocast around the loss (the graph-bf16 variant)
        self.autocast_cache = True  # its cache of cast weights, as the trainer's (a CUDA-graph step turns it off)
        fused = device.type in ("cuda", "cpu")
        self.optimizer = torch.optim.Adam(
            model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=fused, foreach=not fused
        )

    def training_loss_of(self, batch: TokenBatch) -> torch.Tensor:
        kw = batch.model_inputs()
        if batch.masked_positions is not None:
            kw.update(masked_only=True, masked_positions=batch.masked_positions)
        with torch.autocast(
            self.device.type, dtype=torch.bfloat16, enabled=self.bf16, cache_enabled=self.autocast_cache
        ):
            return self.model(**kw).loss

    def backward_and_update(self, loss: torch.Tensor) -> None:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), CLIP)
        self.optimizer.step()

    def seed_dropout(self) -> None:
        torch.manual_seed(self.step)


def eager_runner(loop: StepLoop):
    """The eager step: zero the gradients, loss, backward, clip, Adam; returns the detached loss."""

    def step(batch: TokenBatch) -> torch.Tensor:
        loop.optimizer.zero_grad(set_to_none=True)
        loss = loop.training_loss_of(batch)
        loop.backward_and_update(loss)
        return loss.detach()

    return step


def make_runner(variant: str, loop: StepLoop, cpu_backend: str):
    """The step function of ``variant`` for ``loop`` (``batch -> detached loss``)."""
    if variant == "eager":
        return eager_runner(loop)
    if variant == "compiled":
        return CompiledStep(loop, backend=None if loop.device.type == "cuda" else cpu_backend)
    if variant in ("graph", "graph-bf16"):
        loop.bf16 = variant == "graph-bf16"
        return CudaGraphStep(loop)
    raise ValueError(f"unknown variant {variant!r}")


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(loop: StepLoop, runner, batch: TokenBatch, steps: int, warmup: int) -> tuple[float, float, float]:
    """``(steps per second over steps after warmup, seconds of the warm-up, the last loss)``; each step
    seeds its dropout first (as the trainer's ``device_step``); the device is waited for at both ends."""
    device = loop.device

    def one():
        loop.seed_dropout()
        loss = runner(batch)
        loop.step += 1
        return loss

    t0 = time.perf_counter()
    for _ in range(warmup):
        one()
    _synchronize(device)
    t1 = time.perf_counter()
    for _ in range(steps):
        loss = one()
    _synchronize(device)
    t2 = time.perf_counter()
    return steps / (t2 - t1), t1 - t0, float(loss)


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


def flops_per_step(loop: StepLoop, batch: TokenBatch) -> int:
    """FLOPs of one eager forward and backward (``FlopCounterMode``: matrix products and attention)."""
    with FlopCounterMode(display=False) as counter:
        loop.training_loss_of(batch).backward()
    loop.model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


@contextmanager
def tf32(device: torch.device, on: bool):
    """TF32 products on CUDA while inside when ``on`` (``use_tf32``); PyTorch's settings restored after."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    use_tf32(device, on)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


class RowTimeout(Exception):
    """A row ran past its time limit."""


@contextmanager
def time_limit(seconds: int):
    """Raise :class:`RowTimeout` in the main thread after ``seconds`` (SIGALRM; none where unavailable or 0)."""
    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expired(signum, frame):
        raise RowTimeout(f"the row ran past its limit of {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:300]}"


def sized(case, smoke: bool) -> tuple:
    """``case`` as a run measures it: itself, or with ``smoke`` the ``tiny`` preset and at most 8 x 12."""
    model, preset, prior, rows, length, overrides = case
    return (model, "tiny", prior, min(rows, 8), min(length, 12), overrides) if smoke else case


def step_loop(model: str, preset: str, overrides: dict, device: torch.device) -> StepLoop:
    """A :class:`StepLoop` of a fresh model of the registry (seed 0, :data:`VOCAB` words) on ``device``."""
    torch.manual_seed(0)
    config = make_config(model, preset, vocab_size=VOCAB, **overrides)
    return StepLoop(MODELS[model](config).to(device).train(), device)


def code_record(commit: str | None) -> dict:
    """The code a record names: :func:`~syntaxformer.runtime.code_version`, with ``commit`` (when given) in
    place of git's: a copy of the tree on another machine may carry a stale ``.git``."""
    code = code_version()
    return code if commit is None else {**code, "commit": commit, "modified": None}


def row_of(case, variant: str) -> dict:
    """The columns naming a row of the record: model, preset, prior, batch (``"B x N"``) and variant."""
    model, preset, prior, rows, length, _ = case
    return dict(model=model, preset=preset, prior=prior, batch=f"{rows} x {length}", variant=variant)


def measure(case, variant: str, device: torch.device, args, peak: float, limit_s: int = 0) -> dict:
    """One row: build the model, count its FLOPs, time its step in ``variant`` (errors recorded; stopped
    after ``limit_s`` seconds, 0: never)."""
    model, preset, _, rows, length, overrides = case
    row = row_of(case, variant)
    if variant.startswith("graph") and device.type != "cuda":
        return {**row, "skipped": f"needs CUDA (torch.cuda.graph); the run is on {device.type}"}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    loop = runner = None
    try:
        with time_limit(limit_s), tf32(device, variant != "eager"):
            loop = step_loop(model, preset, overrides, device)
            batch = synthetic_batch(model, rows, length, device, fixed=variant != "eager")
            runner = make_runner(variant, loop, args.cpu_backend)
            warmup = args.warmup + (CUDA_GRAPH_WARMUP + 1 if variant != "eager" else 0)
            sps, warmup_seconds, loss = time_steps(loop, runner, batch, args.steps, warmup)
            # counted after the timing: no dispatch mode has run in the process before a capture
            flops = flops_per_step(loop, synthetic_batch(model, rows, length, device, fixed=False))
    except Exception as e:  # a variant that cannot run is recorded, not fatal
        traceback.print_exc()  # the whole story in the log; the row keeps one line
        return {**row, "error": error_text(e)}
    finally:
        del loop, runner
        if variant == "compiled":
            torch._dynamo.reset()
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    out = {
        **row,
        "steps_per_second": round(sps, 3),
        "tokens_per_second": round(sps * rows * length, 1),
        "flops_per_step": flops,
        "peak_share": round(flops * sps / peak, 5),
        "warmup_seconds": round(warmup_seconds, 2),
        "last_loss": round(loss, 4),
    }
    if device.type == "cuda":
        out["max_memory_mib"] = round(torch.cuda.max_memory_allocated(device) / 2**20)
    return out


def argv_of(args) -> list[str]:
    """The options a child process of ``--isolate`` repeats (device, steps, warm-up, smoke, backend)."""
    argv = ["--device", args.device, "--steps", str(args.steps), "--warmup", str(args.warmup)]
    return argv + ["--cpu-backend", args.cpu_backend] + (["--smoke"] if args.smoke else [])


def measure_in_child(index: int, variant: str, argv: list[str], peak: float, limit_s: int) -> dict:
    """:func:`measure` of case ``index`` in a fresh Python process (``--one-row``): a capture or
    compilation that fails leaves CUDA's generator and allocator broken for the rest of a process
    ("Offset increment outside graph capture"), so each row gets its own. The child's stderr passes
    through (tracebacks in the log); its row is its last line of stdout."""
    command = [sys.executable, "-m", "benchmarks.speed.gpu_step", *argv, "--one-row", str(index), variant]
    command += ["--peak", repr(peak), "--row-limit-s", str(limit_s)]
    row = row_of(sized(CASES[index], "--smoke" in argv), variant)
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=limit_s + 60 if limit_s else None)
    except subprocess.TimeoutExpired:
        return {**row, "error": f"RowTimeout: the row's process ran past {limit_s + 60} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {**row, "error": f"the row's process exited with status {done.returncode}"}
    return json.loads(lines[-1])


def parser() -> argparse.ArgumentParser:
    """The script's options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=40, help="timed steps per row")
    p.add_argument("--warmup", type=int, default=3, help="warm-up steps (compiled and graph: 4 more)")
    p.add_argument("--smoke", action="store_true", help="tiny presets and small batches (checks the script)")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    p.add_argument("--cpu-backend", default="aot_eager", help="torch.compile's backend off CUDA (compiled)")
    p.add_argument(
        "--budget-s",
        type=float,
        default=0,
        help="the run's seconds: a row is stopped there, later ones skipped (0: no limit)",
    )
    p.add_argument("--row-limit-s", type=int, default=0, help="a row's time limit, seconds (0: none)")
    p.add_argument(
        "--baselines-only",
        nargs="+",
        default=[],
        choices=VARIANTS,
        help="variants measured only for the default kernel settings (BASELINE_PRIORS: the targets' baselines)",
    )
    p.add_argument(
        "--cases",
        nargs="+",
        type=int,
        default=None,
        help=f"indices into CASES to measure, in CASES' order (default: all {len(CASES)})",
    )
    p.add_argument(
        "--commit",
        default=None,
        help="the code's commit, recorded in place of git's (a copied tree's .git may be stale)",
    )
    p.add_argument("--out", default=None, help="the JSON record, rewritten after every row (default: print only)")
    p.add_argument("--isolate", action="store_true", help="each row in its own Python process (after a failed capture)")
    p.add_argument("--one-row", nargs=2, metavar=("CASE", "VARIANT"), help=argparse.SUPPRESS)  # an --isolate child
    p.add_argument("--peak", type=float, default=None, help=argparse.SUPPRESS)  # the parent's measured peak
    return p


def measure_rows(args, cases: list, device: torch.device, peak: float, record: dict, start: float) -> None:
    """Measure every (variant, case) row asked for, in order, appending each to ``record['rows']`` (and
    rewriting ``--out`` after each); rows past ``--budget-s`` are recorded as skipped."""
    for variant in args.variants:
        for index, case in enumerate(cases):
            if args.cases is not None and index not in args.cases:
                continue
            if variant in args.baselines_only and case[2] not in BASELINE_PRIORS:
                continue
            left = args.budget_s - (time.perf_counter() - start) if args.budget_s else None
            if left is not None and left < 1:
                row = {**row_of(case, variant), "skipped": f"out of time (--budget-s {args.budget_s:g})"}
            else:
                limits = [x for x in (args.row_limit_s, None if left is None else int(left)) if x]
                limit = min(limits, default=0)
                if args.isolate:
                    row = measure_in_child(index, variant, argv_of(args), peak, limit)
                else:
                    row = measure(case, variant, device, args, peak, limit)
            record["rows"].append(row)
            print(json.dumps(row), flush=True)
            if args.out:
                Path(args.out).write_text(json.dumps(record, indent=2) + "\n")


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    start = time.perf_counter()
    device = torch.device(args.device)
    peak = args.peak or matmul_peak(device, n=512 if args.smoke else 8192)
    cases = [sized(case, args.smoke) for case in CASES]
    if args.one_row:
        index, variant = int(args.one_row[0]), args.one_row[1]
        print(json.dumps(measure(cases[index], variant, device, args, peak, args.row_limit_s)), flush=True)
        return 0
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the peak's matrices: the children have the device
    record = dict(
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        torch=torch.__version__,
        code=code_record(args.commit),
        smoke=args.smoke,
        matmul_peak_flops=round(peak),
        steps=args.steps,
        warmup=args.warmup,
        rows=[],
    )
    measure_rows(args, cases, device, peak, record, start)
    record["seconds"] = round(time.perf_counter() - start, 1)
    text = json.dumps(record, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
