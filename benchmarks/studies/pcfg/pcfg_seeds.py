"""``syntaxformer induce --architecture neural-pcfg | compound-pcfg --recipe cpu`` on the ptb-lm text, seeds side
by side, each report recorded, then the results table's row.

    python -m benchmarks.studies.pcfg.pcfg_seeds compound-pcfg --seeds 0,1 --jobs 2
    python -m benchmarks.studies.pcfg.pcfg_seeds neural-pcfg --seeds 0 --dry-run   # the command, nothing run

Each run gets one CPU thread and ``--max-minutes`` (default 100: the ``cpu`` recipe's 10 epochs take about
45 minutes for the neural PCFG and 90 for the compound one on one thread of a 2-core machine that runs
two of them), trains on ``--data``'s ``ptb.train.txt`` (validation ``ptb.valid.txt``) and is scored on
ptb-sample as ``induce`` scores (dev half: the learning curve; test half: the headline). Runs go to
``--runs`` (default ``runs/pcfg``), logs beside them, resumed from their checkpoint when started again (the
job runner, ``benchmarks/tools/jobs.py``; a seed whose ``report.json`` exists is skipped). Each report is
copied, its paths made relative to the repository (``benchmarks.tools.portable``), to
``records/induce/ARCH-cpu-seedN.json``, seed 0's learning curve beside it; then
``benchmarks/tools/summarise_induce.py`` prints mean ± sd over the seeds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from benchmarks import RECORDS, ROOT
from benchmarks.tools import summarise_induce
from benchmarks.tools.jobs import Job, add_job_options, module_command, run_jobs
from benchmarks.tools.portable import portable

ARCHITECTURES = ("neural-pcfg", "compound-pcfg")


def seed_job(args: argparse.Namespace, seed: int) -> Job:
    """``induce`` of one seed into ``RUNS/ARCH-cpu-seedN``, logging to ``...seedN.log``."""
    out = args.runs / f"{args.architecture}-cpu-seed{seed}"
    command = module_command(
        "syntaxformer.cli",
        *("induce", "--architecture", args.architecture, "--recipe", "cpu", "--seed", seed, "--resume"),
        *("--corpus", args.data / "ptb.train.txt", "--valid", args.data / "ptb.valid.txt"),
        *("--threads", args.threads or 1, "--max-minutes", args.max_minutes, "--quiet", "--out", out),
    )
    return Job(out.name, command, log=args.runs / f"{out.name}.log", done=lambda: (out / "report.json").is_file())


def record(args: argparse.Namespace, seeds: list[int]) -> list[Path]:
    """Each seed's report as ``records/induce/ARCH-cpu-seedN.json`` (portable paths), seed 0's curve beside."""
    records = RECORDS / "induce"
    reports = []
    for seed in seeds:
        run = args.runs / f"{args.architecture}-cpu-seed{seed}"
        reports.append(records / f"{args.architecture}-cpu-seed{seed}.json")
        report = portable(json.loads((run / "report.json").read_text(encoding="utf-8")))
        reports[-1].write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        for ext in ("png", "svg"):
            if seed == seeds[0] and (run / f"curve.{ext}").is_file():
                shutil.copyfile(run / f"curve.{ext}", records / f"{args.architecture}-cpu-seed{seed}-curve.{ext}")
    return reports


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("architecture", choices=ARCHITECTURES)
    parser.add_argument("--seeds", default="0,1,2", help="seeds joined by ','")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "ptb-lm")
    parser.add_argument("--max-minutes", type=float, default=100.0, help="each run's cap on training minutes")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "pcfg", help="where the runs and logs go")
    add_job_options(parser, "runs at once", jobs=1, threads=1)
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    args.runs.mkdir(parents=True, exist_ok=True)
    failed = run_jobs([seed_job(args, seed) for seed in seeds], args.jobs, args.dry_run)
    if args.dry_run:
        return 0
    if failed:
        print(f"failed: {', '.join(failed)} (see their logs in {args.runs})", file=sys.stderr)
        return 1
    return summarise_induce.main([str(path) for path in record(args, seeds)])


if __name__ == "__main__":
    sys.exit(main())
