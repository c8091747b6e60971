"""Every results table of ``README.md`` and ``docs/results/*.md``, written from the JSON reports in the
repository (``docs/induce/``, ``docs/logic/``, ``docs/heads/``, ``docs/nli-study.json``,
``docs/prior-study.json``, ``docs/benchmarks/``, ``docs/results/*.json`` ...), never copied by hand.

    python -m benchmarks.tools.results_tables            # rewrite the tables in place
    python -m benchmarks.tools.results_tables --check    # exit 1 and name the pages that differ

A table lives between two marker comments, ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->``;
:data:`TABLES` maps ``NAME`` to the function that writes it. Everything outside the markers is left as
it is. ``tests/docs/test_results_pages.py`` regenerates the tables in memory and fails when a page differs.

Cells: means ± sample standard deviation over the seeds listed (one seed: the value alone); F1,
accuracy and recall are percentages (0-100); minutes are wall-clock minutes of training.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable

from benchmarks import ROOT
from syntaxformer.evaluation.curve import curve_decoder_name
from syntaxformer.pretrained import SHIPPED as SHIPPED_PARSERS

DOCS = ROOT / "docs"
RESULTS = DOCS / "results"

#: the pages whose marked tables this script writes
PAGES = [
    ROOT / "README.md",
    ROOT / "benchmarks" / "speed" / "README.md",
    DOCS / "guide" / "parse.md",
    *sorted(RESULTS.glob("*.md")),
]

MARKER = re.compile(r"(<!-- results:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S)

#: table name -> function returning the markdown table (no trailing newline)
TABLES: dict[str, Callable[[], str]] = {}


def table(name: str):
    """Register a table writer under ``name`` (the marker's name)."""

    def register(function):
        TABLES[name] = function
        return function

    return register


# ---------------------------------------------------------------------------------------------------------
# reading and formatting


@lru_cache(maxsize=None)
def load(path: str) -> dict:
    """A JSON report, by path relative to the repository root."""
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


def reports(pattern: str) -> list[dict]:
    """The induce reports matching ``docs/induce/PATTERN``, in seed order."""
    found = [load(str(p.relative_to(ROOT))) for p in sorted((DOCS / "induce").glob(pattern))]
    if not found:
        raise FileNotFoundError(f"no report matches docs/induce/{pattern}")
    return sorted(found, key=lambda r: r["seed"])


def mean_sd(values, digits: int = 2) -> str:
    """``mean ± sample sd`` of ``values``; one value alone; ``–`` for none."""
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def span(values, digits: int = 1) -> str:
    """``low–high`` of ``values`` (one value alone)."""
    low, high = min(values), max(values)
    low, high = f"{low:.{digits}f}", f"{high:.{digits}f}"
    return low if low == high else f"{low}–{high}"


def seeds_of(rows: list[dict]) -> str:
    return ", ".join(str(r["seed"]) for r in rows)


def markdown(header: list[str], rows: list[list[str]], align: str | None = None) -> str:
    """A markdown table; ``align``: one character per column, ``l`` or ``r`` (default all left)."""
    align = align or "l" * len(header)
    rule = ["---" if a == "l" else "--:" for a in align]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# induce (docs/induce/*.json, syntaxformer/pretrained/.../report.json)

#: where a shipped parser's report is (relative to the repository root)
SHIPPED_REPORT = "syntaxformer/pretrained/{}/report.json"
SHIPPED_SF = SHIPPED_REPORT.format("structformer-ptb-lm")
SHIPPED_LM = SHIPPED_REPORT.format("tree-transformer-ptb-lm")
SHIPPED_ON_LSTM = SHIPPED_REPORT.format("on-lstm-ptb-lm")
SHIPPED = SHIPPED_REPORT.format("tree-transformer-ptb")

#: the induce groups: label, report pattern under docs/induce/ (or the shipped parser's report)
INDUCE = {
    "tt-default": (
        "Tree Transformer, `induce --recipe sample` (mini, ptb-sample; the default before)",
        "tree-transformer-default-cpu-seed[0-9].json",
    ),
    "tt-default-bf16": (
        "the same under bfloat16 autocast (`--bf16`)",
        "tree-transformer-default-bf16-seed[0-9].json",
    ),
    "tt-default-foreach": (
        "`--recipe sample` in float32, before Adam's fused kernel and the shared attention-dropout masks "
        "(another random stream)",
        "tree-transformer-default-cpu-foreach-seed[0-9].json",
    ),
    "tt-default-before": (
        "`--recipe sample`, before the cheaper dropout mask too (another random stream)",
        "tree-transformer-default-seed[0-9].json",
    ),
    "tt-3500": (
        "Tree Transformer, `--recipe sample` with its schedule ending at 3,500 steps, where the dev curve flattens",
        "tree-transformer-default-3500-cpu-seed[0-9].json",
    ),
    "tt-wikitext": (
        "Tree Transformer, `induce` default (mini, ptb-sample + the embedded WikiText-2, 10k words, 6,000 steps)",
        "tree-transformer-wikitext-cpu-seed[0-9].json",
    ),
    "sf-default": (
        "StructFormer, `induce --architecture structformer` default (mini, ptb-sample)",
        "structformer-default-seed[0-9].json",
    ),
    "tt-long": ("Tree Transformer, `--recipe long` (small, ptb-lm text)", "tree-transformer-long-seed[0-9].json"),
    "sf-long": ("StructFormer, `--recipe long` (mini, ptb-lm text)", "structformer-long-seed[0-9].json"),
    "tt-12000": (
        "Tree Transformer, default setting with a 12,000-step schedule, stopped early",
        "tree-transformer-mini-12000-seed[0-9].json",
    ),
    "sf-12000": (
        "StructFormer, default setting for 12,000 steps on ptb-sample",
        "structformer-ptbsample-12000-seed[0-9].json",
    ),
    "sf-small-8000": (
        "StructFormer, small on the ptb-lm text, 8,000-step schedule",
        "structformer-small-ptblm-8000-seed[0-9].json",
    ),
    "tt-b256-3500": (
        "Tree Transformer, small on the ptb-lm text, batches of 256, 3,500 steps",
        "tree-transformer-small-ptblm-b256-3500-seed[0-9].json",
    ),
    "tt-b256-4500": (
        "Tree Transformer, small on the ptb-lm text, batches of 256, 4,500 steps",
        "tree-transformer-small-ptblm-b256-4500-seed[0-9].json",
    ),
    "tt-b512-4500": (
        "Tree Transformer, small on the ptb-lm text, batches of 512, lr 2e-3, 4,500 steps, Algorithm 1 from layer 2",
        "tree-transformer-small-ptblm-b512-4500-lr2e-3-seed[0-9].json",
    ),
    "tt-b1024": (
        "the same with batches of 1,024 and lr 3e-3, stopped by a 7.3-minute cap before its schedule's end",
        "tree-transformer-small-ptblm-b1024-4500-lr3e-3-seed[0-9].json",
    ),
    "tt-paper-cpu": (
        "Tree Transformer, `induce --recipe paper --preset mini` on the CPU: the authors' procedure (the last step; "
        "Algorithm 1 from layer 2 with the 0.7 descend rule), stopped by its time limit before its 60,000 steps",
        "tree-transformer-paper-mini-cpu-seed[0-9].json",
    ),
    "tt-paper-cpu-dev-decoder": (
        "the same models, Algorithm 1 from layer 1 without the descend rule, the decoder chosen on the dev half "
        "(`induce --rescore --min-layer 1 --descend-rule paper`)",
        "tree-transformer-paper-mini-cpu-dev-decoder-seed[0-9].json",
    ),
    "sf-main-sample-paper": (
        "StructFormer, `--recipe sample-paper`: the authors' procedure at the mini size on ptb-sample's words, "
        "1,600 steps of >= 4,096 tokens",
        "structformer-main-sample-paper-seed[0-9].json",
    ),
    "sf-main-embedded-paper": (
        "StructFormer, `--recipe embedded-paper`: the same on ptb-sample + WikiText-2 (10k words)",
        "structformer-main-embedded-paper-seed[0-9].json",
    ),
    "sf-main-sample-fast": (
        "StructFormer, `--recipe sample-fast`: sample-paper with lr 1e-3, linear decay",
        "structformer-main-sample-fast-seed[0-9].json",
    ),
    "sf-main-sample-faster": (
        "StructFormer, `--recipe sample-faster`: sample-paper with lr 2e-3, linear decay",
        "structformer-main-sample-faster-seed[0-9].json",
    ),
    "sf-paper-cpu": (
        "StructFormer, `induce --architecture structformer --recipe paper --preset mini` on the CPU: the authors' "
        "procedure, stopped after 27 of its 100 epochs",
        "structformer-paper-mini-cpu-seed[0-9].json",
    ),
    "sf-paper-cpu-seeds": (
        "the same command for 26 epochs (`--epochs 26`), seeds 0, 1, 2",
        "structformer-paper-mini-cpu-26ep-seed[0-9].json",
    ),
    "sf-paper-cpu-42ep": (
        "the same command for 42 epochs (`--epochs 42`), seeds 0, 1, 2 (each in one run, on one machine)",
        "structformer-paper-mini-cpu-42ep-seed[0-9].json",
    ),
    "sf-paper-cpu-longer": (
        "the 42-epoch runs continued with `--resume` to 58 epochs (seed 0: `--epochs 100`, stopped by a signal "
        "after 58; seeds 1 and 2: `--epochs 58`)",
        "structformer-paper-mini-cpu-longer-seed[0-9].json",
    ),
    "sf-paper-cpu-100ep": (
        "the same continued with `--resume` to the authors' 100 epochs (`--epochs 100`; seeds 1 and 2 from their "
        "58-epoch runs, seed 0 from its 42-epoch run; seed 0: the shipped `structformer-ptb-lm`)",
        "structformer-paper-mini-cpu-100ep-seed[0-9].json",
    ),
    "on-lstm": ("ON-LSTM, `induce --architecture on-lstm` default (layer 1)", "on-lstm-default-seed[0-9].json"),
    "on-lstm-paper-cpu": (
        "ON-LSTM, `induce --architecture on-lstm --recipe paper --preset mini --epochs 8` on the CPU: the AWD-LSTM "
        "procedure (layer 1; seed 0's run was stopped by its time limit after 9.8 epochs and keeps epoch 8's model)",
        "on-lstm-paper-mini-cpu-seed[0-9].json",
    ),
    "on-lstm-paper-cpu-longer": (
        "the same for 18 epochs (`--epochs 18`), seeds 0, 1, 2 (seed 0 in one run, the shipped `on-lstm-ptb-lm`; seeds "
        "1 and 2: their 8-epoch runs continued with `--resume`)",
        "on-lstm-paper-mini-cpu-longer-seed[0-9].json",
    ),
    "on-lstm-paper-cpu-30ep": (
        "the 18-epoch runs of seeds 0, 1 and 2 continued with `--resume` to 30 epochs (`--epochs 30`)",
        "on-lstm-paper-mini-cpu-30ep-seed[0-9].json",
    ),
    "shipped-on-lstm": (
        "shipped `on-lstm-ptb-lm` (mini, ptb-lm text, `--recipe paper` on the CPU, 18 epochs: the best of these "
        "runs on dev)",
        SHIPPED_ON_LSTM,
    ),
    "shipped-sf": (
        "shipped `structformer-ptb-lm` (the default: mini, ptb-lm text, `--recipe paper` on the CPU, its 100 "
        "epochs: seed 0, the best on dev of the three seeds continued to 100)",
        SHIPPED_SF,
    ),
    "sf-small-8000-cpu": (
        "StructFormer small, ptb-lm text, the long recipe's settings, 8,000 steps on the CPU (shipped as "
        "`structformer-ptb-lm` before the `--recipe paper` runs)",
        "docs/induce/structformer-small-ptblm-8000-cpu-seed0/report.json",
    ),
    "shipped-lm": (
        "shipped `tree-transformer-ptb-lm` (small, ptb-lm text, batches of 512, lr 3e-3, 4,500 steps, "
        "Algorithm 1 from layer 2)",
        SHIPPED_LM,
    ),
    "shipped": (
        "shipped `tree-transformer-ptb` (mini, ptb-sample, lr decaying over 50,000 steps, stopped at 8,233)",
        SHIPPED,
    ),
}


def group(key: str) -> list[dict]:
    pattern = INDUCE[key][1]
    if pattern.endswith("/report.json"):  # a shipped parser's, not a docs/induce pattern
        return [shipped_report(pattern)]
    return reports(pattern)


def shipped_report(path: str) -> dict:
    """A shipped parser's report; for a run continued with ``--resume`` (whose report has only its last
    part's clock) the training minutes of all its parts (``training.json``'s ``train_minutes_total``)."""
    report = json.loads(json.dumps(load(path)))
    total = load(str(Path(path).with_name("training.json"))).get("train_minutes_total")
    if total is not None and total > report["minutes"]["train"]:
        report["minutes"]["train"] = total
    return report


@table("shipped-parsers")
def shipped_parsers_table() -> str:
    """The parse guide: each shipped parser (``syntaxformer.pretrained.SHIPPED``, the default first) with
    its training, its dev- and test-half sentence F1 (the default is the best on dev) and its size."""
    rows = []
    for i, name in enumerate(SHIPPED_PARSERS):
        report = shipped_report(SHIPPED_REPORT.format(name))
        training = report["training"]
        planned = training.get("planned_steps") or training["steps"]
        steps = f"{training['steps']:,} steps" + (
            f" of a {planned:,}-step schedule" if planned != training["steps"] else ""
        )
        rows.append(
            [
                f"`{name}`" + (" (default)" if i == 0 else ""),
                f"{report['model']} `{report['preset']}`",
                f"{steps}, {report['data'].get('recipe_text') or report['data']['train']}",
                f"{part_scores([report], 'dev')[0]:.2f}",
                f"**{part_scores([report], 'test')[0]:.2f}**",
                f"{(ROOT / SHIPPED_REPORT.format(name)).with_name('model.safetensors').stat().st_size / 2**20:.1f} MB",
            ]
        )
    return markdown(["name", "model", "training", "dev F1", "test F1", "size"], rows, "lllrrr")


def model_key(report: dict) -> str:
    return report["model"].replace("-", "_")


def part_scores(rows: list[dict], part: str, system: str | None = None, field: str = "sentence_f1") -> list[float]:
    """``field`` of ``system`` (default: the model itself) on ``part`` (test, dev, all), one per report."""
    return [r["parts"][part][system or model_key(r)][field] for r in rows]


def train_minutes(report: dict) -> float:
    """A run's minutes of training: its report's training stage, or for a resumed run whose report names its
    resumes, the optimizer steps' minutes summed over all its processes (``minutes.train`` is the last one's)."""
    training = report["training"]
    return training["train_minutes_total"] if training.get("resumed_from_steps") else report["minutes"]["train"]


def compute(rows: list[dict]) -> str:
    """Steps and training minutes of a group, from the reports: a run's training stage, or for a resumed run
    whose report has them, its optimizer steps' minutes over all its processes (an older resumed run's clock
    is not its training's)."""
    steps = sorted({r["training"]["steps"] for r in rows})
    steps = f"{steps[0]:,}" if len(steps) == 1 else f"{steps[0]:,}–{steps[-1]:,}"
    resumed = [r for r in rows if r["training"].get("resumed_from_steps")]
    timed = [r for r in rows if r["training"].get("tokens_per_second")]
    devices = sorted({"GPU" if str(r["training"]["device"]).startswith("cuda") else "CPU" for r in timed})
    minutes = span([train_minutes(r) for r in timed]) + f" min, {'/'.join(devices)}" if timed else "–"
    if resumed:
        minutes += f" (seed {', '.join(str(r['seed']) for r in resumed)}: resumed, minutes summed over its runs)"
    untimed = [str(r["seed"]) for r in rows if r not in timed]
    if untimed:
        minutes += f" (seed {', '.join(untimed)}: resumed, its clock not kept)"
    return f"{steps} steps; {minutes}"


#: README's rows: (induce group, short label, the papers' family it sits beside)
README_ROWS = [
    ("tt-wikitext", "Tree Transformer, `induce` (default recipe: ptb-sample + WikiText-2)", None),
    ("tt-default", "Tree Transformer, `induce --recipe sample` (ptb-sample alone)", None),
    ("tt-long", "Tree Transformer, `induce --recipe long`", None),
    ("shipped", "the shipped parser `tree-transformer-ptb` (Tree Transformer)", None),
    ("tt-b256-4500", "Tree Transformer, small on the ptb-lm text, batches of 256, 4,500 steps", None),
    (
        "shipped-lm",
        "the shipped parser `tree-transformer-ptb-lm` (Tree Transformer; from layer 2)",
        "tree-transformer",
    ),
    ("sf-default", "StructFormer, `induce --architecture structformer`", None),
    ("sf-long", "StructFormer, `induce --architecture structformer --recipe long`", None),
    ("sf-small-8000", "StructFormer, small on the ptb-lm text, 8,000 steps", None),
    (
        "sf-paper-cpu",
        "StructFormer, `induce --architecture structformer --recipe paper` (mini, the authors' procedure, stopped after"
        " 27 of 100 epochs)",
        None,
    ),
    (
        "sf-paper-cpu-seeds",
        "StructFormer, `induce --architecture structformer --recipe paper --epochs 26` (mini, 26 of 100 epochs)",
        None,
    ),
    (
        "sf-paper-cpu-42ep",
        "the same with `--epochs 42` (42 of 100 epochs)",
        None,
    ),
    ("sf-paper-cpu-100ep", "the same with `--epochs 100` (the authors' 100 epochs)", None),
    (
        "shipped-sf",
        "the shipped parser `structformer-ptb-lm` (StructFormer, the default: mini, `--recipe paper`, 100 epochs)",
        "structformer",
    ),
    ("on-lstm", "ON-LSTM, `induce --architecture on-lstm`", None),
    (
        "on-lstm-paper-cpu",
        "ON-LSTM, `induce --architecture on-lstm --recipe paper --epochs 8` (mini, the AWD-LSTM procedure; seed 0's"
        " run stopped by its time limit after 9.8 epochs, keeping epoch 8's model)",
        None,
    ),
    ("on-lstm-paper-cpu-longer", "the same for 18 epochs (`--epochs 18`)", None),
    (
        "shipped-on-lstm",
        "the shipped parser `on-lstm-ptb-lm` (ON-LSTM, mini, `--recipe paper`, 18 epochs, the best run on dev)",
        "on-lstm",
    ),
]


@table("readme-induce")
def readme_induce() -> str:
    """README: the one results table: ours on ptb-sample's test half, the papers' WSJ-test numbers beside."""
    papers = load("docs/results/papers.json")
    right = f"{papers['right_branching']['sentence_f1']:.1f}"
    rows = []
    for key, label, family in README_ROWS:
        reps = group(key)
        seeds = f"seed {reps[0]['seed']}" if len(reps) == 1 else f"seeds {seeds_of(reps)}"
        rows.append(
            [
                label,
                f"ptb-sample test half, {seeds}",
                f"**{mean_sd(part_scores(reps, 'test'))}**",
                f"{reps[0]['parts']['test']['right_branching']['sentence_f1']:.2f}",
                compute(reps),
            ]
        )
        for paper in (p for p in papers["rows"] if p["family"] == family):
            rows.append(
                [
                    f"*published*: {paper['model']}",
                    paper["data"],
                    "–".join(str(v) for v in paper["sentence_f1"]),  # as printed in the source
                    right,
                    paper["compute"],
                ]
            )
    return markdown(["model", "sentences", "sentence F1", "right-branching", "training compute"], rows, "llrrl")


#: the recipes' seeded groups (three seeds, the bf16 run one) on ptb-sample or the ptb-lm text, in the tables' order
SEEDED_GROUPS = (
    "tt-wikitext",
    "tt-default",
    "tt-default-bf16",
    "tt-3500",
    "sf-default",
    "tt-long",
    "sf-long",
    "tt-12000",
    "sf-12000",
)


#: groups of superseded code (another random stream of the same recipe), in the history below the tables
HISTORY_GROUPS = ("tt-default-foreach", "tt-default-before")


@table("induce-test")
def induce_test() -> str:
    """Every induce group on the test half: sentence, corpus and WSJ-10 F1, the untrained model, right-branching."""
    rows = []
    for key in (
        *SEEDED_GROUPS,
        "sf-small-8000",
        "sf-paper-cpu",
        "sf-paper-cpu-seeds",
        "sf-paper-cpu-42ep",
        "sf-paper-cpu-longer",
        "sf-paper-cpu-100ep",
        "tt-b256-3500",
        "tt-b256-4500",
        "tt-b512-4500",
        "tt-b1024",
        "tt-paper-cpu",
        "tt-paper-cpu-dev-decoder",
        "on-lstm",
        "on-lstm-paper-cpu",
        "on-lstm-paper-cpu-longer",
        "on-lstm-paper-cpu-30ep",
        "shipped-on-lstm",
        "shipped-lm",
        "shipped-sf",
        "sf-small-8000-cpu",
        "shipped",
    ):
        reps = group(key)
        rows.append(
            [
                INDUCE[key][0],
                seeds_of(reps),
                f"**{mean_sd(part_scores(reps, 'test'))}**",
                mean_sd(part_scores(reps, "test", field="corpus_f1")),
                mean_sd(part_scores(reps, "test", field="wsj10_sentence_f1")),
                mean_sd(part_scores(reps, "test", "untrained")),
                f"{reps[0]['parts']['test']['right_branching']['sentence_f1']:.2f}",
                compute(reps),
            ]
        )
    on_lstm = group("on-lstm")
    layer2 = [r["parts"]["test"]["single_layer"]["2"] for r in on_lstm]
    rows.append(
        [
            "the same ON-LSTM models, layer 2 (`--layer 2`; the best layer on dev)",
            seeds_of(on_lstm),
            mean_sd(s["sentence_f1"] for s in layer2),
            mean_sd(s["corpus_f1"] for s in layer2),
            "",
            "",
            "",
            "",
        ]
    )
    first = group("tt-default")[0]["parts"]["test"]
    rows.append(
        [
            "balanced binary / random binary trees",
            "",
            f"{first['balanced']['sentence_f1']:.2f} / {first['random']['sentence_f1']:.2f}",
            "",
            "",
            "",
            "",
            "",
        ]
    )
    return markdown(
        [
            "ptb-sample **test** half (1,993 sentences)",
            "seeds",
            "sentence F1",
            "corpus F1",
            "WSJ-10 sent. F1",
            "same model untrained",
            "right-branching",
            "training",
        ],
        rows,
        "llrrrrrl",
    )


@table("induce-parts")
def induce_parts() -> str:
    """Sentence F1 per seed and on the three parts (test, dev, all of ptb-sample)."""
    return parts_table((*SEEDED_GROUPS, "on-lstm"))


@table("induce-history")
def induce_history() -> str:
    """The same for the groups of superseded code (:data:`HISTORY_GROUPS`), with their training."""
    return parts_table(HISTORY_GROUPS, with_training=True)


def parts_table(keys, with_training: bool = False) -> str:
    """Sentence F1 of the groups ``keys``: per seed on the test half, and the means on test, dev and all."""
    rows = []
    for key in keys:
        reps = group(key)
        per_seed = ", ".join(f"{v:.2f}" for v in part_scores(reps, "test"))
        row = [INDUCE[key][0], per_seed, *(mean_sd(part_scores(reps, p)) for p in ("test", "dev", "all"))]
        rows.append(row + [compute(reps)] if with_training else row)
    right = group("tt-default")[0]["parts"]
    rb = [f"{right[p]['right_branching']['sentence_f1']:.2f}" for p in ("test", "dev", "all")]
    rows.append(["right-branching", "", *rb] + ([""] if with_training else []))
    header = ["", "test, per seed", "test (1,993)", "dev (1,921)", "all (3,914)"]
    if with_training:
        return markdown(header + ["training"], rows, "lrrrrl")
    return markdown(header, rows, "lrrrr")


#: the candidates for the main job (``induce`` with no options), chosen on the dev half
MAIN_JOB_CANDIDATES = ("tt-wikitext", "tt-default", "tt-3500")


def setting_cell(setting: str) -> str:
    """A report's ``data.setting`` in a few words: ``transductive``, plus the out-of-domain part if any."""
    short = setting.split(" (")[0]
    return short + ("; WikiText-2 out of domain" if "WikiText-2" in setting else "")


@table("induce-main-job")
def induce_main_job() -> str:
    """The main job's candidates: dev-half sentence F1 (the choice), test half, training minutes, against
    right-branching on the same half."""
    rows = []
    for key in MAIN_JOB_CANDIDATES:
        reps = group(key)
        rows.append(
            [
                INDUCE[key][0],
                seeds_of(reps),
                f"**{mean_sd(part_scores(reps, 'dev'))}**",
                mean_sd(part_scores(reps, "test")),
                setting_cell(reps[0]["data"]["setting"]),
                compute(reps),
            ]
        )
    right = group("tt-default")[0]["parts"]
    rows.append(
        ["right-branching", "", *(f"{right[p]['right_branching']['sentence_f1']:.2f}" for p in ("dev", "test")), "", ""]
    )
    return markdown(
        ["candidate", "seeds", "dev sentence F1", "test sentence F1", "setting", "training"], rows, "llrrll"
    )


@table("induce-labels")
def induce_labels() -> str:
    """Label recall of the default Tree Transformer's seed-0 test trees, beside untrained and right-branching."""
    test = group("tt-wikitext")[0]["parts"]["test"]
    labels = list(test["tree_transformer"]["label_recall"])
    rows = [
        [name, *(f"{test[system]['label_recall'][label]:.1f}" for label in labels)]
        for name, system in (
            ("Tree Transformer, seed 0", "tree_transformer"),
            ("untrained", "untrained"),
            ("right-branching", "right_branching"),
        )
    ]
    rows.append(["gold constituents", *(f"{test['tree_transformer']['label_counts'][label]:,}" for label in labels)])
    return markdown(["recall (%), test half", *labels], rows, "l" + "r" * len(labels))


@table("induce-dependencies")
def induce_dependencies() -> str:
    """StructFormer's dependency trees on the test half (UAS / UUAS per seed) beside the chain baselines."""
    rows = []
    for key in ("sf-default", "sf-long", "sf-12000"):
        for r in group(key):
            dep = r["parts"]["test"]["dependency"]
            rows.append(
                [INDUCE[key][0], r["seed"], f"{dep['structformer']['uas']:.2f}", f"{dep['structformer']['uuas']:.2f}"]
            )
    dep = group("sf-default")[0]["parts"]["test"]["dependency"]
    for chain in ("left_chain", "right_chain"):
        rows.append([chain.replace("_", " "), "", f"{dep[chain]['uas']:.2f}", f"{dep[chain]['uuas']:.2f}"])
    return markdown(["test half, punctuation excluded", "seed", "UAS", "UUAS"], rows, "lrrr")


@table("induce-structformer-paper")
def induce_structformer_paper() -> str:
    """StructFormer trained by its authors' procedure (``--recipe paper``: a first run of seed 0, then seeds 0,
    1 and 2 for 26, 42, 58 and 100 epochs, seed 0's 100-epoch run shipped) beside the long
    recipe at the same size and the StructFormer shipped before them: dev and test sentence F1, test UAS (each
    with its own decoder)."""
    rows = []
    for key in (
        "sf-paper-cpu",
        "sf-paper-cpu-seeds",
        "sf-paper-cpu-42ep",
        "sf-paper-cpu-longer",
        "sf-paper-cpu-100ep",
        "shipped-sf",
        "sf-long",
        "sf-small-8000-cpu",
    ):
        reps = group(key)
        uas = [r["parts"]["test"]["dependency"]["structformer"]["uas"] for r in reps]
        rows.append(
            [
                INDUCE[key][0],
                seeds_of(reps),
                f"**{mean_sd(part_scores(reps, 'dev'))}**",
                mean_sd(part_scores(reps, "test")),
                mean_sd(uas),
                reps[0]["decoder"].get("dependency", "mst"),
                compute(reps),
            ]
        )
    parts = group("sf-paper-cpu")[0]["parts"]
    chain = parts["test"]["dependency"]["left_chain"]["uas"]
    rows.append(
        [
            "right-branching (UAS: left chain)",
            "",
            f"{parts['dev']['right_branching']['sentence_f1']:.2f}",
            f"{parts['test']['right_branching']['sentence_f1']:.2f}",
            f"{chain:.2f}",
            "",
            "",
        ]
    )
    return markdown(
        ["StructFormer", "seeds", "dev sentence F1", "test sentence F1", "test UAS", "heads", "training"],
        rows,
        "llrrrll",
    )


def is_shipped(report: dict, shipped: dict) -> bool:
    """Whether ``report`` is the run the shipped parser's report comes from (its seed and its steps)."""
    return (report["seed"], report["training"]["steps"]) == (shipped["seed"], shipped["training"]["steps"])


#: the epochs at which the seeds' dev curves are compared (the paper recipe validates after every epoch)
SEED_EPOCHS = (5, 10, 15, 20)


def dev_by_epoch(report: dict) -> dict[int, float]:
    """A run's dev sentence F1 after each whole epoch, from its learning curve: its one decoder's, or where
    the curve scores several (the ON-LSTM's layers), the report's decoder's (``curve_decoder_name``). A
    running-text run (the ON-LSTM's paper recipe) validates at each epoch's end, at a step that varies with
    its window lengths: its epochs are counted by the tokens seen."""
    training = report["training"]
    running = training.get("running_text")
    per_epoch = round(training["steps"] / training["epochs"])
    curve = {}
    for point in report["curve"]["points"]:
        if running:
            epoch = round(point["tokens_seen"] / (running["rows"] * running["tokens_per_row"]))
        elif point["step"] % per_epoch == 0:
            epoch = point["step"] // per_epoch
        else:
            continue
        scores = point["scores"]
        (score,) = scores.values() if len(scores) == 1 else [scores[curve_decoder_name(report["decoder"], scores)]]
        curve[epoch] = score["sentence_f1"]
    return curve


@table("induce-structformer-paper-seeds")
def induce_structformer_paper_seeds() -> str:
    """StructFormer's ``--recipe paper`` over seeds: each run's dev sentence F1 after 5, 10, 15, 20 epochs and
    at the last epoch every run reached, then where each stopped (the lowest-validation-loss model's dev and
    test F1); the mean ± sd over the three seeds trained for 26 epochs."""
    shipped = group("shipped-sf")[0]
    seeds = group("sf-paper-cpu-seeds")
    runs = [("first run, 27.1 epochs", r) for r in group("sf-paper-cpu")]
    runs += [("shipped" if is_shipped(r, shipped) else "", r) for r in seeds]
    curves = [dev_by_epoch(r) for _, r in runs]
    common = min(max(c) for c in curves)
    epochs = [e for e in SEED_EPOCHS if e < common] + [common]
    rows = [
        [
            f"{r['seed']}" + (f" ({label})" if label else ""),
            *(f"{c[e]:.2f}" for e in epochs),
            f"{part_scores([r], 'dev')[0]:.2f}",
            f"**{part_scores([r], 'test')[0]:.2f}**",
            compute([r]),
        ]
        for (label, r), c in zip(runs, curves)
    ]
    seed_curves = curves[-len(seeds) :]
    rows.append(
        [
            f"seeds {seeds_of(seeds)}",
            *(mean_sd([c[e] for c in seed_curves]) for e in epochs),
            mean_sd(part_scores(seeds, "dev")),
            f"**{mean_sd(part_scores(seeds, 'test'))}**",
            "",
        ]
    )
    header = ["seed", *(f"dev, epoch {e}" for e in epochs), "dev F1", "test F1", "training"]
    return markdown(header, rows, "l" + "r" * (len(epochs) + 2) + "l")


#: the epochs at which the longer runs' dev curves are compared, from where the three-seed runs stopped
LONGER_EPOCHS = (26, 30, 34, 38)


@table("induce-structformer-paper-longer")
def induce_structformer_paper_longer() -> str:
    """The 42-epoch runs toward the authors' 100 epochs: each run's dev sentence F1 after 26, 30, 34, 38
    epochs and at the last epoch all reached, then the kept (lowest validation loss) model's dev and test F1
    (beside a 26-epoch twin's test F1 where a run continues one, :func:`longer_runs`); the mean ± sd."""
    return longer_runs("sf-paper-cpu-42ep", "sf-paper-cpu-seeds", "shipped-sf", LONGER_EPOCHS)


@table("induce-structformer-paper-58")
def induce_structformer_paper_58() -> str:
    """The 42-epoch runs continued with ``--resume`` to 58 epochs: each run's dev sentence F1 after 42, 46, 50,
    54 epochs and at the last epoch all reached, the kept (lowest validation loss) model's dev and test F1
    beside the same run's at 42 epochs; the mean ± sd over the runs."""
    return longer_runs("sf-paper-cpu-longer", "sf-paper-cpu-42ep", "shipped-sf", (42, 46, 50, 54))


@table("induce-structformer-paper-100")
def induce_structformer_paper_100() -> str:
    """The ``--recipe paper`` runs continued with ``--resume`` to the authors' 100 epochs (seeds 1 and 2 from
    58 epochs, seed 0 from 42): each run's dev sentence F1 after 58, 66, 74, 82, 90 epochs and at the last
    epoch all reached, the kept (lowest validation loss) model's dev and test F1 beside the same run's at 58
    epochs where the table can pair it; the mean ± sd over the runs."""
    return longer_runs("sf-paper-cpu-100ep", "sf-paper-cpu-longer", "shipped-sf", (58, 66, 74, 82, 90))


def longer_runs(key: str, shorter_key: str, shipped_key: str, at_epochs: tuple[int, ...]) -> str:
    """Runs of group ``key``, longer than those of ``shorter_key``: each run's dev sentence F1 after
    ``at_epochs`` and at the last epoch all reached, the kept model's dev and test F1 beside its shorter
    twin's test F1 (the run it continues, :func:`shorter_twin`; "–" where there is none; no such column when
    no run has one), its compute; then, for more than one run, the mean ± sd over the runs (the twins' over the seeds
    that have one). The run the shipped parser of ``shipped_key`` comes from is marked."""
    longer = group(key)
    shipped = group(shipped_key)[0]
    twins = [shorter_twin(r, group(shorter_key)) for r in longer]
    continued = [twin for twin in twins if twin]
    curves = [dev_by_epoch(r) for r in longer]
    common = min(max(c) for c in curves)
    epochs = [e for e in at_epochs if e < common] + [common]
    rows = [
        [
            f"{r['seed']}" + (" (shipped)" if is_shipped(r, shipped) else ""),
            *(f"{c[e]:.2f}" for e in epochs),
            f"{part_scores([r], 'dev')[0]:.2f}",
            f"**{part_scores([r], 'test')[0]:.2f}**",
            *([f"{part_scores([twin], 'test')[0]:.2f}" if twin else "–"] if continued else []),
            compute([r]),
        ]
        for r, c, twin in zip(longer, curves, twins)
    ]
    twin_mean = []  # the twins' mean test F1: a cell where any run has a twin
    if continued:
        partial = f" (seeds {seeds_of(continued)})" if len(continued) < len(longer) else ""
        twin_mean = [mean_sd(part_scores(continued, "test")) + partial]
    if len(longer) > 1:  # one run has no mean row
        rows.append(
            [
                f"seeds {seeds_of(longer)}",
                *(mean_sd([c[e] for c in curves]) for e in epochs),
                mean_sd(part_scores(longer, "dev")),
                f"**{mean_sd(part_scores(longer, 'test'))}**",
                *twin_mean,
                "",
            ]
        )
    header = ["seed", *(f"dev, epoch {e}" for e in epochs), "dev F1", "test F1"]
    if continued:  # a twin stopped by time may run past its planned epochs: the shortest twin's last epoch
        header.append(f"test F1 at {min(max(dev_by_epoch(twin)) for twin in continued)} epochs")
    header.append("training")
    return markdown(header, rows, "l" + "r" * (len(header) - 2) + "l")


@table("induce-tree-transformer-paper")
def induce_tree_transformer_paper() -> str:
    """The Tree Transformer's ``--recipe paper`` runs on the CPU: each run's dev sentence F1 at the
    learning-curve points every run reached (at most five, evenly spaced back from the last), by Algorithm 1
    from the recipe's minimum layer (2) under the paper's rule (or with the descend rule, where a run's curve
    scores it), then at its last step (no selection: the model it ends with) the curve's Algorithm 1 from
    layer 0 (the other recipes' decoder) and the recipe decoder's (with the descend rule) dev and test F1;
    the mean ± sd over the seeds."""
    runs = group("tt-paper-cpu")
    curves = [{p["step"]: p["scores"] for p in r["curve"]["points"]} for r in runs]
    steps = sorted(set.intersection(*(set(c) for c in curves)) - {0})
    steps = steps[::-1][:: -(-len(steps) // 5)][::-1]  # at most 5 columns, the last common point kept
    name = curve_decoder_name(runs[0]["decoder"], curves[0][0])
    dev = [[c[s][name]["sentence_f1"] for s in steps] for c in curves]
    layer0 = [c[max(c)]["algorithm1_m0"]["sentence_f1"] for c in curves]
    rows = [
        [
            f"{r['seed']}",
            *(f"{v:.2f}" for v in d),
            f"{m0:.2f}",
            f"{part_scores([r], 'dev')[0]:.2f}",
            f"**{part_scores([r], 'test')[0]:.2f}**",
            compute([r]),
        ]
        for r, d, m0 in zip(runs, dev, layer0)
    ]
    if len(runs) > 1:
        rows.append(
            [
                f"seeds {seeds_of(runs)}",
                *(mean_sd(column) for column in zip(*dev)),
                mean_sd(layer0),
                mean_sd(part_scores(runs, "dev")),
                f"**{mean_sd(part_scores(runs, 'test'))}**",
                "",
            ]
        )
    header = ["seed", *(f"dev, step {s:,}" for s in steps), "dev, from layer 0, last step", "dev F1", "test F1"]
    return markdown([*header, "training"], rows, "l" + "r" * len(header[1:]) + "l")


def shorter_twin(report: dict, shorter: list[dict]) -> dict | None:
    """The run of ``shorter`` (induce reports) that ``report`` is the continuation of: the same seed, and
    either ``report`` was resumed from its last step (``training.resumed_from_steps``) or ``report``'s dev
    curve repeats every point of its curve exactly (the same training run again, from the start).

    Returns:
        That report, or None for any other run (e.g. one whose arithmetic parted from it on another
        machine, or a seed with no shorter run).
    """
    resumed = report["training"].get("resumed_from_steps") or []
    points = {p["step"]: p["scores"] for p in report.get("curve", {}).get("points", [])}
    for run in shorter:
        if run["seed"] != report["seed"]:
            continue
        curve = run.get("curve", {}).get("points", [])
        if run["training"]["steps"] in resumed or (curve and all(points.get(p["step"]) == p["scores"] for p in curve)):
            return run
    return None


@table("induce-on-lstm-layers")
def induce_on_lstm_layers() -> str:
    """The ON-LSTM's test sentence F1 from each single layer, and its untrained twin (the default recipe)."""
    return on_lstm_layers("on-lstm")


@table("induce-on-lstm-paper-layers")
def induce_on_lstm_paper_layers() -> str:
    """The same for the ON-LSTM trained with the paper's procedure (``--recipe paper``)."""
    return on_lstm_layers("on-lstm-paper-cpu")


@table("induce-on-lstm-paper-longer")
def induce_on_lstm_paper_longer() -> str:
    """The ON-LSTM's ``--recipe paper`` runs for 18 epochs (continued from the 8-epoch ones or run again):
    dev F1 after 8, 10, 12, 14, 16 epochs and at the last all reached, the kept (best validation
    perplexity) model's dev and test F1."""
    return longer_runs("on-lstm-paper-cpu-longer", "on-lstm-paper-cpu", "shipped-on-lstm", (8, 10, 12, 14, 16))


@table("induce-on-lstm-paper-30")
def induce_on_lstm_paper_30() -> str:
    """The ON-LSTM's ``--recipe paper`` runs continued from 18 to 30 epochs: dev F1 after 18, 20, 22, 24, 26,
    28 epochs and at the last all reached, the kept model's dev and test F1 beside the same run's at 18."""
    return longer_runs(
        "on-lstm-paper-cpu-30ep", "on-lstm-paper-cpu-longer", "shipped-on-lstm", (18, 20, 22, 24, 26, 28)
    )


def on_lstm_layers(key: str) -> str:
    """Test and dev sentence F1 of each single layer of the ON-LSTM group ``key``, and its untrained twin."""
    reps = group(key)
    layers = sorted(reps[0]["parts"]["test"]["single_layer"], key=int)
    rows = [
        [
            f"layer {layer}",
            *(f"{r['parts']['test']['single_layer'][layer]['sentence_f1']:.2f}" for r in reps),
            mean_sd([r["parts"]["test"]["single_layer"][layer]["sentence_f1"] for r in reps]),
            mean_sd([r["parts"]["dev"]["single_layer"][layer]["sentence_f1"] for r in reps]),
        ]
        for layer in layers
    ]
    rows.append(
        [
            "untrained, layer 1",
            *(f"{v:.2f}" for v in part_scores(reps, "test", "untrained")),
            mean_sd(part_scores(reps, "test", "untrained")),
            mean_sd(part_scores(reps, "dev", "untrained")),
        ]
    )
    return markdown(
        ["ON-LSTM, sentence F1", *(f"seed {r['seed']}" for r in reps), "test", "dev"], rows, "l" + "r" * (len(reps) + 2)
    )


# ---------------------------------------------------------------------------------------------------------
# baselines (docs/results/baselines-*.json: `syntaxformer baselines --json`)


@table("baselines")
def baselines() -> str:
    """Structure-free baselines on all of ptb-sample and on its test half."""
    rows = []
    for path, part in (
        ("docs/results/baselines-ptb-sample.json", "all"),
        ("docs/results/baselines-ptb-sample-test.json", "test"),
    ):
        report = load(path)
        for name in ("left_branching", "right_branching", "random", "balanced"):
            b = report[name]
            sd = b.get("std", {})
            cell = (lambda f: f"{b[f]:.2f} ± {sd[f]:.2f}") if sd else (lambda f: f"{b[f]:.2f}")
            label = name.replace("_", "-") + (
                f" (seeds {report['meta']['seeds'][0]}–{report['meta']['seeds'][-1]})" if sd else ""
            )
            rows.append(
                [
                    f"{part} ({report['meta']['n_sentences']:,})",
                    label,
                    cell("sentence_f1"),
                    cell("corpus_f1"),
                    cell("wsj10_sentence_f1"),
                    cell("wsj10_corpus_f1"),
                    f"{b['mean_depth']:.2f}",
                ]
            )
    return markdown(
        ["ptb-sample", "baseline", "sentence F1", "corpus F1", "WSJ-10 sentence F1", "WSJ-10 corpus F1", "mean depth"],
        rows,
        "llrrrrr",
    )


@table("baselines-dependencies")
def baselines_dependencies() -> str:
    rows = []
    for path in ("docs/results/baselines-ptb-sample.json", "docs/results/baselines-ptb-sample-test.json"):
        report = load(path)
        dep = report["dependency"]
        rows += [
            [
                report["meta"]["treebank"],
                chain.replace("_", " "),
                f"{dep[chain]['uas']:.2f}",
                f"{dep[chain]['uuas']:.2f}",
            ]
            for chain in ("left_chain", "right_chain")
        ]
    return markdown(["treebank", "baseline", "UAS", "UUAS"], rows, "llrr")


# ---------------------------------------------------------------------------------------------------------
# attention heads (docs/heads/*.json, docs/results/prune-shipped-parser.json)

PRUNE_SHIPPED = "docs/results/prune-shipped-parser.json"


def _point(curve: list[dict], removed: int) -> dict:
    return next(p for p in curve if p["n_removed"] == removed)


def _ppl_f1(point: dict) -> str:
    """``perplexity / F1`` of a pruning point; a random point (with ``*_sd``): mean ± sd over its seeds."""

    def cell(key: str, digits: int) -> str:
        sd = point.get(f"{key}_sd")
        return f"{point[key]:.{digits}f}" + (f" ± {sd:.{digits}f}" if sd and point["n_removed"] else "")

    return cell("perplexity", 1) + (f" / {cell('sentence_f1', 2)}" if "sentence_f1" in point else "")


@table("heads-prune-shipped")
def heads_prune_shipped() -> str:
    """``syntaxformer prune`` on the shipped parser: perplexity / sentence F1 per order and heads removed."""
    record = load(PRUNE_SHIPPED)
    once, recomputed = record["once"]["orders"], record["recomputed"]["orders"]
    n_heads = record["once"]["n_heads"]
    rows = []
    for point in once["importance"]["points"]:
        n = point["n_removed"]
        rows.append(
            [
                f"{n} ({100 * n / n_heads:.0f}%)",
                _ppl_f1(point),
                _ppl_f1(_point(recomputed["importance"]["points"], n)),
                _ppl_f1(_point(once["confidence"]["points"], n)),
                _ppl_f1(_point(once["random"]["points"], n)),
            ]
        )
    seeds = len(once["random"]["seeds"])
    return markdown(
        ["heads removed", "importance: ppl / F1", "importance, recomputed", "confidence", f"random ({seeds} seeds)"],
        rows,
        "lrrrr",
    )


@table("heads-gates")
def heads_gates() -> str:
    """Hard-concrete gates on the shipped parser, per λ."""
    report = load("docs/heads/gates-tree-transformer-ptb.json")
    src = report["source"]
    rows = [
        [
            "source, not fine-tuned",
            f"{src['n_heads']}/{src['n_heads']}",
            f"{src['perplexity']:.1f}",
            f"{src['sentence_f1']:.2f}",
            f"{src['parameters']:,}",
        ]
    ]
    for run in report["runs"]:
        silenced = f" (layer {', '.join(run['silenced'])} silenced)" if run["silenced"] else ""
        rows.append(
            [
                f"{run['gate_l0']:g}" + (" (control)" if run["gate_l0"] == 0 else ""),
                f"{run['n_kept']}/{run['n_heads']} {run['kept_per_layer']}{silenced}",
                f"{run['perplexity']:.1f}",
                f"{run['sentence_f1']:.2f}",
                f"{run['parameters_after_pruning']:,}",
            ]
        )
    return markdown(["λ", "heads kept (per layer)", "perplexity", "sentence F1", "parameters"], rows, "llrrr")


def _gate(model: dict, lam: float) -> dict:
    return next(g for g in model["gates"] if g["gate_l0"] == lam)


def _f1(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _study_cells(m: dict) -> list[str]:
    """One model's column of the head study (``docs/heads/head-study.json``'s ``models`` entry)."""
    curves, roles, importance = m["curves"], m["roles"], m["importance"]
    half = importance["n_heads"] // 2
    pruned = {order: _point(curves[order], half) for order in ("importance", "confidence", "random")}
    gate0, gate1, gate3 = _gate(m, 0.0), _gate(m, 0.1), _gate(m, 0.3)
    return [
        f"{curves['importance'][0]['perplexity']:.1f}",
        _f1(curves["importance"][0].get("sentence_f1")),
        f"{importance['top_quarter_share']:.1f}% / {importance['gini']:.2f}",
        str(roles["positional"]),
        str(roles["syntactic_any"]),
        f"{roles['ptb_attends_to_head_best']:.1f}",
        f"{pruned['importance']['perplexity']:.0f} / {pruned['confidence']['perplexity']:.0f} / "
        f"{pruned['random']['perplexity']:.0f} ± {pruned['random']['perplexity_sd']:.0f}",
        _f1(pruned["importance"].get("sentence_f1")),
        f"{gate1['n_kept']}, {gate1['perplexity']:.1f} ({gate0['perplexity']:.1f})",
        f"{gate3['n_kept']}, {gate3['perplexity']:.1f}, {_f1(gate3.get('sentence_f1'))}",
    ]


@table("heads-study")
def heads_study() -> str:
    """The head study (seed 0): Tree Transformer, plain Transformer, StructFormer side by side."""
    models = load("docs/heads/head-study.json")["models"]
    order = [models[k] for k in ("tree-transformer", "transformer", "structformer")]
    baseline = order[0]["roles"]["ptb_attends_to_head_baseline"]
    labels = [
        "held-out perplexity (one mask per input)",
        "sentence F1, ptb-sample:dev",
        "importance: share of the top quarter of heads / Gini",
        "positional heads (≥ 90% on −1 or +1)",
        "syntactic heads (UD-EWT dev, ≥ 10 points over the relation's positional baseline)",
        f'best head "attends to its head", ptb-sample:dev (baseline {baseline:.1f})',
        "perplexity with half the heads pruned: importance / confidence / random (3 seeds)",
        "F1 with half the heads pruned, importance order",
        "gates λ = 0.1: heads kept, perplexity (λ = 0 control)",
        "gates λ = 0.3: heads kept, perplexity, F1",
    ]
    columns = [_study_cells(m) for m in order]
    rows = [[label, *(column[i] for column in columns)] for i, label in enumerate(labels)]
    return markdown(["seed 0, ptb-sample", *(m["label"] for m in order)], rows, "lrrr")


# ---------------------------------------------------------------------------------------------------------
# propositional logic (docs/logic/study.json, docs/logic/recipe-choice.json)

ENCODER_LABELS = {
    "on-lstm": "ON-LSTM",
    "lstm": "LSTM",
    "transformer": "Transformer (`prior none`)",
    "on-lstm-san": "ON-LSTM + self-attention",
    "tree-transformer": "Tree Transformer",
}


@table("logic")
def logic() -> str:
    """Test accuracy per operator group, mean ± sd over seeds, each encoder's recipe, and its clocks."""
    study = load("docs/logic/study.json")
    rows = []
    for encoder in ("on-lstm", "lstm", "transformer", "on-lstm-san", "tree-transformer"):
        s = study["summary"][encoder]
        runs = study["runs"][encoder]
        clocks = ", ".join(
            f"{m:.1f} ({runs[str(seed)]['report']['training']['threads']})"
            for seed, m in zip(s["seeds"], s["train_minutes"])
        )
        groups = [f"{s['groups'][g]['mean']:.1f} ± {s['groups'][g]['sd']:.1f}" for g in ("1-6", "7-9", "10-12")]
        rows.append(
            [
                ENCODER_LABELS[encoder],
                f"{s['lr']:g}",
                f"{s['recipe_steps']:,}",
                s["precision"],
                ", ".join(map(str, s["seeds"])),
                *groups,
                mean_sd(s["best_valid_accuracy"], 1),
                clocks,
            ]
        )
    return markdown(
        [
            "encoder",
            "lr",
            "steps",
            "precision",
            "seeds",
            "1–6 operators",
            "7–9 operators",
            "10–12 operators",
            "best validation",
            "train min (threads), per seed",
        ],
        rows,
        "lrrllrrrrl",
    )


@table("logic-recipe-choice")
def logic_recipe_choice() -> str:
    """Every run of the recipe choice (validation accuracy against steps), as logic_study prints it."""
    from benchmarks.studies.logic import logic_study

    recorded = load("docs/logic/recipe-choice.json")["runs"]
    rows = [
        dict(
            r,
            valid_curve={int(k): v for k, v in r["valid_curve"].items()},
            precision=r.get("precision") or "fp32",
            final_lr_fraction=r.get("final_lr_fraction", logic_study.RECORDED_FINAL_LR_FRACTION),
        )
        for r in recorded
    ]
    return logic_study.recipe_choice_table(rows)


@table("logic-precision")
def logic_precision() -> str:
    report = load("docs/benchmarks/logic-precision-cpu.json")
    rows = [
        [
            r["encoder"],
            r["threads"],
            r["steps"],
            f"{r['seconds_per_step']['fp32']:.3f}",
            f"{r['seconds_per_step']['bf16']:.3f}",
            f"×{r['speedup']:.2f}",
            f"{r['first_step_loss']['fp32']:.5f} / {r['first_step_loss']['bf16']:.5f}",
        ]
        for r in report["results"]
    ]
    return markdown(
        ["encoder", "threads", "steps each", "fp32 s/step", "bf16 s/step", "speed-up", "first-step loss fp32 / bf16"],
        rows,
        "lrrrrrr",
    )


# ---------------------------------------------------------------------------------------------------------
# structural priors (docs/prior-study.json, docs/prior-study/)

PRIOR_LABELS = {
    "transformer": "plain Transformer",
    "constituent": "constituent (Tree Transformer)",
    "gaussian": "Gaussian",
    "structformer": "StructFormer",
    "sp-induced": "structural positions, the same-seed StructFormer's trees of the unmasked sentence",
    "sp-induced-masked": "structural positions, the same-seed StructFormer's trees of each masked input",
    "mgsa-ngram": "MG-SA, heads word, word, 2-gram, 3-gram",
    "mgsa-induced": "MG-SA, heads word, word, tree (the same-seed Tree Transformer's phrases of the unmasked "
    "sentence), 2-gram",
    "transformer-gold-block": "*gold block*: plain Transformer",
    "sp-gold": "*gold block*: structural positions, gold dependency trees",
    "mgsa-gold": "*gold block*: MG-SA, heads word, word, tree (gold phrases), 2-gram",
}
PROBING_TASKS = ("TreeDepth", "TopConst", "BShift", "SentLen")


def _stat(stat: dict | None, digits: int) -> str:
    if not stat:
        return "–"
    return f"{stat['mean']:.{digits}f}" + (f" ± {stat['sd']:.{digits}f}" if stat.get("n", 1) > 1 else "")


@table("priors")
def priors() -> str:
    """The prior study: perplexity, F1 and probing (best layer on dev; [untrained twin]) per system."""
    systems = load("docs/prior-study.json")["systems"]
    rows = []
    for key, label in PRIOR_LABELS.items():
        s = systems[key]
        probing = [
            f"{s['probing'][t]['best']['mean']:.1f} [{s['probing'][t]['untrained']['mean']:.1f}]"
            if t in s["probing"]
            else "–"
            for t in PROBING_TASKS
        ]
        rows.append(
            [
                label,
                ", ".join(map(str, s["seeds_trained"])),
                _stat(s["perplexity"], 1),
                _stat(s["perplexity_masked_copy"], 1),
                _stat(s["sentence_f1"], 2),
                *probing,
            ]
        )
    return markdown(
        [
            "encoder",
            "seeds",
            "perplexity",
            "perplexity, each masked copy's structure",
            "F1 (ptb-sample:test)",
            *PROBING_TASKS,
        ],
        rows,
        "llrrr" + "r" * len(PROBING_TASKS),
    )


@table("priors-first-look")
def priors_first_look() -> str:
    """One seed, 1,500 steps on ptb-sample:dev: masked-LM perplexity on ptb-sample:test."""
    rows = []
    for name, label in (
        ("transformer-gold-block", "plain Transformer"),
        ("sp-gold", "structural positions, gold dependency trees (`--trees gold`)"),
        ("mgsa-gold", "MG-SA: heads word, word, gold phrases at level 1, 2-gram (`--phrases gold`)"),
    ):
        ppl = load(f"docs/prior-study/{name}-seed0-1500steps-perplexity.json")
        training = load(f"docs/prior-study/{name}-seed0-1500steps-training.json")
        rows.append(
            [
                label,
                f"{ppl['perplexity']:.1f}",
                f"{training['steps']:,}",
                f"{training['minutes']:.1f}",
                f"{training['parameters']:,}",
            ]
        )
    return markdown(
        ["seed 0, ptb-sample:dev → ptb-sample:test", "perplexity", "steps", "train min (1 thread)", "parameters"],
        rows,
        "lrrrr",
    )


# ---------------------------------------------------------------------------------------------------------
# probing (docs/probe/*.json)


def _probe_table(path: str) -> str:
    report = load(path)
    rows = []
    for task, t in report["tasks"].items():
        best = t["best_layer"]
        layers = " / ".join(f"{layer['logreg']['test']:.1f}" for layer in t["layers"]["trained"])
        rows.append(
            [
                task,
                f"{t['majority']['test']:.1f}",
                f"{t['bag_of_words']['logreg']['test']:.1f}",
                f"{best['untrained']['logreg']['test']:.1f} ({best['untrained']['logreg']['layer']})",
                f"{best['trained']['logreg']['test']:.1f} ({best['trained']['logreg']['layer']})",
                layers,
                f"{t['n_sentences']['test']:,}",
            ]
        )
    n_layers = len(next(iter(report["tasks"].values()))["layers"]["trained"])
    return markdown(
        [
            "task",
            "majority",
            "bag of words",
            "untrained (best layer)",
            "trained (best layer)",
            f"trained, layers 0–{n_layers - 1}",
            "test sentences",
        ],
        rows,
        "lrrrrrr",
    )


@table("probe-shipped")
def probe_shipped() -> str:
    return _probe_table("docs/probe/shipped-parser-seed0.json")


@table("probe-shipped-ud-ewt")
def probe_shipped_ud_ewt() -> str:
    return _probe_table("docs/probe/shipped-parser-ud-ewt-dev-seed0.json")


# ---------------------------------------------------------------------------------------------------------
# out of domain (docs/out-of-domain/*.json, benchmarks/studies/out_of_domain/out_of_domain.py)


@table("out-of-domain")
def out_of_domain() -> str:
    """Each shipped or long-run parser on UD English-EWT test: F1 against the gold dependency trees'
    yields beside right- and left-branching, UAS beside the chains when the parser gives heads."""
    rows = []
    for path in sorted((DOCS / "out-of-domain").glob("*.json")):
        r = load(str(path.relative_to(ROOT)))
        c, d = r["constituency"], r.get("dependencies")
        delta = c["parser"]["sentence_f1"] - c["right_branching"]["sentence_f1"]
        rows.append(
            [
                r["parser"],
                f"{r['n_sentences']:,}",
                f"**{c['parser']['sentence_f1']:.2f}**",
                f"{c['right_branching']['sentence_f1']:.2f}",
                f"{delta:+.2f}",
                f"{c['left_branching']['sentence_f1']:.2f}",
                f"{d['parser']['uas']:.2f} (right chain {d['right_chain']['uas']:.2f})" if d else "–",
            ]
        )
    header = ["parser", "sentences", "sentence F1", "right-branching", "parser − right", "left-branching", "UAS"]
    return markdown(header, rows, "lrrrrrl")


@table("out-of-domain-history")
def out_of_domain_history() -> str:
    """Earlier parsers on UD English-EWT (``docs/results/recorded.json``: their reports were not kept)."""
    rows = [
        [r["parser"], f"{r['minus_right_branching']:+.2f}", "–" if r["uas"] is None else f"{r['uas']:.2f}"]
        for r in load("docs/results/recorded.json")["out_of_domain_history"]["rows"]
    ]
    return markdown(["earlier parser", "sentence F1 − right-branching", "UAS"], rows, "lrr")


# ---------------------------------------------------------------------------------------------------------
# ensembles and distilled students (docs/results/ensemble.json)

ENSEMBLE_JSON = "docs/results/ensemble.json"
#: the published ensemble of the ensemble-distillation paper, in its own setting
ENSEMBLE_PUBLISHED = [
    [
        "*published*: Shayegh et al. (ICLR 2024), ensemble of seven induced parsers (tree averaging); "
        "mean over runs, best 71.9 (as Papers with Code lists it)",
        "–",
        "70.4 (WSJ test)",
        "–",
        "–",
    ]
]


def _parser_label(record: dict, shipped_names: tuple = SHIPPED_PARSERS) -> str:
    name = Path(record["model"]).name
    return f"`{name}`" if name in shipped_names else name


def _student_label(student: dict) -> str:
    job = student["job"]
    size = f", {job['parser_layers']} parse layers" if job.get("parser_layers") else ""
    held = "held out: ptb-sample's sentences removed from the text" if job.get("exclude_treebank") else "transductive"
    return (
        f"student: `{Path(job['student']).name}` distilled from `{job['teacher']}` ({held}; {student['sentences']:,} "
        f"sentences, epoch {student['kept_epoch']} of {job['epochs']}, train {job['train']}{size})"
    )


@table("ensemble")
def ensemble_table() -> str:
    """Members, their ensemble (weights chosen on dev), the distilled students and right-branching: sentence
    F1 on ptb-sample's halves and UD-EWT (and its margin over right-branching), parse speed on the test half."""
    r = load(ENSEMBLE_JSON)
    rb = r["right_branching"]

    def cells(label: str, record: dict) -> list[str]:
        ud = record.get("ud-ewt")
        ud_cell = f"{ud['sentence_f1']:.2f} ({ud['sentence_f1'] - rb['ud-ewt']['sentence_f1']:+.2f})" if ud else "–"
        speed = record["test"].get("sentences_per_second")
        return [
            label,
            f"{record['dev']['sentence_f1']:.2f}",
            f"**{record['test']['sentence_f1']:.2f}**",
            ud_cell,
            f"{speed:,.0f}" if speed else "–",
        ]

    chosen = r["ensemble_chosen"]
    weights = ", ".join(f"{w:g}" for w in chosen["weights"])
    rows = [cells(f"member {_parser_label(m)}", m) for m in r["members"]]
    rows.append(cells(f"**ensemble** of the {len(r['members'])} (weights {weights}, chosen on dev)", chosen))
    rows += [cells(_student_label(s), s) for s in r["students"]]
    rows.append(cells("right-branching", {k: v | {"sentences_per_second": None} for k, v in rb.items()}))
    rows += ENSEMBLE_PUBLISHED
    header = ["parser", "dev sentence F1", "test sentence F1", "UD-EWT F1 (− right-branching)", "sentences/s (test)"]
    return markdown(header, rows, "lrrrr")


@table("readme-ensemble")
def readme_ensemble() -> str:
    """The README's rows: the best member, the ensemble and the students, on the test half."""
    r = load(ENSEMBLE_JSON)
    best = max(r["members"], key=lambda m: m["dev"]["sentence_f1"])
    rows = [
        [
            f"best member, {_parser_label(best)}",
            f"{best['dev']['sentence_f1']:.2f}",
            f"**{best['test']['sentence_f1']:.2f}**",
        ]
    ]
    rows.append(
        [
            "`ensemble-ptb-lm` (the three shipped parsers)",
            f"{r['ensemble_chosen']['dev']['sentence_f1']:.2f}",
            f"**{r['ensemble_chosen']['test']['sentence_f1']:.2f}**",
        ]
    )
    rows += [
        [_student_label(s), f"{s['dev']['sentence_f1']:.2f}", f"**{s['test']['sentence_f1']:.2f}**"]
        for s in r["students"]
    ]
    return markdown(["parser", "dev sentence F1", "test sentence F1"], rows, "lrr")


# ---------------------------------------------------------------------------------------------------------
# natural-language inference (docs/nli-study.json, docs/nli-speed-2threads.json, docs/results/recorded.json)

NLI_LABELS = {
    "gaussian": 'Gaussian Transformer (`prior="gaussian"`)',
    "none": 'same model, `prior="none"`',
    "constituent": "same model, constituent prior",
    "mean-pool": "mean-pooled embeddings + MLP",
    "majority": "majority class (NEUTRAL)",
}


@table("nli")
def nli() -> str:
    """SICK TEST accuracy per system (selected on TRIAL), parameters, training minutes, inference speed."""
    study, speed = load("docs/nli-study.json"), load("docs/nli-speed-2threads.json")
    rows = []
    for key, label in NLI_LABELS.items():
        s = study["systems"][key]
        fast = speed["rows"].get(key)
        rows.append(
            [
                label,
                f"**{mean_sd(s['test'])}**" if len(s["test"]) > 1 else f"{s['test'][0]:.2f}",
                ", ".join(f"{v:.2f}" for v in s["test"]) if len(s["test"]) > 1 else "",
                f"{statistics.mean(s['trial']):.2f}" if s["trial"] else "",
                f"{s['parameters']:,}" + (f" ({s['trainable_parameters']:,})" if "trainable_parameters" in s else ""),
                f"{s['train_minutes'][0]:.1f} ± {s['train_minutes'][1]:.1f}" if "train_minutes" in s else "",
                f"{fast['forward_pairs_per_second']:,.0f} / {fast['end_to_end_pairs_per_second']:,.0f}" if fast else "",
            ]
        )
    return markdown(
        [
            "system (recipe `default`, frozen word2vec vectors)",
            "SICK TEST accuracy",
            "per seed",
            "TRIAL (mean of the seeds' best)",
            "parameters (trained)",
            "training min (1 thread)",
            f"inference pairs/s, forward / end to end ({speed['threads']} threads, batch {speed['batch']})",
        ],
        rows,
        "lrlrrrr",
    )


@table("nli-recipe-choice")
def nli_recipe_choice() -> str:
    rows = [
        [r["setting"], f"{r['best_trial']:.2f}", f"{r['test']:.2f}"]
        for r in load("docs/results/recorded.json")["nli_recipe_choice"]["rows"]
    ]
    return markdown(["setting (seed 0, Gaussian Transformer, frozen vectors)", "best TRIAL", "TEST"], rows, "lrr")


# ---------------------------------------------------------------------------------------------------------
# masked-LM comparison (docs/compare-*.json) and speed (docs/benchmarks/*.json)

COMPARE_LABELS = {
    "tree-transformer": "Tree Transformer",
    "transformer": "Transformer",
    "transformer-L8": "Transformer, ≥ the Tree Transformer's parameters",
}


@table("compare")
def compare() -> str:
    report = load("docs/compare-ptb-lm-small-seed0.json")
    rows = [
        [
            COMPARE_LABELS.get(r["name"], r["name"]),
            r["prior"],
            r["layers"],
            f"{r['parameters']:,}",
            f"{r['steps']:,}",
            f"{r['train_minutes']:.1f}",
            f"{r['perplexity']:.1f}",
        ]
        for r in report["runs"]
    ]
    return markdown(
        ["model", "prior", "layers", "parameters", "steps", "train min", "test perplexity"], rows, "llrrrrr"
    )


def _speed(path: str) -> tuple[list[int], dict]:
    rows = load(path)["rows"]
    lengths = sorted({r["N"] for r in rows})
    return lengths, {(r["N"], r["model"]): r for r in rows}


@table("speed-dropout")
def speed_dropout() -> str:
    """Step time with the paper's attention dropout: ms of the plain rows, ratios of the others."""
    lengths, rows = _speed("docs/benchmarks/attention-cpu-small-dropout0.1.json")
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
    lengths, rows = _speed("docs/benchmarks/attention-cpu-small-dropout0.1.json")
    models = ("plain/sdpa", "tree/sdpa", "tree/blocks", "plain/eager", "tree/eager", "tree/cubic")
    out = [[n, *(f"{rows[(n, m)]['peak_mib']:.0f}" for m in models)] for n in lengths]
    return markdown(["N", *models], out, "r" * (len(models) + 1))


@table("speed-no-dropout")
def speed_no_dropout() -> str:
    lengths, rows = _speed("docs/benchmarks/attention-cpu-small-dropout0.json")
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


@table("nli-speed")
def nli_speed() -> str:
    speed = load("docs/nli-speed-2threads.json")
    rows = [
        [
            NLI_LABELS[k],
            f"{r['parameters']:,}",
            f"{r['forward_pairs_per_second']:,.0f}",
            f"{r['end_to_end_pairs_per_second']:,.0f}",
            f"{r['ratio_to_none']:.2f}",
        ]
        for k, r in speed["rows"].items()
    ]
    return markdown(
        ["system", "parameters", "forward pairs/s", "end to end pairs/s", "forward, ratio to prior none"], rows, "lrrrr"
    )


TRAIN_STEP_LABELS = {
    "tree": "`tree` (today: default config, Adam `fused`, the cheaper dropout masks everywhere)",
    "plain": '`plain` (`prior="none"`)',
    "tree-adam-loop": "`tree-adam-loop` (Adam's per-tensor loop, torch's CPU default)",
    "tree-adam-foreach": "`tree-adam-foreach` (Adam's multi-tensor form)",
    "tree-fused": "`tree-fused` (`constituent_fused=True`)",
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
    """benchmarks/speed/README.md: a training step of the default induce recipe per variant (docs/benchmarks/train-step.json)."""
    run = load("docs/benchmarks/train-step.json")
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


#: benchmarks/speed/gpu_step.py's record (written on a GPU machine by benchmarks/speed/gpu_session.sh)
GPU_STEP = "docs/benchmarks/gpu-step.json"


#: gpu_step.py's ``compiled`` rows of the same GPU session (gpu_session.sh part 2a), read with GPU_STEP's
GPU_STEP_COMPILED = "docs/benchmarks/gpu-step-compiled.json"


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
    statement that no GPU measurement exists (``docs/benchmarks/gpu-step.json`` absent, or holding only a
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


#: benchmarks/speed/cpu_against_base.py's record: today's CPU step against the code before the accelerator work
CPU_AGAINST_BASE = "docs/benchmarks/cpu-against-base.json"


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


OP_COUNT = "docs/benchmarks/op-count.json"

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


TRITON_COMPILE = "docs/benchmarks/triton-compile.json"


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


COMPILE_TRACES = "docs/benchmarks/compile-trace-*.json"


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
GPU_CURVE = "docs/benchmarks/gpu-loss-curve.json"


@table("gpu-loss-curve")
def gpu_loss_curve() -> str:
    """docs/results/speed.md: the eager and the fast step through the trainer on real data (minutes,
    steps/s, final losses), from ``docs/benchmarks/gpu-loss-curve.json``, or nothing measured."""
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


# ---------------------------------------------------------------------------------------------------------
# the pages


def render(text: str, where: str = "page") -> str:
    """``text`` with every marked table rewritten; an unknown table name is an error naming ``where``."""

    def replace(match: re.Match) -> str:
        name = match["name"]
        if name not in TABLES:
            raise KeyError(f"{where}: no table named {name!r} (known: {', '.join(sorted(TABLES))})")
        return f"{match.group(1)}{TABLES[name]()}\n{match.group(4)}"

    return MARKER.sub(replace, text)


def stale_pages(pages=None) -> list[Path]:
    """The pages whose tables differ from what the reports say."""
    return [
        p for p in (pages or PAGES) if render(p.read_text(encoding="utf-8"), str(p)) != p.read_text(encoding="utf-8")
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs")
    args = parser.parse_args(argv)
    stale = stale_pages()
    if args.check:
        for page in stale:
            print(
                f"{page.relative_to(ROOT)}: tables differ from the reports (run python -m benchmarks.tools.results_tables)"
            )
        return 1 if stale else 0
    for page in stale:
        page.write_text(render(page.read_text(encoding="utf-8"), str(page)), encoding="utf-8")
        print(f"rewrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
