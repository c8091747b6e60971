"""The inference study: systems side by side on SICK, one recipe, 3 seeds each.

Systems (``--systems``), all trained by ``syntaxformer.workflows.nli.RECIPES[--recipe]`` (epochs, not
minutes, so results do not depend on the machine), selected on SICK TRIAL, reported on SICK TEST:

* ``gaussian``    -- the Gaussian Transformer (``prior="gaussian"``);
* ``none``        -- the same model with ``prior="none"`` (no prior: the plain twin);
* ``constituent`` -- the same model with the Tree Transformer's constituent prior in the encoder;
* ``mean-pool``   -- mean-pooled embeddings + MLP (the strong simple baseline);
* ``majority``    -- the majority class of TRAIN (no training).

Word vectors: ``--word-vectors PATH`` (frozen, as the paper) or learned (``--word-vectors learned``).
With a PATH that does not exist yet, ``prepare`` trains it (word2vec, ``syntaxformer nli vectors``
defaults, seed 0) -- run ``prepare`` once before starting parallel ``run`` processes.

Every (system, seed) is an independent, resumable job: ``OUT/<system>-seed<k>/`` (a finished job,
one whose ``report.json`` says it stopped at its recipe's steps, is skipped; an interrupted one
resumes from its checkpoint). So the study
can run as separate processes, e.g. 15 on a 16-core machine::

    python -m benchmarks.studies.nli.nli_study prepare --out runs/nli-study
    for s in gaussian none constituent mean-pool; do for k in 0 1 2; do
        python -m benchmarks.studies.nli.nli_study run --out runs/nli-study --systems $s --seeds $k --threads 1 &
    done; done; wait
    python -m benchmarks.studies.nli.nli_study summarise --out runs/nli-study --inference-threads 2

or all in one: ``python -m benchmarks.studies.nli.nli_study all --out runs/nli-study --jobs 12 --threads 1``.

``summarise`` reads every ``report.json`` and writes ``ROOT/records/nli/nli-study.json`` and ``ROOT/docs/results/nli/study.md`` (``--root``: the repository)
(the data, the runs' code and torch, accuracy mean ± sample sd on TEST over the seeds, per seed, TRIAL accuracy, parameters, training
minutes and pairs/s as measured by each job on its device, and inference pairs/s measured again
here on this machine's CPU, ``--inference-threads`` threads, batch 64, for every model in turn, median of
``--repeats`` passes over SICK TEST after one warm-up pass).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

from benchmarks.tools.jobs import Job, add_job_options, module_command, run_jobs

SYSTEMS = {
    "gaussian": dict(model="gaussian-transformer", prior="gaussian"),
    "none": dict(model="gaussian-transformer", prior="none"),
    "constituent": dict(model="gaussian-transformer", prior="constituent"),
    "mean-pool": dict(model="mean-pool", prior=None),
    "majority": None,
}
NAMES = {
    "gaussian": "Gaussian Transformer (prior gaussian)",
    "none": "same, prior none",
    "constituent": "same, constituent prior",
    "mean-pool": "mean-pooled embeddings + MLP",
    "majority": "majority class (TRAIN)",
}
DEFAULT_VECTORS = "runs/vectors/w2v-100-seed0.kv"

logger = logging.getLogger("nli_study")


def prepare(args) -> None:
    """Train the word vectors once, if the study uses vectors and they are absent."""
    if args.word_vectors != "learned" and not Path(args.word_vectors).is_file():
        from syntaxformer.data.word_vectors import DEFAULT_TEXT, train_word2vec

        logger.info("training word2vec vectors -> %s", args.word_vectors)
        train_word2vec(DEFAULT_TEXT, args.word_vectors, seed=0)


def run_job(args, system: str, seed: int) -> None:
    """Train (or resume, or skip) one (system, seed)."""
    from syntaxformer.workflows.nli import run_nli_train

    spec = SYSTEMS[system]
    out = Path(args.out) / f"{system}-seed{seed}"
    if spec is None:
        return
    if (out / "report.json").is_file() and json.loads((out / "report.json").read_text())["stopped"] == "max_steps":
        return  # finished (a run cut by --max-minutes or a signal resumes)
    if args.word_vectors != "learned" and not Path(args.word_vectors).is_file():
        raise SystemExit(f"{args.word_vectors} is missing: run `nli_study.py prepare` first")
    t0 = time.time()
    run_nli_train(
        out,
        model=spec["model"],
        recipe=args.recipe,
        seed=seed,
        prior=spec["prior"],
        word_vectors=None if args.word_vectors == "learned" else args.word_vectors,
        resume=True,
        threads=args.threads,
        device=args.device,
        quiet=True,
        **({"epochs": args.epochs} if args.epochs else {}),
    )
    logger.info("%s seed %d done in %.1f min", system, seed, (time.time() - t0) / 60)


def run(args) -> None:
    """The jobs of ``--systems`` × ``--seeds``: in this process, or ``--jobs`` child processes (the job
    runner; their output is this process's)."""
    jobs = [(s, k) for s in args.systems for k in args.seeds if SYSTEMS[s] is not None]
    if args.jobs <= 1 and not args.dry_run:
        for system, seed in jobs:
            run_job(args, system, seed)
        return
    base = (
        ["run", "--out", args.out, "--recipe", args.recipe, "--word-vectors", args.word_vectors]
        + ["--threads", str(args.threads or 1)]
        + (["--device", args.device] if args.device else [])
        + (["--epochs", str(args.epochs)] if args.epochs else [])
    )
    failed = run_jobs(
        [
            Job(f"{system}-seed{seed}", module_command(__spec__.name, *base, "--systems", system, "--seeds", seed))
            for system, seed in jobs
        ],
        args.jobs,
        args.dry_run,
        poll_seconds=2,
    )
    if failed:
        raise SystemExit(f"{len(failed)} job(s) failed: {failed}")


def measure_inference(folder: Path, threads: int, repeats: int) -> float:
    """Median pairs/s of the model forward over SICK TEST at batch 64 on this CPU (``threads``)."""
    import torch

    from syntaxformer.data.nli import load_nli_split
    from syntaxformer.workflows.nli import load_pair_model, predict_pairs

    torch.set_num_threads(threads)
    pairs, _ = load_nli_split("sick", "test")
    model, tokenizer = load_pair_model(folder, "cpu")
    return statistics.median(
        predict_pairs(model, tokenizer, pairs, 64, "cpu")[1]["pairs_per_second"] for _ in range(repeats)
    )


def _mean_sd(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _distinct(records) -> list:
    """The distinct values among the runs' records (a report written before a field existed gives None)."""
    seen = []
    for record in records:
        if record not in seen:
            seen.append(record)
    return seen


def summarise(args) -> dict:
    """Collect the jobs' reports into one JSON and the docs/results/nli/study.md table."""
    rows = {}
    for system in args.systems:
        reports = {
            k: json.loads((Path(args.out) / f"{system}-seed{k}" / "report.json").read_text())
            for k in args.seeds
            if (Path(args.out) / f"{system}-seed{k}" / "report.json").is_file()
        }
        if system == "majority":
            any_report = next((r for rs in rows.values() for r in rs["reports"].values()), None)
            if any_report is None:
                continue
            acc = any_report["scores"]["majority_test"]["accuracy"]
            rows[system] = dict(reports={}, test=[acc], trial=[], accuracy=(acc, 0.0), parameters=0)
            continue
        if not reports:
            continue
        test = [r["scores"]["test"]["accuracy"] for r in reports.values()]
        first = next(iter(reports.values()))
        speed = None
        if args.inference_threads:
            speed = statistics.median(
                measure_inference(Path(r["out"]) / "best", args.inference_threads, args.repeats)
                for r in reports.values()
            )
        rows[system] = dict(
            reports=reports,
            seeds=list(reports),
            test=test,
            accuracy=_mean_sd(test),
            trial=[r["scores"]["valid"]["accuracy"] for r in reports.values()],
            parameters=first["parameters"],
            trainable_parameters=first["trainable_parameters"],
            train_minutes=_mean_sd([r["train_minutes"] for r in reports.values()]),
            train_pairs_per_second=_mean_sd([r["train_pairs_per_second"] for r in reports.values()]),
            train_device=sorted({f"{r['device']}, {r['threads']} threads" for r in reports.values()}),
            steps=first["steps"],
            epochs=first["epochs"],
            word_vectors=first["word_vectors"],
            inference_pairs_per_second=speed,
            per_class_recall={
                label: _mean_sd([r["scores"]["test"]["per_class"][label]["recall"] for r in reports.values()])[0]
                for label in first["scores"]["test"]["per_class"]
            },
        )
    reports = [r for row in rows.values() for r in row["reports"].values()]
    result = dict(
        study="SICK 3-way",
        data=reports[0]["data"] if reports else None,
        recipe=args.recipe,
        protocol="select on SICK TRIAL, report SICK TEST (4,906 pairs); accuracy mean ± sample sd over seeds",
        inference=f"model forward, batch 64, SICK TEST sorted by length, CPU, {args.inference_threads} threads, median "
        f"of {args.repeats} passes (this machine)",
        systems={s: {k: v for k, v in row.items() if k != "reports"} for s, row in rows.items()},
        code=_distinct(r.get("code") for r in reports),
        torch=_distinct(r.get("torch") for r in reports),
    )
    records, pages = Path(args.root) / "records" / "nli", Path(args.root) / "docs" / "results" / "nli"
    records.mkdir(parents=True, exist_ok=True)
    pages.mkdir(parents=True, exist_ok=True)
    (records / "nli-study.json").write_text(json.dumps(result, indent=2) + "\n")
    (pages / "study.md").write_text(format_markdown(result) + "\n")
    print(format_markdown(result))
    return result


def format_markdown(result: dict) -> str:
    """The study's table (docs/results/nli/study.md)."""
    lines = [
        "# The inference study (SICK)",
        "",
        "Written by `python -m benchmarks.studies.nli.nli_study summarise` from the jobs' `report.json` "
        "(`records/nli/nli-study.json` has every number); docs/results/nli.md discusses it.",
        "",
        f"Recipe `{result['recipe']}`; {result['protocol']}; inference: {result['inference']}.",
        "",
        "| system | SICK TEST accuracy | per seed | TRIAL | parameters (trained) | training min | "
        "training pairs/s | inference pairs/s |",
        "|---|--:|---|--:|--:|--:|--:|--:|",
    ]
    for system, row in result["systems"].items():
        mean, sd = row["accuracy"]
        if system == "majority":
            lines.append(f"| {NAMES[system]} | {mean:.2f} | | | 0 | | | |")
            continue
        minutes, rate = row["train_minutes"][0], row["train_pairs_per_second"][0]
        speed = row.get("inference_pairs_per_second")
        accuracy = f"**{mean:.2f} ± {sd:.2f}**" if len(row["test"]) > 1 else f"**{mean:.2f}** (1 seed)"
        lines.append(
            f"| {NAMES[system]} | {accuracy} | {', '.join(f'{a:.2f}' for a in row['test'])} | "
            f"{statistics.mean(row['trial']):.2f} | {row['parameters']:,} ({row['trainable_parameters']:,}) | "
            f"{minutes:.1f} | {rate:,.0f} | {'-' if speed is None else f'{speed:,.0f}'} |"
        )
    devices = sorted({d for row in result["systems"].values() for d in row.get("train_device", [])})
    lines += ["", f"Training measured on: {'; '.join(devices)}."]
    commits = [c["commit"] or c["version"] for c in result.get("code", []) if c]
    if commits:
        lines.append(f"Code: {', '.join(commits)}.")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["prepare", "run", "summarise", "all"])
    p.add_argument("--out", default="runs/nli-study", help="the jobs' folder")
    p.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--recipe", default="default")
    p.add_argument("--epochs", type=int, default=None, help="replace the recipe's epochs (smoke runs only)")
    p.add_argument("--word-vectors", default=DEFAULT_VECTORS, help="a vectors file, or 'learned'")
    p.add_argument("--device", default=None, help="training device: cpu, cuda (default: cuda if available)")
    p.add_argument(
        "--inference-threads",
        type=int,
        default=2,
        help="summarise: CPU threads of the inference measurement (0: no measurement)",
    )
    p.add_argument("--repeats", type=int, default=3, help="summarise: inference passes per model")
    p.add_argument(
        "--root", default=".", help="summarise: where records/nli/nli-study.json and docs/results/nli/study.md go"
    )
    add_job_options(p, "run: parallel child processes")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from syntaxformer.cli import prepare_process

    prepare_process()
    if args.action in ("prepare", "all") and not args.dry_run:
        prepare(args)
    if args.action in ("run", "all"):
        run(args)
    if args.action in ("summarise", "all") and not args.dry_run:
        summarise(args)


if __name__ == "__main__":
    main()
