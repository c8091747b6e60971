"""``docs/results/speed.md``: the accelerator step: steps/s on a GPU per preset and variant (``gpu-step``),
each speed target met or not (``gpu-step-targets``, :data:`GPU_TARGETS`), the eager and the fast step
through the trainer (``gpu-loss-curve``), operators per step (``op-count``), each Triton launch compiled for
CUDA (``triton-compile``) and whether the compiled step traces per PyTorch version (``compile-trace``);
each table says so where its record does not exist yet.

Data: ``records/benchmarks/gpu-step.json`` and ``gpu-step-compiled.json`` (``benchmarks/speed/gpu_step.py``,
written on a GPU machine by ``benchmarks/speed/gpu_session.sh``), ``gpu-loss-curve.json``,
``op-count.json``, ``triton-compile*.json`` and ``compile-trace-*.json`` (all under ``records/benchmarks/``).
"""

from __future__ import annotations

from benchmarks import ROOT
from benchmarks.tools.results.core import load, markdown, table

#: benchmarks/speed/gpu_step.py's record (written on a GPU machine by benchmarks/speed/gpu_session.sh)
GPU_STEP = "records/benchmarks/gpu-step.json"


#: gpu_step.py's ``compiled`` rows of the same GPU session (gpu_session.sh part 2a), read with GPU_STEP's
GPU_STEP_COMPILED = "records/benchmarks/gpu-step-compiled.json"


def _gpu_step_run() -> dict:
    """GPU_STEP's record, with the rows of GPU_STEP_COMPILED appended when that exists for the same device
    and torch (one session's two runs of gpu_step.py)."""
    run = load(GPU_STEP)
    if (ROOT / GPU_STEP_COMPILED).exists():
        more = load(GPU_STEP_COMPILED)
        if (more.get("device"), more.get("torch")) == (run.get("device"), run.get("torch")):
            run = {**run, "rows": [*run["rows"], *more["rows"]]}
    return run


def _note(row: dict) -> str:
    """A gpu-step row's error or skip, one line for a table cell."""
    text = f"failed: {row['error']}" if "error" in row else f"skipped: {row['skipped']}" if "skipped" in row else ""
    return text.replace("|", "\\|")[:160]


@table("gpu-step")
def gpu_step_table() -> str:
    """docs/results/speed.md: steps/s of the training step on a GPU per preset and variant, or a plain
    statement that no GPU measurement exists (``records/benchmarks/gpu-step.json`` absent, or holding only a
    run on the CPU or a smoke run)."""
    if not (ROOT / GPU_STEP).exists():
        return (
            f"**Not measured on a GPU yet**: `{GPU_STEP}` does not exist. `benchmarks/speed/gpu_session.sh` writes"
            " it on a GPU machine (`benchmarks/speed/README.md`)."
        )
    run = _gpu_step_run()
    if run.get("smoke") or str(run.get("device", "cpu")).lower() in ("cpu", ""):
        what = "a smoke run (tiny presets, small batches)" if run.get("smoke") else "a run"
        return (
            f"**Not measured on a GPU yet**: `{GPU_STEP}` holds only {what} on `{run.get('device', 'cpu')}`"
            f" (torch {run.get('torch', '?')}), which checks that the script runs; its numbers are not a GPU's."
        )
    eager = {
        (r["model"], r["preset"], r["prior"], r["batch"]): r["steps_per_second"]
        for r in run["rows"]
        if r["variant"] == "eager" and "steps_per_second" in r
    }
    rows = []
    for r in sorted(run["rows"], key=lambda r: [str(r[k]) for k in ("model", "preset", "prior", "batch")]):
        measured = "steps_per_second" in r
        base = eager.get((r["model"], r["preset"], r["prior"], r["batch"]))
        rows.append(
            [
                f"`{r['model']}`",
                r["preset"],
                r["prior"] or "–",
                r["batch"],
                f"`{r['variant']}`",
                f"{r['steps_per_second']:.1f}" if measured else "–",
                f"{r['tokens_per_second']:,.0f}" if measured else "–",
                f"{r['steps_per_second'] / base:.2f}" if measured and base else "–",
                f"{r['flops_per_step'] / 1e9:.1f}" if measured else "–",
                f"{100 * r['peak_share']:.1f}%" if measured else "–",
                f"{r['warmup_seconds']:.1f}" if measured and "warmup_seconds" in r else "–",
                _note(r),
            ]
        )
    head = (
        f"{run['device']}, torch {run['torch']}; bfloat16 matrix-product peak measured in the run:"
        f" {run['matmul_peak_flops'] / 1e12:.0f} TFLOP/s; {run['steps']} timed steps per row after warm-up."
    )
    table_ = markdown(
        [
            "model",
            "preset",
            "prior",
            "batch",
            "variant",
            "steps/s",
            "tokens/s",
            "vs eager",
            "GFLOP/step",
            "share of peak",
            "warm-up s",
            "note",
        ],
        rows,
        "lllllrrrrrrl",
    )
    return f"{head}\n\n{table_}"


#: the kernel settings of one model, any of whose graphed rows can meet its target (the same model)
TT_KERNELS = ("constituent", "constituent-fused", "constituent-triton")

#: the accelerator step's targets: (what, (model, preset, the priors of its rows: the first is the eager
#: baseline's), its baseline: "eager" (the first prior's eager row, a speed-up of at least the bound) or
#: another case's graphed row (model, preset, prior) (a time ratio of at most the bound))
GPU_TARGETS = [
    ("Tree Transformer `paper`, batches of 64: ≥ 4× eager", ("tree-transformer", "paper", TT_KERNELS), "eager", 4.0),
    (
        "its step ≤ 1.2× the plain Transformer's, both fast",
        ("tree-transformer", "paper", TT_KERNELS),
        ("tree-transformer", "paper", "none"),
        1.2,
    ),
    ("Tree Transformer `small`, batches of 512: ≥ 2×", ("tree-transformer", "small", TT_KERNELS), "eager", 2.0),
    (
        "StructFormer `paper`, about 4,096 tokens: ≥ 3×",
        ("structformer", "paper", (None, "dependency-triton")),
        "eager",
        3.0,
    ),
    ("ON-LSTM `paper`, 20 × 70: ≥ 10×", ("on-lstm", "paper", (None, "cell-triton")), "eager", 10.0),
]


#: the fast variants of gpu_step.py, the first the reference one (float32, captured by hand)
FAST_VARIANTS = ("graph", "graph-bf16", "compiled")


def _fastest(sps: dict, key: tuple, variants: tuple = FAST_VARIANTS) -> tuple[float | None, str]:
    """The fastest row of ``key`` = (model, preset, priors) among its kernel settings and ``variants``:
    ``(steps/s, " (`prior`, `variant`)" naming what is not the default)`` (the default: the first prior,
    ``graph``), or ``(None, "")``."""
    model, preset, priors = key
    found = [
        (v, p, variant)
        for (m, pr, p, variant), v in sps.items()
        if (m, pr) == (model, preset) and p in priors and variant in variants
    ]
    if not found:
        return None, ""
    value, prior, variant = max(found, key=lambda f: f[0])
    named = [f"`{prior}`"] * (prior != priors[0]) + [f"`{variant}`"] * (variant != FAST_VARIANTS[0])
    return value, f" ({', '.join(named)})" if named else ""


OP_COUNT = "records/benchmarks/op-count.json"

#: each kernel setting's (model, preset, prior) -> the default setting's, whose count it is compared with
OP_COUNT_BASES = {
    "constituent-fused": "constituent",
    "constituent-triton": "constituent",
    "cell-triton": None,
    "dependency-triton": None,
}


@table("op-count")
def op_count_table() -> str:
    """docs/results/speed.md: operators per training step (``op_count.py``) of each case, with the
    operators the prior adds over the plain Transformer and each kernel setting's count against its
    model's default, or nothing recorded."""
    if not (ROOT / OP_COUNT).exists():
        return f"No record yet (`{OP_COUNT}`)."
    run = load(OP_COUNT)
    counts = {(r["model"], r["preset"], r["prior"]): r["ops_per_step"] for r in run["rows"]}
    rows, seen = [], set()
    for r in run["rows"]:
        key = (r["model"], r["preset"], r["prior"])
        if key in seen:
            continue
        seen.add(key)
        plain = counts.get((r["model"], r["preset"], "none")) if r["model"] == "tree-transformer" else None
        base_prior = OP_COUNT_BASES.get(r["prior"], r["prior"])
        base = counts.get((r["model"], r["preset"], base_prior))
        added = f"{r['ops_per_step'] - plain:,}" if plain is not None and r["prior"] != "none" else "–"
        against = f"{r['ops_per_step'] / base:.2f}" if base and base_prior != r["prior"] else "–"
        rows.append(
            [
                f"`{r['model']}`",
                f"`{r['preset']}`",
                f"`{r['prior']}`" if r["prior"] else "–",
                r["batch"],
                f"{r['ops_per_step']:,}",
                f"{r['triton_kernels']:,}",
                added,
                against,
            ]
        )
    head = f"{run['what']}; torch {run['torch']}, Triton {run['triton']}."
    return f"{head}\n\n" + markdown(
        ["model", "preset", "kernels (prior)", "batch", "ops/step", "of them Triton", "over `none`", "× default"],
        rows,
        "lllrrrrr",
    )


TRITON_COMPILE = "records/benchmarks/triton-compile.json"


@table("triton-compile")
def triton_compile_table() -> str:
    """docs/results/speed.md: each Triton launch of a training step compiled for CUDA without a GPU
    (``triton_compile.py``): its kernel, tile sizes, threads, and per architecture its registers and the
    bytes per thread spilled to stack or local memory, or the compiler's error; or nothing recorded."""
    if not (ROOT / TRITON_COMPILE).exists():
        return f"No record yet (`{TRITON_COMPILE}`)."
    run = load(TRITON_COMPILE)
    rows = []
    for launch in run["launches"]:
        blocks = ", ".join(f"{k} {v}" for k, v in launch["constexprs"].items() if k.startswith("BLOCK"))
        precision = launch["constexprs"].get("PRECISION", "–")
        switches = ", ".join(k for k, v in launch["constexprs"].items() if v is True) or "–"
        module, name = launch["kernel"].rsplit(".", 1)
        kernel = f"`{module.rsplit('.', 1)[1]}.{name}`"
        for arch, result in launch["compiled"].items():
            if "error" in result:
                cells = ["**error**", result["error"]]
            else:
                cells = [str(result["registers"]), f"{result['stack_bytes'] + result['local_bytes']:,}"]
            rows.append([kernel, blocks, switches, precision, str(launch["num_warps"]), f"sm_{arch}", *cells])
    head = f"{run['what']}; Triton {run['triton']}, torch {run['torch']} (the code: the record's `code`)."
    header = ["kernel", "tiles", "switched on", "products", "warps", "target", "registers", "spilled bytes/thread"]
    others = []
    for path in sorted((ROOT / TRITON_COMPILE).parent.glob("triton-compile-*.json")):
        other = load(str(path.relative_to(ROOT)))
        results = [r for launch in other["launches"] for r in launch["compiled"].values()]
        failed = sum("error" in r for r in results)
        spilled = sum(r.get("stack_bytes", 0) + r.get("local_bytes", 0) > 0 for r in results)
        status = f"**{failed} fail**" if failed else "all compile"
        others.append(
            f"With Triton {other['triton']} (`{path.name}`): {len(results)} launches, {status}, {spilled} with spills."
        )
    tail = "\n\n" + " ".join(others) if others else ""
    return f"{head}\n\n" + markdown(header, rows, "lllllrrr") + tail


COMPILE_TRACES = "records/benchmarks/compile-trace-*.json"


@table("compile-trace")
def compile_trace_table() -> str:
    """docs/results/speed.md: per PyTorch version (``compile_trace.py``'s records), whether the compiled
    step's loss traces on (fake) CUDA tensors for each case, or the tracer's error and where."""
    paths = sorted(ROOT.glob(COMPILE_TRACES))
    if not paths:
        return f"No record yet (`{COMPILE_TRACES}`)."
    runs = [load(str(path.relative_to(ROOT))) for path in paths]
    by_case = [{(r["model"], r["preset"], r["prior"], r["batch"]): r for r in run["rows"]} for run in runs]
    rows = []
    for key in dict.fromkeys(k for rows_of in by_case for k in rows_of):  # every case, in first-seen order
        cells = []
        for rows_of in by_case:
            row = rows_of.get(key)
            if row is None:
                cells.append("–")
            else:
                cells.append("traces" if row["traced"] else f"**fails**: {row['error']} (`{row['where']}`)")
        rows.append([key[0], key[1], key[2] or "–", key[3], *cells])
    header = ["model", "preset", "kernels (prior)", "batch", *(f"torch {run['torch']}" for run in runs)]
    head = f"{runs[0]['what']} (the code: the records' `code`)."
    return f"{head}\n\n" + markdown(header, rows, "l" * len(header))


@table("gpu-step-targets")
def gpu_step_targets() -> str:
    """docs/results/speed.md: each speed target of the accelerator step (met or not met) from the fastest
    of ``gpu-step.json``'s fast rows (:data:`FAST_VARIANTS`, with ``gpu-step-compiled.json``'s) against
    its baseline, or nothing measured."""
    if not (ROOT / GPU_STEP).exists() or load(GPU_STEP).get("smoke"):
        return "No GPU record: every target is **not measured**."
    run = _gpu_step_run()
    sps = {
        (r["model"], r["preset"], r["prior"], r["variant"]): r["steps_per_second"]
        for r in run["rows"]
        if "steps_per_second" in r
    }
    rows = []
    for what, key, against, bound in GPU_TARGETS:
        default = (*key[:2], key[2][0])  # the default kernels' (model, preset, prior)
        if against == "eager":
            fast, kernels = _fastest(sps, key)
            base = sps.get((*default, "eager"))
        else:  # both fast and in the same variant: the variant where the ratio is least
            pairs = []
            for variant in FAST_VARIANTS:
                value, named = _fastest(sps, key, (variant,))
                if value is not None and (*against, variant) in sps:
                    pairs.append((sps[(*against, variant)] / value, value, sps[(*against, variant)], named))
            _, fast, base, kernels = min(pairs) if pairs else (None, None, None, "")
        if fast is None or base is None:
            rows.append([what, "not measured", "**not met**"])
            continue
        if against == "eager":
            ratio, met = fast / base, fast / base >= bound
            cell = f"{fast:.1f}{kernels} against {base:.1f} steps/s: **{ratio:.1f}×**"
        else:
            ratio, met = base / fast, base / fast <= bound
            eager = sps.get((*default, "eager")), sps.get((*against, "eager"))
            extra = f" (eager: {eager[1] / eager[0]:.1f}×)" if all(eager) else ""
            cell = f"{base:.1f} against {fast:.1f}{kernels} steps/s: **{ratio:.2f}×**{extra}"
        rows.append([what, cell, "met" if met else "**not met**"])
    return markdown(["target", f"measured ({run['device']}, the fastest step against its baseline)", ""], rows, "lll")


#: two 2,000-step training runs on a GPU, eager against the fast step (benchmarks/speed/gpu_session.sh)
GPU_CURVE = "records/benchmarks/gpu-loss-curve.json"


@table("gpu-loss-curve")
def gpu_loss_curve() -> str:
    """docs/results/speed.md: the eager and the fast step through the trainer on real data (minutes,
    steps/s, final losses), from ``records/benchmarks/gpu-loss-curve.json``, or nothing measured."""
    if not (ROOT / GPU_CURVE).exists():
        return "No GPU training record yet."
    record = load(GPU_CURVE)
    rows = []
    for name, run in sorted(record["runs"].items()):
        train = run["train_minutes_total"]
        rows.append(
            [
                f"`{name}`",
                str(run["steps"]),
                f"{train:.2f}",
                f"{run['minutes']:.2f}",
                f"{run['steps'] / (60 * train):.1f}",
                f"{run['tokens_per_second']:,.0f}",
                f"{run['final_train_loss']:.3f}",
                f"{run['final_valid_loss']:.3f}",
            ]
        )
    head = f"{record['device']}, torch {record['torch']}: {record['what']}."
    header = ["step", "steps", "training min", "with validation min", "steps/s", "tokens/s", "train loss", "valid loss"]
    return f"{head}\n\n" + markdown(header, rows, "lrrrrrrr")
