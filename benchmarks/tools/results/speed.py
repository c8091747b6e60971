"""``docs/results/speed.md``: the translation model's training step against ``torch.nn.Transformer``
(``translation-step``), with glibc's default allocator and the tuned one (``cpu-allocator``) and its beam
search (``translation-beam``); the attention's step time and memory on the CPU with and without dropout
(``speed-dropout``, ``speed-memory``, ``speed-no-dropout``) and today's CPU training step against the base
commit's (``cpu-against-base``); ``benchmarks/speed/README.md``: a training step of the default induce
recipe per variant (``train-step``, the variants labelled by :data:`TRAIN_STEP_LABELS`).

Data: ``records/benchmarks/translation-step.json``, ``records/benchmarks/cpu-allocator.json``,
``records/benchmarks/translation-beam.json``,
``records/benchmarks/attention-cpu-small-dropout{0.1,0}.json``, ``records/benchmarks/train-step.json`` and
``records/benchmarks/cpu-against-base.json``. The accelerator's tables are
:mod:`benchmarks.tools.results.accelerator`'s.
"""

from __future__ import annotations

from benchmarks import ROOT
from benchmarks.tools.results.core import load, markdown, table


def _speed(path: str) -> tuple[list[int], dict]:
    rows = load(path)["rows"]
    lengths = sorted({r["N"] for r in rows})
    return lengths, {(r["N"], r["model"]): r for r in rows}


@table("speed-dropout")
def speed_dropout() -> str:
    """Step time with the paper's attention dropout: ms of the plain rows, ratios of the others."""
    lengths, rows = _speed("records/benchmarks/attention-cpu-small-dropout0.1.json")
    out = []
    for n in lengths:
        r = lambda m: rows[(n, m)]  # noqa: E731
        out.append(
            [
                n,
                r("plain/sdpa")["batch"],
                f"{r('plain/sdpa')['step_ms']:.0f}",
                f"**{r('tree/sdpa')['ratio']:.2f}**",
                f"{r('tree/blocks')['ratio']:.2f}",
                f"{r('plain/eager')['step_ms']:.0f}",
                f"{r('tree/eager')['ratio']:.2f}",
                f"{r('tree/cubic')['ratio']:.2f}",
            ]
        )
    return markdown(
        ["N", "batch", "plain/sdpa ms", "tree/sdpa", "tree/blocks", "plain/eager ms", "tree/eager", "tree/cubic"],
        out,
        "rrrrrrrr",
    )


@table("speed-memory")
def speed_memory() -> str:
    lengths, rows = _speed("records/benchmarks/attention-cpu-small-dropout0.1.json")
    models = ("plain/sdpa", "tree/sdpa", "tree/blocks", "plain/eager", "tree/eager", "tree/cubic")
    out = [[n, *(f"{rows[(n, m)]['peak_mib']:.0f}" for m in models)] for n in lengths]
    return markdown(["N", *models], out, "r" * (len(models) + 1))


@table("speed-no-dropout")
def speed_no_dropout() -> str:
    lengths, rows = _speed("records/benchmarks/attention-cpu-small-dropout0.json")
    out = []
    for n in lengths:
        plain, sdpa, blocks = rows[(n, "plain/sdpa")], rows[(n, "tree/sdpa")], rows[(n, "tree/blocks")]
        out.append(
            [
                n,
                plain["batch"],
                f"{plain['step_ms']:.0f}",
                f"{sdpa['ratio']:.2f}",
                f"{blocks['ratio']:.2f}",
                f"{plain['peak_mib']:.0f}",
                f"{sdpa['peak_mib']:.0f} (+{sdpa['peak_over_plain_mib']:.0f})",
                f"{blocks['peak_mib']:.0f} (+{blocks['peak_over_plain_mib']:.0f})",
            ]
        )
    return markdown(
        [
            "N",
            "batch",
            "plain/sdpa ms",
            "tree/sdpa",
            "tree/blocks",
            "peak MiB plain/sdpa",
            "tree/sdpa (− plain)",
            "tree/blocks (− plain)",
        ],
        out,
        "rrrrrrrr",
    )


TRAIN_STEP_LABELS = {
    "tree": "`tree` (today: default config, Adam `fused`, the cheaper dropout masks everywhere)",
    "plain": '`plain` (`prior="none"`)',
    "tree-adam-loop": "`tree-adam-loop` (Adam's per-tensor loop, torch's CPU default)",
    "tree-adam-foreach": "`tree-adam-foreach` (Adam's multi-tensor form)",
    "tree-fused": '`tree-fused` (`kernel="fused"`)',
    "tree-compile": "`tree-compile` (fused + `torch.compile`, dynamic)",
    "tree-bf16": "`tree-bf16` (fused + bf16 autocast)",
    "tree-torch-dropout": "`tree-torch-dropout` (torch's `nn.Dropout`, `bernoulli_` masks)",
    "plain-torch-dropout": "`plain-torch-dropout` (`plain` with torch's `nn.Dropout`)",
    "tree-rand-attention-mask": "`tree-rand-attention-mask` (attention masks from `torch.rand`)",
    "tree-last": "`tree-last` (Adam `foreach`, `torch.rand` attention masks: the step before the fused Adam)",
    "tree-before": "`tree-before` (torch's dropout, `torch.rand` attention masks, Adam's per-tensor loop: "
    "the step before this work)",
    "structformer": "`structformer` (StructFormer's default recipe, as `tree`)",
    "structformer-before": "`structformer-before` (torch's dropout, Adam's per-tensor loop)",
}


@table("train-step")
def train_step() -> str:
    """benchmarks/speed/README.md: a training step of the default induce recipe per variant (records/benchmarks/train-step.json)."""
    run = load("records/benchmarks/train-step.json")
    rows = [
        [
            TRAIN_STEP_LABELS.get(name, f"`{name}`"),
            f"{r['ms_per_step']:.0f}",
            f"{r['ratio_to_plain']:.3f}",
            f"{r['paired_ratio_to_plain']:.3f}",
            f"{r['paired_speedup_over_tree']:.3f}",
            f"{r['gflop_per_step']:.2f}",
            f"{100 * r['share_of_peak']:.1f}%",
        ]
        for name, r in run["variants"].items()
    ]
    return markdown(
        [
            "variant",
            "ms/step (median)",
            "vs plain (medians)",
            "vs plain (paired)",
            "speed-up over `tree` (paired)",
            "GFLOP/step",
            "share of peak",
        ],
        rows,
        "lrrrrrr",
    )


#: benchmarks/speed/cpu_against_base.py's record: today's CPU step against the code before the accelerator work
CPU_AGAINST_BASE = "records/benchmarks/cpu-against-base.json"


@table("cpu-against-base")
def cpu_against_base() -> str:
    """docs/results/speed.md: steps/s of today's CPU training step and the base commit's, per round, the
    median ratio and whether the trained weights are the same bits."""
    if not (ROOT / CPU_AGAINST_BASE).exists():
        return f"No record yet (`{CPU_AGAINST_BASE}`)."
    run = load(CPU_AGAINST_BASE)
    speed = run["steps_per_second"]
    rows = [
        [str(i + 1), f"{b:.2f}", f"{t:.2f}", f"{r:.3f}"]
        for i, (b, t, r) in enumerate(zip(speed["base"], speed["today"], run["ratios"]))
    ]
    rows.append(["median", "", "", f"**{run['ratio_today_to_base']:.3f}**"])
    same = "the same bits" if run["bit_identical"] else "**not** the same bits"
    head = f"{run['what']}. Trained weights of every run: {same}."
    return f"{head}\n\n" + markdown(["round", "base steps/s", "today steps/s", "today / base"], rows, "lrrr")


#: benchmarks/speed/translation_step.py's record: the translation model's step against torch.nn.Transformer
TRANSLATION_STEP = "records/benchmarks/translation-step.json"
#: benchmarks/speed/translation_beam.py's record: beam-5 translation of test_2016_flickr
TRANSLATION_BEAM = "records/benchmarks/translation-beam.json"


@table("translation-step")
def translation_step() -> str:
    """docs/results/speed.md: the translation training step per row and threads setting: ms, target
    tokens/s, the speed ratios against ``torch.nn.Transformer`` and against our baseline (paired)."""
    if not (ROOT / TRANSLATION_STEP).exists():
        return f"No record yet (`{TRANSLATION_STEP}`)."
    run = load(TRANSLATION_STEP)
    rows = []
    for setting in run["runs"]:
        for name, r in setting["rows"].items():
            reference = name == "torch.nn.Transformer"
            rows.append(
                [
                    f"`{name}`",
                    str(setting["threads"]),
                    f"{r['ms_per_step']:,.0f}",
                    f"{r['target_tokens_per_second']:,}",
                    "1" if reference else f"{r['speed_vs_reference']:.2f}",
                    "1" if reference else f"**{r['speed_vs_reference_paired']:.2f}**",
                    "1" if reference else f"{r['speed_vs_reference_cpu']:.2f}",
                    ""
                    if reference or r["speed_vs_baseline_paired"] is None
                    else f"{r['speed_vs_baseline_paired']:.2f}",
                ]
            )
    head = [
        "row",
        "threads",
        "ms/step (median)",
        "target tokens/s",
        "speed vs torch (medians)",
        "speed vs torch (paired)",
        "speed vs torch (CPU time, paired)",
        "speed vs our baseline (paired)",
    ]
    return markdown(head, rows, "lrrrrrrr")


#: benchmarks/speed/cpu_allocator.py's record: glibc's default allocator against the tuned thresholds
CPU_ALLOCATOR = "records/benchmarks/cpu-allocator.json"


@table("cpu-allocator")
def cpu_allocator() -> str:
    """docs/results/speed.md: the translation step with glibc's default allocator and with the tuned
    thresholds, each in its own processes: ms and CPU ms per step (medians over rounds), page faults,
    kernel seconds, and the default / tuned ratios."""
    if not (ROOT / CPU_ALLOCATOR).exists():
        return f"No record yet (`{CPU_ALLOCATOR}`)."
    run = load(CPU_ALLOCATOR)
    ratios, rows = run["speed_tuned_vs_default"], []
    for mode, m in run["medians"].items():
        for name, r in m["rows"].items():
            tuned = mode == "tuned"
            rows.append(
                [
                    mode,
                    f"`{name}`",
                    f"{r['ms_per_step']:,.0f}",
                    f"{r['cpu_ms_per_step']:,.0f}",
                    f"{m['page_faults']:,.0f}",
                    f"{m['kernel_seconds']:.1f}",
                    f"**{ratios[name]['ms_per_step']:.2f}** (CPU {ratios[name]['cpu_ms_per_step']:.2f})"
                    if tuned
                    else "1",
                ]
            )
    head = [
        "allocator",
        "row",
        "ms/step",
        "CPU ms/step",
        "page faults (process)",
        "kernel s (process)",
        "speed vs default",
    ]
    return markdown(head, rows, "llrrrrr")


@table("translation-beam")
def translation_beam() -> str:
    """docs/results/speed.md: beam-5 translation of test_2016_flickr per model and batch size: seconds
    (wall clock and CPU), sentences/s, the output lengths and whether the 60 s target is met."""
    if not (ROOT / TRANSLATION_BEAM).exists():
        return f"No record yet (`{TRANSLATION_BEAM}`)."
    run = load(TRANSLATION_BEAM)
    rows = [
        [
            "untrained anchor baseline" if r["model"] == "random" else f"`{r['variant']}`: {r['model']}",
            str(r["threads"]),
            str(r["batch_size"]),
            f"{r['seconds']:.1f}",
            f"{r['cpu_seconds']:.1f}",
            f"{r['sentences_per_second']:.1f}",
            f"{r['mean_output_pieces']:.1f}",
            f"{100 * r['capped_share']:.0f}%",
            "yes" if r["target_met"] else "**no**",
        ]
        for r in run["rows"]
    ]
    head = [
        "model",
        "threads",
        "batch",
        "seconds",
        "CPU seconds",
        "sentences/s",
        "output pieces (mean)",
        "stopped by the cap",
        "≤ 60 s",
    ]
    return markdown(head, rows, "lrrrrrrrl")
