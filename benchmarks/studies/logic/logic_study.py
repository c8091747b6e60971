"""The logic study: ON-LSTM, ON-LSTM + self-attention, Tree Transformer, plain Transformer and LSTM
encoders on propositional-logic inference (Bowman et al. 2015; DESIGN.md §6).

Every (encoder, seed) is one independent process running ``syntaxformer logic train``'s workflow
(:func:`syntaxformer.workflows.logic.run_logic_train`) with the study's recipe
(:data:`syntaxformer.tasks.logic.RECIPE`: a fixed number of steps, so the result does not depend on
the machine) into ``RUNS/<encoder>-seed<s>/``; ``--jobs`` of them run at once. Resumable: a finished
run (``logic.json`` present) is skipped, an interrupted one resumes from its checkpoint. Each run also
records a **test curve** (accuracy on the first 300 pairs of each of test1-test12 at every evaluation,
``test_curve.json``): a diagnostic of how accuracy grows with steps, never used to choose anything
(the model is chosen on validation accuracy).

    python -m benchmarks.studies.logic.logic_study --measure-cpu                      # steps/s on 2 threads, this CPU
    python -m benchmarks.studies.logic.logic_study --train --device cuda --jobs 15 --threads 1   # the 15 trainings
    python -m benchmarks.studies.logic.logic_study --report                           # docs/results/logic/study.md + figure + JSON

The report keeps the runs an earlier report recorded in ``records/logic/study.json`` when their folders
are gone (the runs folder is not in git), so runs trained on different machines add up.

``--encoders`` (default: every registered encoder), ``--seeds`` (default 0 1 2), ``--scale tiny``
(an end-to-end check, not the protocol: the ``tiny`` presets trained 300 steps on the pairs with <= 1
operator, 100 test pairs per file, about a minute a run; written under ``runs/logic-tiny``, reported
under ``--root``).

Outputs of ``--report``: ``docs/results/logic/study.md`` (the table: mean ± sample sd over seeds per operator
count; the targets; CPU minutes estimated from ``--measure-cpu``'s rates), ``records/logic/study.json``
(every run's per-N accuracies, training record, test curve), ``docs/results/logic/accuracy.{png,svg}``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import ROOT
from benchmarks.tools.jobs import Job, add_job_options, module_command, run_jobs
from benchmarks.tools.portable import CODE_JSON, portable, record_code_version

DATA = ROOT.parent / "shared" / "data" / "propositional-logic"
#: where the study's records are (``records/logic/``) and its page and figure (``docs/results/logic/``)
RECORDS, PAGES = Path("records") / "logic", Path("docs") / "results" / "logic"
SEEDS = (0, 1, 2)
CURVE_PAIRS = 300  # test pairs per file in the test curve
MEASURE_STEPS = 30  # timed steps per encoder for --measure-cpu (after 5 warm-up steps)
#: forward+backward speed-up of 2 threads over 1 for the ON-LSTM ``base`` encoder (batch 256 x 18 tokens:
#: 422 -> 260 ms a step), measured on this project's development CPU while it was idle; the CPU-minute
#: estimates divide one thread's CPU time by it
TWO_CORE_SPEEDUP = 1.6

#: per scale: the runs folder, the LogicArguments fields on top of the recipe, the test-pair cap
SCALES = {
    "full": dict(runs=ROOT / "runs" / "logic", args=dict(preset="base"), max_test_pairs=None),
    # an end-to-end check, not the protocol: the tiny presets learn something in a minute only on the
    # pairs with <= 1 operator
    "tiny": dict(
        runs=ROOT / "runs" / "logic-tiny",
        args=dict(
            preset="tiny",
            max_train_operators=1,
            max_steps=300,
            batch_size=32,
            lr=1e-2,
            dropout=0.0,
            eval_every=100,
            save_every=100,
        ),
        max_test_pairs=100,
    ),
}

logger = logging.getLogger("logic_study")


# ----------------------------------------------------------------------------------------------
# One run (a process of its own)
# ----------------------------------------------------------------------------------------------


def _test_curve_callback(data: Path, out: Path):
    """A trainer callback: at every evaluation, the accuracy on the first CURVE_PAIRS pairs of each
    test file, appended to ``out/test_curve.json`` (a point per step; a resumed run rewrites its own)."""
    from syntaxformer.data.logic import read_logic_split
    from syntaxformer.tasks.logic import TEST_OPERATORS, accuracy_by_operators, group_means
    from syntaxformer.training.callbacks import TrainerCallback

    files = {n: pairs[:CURVE_PAIRS] for n, pairs in read_logic_split(data, "test", TEST_OPERATORS).items()}
    path = out / "test_curve.json"

    class TestCurve(TrainerCallback):
        def on_evaluate(self, trainer, metrics):
            step = trainer.state.step
            points = json.loads(path.read_text()) if path.exists() else []
            points = [p for p in points if p["step"] < step]
            per_n = accuracy_by_operators(trainer.model, trainer.tokenizer, files, trainer.device)
            points.append(
                dict(
                    step=step,
                    train_minutes=round(trainer.state.train_seconds / 60, 3),
                    valid_accuracy=metrics.get("valid/accuracy"),
                    accuracy={n: v["accuracy"] for n, v in per_n.items()},
                    groups=group_means(per_n),
                )
            )
            out.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(points) + "\n")

    return TestCurve()


def run_one(
    runs: Path, encoder: str, seed: int, scale: str, device: str | None, threads: int | None, overrides: dict
) -> None:
    """Train and test one (encoder, seed) with the recipe into ``runs/<encoder>-seed<seed>``."""
    from syntaxformer.tasks.logic import LogicArguments
    from syntaxformer.workflows.logic import run_logic_train

    spec = SCALES[scale]
    out = run_folder(runs, encoder, seed)
    args = LogicArguments(
        out=str(out),
        data=str(DATA),
        encoder=encoder,
        seed=seed,
        device=device,
        threads=threads,
        resume=True,
        quiet=True,
        **{**spec["args"], **overrides},
    )
    run_logic_train(args, callbacks=[_test_curve_callback(DATA, out)], max_test_pairs=spec["max_test_pairs"])
    if finished(out):
        record_code_version(out)


def run_folder(runs: Path, encoder: str, seed: int) -> Path:
    return runs / f"{encoder}-seed{seed}"


# ----------------------------------------------------------------------------------------------
# Many runs
# ----------------------------------------------------------------------------------------------


def finished(folder: Path) -> bool:
    """Whether the run in ``folder`` trained to the end of the recipe and was tested (a run stopped
    early, by a signal or ``--max-minutes``, has a ``logic.json`` too, but is resumed, not reported)."""
    path = folder / "logic.json"
    return path.exists() and json.loads(path.read_text())["training"]["stopped"] == "max_steps"


def run_job(runs: Path, encoder: str, seed: int, scale: str, device, threads, overrides: dict) -> Job:
    """``--one encoder seed`` as a job logging to its run folder's ``log.txt``, done when it finished."""
    out = run_folder(runs, encoder, seed)
    command = module_command(__spec__.name, "--one", encoder, seed, "--scale", scale, "--runs", runs, "--data", DATA)
    command += (["--device", device] if device else []) + (["--threads", str(threads)] if threads else [])
    command += [f"--set={k}={json.dumps(v)}" for k, v in overrides.items()]
    return Job(out.name, command, log=out / "log.txt", done=lambda: finished(out))


def train_all(
    runs: Path,
    encoders,
    seeds,
    scale: str,
    device: str | None,
    threads: int | None,
    jobs: int,
    overrides: dict,
    dry_run: bool = False,
) -> list[str]:
    """One process per unfinished (encoder, seed), ``jobs`` at a time (the job runner); returns the
    failures and the runs stopped early. SIGTERM / SIGINT are passed on to the runs, which checkpoint
    and stop (rerun the command to resume them)."""
    todo = [run_job(runs, e, s, scale, device, threads, overrides) for e in encoders for s in seeds]
    return run_jobs(todo, jobs, dry_run, poll_seconds=2)


def measure_cpu(encoders, rates_path: Path, threads: int = 1) -> dict:
    """CPU seconds per training step of the recipe for each encoder (``base``) on this machine: 5
    warm-up steps, then MEASURE_STEPS timed steps on the first batches of epoch 0 (real pairs; mean
    padded length about 22 tokens, as an epoch's), with ``threads`` torch threads. Records the process's
    CPU time per step (what a shared machine distorts least) and the wall time. Written to ``rates_path``."""
    import torch

    from syntaxformer.tasks.logic import LogicArguments, LogicTrainer

    rates = json.loads(rates_path.read_text()) if rates_path.exists() else {}
    for encoder in encoders:
        with tempfile.TemporaryDirectory() as tmp:
            trainer = LogicTrainer(
                LogicArguments(out=tmp, data=str(DATA), encoder=encoder, device="cpu", threads=threads, quiet=True)
            )
            trainer.build()
            batches = trainer.sampler.batches(0)
            for b in batches[:5]:
                trainer.training_step(b)
            timed = batches[5 : 5 + MEASURE_STEPS]
            wall, cpu = time.perf_counter(), time.process_time()
            for b in timed:
                trainer.training_step(b)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        rates[encoder] = dict(
            cpu_seconds_per_step=cpu / len(timed),
            wall_seconds_per_step=wall / len(timed),
            precision=trainer.args.precision,
            threads=threads,
            steps=len(timed),
            pairs=sum(map(len, timed)),
            load_average=os.getloadavg()[0],
            torch=torch.__version__,
            measured=time.strftime("%Y-%m-%d %H:%M"),
        )
        logger.info(
            "%s: %.3f CPU s/step, %.3f wall s/step on %d thread(s), load %.1f",
            encoder,
            cpu / len(timed),
            wall / len(timed),
            threads,
            rates[encoder]["load_average"],
        )
    rates_path.parent.mkdir(parents=True, exist_ok=True)
    rates_path.write_text(json.dumps(rates, indent=2) + "\n")
    return rates


# ----------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------


def _mean_sd(values: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def _cell(values: list[float]) -> str:
    mean, sd = _mean_sd(values)
    return f"{mean:.1f}" if sd is None else f"{mean:.1f} ± {sd:.1f}"


def recorded(root: Path, scale: str) -> dict:
    """The runs an earlier report recorded (``records/logic/study.json``'s ``runs``, same scale), as
    ``{encoder: {seed: run}}``: run folders are not kept in git, so a report written on another machine
    keeps the runs trained there."""
    path = root / RECORDS / "study.json"
    if not path.is_file():
        return {}
    study = json.loads(path.read_text())
    if study.get("scale") != scale:
        return {}
    return {e: {int(s): run for s, run in by.items()} for e, by in study.get("runs", {}).items()}


def collect(runs_folder: Path, encoders, seeds, earlier: dict | None = None) -> dict:
    """``{encoder: {seed: {"report": logic.json, "curve": test_curve.json or [], "code": code.json or None}}}``
    of the finished runs, read from the run folder, else from ``earlier`` (:func:`recorded`) when it
    holds that run."""
    runs = {}
    for encoder in encoders:
        for seed in seeds:
            folder = run_folder(runs_folder, encoder, seed)
            if finished(folder):
                curve, code = folder / "test_curve.json", folder / CODE_JSON
                runs.setdefault(encoder, {})[seed] = dict(
                    report=json.loads((folder / "logic.json").read_text()),
                    curve=json.loads(curve.read_text()) if curve.exists() else [],
                    code=json.loads(code.read_text()) if code.exists() else None,
                )
            elif seed in (earlier or {}).get(encoder, {}):
                logger.info(
                    "%s seed %d: taken from the earlier report (no finished run in %s)", encoder, seed, runs_folder
                )
                runs.setdefault(encoder, {})[seed] = earlier[encoder][seed]
    return runs


def precision(arguments: dict) -> str:
    """A run's ``--precision`` from its recorded arguments (``fp32`` for runs made before the option)."""
    return arguments.get("precision") or "fp32"


def summarise(runs: dict) -> dict:
    """Per encoder: seeds, mean and sd per N and per group, parameters, steps, training minutes."""
    from syntaxformer.tasks.logic import GROUPS, TEST_OPERATORS

    summary = {}
    for encoder, by_seed in runs.items():
        reports = [r["report"] for r in by_seed.values()]
        per_n = {n: [r["test"][str(n)]["accuracy"] for r in reports] for n in TEST_OPERATORS}
        groups = {g: [r["groups"][g] for r in reports] for g in GROUPS}
        recipes = sorted(
            {
                (
                    r["training"]["arguments"]["lr"],
                    r["training"]["arguments"]["max_steps"],
                    json.dumps(r["training"]["arguments"]["overrides"], sort_keys=True),
                    precision(r["training"]["arguments"]),
                    r["training"]["arguments"]["final_lr_fraction"],
                )
                for r in reports
            }
        )
        if len(recipes) > 1:
            raise ValueError(
                f"{encoder}: seeds trained with different learning rates, steps, encoder settings, "
                f"precisions or final learning rates {recipes}; rerun them alike"
            )
        ((lr, recipe_steps, _, run_precision, _),) = recipes
        summary[encoder] = dict(
            seeds=sorted(by_seed),
            preset=reports[0]["preset"],
            pooling=reports[0]["pooling"],
            lr=lr,
            recipe_steps=recipe_steps,
            precision=run_precision,
            overrides=reports[0]["training"]["arguments"]["overrides"],
            parameters=reports[0]["parameters"],
            encoder_parameters=reports[0]["encoder_parameters"],
            steps=[r["training"]["steps"] for r in reports],
            train_minutes=[r["training"]["train_minutes_total"] for r in reports],
            device=reports[0]["training"]["device"],
            best_valid_accuracy=[r["training"]["best_valid_accuracy"] for r in reports],
            accuracy={n: dict(zip(("mean", "sd"), _mean_sd(v))) for n, v in per_n.items()},
            groups={g: dict(zip(("mean", "sd"), _mean_sd(v))) for g, v in groups.items()},
            values=dict(per_n=per_n, groups=groups),
        )
    return summary


def targets(summary: dict, seeds) -> dict:
    """The study's targets on the means over seeds: ON-LSTM >= 90% at each of 7, 8, 9 operators, and
    ahead of the plain Transformer at each of 10, 11, 12 (None while a run of ``seeds`` is missing)."""
    complete = {e: s for e, s in summary.items() if s["seeds"] == sorted(seeds)}
    on, plain = complete.get("on-lstm"), complete.get("transformer")
    at_7_9 = None if on is None else all(on["accuracy"][n]["mean"] >= 90.0 for n in (7, 8, 9))
    ahead = (
        None
        if on is None or plain is None
        else all(on["accuracy"][n]["mean"] > plain["accuracy"][n]["mean"] for n in (10, 11, 12))
    )
    return {"on-lstm >= 90% at 7-9": at_7_9, "on-lstm > transformer at 10-12": ahead}


def cpu_minutes(rates: dict, encoder: str, steps: int, precision: str) -> float | None:
    """Estimated minutes of ``steps`` training steps on 2 CPU cores: one thread's CPU seconds per step
    (``--measure-cpu``) / :data:`TWO_CORE_SPEEDUP` (evaluations not counted); None if not measured, or
    measured at another precision than ``precision`` (a rate recorded without one was fp32)."""
    rate = rates.get(encoder, {})
    if "cpu_seconds_per_step" not in rate or rate.get("precision", "fp32") != precision:
        return None
    return steps * rate["cpu_seconds_per_step"] / TWO_CORE_SPEEDUP / 60


def table(summary: dict, rates: dict) -> str:
    """The markdown table: one row per encoder, mean ± sd (seeds) per operator count and group."""
    from syntaxformer.tasks.logic import TEST_OPERATORS

    head = (
        "| encoder (pooling) | lr | steps | precision | seeds | parameters | "
        + " | ".join(str(n) for n in TEST_OPERATORS)
        + " | 7-9 | 10-12 | best valid | est. 2-core CPU min |"
    )
    lines = [head, "|---|--:|--:|---|---|--:|" + "--:|" * (len(TEST_OPERATORS) + 5)]
    for encoder, s in summary.items():
        minutes = cpu_minutes(rates, encoder, s["recipe_steps"], s["precision"])
        cells = [_cell(s["values"]["per_n"][n]) for n in TEST_OPERATORS]
        lines.append(
            f"| {encoder} ({s['pooling']}) | {s['lr']:g} | {s['recipe_steps']:,} | {s['precision']} | "
            f"{', '.join(map(str, s['seeds']))} | "
            f"{s['parameters']:,} | "
            + " | ".join(cells)
            + f" | {_cell(s['values']['groups']['7-9'])} | "
            + f"{_cell(s['values']['groups']['10-12'])} | {_cell(s['best_valid_accuracy'])} | "
            + (f"{minutes:.0f}" if minutes is not None else "not measured")
            + " |"
        )
    return "\n".join(lines)


def rates_table(rates: dict, summary: dict) -> str:
    """The CPU measurements: seconds per step and the recipe's estimated minutes on 2 cores (at each
    encoder's steps)."""
    lines = [
        "| encoder | precision | CPU s/step (1 thread) | wall s/step | load average | steps | "
        "est. 2-core min for the recipe |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for encoder, r in rates.items():
        if encoder not in summary:
            continue
        steps, rate_precision = summary[encoder]["recipe_steps"], r.get("precision", "fp32")
        minutes = cpu_minutes(rates, encoder, steps, summary[encoder]["precision"])
        lines.append(
            f"| {encoder} | {rate_precision} | {r['cpu_seconds_per_step']:.3f} | {r['wall_seconds_per_step']:.3f} | "
            f"{r['load_average']:.1f} | {steps:,} | "
            + (f"{minutes:.0f} |" if minutes is not None else "- (the recipe's precision differs) |")
        )
    return "\n".join(lines)


def measured_table(runs: dict) -> str:
    """The runs' own clocks: per encoder and seed, the torch threads, the minutes from the start to the
    end of training (data, validations and checkpoints included) and those of the optimizer steps alone.
    Comparable only between runs that had the machine alike (see the text)."""
    lines = [
        "| encoder | seed | threads | minutes to the end of training | of which optimizer steps |",
        "|---|--:|--:|--:|--:|",
    ]
    for encoder, by_seed in runs.items():
        for seed, r in sorted(by_seed.items()):
            t = r["report"]["training"]
            resumed = t.get("resumed_from_steps") or []
            last = f" (the last of {len(resumed) + 1} processes)" if resumed else ""
            lines.append(
                f"| {encoder} | {seed} | {t.get('threads') or '-'} | {t['minutes']:.1f}{last} | "
                f"{t['train_minutes_total']:.1f} |"
            )
    return "\n".join(lines)


def curve_table(runs: dict) -> str:
    """Accuracy at 7-9 and 10-12 operators (the first 300 test pairs per N) against steps, mean over
    seeds: how far from converged the recipe stops (a diagnostic; nothing is chosen on it)."""
    lines = []
    for encoder, by_seed in runs.items():
        curves = [r["curve"] for r in by_seed.values() if r["curve"]]
        if not curves:
            continue
        steps = sorted(set.intersection(*(set(p["step"] for p in c) for c in curves)))
        at = {step: [next(p for p in c if p["step"] == step) for c in curves] for step in steps}
        lines.append(
            f"| {encoder} | "
            + "; ".join(
                f"{step}: {statistics.fmean(p['groups']['7-9'] for p in at[step]):.1f} / "
                f"{statistics.fmean(p['groups']['10-12'] for p in at[step]):.1f}"
                for step in steps
            )
            + " |"
        )
    return "\n".join(["| encoder | step: 7-9 / 10-12 accuracy (%) |", "|---|---|"] + lines) if lines else "(none)"


def write_report(runs_folder: Path, encoders, seeds, scale: str, root: Path) -> dict:
    """Write ``docs/results/logic/study.md``, ``records/logic/study.json`` and ``docs/results/logic/accuracy.{png,svg}``."""
    from syntaxformer.figures import save_figure
    from syntaxformer.figures.logic import plot_accuracy_by_operators
    from syntaxformer.tasks.logic import RECIPE, TEST_OPERATORS

    runs = collect(runs_folder, encoders, seeds, recorded(root, scale))
    summary = summarise(runs)
    rates_path = root / RECORDS / "cpu_rates.json"
    # the measured rates are of the base presets: no estimate for another scale
    rates = json.loads(rates_path.read_text()) if rates_path.exists() and scale == "full" else {}
    result = dict(
        data=str(DATA),
        scale=scale,
        recipe={**RECIPE, **SCALES[scale]["args"]},
        seeds=list(seeds),
        summary=summary,
        targets=targets(summary, seeds),
        cpu_rates=rates,
        runs={e: {str(s): r for s, r in by.items()} for e, by in runs.items()},
        missing=[f"{e}-seed{s}" for e in encoders for s in seeds if s not in runs.get(e, {})],
    )
    (root / RECORDS).mkdir(parents=True, exist_ok=True)
    (root / PAGES).mkdir(parents=True, exist_ok=True)
    (root / RECORDS / "study.json").write_text(json.dumps(portable(result), indent=1) + "\n")
    curves = {
        f"{e} (lr {s['lr']:g}, {len(s['seeds'])} seed{'s' if len(s['seeds']) > 1 else ''})": dict(
            operators=list(TEST_OPERATORS),
            accuracy=[s["accuracy"][n]["mean"] for n in TEST_OPERATORS],
            sd=[s["accuracy"][n]["sd"] or 0.0 for n in TEST_OPERATORS],
        )
        for e, s in summary.items()
    }
    some = next((r["report"] for by in runs.values() for r in by.values()), None)
    baseline = {n: some["test"][str(n)]["majority"] for n in TEST_OPERATORS} if some else None
    save_figure(
        plot_accuracy_by_operators(
            curves,
            result["recipe"].get("max_train_operators", 6),
            baseline,
            title="propositional logic: test accuracy, mean ± sd over seeds",
        ),
        root / PAGES / "accuracy",
    )
    (root / PAGES / "study.md").write_text(markdown(result, table(summary, rates)))
    return result


def recipe_texts(result: dict) -> tuple[str, str]:
    """docs/results/logic/study.md's recipe paragraph: the steps of each encoder (in epochs of the training pairs) and
    the encoder settings the runs were given over their preset."""
    recipe, summary = result["recipe"], result["summary"]
    some = next((r["report"] for by in result["runs"].values() for r in by.values()), None)
    pairs = some["training"]["data"]["train_pairs"] if some else None
    by_steps: dict[int, list[str]] = {}
    for e, s in summary.items():
        by_steps.setdefault(s["recipe_steps"], []).append(e)
    steps = "; ".join(
        f"{n:,}"
        + (f" = {n * recipe['batch_size'] / pairs:.1f} epochs of {pairs:,} pairs" if pairs else "")
        + f" for {', '.join(es)}"
        for n, es in sorted(by_steps.items())
    )
    settings = (
        "; ".join(
            f"{e}: " + ", ".join(f"{k}={v}" for k, v in s["overrides"].items())
            for e, s in summary.items()
            if s["overrides"]
        )
        or "none"
    )
    return steps, settings


def markdown(result: dict, table_text: str) -> str:
    """docs/results/logic/study.md: what was run, the table, the targets, the CPU estimates, the test curves, what is
    missing."""
    recipe, summary = result["recipe"], result["summary"]
    steps, settings = recipe_texts(result)
    targets_text = "\n".join(
        f"- {name}: " + {True: "**met**", False: "**not met**", None: "pending (runs missing)"}[v]
        for name, v in result["targets"].items()
    )
    missing = ", ".join(result["missing"]) or "none"
    rates = rates_table(result["cpu_rates"], summary) if result["cpu_rates"] else "(not measured)"
    return f"""# Propositional-logic inference: encoders compared

Generated by `benchmarks/studies/logic/logic_study.py --report` (scale `{result["scale"]}`); every number below is
read from the runs' `logic.json`. Data: `propositional-logic` (Bowman et al. 2015, as vendored in
yikangshen/Ordered-Neurons). Protocol (`syntaxformer.tasks.logic`): train on train0-train6 (<= 6
operators) less every 10th pair in file order (validation: the public ON-LSTM code's split); keep the
model of the best validation accuracy (evaluated every {recipe["eval_every"]} steps); accuracy (%) on each
of test1-test12 (test12 = 12 or more operators). Cells: mean ± sample sd over seeds
{", ".join(map(str, result["seeds"]))}; 7-9 and 10-12 = the mean of the per-N accuracies.

Model: each formula is encoded by the encoder (preset `{result["recipe"]["preset"]}`; `base`: ON-LSTM and LSTM as the
public ON-LSTM logic code, embedding 128 and one layer of 400 units; Tree Transformer and plain
Transformer with 4 pre-LN layers of d 128, 4 heads, d_ff 512), pooled to one vector (`last`: the output at the last
token, for recurrent encoders, as the ON-LSTM paper; `mean` over tokens for attention encoders), and
the pair is classified from [u; v; u*v; |u-v|] by Dropout-Linear(4D, D)-ELU-Dropout-Linear(D, 7).

Recipe (every encoder the same but its peak learning rate, its number of steps and its precision,
columns `lr`, `steps` and `precision`: the encoder's, chosen on validation accuracy and the time,
docs/results/logic.md "Recipe choice"; `bf16`: training and validation under `torch.autocast` to bfloat16,
parameters, Adam, the ON-LSTM's cell state and the test in float32): steps of
{recipe["batch_size"]} pairs ({steps}), Adam (eps 1e-9, L2 1.2e-6), {recipe["schedule"]} decay to
{recipe["final_lr_fraction"]} x lr, gradient clip 1.0, pair-MLP dropout 0.2 (the public code's optimiser and
sizes, lr 1e-3; it trains 50 epochs with the learning rate halved on validation plateaus, `syntaxformer
logic train --recipe public`: a run here is a fixed number of steps so that it does not depend on the
machine). Encoder settings the runs were given (`--set`, over the preset of their code): {settings}. The last column estimates the recipe's minutes on 2
CPU cores (below).

{table_text}

![accuracy against operators](accuracy.png)

Targets (means over seeds):
{targets_text}

Runs missing: {missing}.

## CPU time of the recipe

One thread's CPU seconds per training step (`--measure-cpu`: 30 steps of real batches after 5 of
warm-up), measured on this project's development machine, **a 2-core CPU shared with other jobs**
(load average in the table): CPU time is what contention distorts least, but it still runs above an
idle machine's (ON-LSTM: 0.72 s here, about 0.52 s on the idle machine, scaled from 0.42 s a step of 18
tokens to the 22 of an average batch). The estimate for 2 cores divides it
by {TWO_CORE_SPEEDUP} (ON-LSTM's 2-thread speed-up measured while the machine was idle), so it is on the high side;
evaluations (a forward pass over the 13,552 validation pairs every {recipe["eval_every"]} steps) add about 5%.

{rates}

The runs' own clocks (`training.json`; most runs shared the 2 cores with one to three other runs, so
their minutes are an upper bound; a run on 2 threads had the machine to itself but for light work;
"optimizer steps" sums the processes of a resumed run):

{measured_table(result["runs"])}

## Accuracy against steps

Each run also records the accuracy on the first 300 pairs of every test file at each evaluation
(`test_curve.json`), never used to choose anything:

{curve_table(result["runs"])}
"""


# ----------------------------------------------------------------------------------------------
# The recipe choice (records/logic/recipe-choice.json)
# ----------------------------------------------------------------------------------------------

#: the validation steps the recipe-choice table shows
CHOICE_STEPS = (1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000)
#: the final learning-rate fraction of the rows recorded before recipe-choice rows kept it: every one of
#: them ran the default recipe's linear decay to a tenth of the peak
RECORDED_FINAL_LR_FRACTION = 0.1


def recipe_choice_row(training: dict, report: dict | None, source: str) -> dict:
    """One run of the recipe comparison: encoder, seed, lr, the recipe's steps, the encoder settings
    over the preset, the precision (:func:`precision`), the learning rate at the last step as a fraction of
    the peak (``final_lr_fraction``), validation accuracy (%) at every evaluation and its best, and (for a
    tested run) the mean test accuracy of each operator group."""
    args = training["arguments"]
    return dict(
        encoder=training["encoder"],
        seed=training["seed"],
        lr=args["lr"],
        steps=training["steps"],
        recipe_steps=args["max_steps"],
        overrides=args.get("overrides", {}),
        precision=precision(args),
        final_lr_fraction=args["final_lr_fraction"],
        source=source,
        valid_curve={int(step): round(accuracy, 2) for step, _, accuracy in training["valid_history"]},
        best_valid_accuracy=training["best_valid_accuracy"],
        test_groups=report["groups"] if report else None,
    )


def _choice_key(row: dict) -> tuple:
    """(encoder, seed, lr, recipe steps, encoder settings as text: "" for the preset's, so it sorts first,
    precision: ``fp32`` for rows recorded before the option, final learning-rate fraction: the recipe's
    0.1 for rows recorded before it was a key)."""
    overrides = row.get("overrides") or {}
    return (
        row["encoder"],
        row["seed"],
        row["lr"],
        row["recipe_steps"],
        json.dumps(overrides, sort_keys=True) if overrides else "",
        row.get("precision") or "fp32",
        row.get("final_lr_fraction", RECORDED_FINAL_LR_FRACTION),
    )


def recipe_choice(folders: list[str], root: Path) -> list[dict]:
    """Add the runs of ``folders`` to ``records/logic/recipe-choice.json``, keyed by (encoder, seed, lr,
    recipe steps, encoder settings); rows already there stay (their folders may be gone). A folder is a
    run folder (finished, with ``logic.json``, or stopped early, with ``training.json``) or
    ``STUDY_JSON:ENCODER:SEED``, a run recorded in a study report. Returns every row, sorted."""
    path = root / RECORDS / "recipe-choice.json"
    recorded = json.loads(path.read_text())["runs"] if path.is_file() else []
    rows = {
        _choice_key(r): dict(
            r,
            valid_curve={int(k): v for k, v in r["valid_curve"].items()},
            precision=r.get("precision") or "fp32",
            final_lr_fraction=r.get("final_lr_fraction", RECORDED_FINAL_LR_FRACTION),
        )
        for r in recorded
    }  # JSON keeps the steps as strings
    for spec in folders:
        folder = Path(spec)
        if not folder.exists() and spec.count(":") == 2:  # a folder whose name has two colons stays a folder
            study, encoder, seed = spec.split(":")
            report = json.loads(Path(study).read_text())["runs"][encoder][seed]["report"]
            row = recipe_choice_row(report["training"], report, spec)
        elif (folder / "logic.json").is_file():
            report = json.loads((folder / "logic.json").read_text())
            row = recipe_choice_row(report["training"], report, str(folder))
        elif (folder / "training.json").is_file():
            row = recipe_choice_row(json.loads((folder / "training.json").read_text()), None, str(folder))
        else:
            raise SystemExit(
                f"{spec}: neither a run folder with logic.json / training.json nor STUDY_JSON:ENCODER:SEED"
            )
        rows[_choice_key(row)] = row
    # a recipe's seeds together: (encoder, lr, steps, settings, precision, final fraction, seed)
    ordered = [rows[k] for k in sorted(rows, key=lambda k: (k[0], k[2], k[3], k[4], k[5], -k[6], k[1]))]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            portable(
                dict(
                    what="validation accuracy (%) against steps of the default recipe (steps of 128 pairs, linear decay to "
                    "final_lr_fraction of the peak rate, a tenth unless the row says otherwise) at several peak learning "
                    "rates, step counts, encoder settings, precisions and final rates; the recipe is chosen on "
                    "validation only",
                    runs=ordered,
                )
            ),
            indent=1,
        )
        + "\n"
    )
    return ordered


def recipe_choice_table(rows: list[dict]) -> str:
    """Markdown: one line per row of :func:`recipe_choice`: validation accuracy (%) at
    :data:`CHOICE_STEPS`, its best, test 7-9 / 10-12 (the groups' mean accuracy, %); ``final lr``: the
    learning rate at the last step as a fraction of the peak."""
    lines = [
        "| encoder | lr | final lr | steps | --set | precision | seed | "
        + " | ".join(f"valid {s:,}" for s in CHOICE_STEPS)
        + " | best valid | test 7-9 | test 10-12 |",
        "|---|--:|--:|--:|---|---|--:|" + "--:|" * (len(CHOICE_STEPS) + 3),
    ]
    for r in rows:
        curve = r["valid_curve"]
        cells = [f"{curve[s]:.1f}" if s in curve else "-" for s in CHOICE_STEPS]
        test = [f"{r['test_groups'][g]:.1f}" if r["test_groups"] else "-" for g in ("7-9", "10-12")]
        settings = ", ".join(f"{k}={v}" for k, v in r.get("overrides", {}).items()) or "-"
        lines.append(
            f"| {r['encoder']} | {r['lr']:g} | {r['final_lr_fraction']:g} x | {r['recipe_steps']:,} | "
            f"{settings} | {r['precision']} | "
            f"{r['seed']} | " + " | ".join(cells) + f" | {r['best_valid_accuracy']:.1f} | " + " | ".join(test) + " |"
        )
    return "\n".join(lines)


def _override(text: str) -> tuple[str, object]:
    key, _, value = text.partition("=")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def argument_parser() -> argparse.ArgumentParser:
    """The study's command line (module docstring)."""
    from syntaxformer.models import ENCODERS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", action="store_true", help="train (and test) every unfinished run")
    p.add_argument(
        "--report", action="store_true", help="write docs/results/logic/study.md, records/logic/ (JSON, figure)"
    )
    p.add_argument("--measure-cpu", action="store_true", help="steps/s of each encoder on 2 CPU threads")
    p.add_argument("--encoders", nargs="+", default=None, help=f"default: all ({', '.join(ENCODERS)})")
    p.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    p.add_argument("--scale", choices=sorted(SCALES), default="full")
    p.add_argument("--device", default=None, help="cpu, cuda (default: cuda if available)")
    p.add_argument(
        "--data", type=Path, default=DATA, help="the propositional-logic folder (default ../shared/data/...)"
    )
    p.add_argument("--runs", type=Path, default=None, help="runs folder (default runs/logic, runs/logic-tiny)")
    p.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="where records/logic/ and docs/results/logic/ are (default: the repository)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        type=_override,
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe field (JSON value) for these runs (exploration only)",
    )
    p.add_argument(
        "--recipe-choice",
        nargs="+",
        metavar="RUN_DIR",
        help="add these runs (run folders, or STUDY_JSON:ENCODER:SEED) to records/logic/recipe-choice.json "
        "and print the recipe-choice table",
    )
    p.add_argument("--one", nargs=2, metavar=("ENCODER", "SEED"), help=argparse.SUPPRESS)
    add_job_options(p, "runs at once")
    return p


def main(argv=None) -> int:
    global DATA
    from syntaxformer.models import ENCODERS

    p = argument_parser()
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from syntaxformer.runtime import prepare_process

    prepare_process()
    DATA = args.data.resolve()
    overrides = dict(args.overrides)
    runs = args.runs or SCALES[args.scale]["runs"]
    if args.recipe_choice:
        print(recipe_choice_table(recipe_choice(args.recipe_choice, args.root)))
        return 0
    if args.one:
        run_one(runs, args.one[0], int(args.one[1]), args.scale, args.device, args.threads, overrides)
        return 0
    encoders = args.encoders or list(ENCODERS)
    unknown = [e for e in encoders if e not in ENCODERS]
    if unknown:
        p.error(f"unknown encoder(s) {unknown}; registered: {list(ENCODERS)}")
    if args.dry_run:  # the training jobs, nothing else
        train_all(runs, encoders, args.seeds, args.scale, args.device, args.threads, 1, overrides, dry_run=True)
        return 0
    if args.measure_cpu:
        measure_cpu(encoders, args.root / RECORDS / "cpu_rates.json", args.threads or 1)
    if not (args.train or args.report or args.measure_cpu):
        args.train = args.report = True
    failed = (
        train_all(runs, encoders, args.seeds, args.scale, args.device, args.threads, args.jobs, overrides)
        if args.train
        else []
    )
    if args.report:
        result = write_report(runs, encoders, args.seeds, args.scale, args.root)
        print(table(result["summary"], result["cpu_rates"]))
        print(json.dumps(result["targets"]))
    if failed:
        print(
            f"runs failed or stopped early (see their log.txt; rerun to resume): {', '.join(failed)}", file=sys.stderr
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
