"""``syntaxformer induce --architecture on-lstm``, seeds 0, 1, 2, side by side, then the results table's row.

    python -m benchmarks.studies.induce_seeds.on_lstm_induce_seeds [RECIPE] [DEVICE]   # defaults: default cuda

RECIPE: default or long (``syntaxformer/recipes/on_lstm.py``); DEVICE: cuda, cuda:N or cpu. Each
run gets one CPU thread (``--threads-per-job``) and ``--max-minutes 60`` (default) / 240 (long), so that
the recipe's safety cap (19 / 149 minutes, set for an idle 2-core CPU) does not cut its fixed number of
steps on a machine where three runs share the GPU and the CPU. The three run at once (``--jobs``; the
job runner, ``benchmarks/tools/jobs.py``; a seed whose ``report.json`` exists is skipped). Runs go to
``--runs`` (default ``runs/``), logs beside them; each report is copied to
``records/induce/on-lstm-RECIPE-seedN.json`` and seed 0's learning curve beside it, then
``benchmarks/tools/summarise_induce.py`` prints the table (mean ± sample sd over the seeds).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from benchmarks import RECORDS, ROOT
from benchmarks.tools import summarise_induce
from benchmarks.tools.jobs import Job, add_job_options, module_command, run_jobs

SEEDS = (0, 1, 2)
#: --max-minutes of each run, per recipe (default: 60)
CAPS = {"long": 240}


def seed_job(runs: Path, recipe: str, seed: int, device: str, threads: int | None) -> Job:
    """``induce`` of one seed into ``RUNS/on-lstm-RECIPE-seedN``, logging to ``...seedN.log``."""
    out = runs / f"on-lstm-{recipe}-seed{seed}"
    command = module_command(
        "syntaxformer.cli",
        *("induce", "--architecture", "on-lstm", "--recipe", recipe, "--seed", seed, "--device", device),
        *("--threads", threads or 1, "--max-minutes", CAPS.get(recipe, 60), "--quiet", "--out", out),
    )
    return Job(out.name, command, log=runs / f"{out.name}.log", done=lambda: (out / "report.json").is_file())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", nargs="?", default="default", help="default or long")
    parser.add_argument("device", nargs="?", default="cuda", help="cuda, cuda:N or cpu")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs", help="where the runs and their logs go")
    add_job_options(parser, "runs at once", jobs=len(SEEDS), threads=1)
    args = parser.parse_args(argv)
    jobs = [seed_job(args.runs, args.recipe, seed, args.device, args.threads) for seed in SEEDS]
    failed = run_jobs(jobs, args.jobs, args.dry_run)
    if args.dry_run:
        return 0
    if failed:
        print(f"failed: {', '.join(failed)} (see their logs in {args.runs})", file=sys.stderr)
        return 1
    records = RECORDS / "induce"
    records.mkdir(parents=True, exist_ok=True)
    reports = []
    for seed in SEEDS:
        reports.append(records / f"on-lstm-{args.recipe}-seed{seed}.json")
        shutil.copyfile(args.runs / f"on-lstm-{args.recipe}-seed{seed}" / "report.json", reports[-1])
    for ext in ("png", "svg"):
        curve = args.runs / f"on-lstm-{args.recipe}-seed0" / f"curve.{ext}"
        shutil.copyfile(curve, records / f"on-lstm-{args.recipe}-seed0-curve.{ext}")
    return summarise_induce.main([str(path) for path in reports])


if __name__ == "__main__":
    sys.exit(main())
