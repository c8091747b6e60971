"""The main job's candidates: ``syntaxformer induce --architecture ARCH --recipe RECIPE`` for each candidate
and seed, the reports copied into ``records/induce/``, then the table of dev and test sentence F1.

    python -m benchmarks.studies.main_job.main_job_study structformer:sample-paper structformer:sample-fast \\
        --seeds 0 1 2 --jobs 2 --threads-per-job 1

Each candidate is ``ARCHITECTURE:RECIPE`` (the recipes: ``syntaxformer induce --list-recipes``). Each run
gets ``--threads-per-job`` CPU threads (default 1) and ``--device cpu``; ``--jobs`` run at once (the job
runner, ``benchmarks/tools/jobs.py``; a run whose ``report.json`` exists is skipped, an interrupted one
resumes). The runs are a fixed number of steps, so two at a time on one thread each train the same
models as one at a time on two threads would (the times differ: the main job's time is measured alone,
from a fresh clone, ``records/benchmarks/main-job.json``). Runs go to ``--runs`` (default ``runs/``), logs
beside them; each report is copied to ``records/induce/ARCH-main-RECIPE-seedN.json`` (seed 0's learning
curve beside it), which the results tables read (``docs/results/induce.md``, "The main job").
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from benchmarks import RECORDS, ROOT
from benchmarks.tools import summarise_induce
from benchmarks.tools.jobs import Job, add_job_options, module_command, run_jobs


def run_name(candidate: str, seed: int) -> str:
    """``structformer:sample-fast``, 1 -> ``structformer-main-sample-fast-seed1``."""
    architecture, recipe = candidate.split(":")
    return f"{architecture}-main-{recipe}-seed{seed}"


def candidate_job(runs: Path, candidate: str, seed: int, threads: int | None) -> Job:
    """``induce`` of one candidate and seed into ``RUNS/NAME`` (:func:`run_name`), logging to ``NAME.log``."""
    architecture, recipe = candidate.split(":")
    out = runs / run_name(candidate, seed)
    command = module_command(
        "syntaxformer.cli",
        *("induce", "--architecture", architecture, "--recipe", recipe, "--seed", seed, "--device", "cpu"),
        *("--threads", threads or 1, "--quiet", "--out", out),
    )
    resume = ["--resume"] if (out / "model" / "checkpoint.pt").is_file() else []
    return Job(out.name, command + resume, log=runs / f"{out.name}.log", done=lambda: (out / "report.json").is_file())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("candidates", nargs="+", help="ARCHITECTURE:RECIPE, e.g. structformer:sample-paper")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="the seeds of every candidate")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs", help="where the runs and their logs go")
    add_job_options(parser, "runs at once", jobs=2, threads=1)
    args = parser.parse_args(argv)
    bad = [c for c in args.candidates if c.count(":") != 1]
    if bad:
        parser.error(f"a candidate is ARCHITECTURE:RECIPE, got {', '.join(bad)}")
    jobs = [candidate_job(args.runs, c, seed, args.threads) for c in args.candidates for seed in args.seeds]
    failed = run_jobs(jobs, args.jobs, args.dry_run)
    if args.dry_run:
        return 0
    if failed:
        print(f"failed: {', '.join(failed)} (see their logs in {args.runs})", file=sys.stderr)
        return 1
    records = RECORDS / "induce"
    reports = []
    for candidate in args.candidates:
        for seed in args.seeds:
            name = run_name(candidate, seed)
            reports.append(records / f"{name}.json")
            shutil.copyfile(args.runs / name / "report.json", reports[-1])
            for ext in ("png", "svg") if seed == 0 else ():
                shutil.copyfile(args.runs / name / f"curve.{ext}", records / f"{name}-curve.{ext}")
    return summarise_induce.main([str(path) for path in reports])


if __name__ == "__main__":
    sys.exit(main())
