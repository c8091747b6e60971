"""benchmarks/speed/gpu_step.py on the CPU (its smoke mode: every variant either measured, skipped or
failed soft, the record rewritten after every row) and the results table written from its record
(``gpu-step``: a plain statement while no GPU measurement exists)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from benchmarks.speed import gpu_step
from benchmarks.tools import results_tables
from benchmarks.tools.results import accelerator

torch.set_num_threads(1)

TINY_CASE = ("tree-transformer", "paper", "constituent", 64, 27, {"constituent_variant": "official"})


def _run(tmp_path, monkeypatch, *options) -> dict:
    monkeypatch.setattr(gpu_step, "CASES", [TINY_CASE])
    out = tmp_path / "gpu-step.json"
    argv = ["--device", "cpu", "--smoke", "--steps", "1", "--warmup", "0", "--out", str(out), *options]
    assert gpu_step.main(argv) == 0
    return json.loads(out.read_text())


def test_a_smoke_run_measures_eager_and_skips_the_cuda_graph_on_the_cpu(tmp_path, monkeypatch):
    record = _run(tmp_path, monkeypatch, "--variants", "eager", "graph")
    assert record["device"] == "cpu" and record["smoke"] is True and record["code"]
    eager, graph = record["rows"]
    assert (eager["model"], eager["preset"], eager["batch"], eager["variant"]) == (
        "tree-transformer",
        "tiny",
        "8 x 12",
        "eager",
    )
    assert eager["steps_per_second"] > 0 and eager["flops_per_step"] > 0 and 0 < eager["peak_share"]
    assert graph["variant"] == "graph" and "needs CUDA" in graph["skipped"] and "steps_per_second" not in graph


def test_a_failing_variant_records_its_error_and_the_run_goes_on(tmp_path, monkeypatch):
    real = gpu_step.make_runner

    def broken(variant, loop, cpu_backend):
        if variant == "compiled":
            raise RuntimeError("cannot compile this\nsecond line")
        return real(variant, loop, cpu_backend)

    monkeypatch.setattr(gpu_step, "make_runner", broken)
    record = _run(tmp_path, monkeypatch, "--variants", "compiled", "eager")
    compiled, eager = record["rows"]
    assert compiled["error"] == "RuntimeError: cannot compile this"
    assert eager["steps_per_second"] > 0


def test_a_row_past_its_time_limit_is_stopped_and_recorded(tmp_path, monkeypatch):
    def slow(variant, loop, cpu_backend):
        def step(batch):
            time.sleep(30)

        return step

    monkeypatch.setattr(gpu_step, "make_runner", slow)
    t0 = time.perf_counter()
    record = _run(tmp_path, monkeypatch, "--variants", "eager", "--row-limit-s", "1")
    assert record["rows"][0]["error"] == "RowTimeout: the row ran past its limit of 1 s"
    assert time.perf_counter() - t0 < 20


def test_rows_past_the_budget_are_recorded_as_skipped(tmp_path, monkeypatch):
    record = _run(tmp_path, monkeypatch, "--variants", "eager", "--budget-s", "1e-9")
    assert [row["skipped"] for row in record["rows"]] == ["out of time (--budget-s 1e-09)"]


def test_baselines_only_leaves_out_those_variants_rows_of_kernel_settings(tmp_path, monkeypatch):
    kernel_case = ("tree-transformer", "paper", "constituent-fused", 64, 27, {"kernel": "fused"})
    monkeypatch.setattr(gpu_step, "CASES", [TINY_CASE, kernel_case])
    out = tmp_path / "gpu-step.json"
    argv = ["--device", "cpu", "--smoke", "--steps", "1", "--warmup", "0", "--out", str(out)]
    variants = ["--variants", "graph", "eager", "graph-bf16", "--baselines-only", "eager", "graph-bf16"]
    assert gpu_step.main([*argv, *variants]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["prior"], r["variant"]) for r in rows] == [
        ("constituent", "graph"),
        ("constituent-fused", "graph"),
        ("constituent", "eager"),
        ("constituent", "graph-bf16"),
    ]


def test_cases_measures_only_the_cases_named(tmp_path, monkeypatch):
    kernel_case = ("tree-transformer", "paper", "constituent-fused", 64, 27, {"kernel": "fused"})
    monkeypatch.setattr(gpu_step, "CASES", [TINY_CASE, kernel_case, TINY_CASE])  # 0 and 2: the same case
    out = tmp_path / "gpu-step.json"
    argv = ["--device", "cpu", "--smoke", "--steps", "1", "--warmup", "0", "--out", str(out)]
    assert gpu_step.main([*argv, "--variants", "graph", "--cases", "1", "2"]) == 0
    assert [r["prior"] for r in json.loads(out.read_text())["rows"]] == ["constituent-fused", "constituent"]
    assert gpu_step.main([*argv, "--variants", "graph", "--cases", "0"]) == 0
    assert [r["prior"] for r in json.loads(out.read_text())["rows"]] == ["constituent"]


def test_the_bf16_variant_computes_the_loss_under_bf16_autocast():
    loop = gpu_step.step_loop("tree-transformer", "tiny", {"hidden_dropout_prob": 0.0}, torch.device("cpu"))
    loop.model.eval()
    batch = gpu_step.synthetic_batch("tree-transformer", 4, 12, torch.device("cpu"), fixed=True)
    exact = loop.training_loss_of(batch)
    loop.bf16 = True
    low = loop.training_loss_of(batch)
    assert exact.dtype == low.dtype == torch.float32  # the loss itself is float32 under autocast
    assert 0 < abs(float((low - exact).detach())) < 0.05  # bf16 products: another value, close


def test_the_fixed_size_list_holds_the_same_targets():
    eager = gpu_step.synthetic_batch("tree-transformer", 8, 12, torch.device("cpu"), fixed=False)
    fixed = gpu_step.synthetic_batch("tree-transformer", 8, 12, torch.device("cpu"), fixed=True)
    assert torch.equal(eager.labels, fixed.labels)
    n = eager.masked_positions.numel()
    assert torch.equal(fixed.masked_positions[:n], eager.masked_positions)
    assert fixed.masked_positions.numel() == gpu_step.mask_capacity(8, 12, gpu_step.MASK_RATE)
    assert (fixed.labels.reshape(-1)[fixed.masked_positions[n:]] == -100).all()


def _table(tmp_path, monkeypatch, record: dict | None) -> str:
    path = tmp_path / "gpu-step.json"
    if record is not None:
        path.write_text(json.dumps(record))
    monkeypatch.setattr(accelerator, "GPU_STEP", str(path))  # absolute: ROOT / path is the path
    return results_tables.gpu_step_table()


def test_the_table_says_so_while_no_gpu_measurement_exists(tmp_path, monkeypatch):
    assert _table(tmp_path, monkeypatch, None).startswith("**Not measured on a GPU yet**")
    assert "does not exist" in _table(tmp_path, monkeypatch, None)
    smoke = dict(device="cpu", torch="2.13.0+cpu", smoke=True, rows=[])
    text = _table(tmp_path, monkeypatch, smoke)
    assert text.startswith("**Not measured on a GPU yet**") and "smoke run" in text and "|" not in text


def test_the_table_of_a_gpu_record(tmp_path, monkeypatch):
    case = dict(model="tree-transformer", preset="paper", prior="constituent", batch="64 x 27")
    numbers = dict(tokens_per_second=27_000.0, flops_per_step=2e11, peak_share=0.01, warmup_seconds=4.0)
    record = dict(
        device="NVIDIA H100 80GB HBM3",
        torch="2.11.0+cu130",
        smoke=False,
        matmul_peak_flops=7.9e14,
        steps=60,
        rows=[
            {**case, "variant": "eager", "steps_per_second": 15.0, **numbers},
            {**case, "variant": "graph", "steps_per_second": 60.0, **numbers},
            {**case, "variant": "compiled", "error": "Unsupported: a | b"},
        ],
    )
    text = _table(tmp_path, monkeypatch, record)
    assert text.startswith("NVIDIA H100 80GB HBM3, torch 2.11.0+cu130") and "790 TFLOP/s" in text
    lines = text.splitlines()
    graph = next(line for line in lines if "`graph`" in line)
    assert "| 60.0 | 27,000 | 4.00 | 200.0 | 1.0% | 4.0 |" in graph
    compiled = next(line for line in lines if "`compiled`" in line)
    assert "failed: Unsupported: a \\| b" in compiled and compiled.count(" – ") == 6


def test_isolate_runs_each_row_in_its_own_process(tmp_path, monkeypatch):
    """The child measures the row (the real CASES' first row at smoke size) and hands it back whole; a
    child that dies is recorded as an error, the run goes on."""
    out = tmp_path / "gpu-step.json"
    argv = ["--device", "cpu", "--smoke", "--steps", "1", "--warmup", "0", "--isolate", "--variants", "eager"]
    monkeypatch.setattr(gpu_step, "CASES", gpu_step.CASES[:1])
    assert gpu_step.main([*argv, "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert (row["model"], row["preset"], row["batch"], row["variant"]) == (
        "tree-transformer",
        "tiny",
        "8 x 12",
        "eager",
    )
    assert row["steps_per_second"] > 0 and row["flops_per_step"] > 0
    died = gpu_step.measure_in_child(0, "eager", ["--device", "no-such-device", "--smoke"], 1.0, 60)
    assert died["error"] == "the row's process exited with status 1" and died["variant"] == "eager"


def test_the_targets_table_says_met_and_not_met(tmp_path, monkeypatch):
    def rows(model, preset, prior, eager, graph):
        case = dict(model=model, preset=preset, prior=prior)
        return [
            {**case, "variant": "eager", "steps_per_second": eager},
            {**case, "variant": "graph", "steps_per_second": graph},
        ]

    record = dict(device="GPU", smoke=False, rows=rows("tree-transformer", "paper", "constituent", 10.0, 50.0))
    record["rows"] += rows("tree-transformer", "paper", "none", 40.0, 55.0) + rows("on-lstm", "paper", None, 4.0, 8.0)
    path = tmp_path / "gpu-step.json"
    path.write_text(json.dumps(record))
    monkeypatch.setattr(accelerator, "GPU_STEP", str(path))
    lines = results_tables.gpu_step_targets().splitlines()
    assert (
        lines[2]
        == "| Tree Transformer `paper`, batches of 64: ≥ 4× eager | 50.0 against 10.0 steps/s: **5.0×** | met |"
    )
    assert lines[3].endswith("55.0 against 50.0 steps/s: **1.10×** (eager: 4.0×) | met |")
    assert lines[4].endswith("| not measured | **not met** |")  # no small-preset rows
    assert lines[6].endswith("8.0 against 4.0 steps/s: **2.0×** | **not met** |")


def test_the_targets_take_the_fastest_variant_and_compare_like_with_like(tmp_path, monkeypatch):
    """A bf16 graph and a compiled row (the latter from the session's second record) count as fast steps,
    named; the prior/plain ratio pairs rows of one variant and takes the least ratio."""

    def row(prior, variant, sps, model="tree-transformer"):
        return dict(model=model, preset="paper", prior=prior, variant=variant, steps_per_second=sps)

    head = dict(device="GPU", torch="2.11", smoke=False)
    record = dict(head, rows=[row("constituent", "eager", 10.0), row("constituent", "graph", 50.0)])
    record["rows"] += [row("constituent-triton", "graph", 70.0), row("none", "graph", 80.0)]
    record["rows"] += [row("constituent", "graph-bf16", 90.0), row("none", "graph-bf16", 150.0)]
    compiled = dict(head, rows=[row("constituent", "compiled", 75.0), row("none", "compiled", 82.5)])
    path, more = tmp_path / "gpu-step.json", tmp_path / "gpu-step-compiled.json"
    path.write_text(json.dumps(record))
    more.write_text(json.dumps(compiled))
    monkeypatch.setattr(accelerator, "GPU_STEP", str(path))
    monkeypatch.setattr(accelerator, "GPU_STEP_COMPILED", str(more))
    lines = results_tables.gpu_step_targets().splitlines()
    assert "90.0 (`graph-bf16`) against 10.0 steps/s: **9.0×** | met |" in lines[2]
    # graph: 80 / 70 = 1.14 (Triton kernels), bf16: 150 / 90 = 1.67, compiled: 82.5 / 75 = 1.10
    assert "82.5 against 75.0 (`compiled`) steps/s: **1.10×**" in lines[3] and lines[3].endswith("| met |")


def test_the_profile_names_the_package_lines_that_cost_time():
    """benchmarks/speed/gpu_profile.py on the CPU (tiny): every operator is attributed; the prior's own
    functions appear with the constituent prior only, and backward rows are marked."""
    from benchmarks.speed import gpu_profile

    with_prior = gpu_profile.profile_case(gpu_step.CASES[0], torch.device("cpu"), steps=1, smoke=True)
    plain = gpu_profile.profile_case(gpu_step.CASES[1], torch.device("cpu"), steps=1, smoke=True)
    frames = {r["frame"] for r in with_prior["regions"]}
    assert any("syntaxformer/priors/constituent.py" in f for f in frames)
    assert any(f.endswith("(backward)") for f in frames)
    assert not any("constituent" in r["frame"] for r in plain["regions"])
    assert with_prior["ops_per_step"] > plain["ops_per_step"] > 0
    assert with_prior["ops_per_step"] == sum(r["ops_per_step"] for r in with_prior["regions"])


def test_the_prepared_gpu_scripts_parse():
    """The scripts a GPU machine runs in one device call parse as bash (their dry runs, a few minutes on
    the CPU, are in their READMEs)."""
    import subprocess

    for script in (
        "benchmarks/speed/gpu_session.sh",
        "benchmarks/studies/paper_recipes/gpu_session.sh",
        "benchmarks/tools/device_session.sh",
    ):
        done = subprocess.run(
            ["bash", "-n", Path(__file__).resolve().parents[2] / script], capture_output=True, text=True
        )
        assert done.returncode == 0, (script, done.stderr)
