"""Recipe search for unsupervised parsing on a dev split: which training recipe earns F1 per CPU minute.

Each *setting* (:data:`SETTINGS`) is a set of ``syntaxformer train`` options: model size, learning
rate and schedule, batch size, mask rate and replacement, training text, constituent variant. The
decoders (Algorithm 1 with every minimum layer, every single layer; StructFormer's distance split) are
scored at every evaluation point by the learning curve (``train --eval-treebank ptb-sample:dev``),
so the decoder axis needs no extra training. Choices are made on **dev** (``ptb-sample:dev``,
wsj_0001-0099, DESIGN.md §7); the test half is never read here.

The budget is wall-clock time on the 2-core CPU the project targets. A run is a fixed number of steps
(reproducible from the seed): the steps a 2-core CPU makes in ``--budget`` minutes (default 20) at that
setting's **measured** CPU speed (step 1, ``--measure-cpu``: tokens/s over 30 training steps with 2
threads, tokens per step of the setting's batches). The learning-rate schedule ends at that step, and
dev F1 at 5, 10 and 20 CPU minutes is read off the curve (linear interpolation between evaluation
points). The training itself may run anywhere (``--device cuda`` runs the same steps on a GPU, many
settings at once with ``--jobs``): only the step count, not the device, defines the recipe.

Steps, all resumable (a finished run is skipped; an interrupted one resumes from its checkpoint):

    python -m benchmarks.studies.recipe_search.recipe_search --measure-cpu                 # CPU speed of every setting
    python -m benchmarks.studies.recipe_search.recipe_search --train --device cuda --jobs 12   # curves (GPU or CPU)
    python -m benchmarks.studies.recipe_search.recipe_search --thresholds MODEL_DIR ...    # decoder threshold / min layer
    python -m benchmarks.studies.recipe_search.recipe_search --report                      # docs/results/induce/recipes.md + figure

Results: ``cpu_rates.json`` beside this script (speeds), ``runs/recipes/<setting>-seed<s>/training.json``
(curves; ``--report`` packs them into ``curves.json`` beside this script), ``docs/results/induce/recipes.md`` (table) and
``docs/results/induce/recipes.{png,svg}`` (dev F1 against CPU minutes).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

from benchmarks import RESULTS, ROOT
from benchmarks.tools.jobs import Job, add_job_options, module_command, run_jobs
from benchmarks.tools.portable import portable

#: the study's own records, beside this script
HERE = Path(__file__).resolve().parent
RATES = HERE / "cpu_rates.json"
CURVES = HERE / "curves.json"
THRESHOLDS_JSON = HERE / "thresholds.json"
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.01)
RUNS = ROOT / "runs" / "recipes"
DEV = "ptb-sample:dev"
MARKS = (5, 10, 20)  # CPU minutes at which dev F1 is read

_TT = dict(
    model="tree-transformer",
    preset="small",
    lr=5e-4,
    warmup_steps=300,
    schedule="linear",
    final_lr_fraction=0.1,
    batch_size=64,
    mask_rate=0.15,
    mask_replace="bert",
)
_SMALLER = dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=512)
_OFF = dict(constituent_variant="official")
_SF = dict(
    model="structformer",
    preset="small",
    lr=5e-4,
    warmup_steps=300,
    schedule="linear",
    final_lr_fraction=0.1,
    batch_size=64,
    mask_rate=0.3,
    mask_replace="mask",
)


def _s(description: str, base: dict, config: dict | None = None, **train) -> dict:
    return dict(description=description, train={**base, **train}, config=dict(config or {}))


#: name -> {"description", "train": TrainArguments fields, "config": model config overrides}.
SETTINGS = {
    # Tree Transformer: size and variant
    "tt-small-paper": _s("small (6x256, 4 heads), paper variant (the former default)", _TT),
    "tt-small-official": _s("small, official variant", _TT, _OFF),
    "tt-4x128-paper": _s("4 layers x 128, d_ff 512, paper variant", _TT, _SMALLER),
    "tt-4x128-official": _s("4 layers x 128, d_ff 512, official variant", _TT, {**_SMALLER, **_OFF}),
    "tt-6x128-official": _s("6 layers x 128, d_ff 512, official", _TT, {**_SMALLER, "num_hidden_layers": 6, **_OFF}),
    "tt-4x64-official": _s(
        "4 layers x 64, 2 heads, d_ff 256, official",
        _TT,
        dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=2, intermediate_size=256, **_OFF),
    ),
    "tt-3x128-official": _s("3 layers x 128, official", _TT, {**_SMALLER, "num_hidden_layers": 3, **_OFF}),
    "tt-4x128-2h-official": _s(
        "4 layers x 128, 2 heads, official", _TT, {**_SMALLER, "num_attention_heads": 2, **_OFF}
    ),
    # learning rate, warm-up, schedule
    "tt-4x128-official-lr1e-3": _s("4x128 official, lr 1e-3", _TT, {**_SMALLER, **_OFF}, lr=1e-3),
    "tt-4x128-official-lr2e-3": _s("4x128 official, lr 2e-3", _TT, {**_SMALLER, **_OFF}, lr=2e-3),
    "tt-4x128-official-lr2e-4": _s("4x128 official, lr 2e-4", _TT, {**_SMALLER, **_OFF}, lr=2e-4),
    "tt-4x128-official-cosine": _s(
        "4x128 official, 100 warm-up steps, cosine", _TT, {**_SMALLER, **_OFF}, warmup_steps=100, schedule="cosine"
    ),
    "tt-4x128-official-const": _s(
        "4x128 official, constant lr (public code's schedule)", _TT, {**_SMALLER, **_OFF}, schedule="constant"
    ),
    "tt-small-official-lr1e-3": _s("small official, lr 1e-3", _TT, _OFF, lr=1e-3),
    # batch size, in sentences and in tokens
    "tt-4x128-official-b32": _s("4x128 official, batch 32 sentences", _TT, {**_SMALLER, **_OFF}, batch_size=32),
    "tt-4x128-official-b128": _s("4x128 official, batch 128 sentences", _TT, {**_SMALLER, **_OFF}, batch_size=128),
    "tt-4x128-official-t1024": _s(
        "4x128 official, batches of 1,024 padded tokens", _TT, {**_SMALLER, **_OFF}, batch_size=None, max_tokens=1024
    ),
    # masking
    "tt-4x128-official-m30": _s("4x128 official, mask rate 0.3", _TT, {**_SMALLER, **_OFF}, mask_rate=0.3),
    "tt-4x128-official-allmask": _s(
        "4x128 official, selected tokens always [MASK]", _TT, {**_SMALLER, **_OFF}, mask_replace="mask"
    ),
    # training text
    "tt-4x128-official-ptblm": _s(
        "4x128 official, trained on the ptb-lm training text (transductive)", _TT, {**_SMALLER, **_OFF}, corpus="ptb-lm"
    ),
    "tt-small-official-ptblm": _s(
        "small official, trained on the ptb-lm training text (transductive)", _TT, _OFF, corpus="ptb-lm"
    ),
    # combinations with the best learning rate (second round)
    "tt-4x128-official-lr1e-3-m30": _s(
        "4x128 official, lr 1e-3, mask rate 0.3", _TT, {**_SMALLER, **_OFF}, lr=1e-3, mask_rate=0.3
    ),
    "tt-4x128-official-lr1e-3-ptblm": _s(
        "4x128 official, lr 1e-3, ptb-lm text (transductive)", _TT, {**_SMALLER, **_OFF}, lr=1e-3, corpus="ptb-lm"
    ),
    "tt-4x128-official-lr1e-3-drop0.2": _s(
        "4x128 official, lr 1e-3, dropout 0.2", _TT, {**_SMALLER, **_OFF, "hidden_dropout_prob": 0.2}, lr=1e-3
    ),
    "tt-6x128-official-lr1e-3": _s(
        "6 layers x 128 official, lr 1e-3", _TT, {**_SMALLER, "num_hidden_layers": 6, **_OFF}, lr=1e-3
    ),
    "tt-4x128-official-b128-lr2e-3": _s(
        "4x128 official, batch 128, lr 2e-3", _TT, {**_SMALLER, **_OFF}, batch_size=128, lr=2e-3
    ),
    # StructFormer
    "sf-small": _s("StructFormer small (4x256, the former default)", _SF),
    "sf-4x128": _s("StructFormer 4 layers x 128, d_ff 512", _SF, _SMALLER),
    "sf-4x128-lr1e-3": _s("StructFormer 4x128, lr 1e-3", _SF, _SMALLER, lr=1e-3),
    "sf-small-lr1e-3": _s("StructFormer small, lr 1e-3", _SF, lr=1e-3),
    "sf-small-m15-bert": _s(
        "StructFormer small, mask rate 0.15, BERT replacement", _SF, mask_rate=0.15, mask_replace="bert"
    ),
    "sf-small-ptblm": _s("StructFormer small on the ptb-lm training text (transductive)", _SF, corpus="ptb-lm"),
}


def corpus_spec(name: str) -> str:
    """``ptb-lm`` -> the shared ptb-lm training text (DESIGN.md §6); else the name unchanged."""
    if name == "ptb-lm":
        for path in (
            ROOT.parent / "shared" / "data" / "ptb-lm" / "ptb.train.txt",
            ROOT / "runs" / "data" / "ptb.train.txt",
        ):  # the copy a GPU machine is sent
            if path.is_file():
                return str(path)
        raise SystemExit("the ptb-lm text is not there (../shared/data/ptb-lm/ptb.train.txt)")
    return name


def train_arguments(name: str, out: Path, **extra):
    """The :class:`TrainArguments` of setting ``name`` (corpus resolved), plus ``extra`` fields."""
    from syntaxformer.tasks.language_model import TrainArguments

    setting = SETTINGS[name]
    fields = dict(setting["train"])
    fields["corpus"] = corpus_spec(fields.get("corpus", "ptb-sample"))
    return TrainArguments(out=str(out), overrides=setting["config"], **fields, **extra)


def measure_cpu(names, threads: int = 2, steps: int = 40) -> None:
    """Tokens/s and tokens per step of each setting on this CPU (``threads`` threads), into RATES.

    The speed is that of the last ``steps // 2`` steps (the first half warms up); run it on an idle
    machine."""
    from syntaxformer.tasks.run import train

    rates = json.loads(RATES.read_text()) if RATES.is_file() else {}
    for name in names:
        if name in rates:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            args = train_arguments(
                name,
                Path(tmp),
                max_steps=steps,
                log_every=steps // 2,
                eval_every=0,
                save_every=0,
                threads=threads,
                device="cpu",
                quiet=True,
                valid_fraction=0.0,
            )
            train(args)
            record = json.loads((Path(tmp) / "training.json").read_text())
        rates[name] = dict(
            tokens_per_second=record["tokens_per_second"],
            tokens_per_step=record["tokens_seen"] / record["steps"],
            parameters=record["parameters"],
            threads=threads,
        )
        logging.info(
            "%s: %.0f tokens/s, %.0f tokens/step",
            name,
            rates[name]["tokens_per_second"],
            rates[name]["tokens_per_step"],
        )
        RATES.parent.mkdir(parents=True, exist_ok=True)
        RATES.write_text(json.dumps(rates, indent=1) + "\n")


def _speed_key(name: str) -> str:
    """Settings that differ only in optimisation, masking, constituent variant or dropout run at the
    same speed: one key for them."""
    train = SETTINGS[name]["train"]
    config = {
        k: v for k, v in SETTINGS[name]["config"].items() if k not in ("constituent_variant", "hidden_dropout_prob")
    }
    return json.dumps(
        [train["model"], train.get("corpus"), train.get("batch_size"), train.get("max_tokens"), config], sort_keys=True
    )


def cpu_rate(name: str) -> dict:
    """``{"tokens_per_second", "tokens_per_step"}`` of ``name`` on 2 CPU cores: the mean of the
    measurements of every setting with the same architecture, batch and corpus (one 40-step
    measurement varies by ~10%)."""
    rates = json.loads(RATES.read_text())
    same = [rates[n] for n in rates if n in SETTINGS and _speed_key(n) == _speed_key(name)]
    return {k: sum(r[k] for r in same) / len(same) for k in ("tokens_per_second", "tokens_per_step")}


def budget_steps(name: str, minutes: float) -> int:
    """Optimizer steps a 2-core CPU makes in ``minutes`` for setting ``name`` (:func:`cpu_rate`)."""
    rate = cpu_rate(name)
    return max(1, round(minutes * 60 * rate["tokens_per_second"] / rate["tokens_per_step"]))


def finished(out: Path) -> bool:
    """Whether the run in ``out`` made its steps (one stopped early resumes)."""
    done = out / "training.json"
    return done.is_file() and json.loads(done.read_text()).get("stopped") == "max_steps"


def train_one(
    name: str,
    seed: int,
    budget: float,
    device: str | None,
    points: int = 16,
    max_minutes: float | None = None,
    threads: int | None = None,
) -> Path:
    """Train setting ``name`` for ``budget`` CPU minutes' worth of steps, with the dev curve.

    ``max_minutes`` (wall time of this process) stops a run early, cleanly: its curve is kept up to
    there (``stopped: "max_minutes"`` in its record) and a later call resumes it."""
    from syntaxformer.tasks.run import train

    steps = budget_steps(name, budget)
    out = RUNS / f"{name}-seed{seed}"
    if finished(out):
        return out
    args = train_arguments(
        name,
        out,
        max_steps=steps,
        eval_every=max(1, steps // points),
        eval_treebank=DEV,
        save_every=max(1, steps // 4),
        seed=seed,
        device=device,
        resume=True,
        quiet=True,
        threads=threads or 1,
        max_minutes=max_minutes,
    )
    train(args)
    return out


def train_job(name: str, seed: int, budget: float, device, threads, deadline_at: float | None) -> Job:
    """``--train-one`` of (setting, seed) as a job logging to ``RUNS/<setting>-seed<s>.log``; with
    ``deadline_at`` (a ``time.monotonic()``) its command gets the minutes left as ``--max-minutes`` when
    it starts, and it does not start with less than half a minute left."""
    import time

    def command() -> list[str] | None:
        cmd = module_command(__spec__.name, "--train-one", name, "--seed", seed, "--budget", budget)
        cmd += (["--device", device] if device else []) + (["--threads", str(threads)] if threads else [])
        if deadline_at is not None:
            left = (deadline_at - time.monotonic()) / 60
            if left < 0.5:
                logging.info("%s seed %d: no time left", name, seed)
                return None
            cmd += ["--max-minutes", f"{left:.2f}"]
        return cmd

    out = RUNS / f"{name}-seed{seed}"
    return Job(f"{name}-seed{seed}", command, log=RUNS / f"{out.name}.log", done=lambda: finished(out))


def train_many(
    names,
    seeds,
    budget: float,
    device: str | None,
    jobs: int,
    deadline: float | None = None,
    threads: int | None = None,
    dry_run: bool = False,
) -> list[str]:
    """Every (setting, seed), ``jobs`` at a time, each in its own process (the job runner), the longest
    runs first; with ``deadline`` (wall minutes for the whole call) every run stops cleanly by then.
    Returns the runs that failed or stopped early."""
    import time

    deadline_at = None if deadline is None else time.monotonic() + 60 * deadline
    order = sorted(names, key=lambda n: -budget_steps(n, budget) * (3 if "ptblm" in n else 1))
    todo = [train_job(n, s, budget, device, threads, deadline_at) for n in order for s in seeds]
    return run_jobs(todo, jobs, dry_run)


def sweep_thresholds(folders) -> None:
    """Dev F1 of Algorithm 1 for every minimum layer and break threshold (THRESHOLDS; 1.01 = every
    weakest link breaks, so Algorithm 1 reduces to the top layer's single-layer split) of trained
    model folders, into THRESHOLDS_JSON. The curves record threshold 0.8 only."""
    from syntaxformer.data import load_gold_trees
    from syntaxformer.decoding.spans import brackets
    from syntaxformer.decoding.tree_transformer import algorithm1
    from syntaxformer.evaluation.constituency import bracket_scores
    from syntaxformer.parsing import load_model, model_structures

    gold = load_gold_trees(DEV)
    gold_brackets, lengths = [brackets(t) for t in gold], [len(t.leaves()) for t in gold]
    results = json.loads(THRESHOLDS_JSON.read_text()) if THRESHOLDS_JSON.is_file() else {}
    for folder in folders:
        model, tokenizer, _ = load_model(folder)
        structures = model_structures(model, tokenizer, [t.leaves() for t in gold])
        results[str(folder)] = {
            f"m{m}": {
                str(th): bracket_scores(
                    [algorithm1(s.link_probs, threshold=th, min_layer=m) for s in structures], gold_brackets, lengths
                )["sentence_f1"]
                for th in THRESHOLDS
            }
            for m in range(structures[0].link_probs.shape[0])
        }
    THRESHOLDS_JSON.parent.mkdir(parents=True, exist_ok=True)
    THRESHOLDS_JSON.write_text(json.dumps(results, indent=1) + "\n")


def _threshold_lines() -> list[str]:
    if not THRESHOLDS_JSON.is_file():
        return []
    from syntaxformer.evaluation.report import format_table

    lines = [
        "## Decoder: Algorithm 1's minimum layer and threshold",
        "",
        "Dev sentence F1 of trained models (`--thresholds MODEL...`): Algorithm 1 with each "
        "minimum layer and break threshold. Threshold 1.01 breaks at every weakest link, so it "
        "is the top layer's single-layer split whatever the minimum layer.",
        "",
    ]
    for folder, by_layer in json.loads(THRESHOLDS_JSON.read_text()).items():
        rows = [[m] + [values[str(th)] for th in THRESHOLDS] for m, values in by_layer.items()]
        best = max(((m, th) for m in by_layer for th in THRESHOLDS), key=lambda k: by_layer[k[0]][str(k[1])])
        lines += [
            f"`{folder}` (best: min layer {best[0][1:]}, threshold {best[1]}, {by_layer[best[0]][str(best[1])]:.2f}):",
            "",
            "```",
            format_table(["min layer"] + [str(t) for t in THRESHOLDS], rows),
            "```",
            "",
        ]
    return lines


def pack_curves() -> dict:
    """Every run's curve, record and options from RUNS, merged into CURVES (returned)."""
    curves = json.loads(CURVES.read_text()) if CURVES.is_file() else {}
    for path in sorted(RUNS.glob("*/training.json")):
        record = json.loads(path.read_text())
        keep = (
            "arguments",
            "steps",
            "parameters",
            "tokens_seen",
            "minutes",
            "device",
            "final_valid_loss",
            "initial_valid_loss",
            "valid_history",
            "parse_curve",
            "stopped",
        )
        curves[path.parent.name] = {k: record.get(k) for k in keep}
    CURVES.parent.mkdir(parents=True, exist_ok=True)
    CURVES.write_text(json.dumps(portable(curves), indent=None, separators=(",", ":")) + "\n")
    return curves


def at_minutes(points: list[dict], decoder: str, steps_per_minute: float, minutes: float) -> float | None:
    """Dev sentence F1 of ``decoder`` at ``minutes`` CPU minutes, interpolated between curve points."""
    step = minutes * steps_per_minute
    xs = [p["step"] for p in points]
    ys = [p["scores"][decoder]["sentence_f1"] for p in points if decoder in p["scores"]]
    if not xs or len(ys) != len(xs) or step > xs[-1] * 1.001:
        return None
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x0 <= step <= x1:
            return y0 + (y1 - y0) * (step - x0) / max(1e-9, x1 - x0)
    return ys[-1]


def summarise(curves: dict) -> list[dict]:
    """One row per run: dev F1 at the MARKS of the default decoder and of the best one at the end."""
    rows = []
    for run, record in sorted(curves.items()):
        name, seed = run.rsplit("-seed", 1)
        if name not in SETTINGS or not record.get("parse_curve"):
            continue
        points = record["parse_curve"]["points"]
        rate = cpu_rate(name)
        steps_per_minute = 60 * rate["tokens_per_second"] / rate["tokens_per_step"]
        last = points[-1]["scores"]
        default = "algorithm1_m0" if "algorithm1_m0" in last else "distance"
        best = max(last, key=lambda k: last[k]["sentence_f1"])
        rows.append(
            dict(
                setting=name,
                seed=int(seed),
                steps_per_cpu_minute=steps_per_minute,
                description=SETTINGS[name]["description"],
                parameters=record["parameters"],
                cpu_tokens_per_second=rate["tokens_per_second"],
                steps=record["steps"],
                final_valid_loss=record["final_valid_loss"],
                cpu_minutes=record["steps"] / steps_per_minute,
                budget_steps=record["arguments"]["max_steps"],
                decoder=default,
                step0=points[0]["scores"][default]["sentence_f1"],
                last=last[default]["sentence_f1"],
                **{f"f1_{m}min": at_minutes(points, default, steps_per_minute, m) for m in MARKS},
                best_decoder=best,
                best_f1=last[best]["sentence_f1"],
                best_step0=points[0]["scores"][best]["sentence_f1"],
            )
        )
    return rows


#: docs/results/induce/recipes.md: what follows this line was written by hand (later studies) and is kept by --report
HAND_WRITTEN = "<!-- sections below: not written by benchmarks/studies/recipe_search/recipe_search.py --report, which keeps them -->"


def write_report(rows: list[dict], curves: dict) -> None:
    """docs/results/induce/recipes.md (table) and docs/results/induce/recipes.{png,svg} (dev F1 against CPU minutes); the
    file's sections after :data:`HAND_WRITTEN` are kept."""
    from syntaxformer.evaluation.report import format_table

    header = (
        ["setting", "params", "CPU tok/s", "steps run / of the run", "CPU min", "valid loss", "step 0"]
        + [f"{m} min" for m in MARKS]
        + ["last", "best decoder at the last point", "its F1", "its step 0"]
    )
    rows = sorted(rows, key=lambda r: (r["setting"][:3] != "tt-", -r["last"]))
    table = [
        [
            r["setting"] + (f" (seed {r['seed']})" if r["seed"] else ""),
            f"{r['parameters'] / 1e6:.2f}M",
            round(r["cpu_tokens_per_second"]),
            f"{r['steps']:,} / {r['budget_steps']:,}",
            round(r["cpu_minutes"], 1),
            r["final_valid_loss"],
            r["step0"],
        ]
        + [r[f"f1_{m}min"] for m in MARKS]
        + [r["last"], r["best_decoder"], r["best_f1"], r["best_step0"]]
        for r in rows
    ]
    lines = (
        [
            "# Recipe search: dev F1 per CPU minute",
            "",
            "Written by `benchmarks/studies/recipe_search/recipe_search.py --report` (see its docstring for the method). Every "
            "number is **sentence-level F1 on ptb-sample:dev** (wsj_0001-0099, 1,921 sentences; "
            "right-branching 39.94, DESIGN.md §7); the test half is not used for any choice. Columns "
            "`5/10/20 min`: Algorithm 1 from layer 0 (threshold 0.8) for the Tree Transformer, the "
            "distance split for StructFormer, at the step a 2-core CPU reaches in that many minutes "
            "(its measured tokens/s, column `CPU tok/s`, 2 threads); `step 0`: the same decoder on the "
            "untrained model (the control). The lr schedule of each run ends at its 20-minute step "
            "(`of the run`, from the speed measured when it was launched). "
            "`last`: the same decoder at the last point of the run (`CPU min` = the CPU minutes that "
            "many steps take); `best decoder at the last point`: the best of every Algorithm 1 minimum "
            "layer and every single layer there. Sorted by `last` within each model.",
            "",
            "How the runs were made: CPU speeds measured on the 2-core machine (40 training steps, the "
            "last 20 timed, 2 threads; settings that differ only in optimisation, masking, constituent "
            "variant or dropout share the "
            "mean of their measurements). The curves were trained on one H100 GPU, 14-18 runs at a "
            "time, each with a wall-clock deadline of 7.3 or 8.4 minutes: runs whose 20-minute step count "
            "was not reached by then stopped early (`steps run` below the 20-minute steps; their "
            "later columns are `-`), with their learning rate not yet decayed. One seed (0) per "
            "setting: the seed spread of the chosen recipes is in docs/results/induce.md (about ±1-2 points), so "
            "differences below ~2 points here are not resolved.",
            "",
            "```",
            format_table(header, table),
            "```",
            "",
            "Settings:",
            "",
        ]
        + [f"- `{n}`: {s['description']}" for n, s in SETTINGS.items()]
        + ["", "![dev F1 against CPU minutes](recipes.png)", ""]
        + _threshold_lines()
    )
    path = RESULTS / "induce" / "recipes.md"
    old = path.read_text() if path.is_file() else ""
    kept = old[old.index(HAND_WRITTEN) :] if HAND_WRITTEN in old else HAND_WRITTEN + "\n"
    path.write_text("\n".join(lines) + "\n" + kept)
    _figure(rows, curves)


def _figure(rows: list[dict], curves: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    for ax, prefix in zip(axes, ("tt-", "sf-")):
        mine = sorted((r for r in rows if r["setting"].startswith(prefix) and not r["seed"]), key=lambda r: -r["last"])
        former = {"tt-": "tt-small-paper", "sf-": "sf-small"}[prefix]  # the former defaults
        for r in mine[:6] + [r for r in mine[6:] if r["setting"] == former]:
            spm = r["steps_per_cpu_minute"]
            points = curves[f"{r['setting']}-seed{r['seed']}"]["parse_curve"]["points"]
            ax.plot(
                [p["step"] / spm for p in points],
                [p["scores"][r["decoder"]]["sentence_f1"] for p in points],
                marker=".",
                label=r["setting"],
            )
        ax.axhline(39.94, color="black", linestyle="--", label="right-branching (39.94)")
        ax.axhline(24.39, color="grey", linestyle=":", label="balanced binary (24.39)")
        ax.set_xlabel("CPU minutes (2 cores, measured speed); the 6 best settings and the former default")
        ax.set_title("Tree Transformer, Algorithm 1 (m=0)" if prefix == "tt-" else "StructFormer, distance split")
        ax.legend(fontsize=6)
    axes[0].set_ylabel("sentence F1, ptb-sample:dev")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(RESULTS / "induce" / f"recipes.{ext}", dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--measure-cpu", action="store_true")
    p.add_argument("--train", action="store_true")
    p.add_argument("--train-one", default=None, help=argparse.SUPPRESS)
    p.add_argument("--report", action="store_true")
    p.add_argument(
        "--thresholds",
        nargs="*",
        default=None,
        metavar="MODEL",
        help="sweep Algorithm 1's threshold and minimum layer on dev for these model folders",
    )
    p.add_argument("--only", nargs="*", default=None, help="settings (default: all)")
    p.add_argument("--seeds", type=int, nargs="*", default=[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget", type=float, default=20.0, help="CPU minutes per run")
    p.add_argument("--device", default=None)
    p.add_argument("--deadline", type=float, default=None, help="--train: wall minutes for all runs")
    p.add_argument("--max-minutes", type=float, default=None, help=argparse.SUPPRESS)
    add_job_options(p, "--train: runs at once")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from syntaxformer.cli import prepare_process

    prepare_process()
    names = args.only or list(SETTINGS)
    if args.dry_run:  # the --train jobs, nothing else
        train_many(names, args.seeds, args.budget, args.device, 1, args.deadline, args.threads, dry_run=True)
        return 0
    if args.measure_cpu:
        measure_cpu(names)
    if args.train_one:
        train_one(
            args.train_one, args.seed, args.budget, args.device, max_minutes=args.max_minutes, threads=args.threads
        )
    if args.train:
        train_many(names, args.seeds, args.budget, args.device, args.jobs, args.deadline, args.threads)
    if args.thresholds:
        sweep_thresholds(args.thresholds)
    if args.report:
        curves = pack_curves()
        write_report(summarise(curves), curves)
    return 0


if __name__ == "__main__":
    sys.exit(main())
