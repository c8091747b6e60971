"""The CPU allocator setting (:func:`syntaxformer.runtime.tune_cpu_allocator`) against glibc's default, on
the translation model's training step.

Rows: ``glibc default`` (``SYNTAXFORMER_MALLOC=default``: the dynamic mmap threshold, at most 32 MB, and
freed memory given back) and ``tuned`` (both thresholds 1 GB: freed memory kept and reused). Each
measurement is its own process (the setting is process-wide), the two alternating ``--rounds`` times
(the order swapped each round). In each process: ``benchmarks/speed/translation_step.py``'s step of the
``baseline`` variant and of ``torch.nn.Transformer`` at the anchor size (1 thread, its ``--warmup``
and ``--steps`` rounds, Multi30k En→De batches of 4,096 tokens, or random pairs with ``--synthetic``);
recorded: the median ms per step and CPU ms per step of each row, the process's minor page faults and
its seconds in the kernel. Ratios: default / tuned (≥ 1: the tuned process at least as fast), of the
medians over rounds. Not a timed test: the ratio is the measurement, the times are the machine's load.

Usage::

    python -m benchmarks.speed.cpu_allocator --rounds 3 --out records/benchmarks/cpu-allocator.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks import ROOT
from benchmarks.tools.portable import portable
from syntaxformer.runtime import ALLOCATOR_THRESHOLD, ALLOCATOR_VARIABLE, code_version

#: the rows: name -> the environment's allocator variable (None: unset, the library tunes)
MODES = {"glibc default": "default", "tuned": None}

#: the first argument that makes a process a measurement (:func:`child`), not the driver (:func:`main`)
CHILD_FLAG = "--child"


def child(argv: list[str]) -> int:
    """One measurement, in a process of its own: the allocator set as the environment says, then
    ``translation_step``'s rows; prints one JSON line (the rows' ms and CPU ms per step, the process's
    minor page faults, user and kernel seconds). ``argv``: the step's JSON output path, then its arguments."""
    import resource

    from benchmarks.speed import translation_step
    from syntaxformer.runtime import tune_cpu_allocator

    tuned = tune_cpu_allocator()
    out, step_arguments = argv[0], argv[1:]
    translation_step.main([*step_arguments, "--out", out])
    usage = resource.getrusage(resource.RUSAGE_SELF)
    rows = json.loads(Path(out).read_text())["runs"][0]["rows"]
    result = dict(
        tuned=tuned,
        page_faults=usage.ru_minflt,
        kernel_seconds=round(usage.ru_stime, 2),
        user_seconds=round(usage.ru_utime, 2),
        rows={k: dict(ms_per_step=v["ms_per_step"], cpu_ms_per_step=v["cpu_ms_per_step"]) for k, v in rows.items()},
    )
    print(json.dumps(result))
    return 0


def measure(mode: str, step_arguments: list[str]) -> dict:
    """One process of ``mode`` (:data:`MODES`): its rows' step times, page faults and kernel seconds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != ALLOCATOR_VARIABLE}
    if MODES[mode] is not None:
        env[ALLOCATOR_VARIABLE] = MODES[mode]
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "step.json")
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.speed.cpu_allocator", CHILD_FLAG, out, *step_arguments],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            check=True,
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(results: dict[str, list[dict]]) -> dict:
    """Per mode the medians over rounds; the default / tuned ratios."""
    medians = {}
    for mode, runs in results.items():
        rows = {
            row: {
                key: statistics.median(r["rows"][row][key] for r in runs) for key in ("ms_per_step", "cpu_ms_per_step")
            }
            for row in runs[0]["rows"]
        }
        medians[mode] = dict(
            rows=rows,
            page_faults=statistics.median(r["page_faults"] for r in runs),
            kernel_seconds=statistics.median(r["kernel_seconds"] for r in runs),
            tuned=runs[0]["tuned"],
        )
    default, tuned = medians["glibc default"], medians["tuned"]
    ratios = {
        row: {
            key: round(default["rows"][row][key] / tuned["rows"][row][key], 3)
            for key in ("ms_per_step", "cpu_ms_per_step")
        }
        for row in tuned["rows"]
    }
    ratios["page_faults"] = round(default["page_faults"] / max(tuned["page_faults"], 1), 1)
    return dict(medians=medians, speed_tuned_vs_default=ratios)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="processes per mode, alternating")
    parser.add_argument("--steps", type=int, default=8, help="timed steps of each row in a process")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--synthetic", action="store_true", help="random pairs even when the corpus is there")
    parser.add_argument("--background", default="", help="the machine's load, for the record")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    step_arguments = ["--variants", "baseline", "--threads", "1", "--rounds", str(args.steps)]
    step_arguments += ["--warmup", str(args.warmup)] + (["--synthetic"] if args.synthetic else [])
    results: dict[str, list[dict]] = {mode: [] for mode in MODES}
    for r in range(args.rounds):
        for mode in list(MODES)[:: 1 if r % 2 == 0 else -1]:
            results[mode].append(measure(mode, step_arguments))
            print(mode, json.dumps(results[mode][-1]["rows"]), results[mode][-1]["page_faults"], file=sys.stderr)
    record = dict(
        benchmark="cpu_allocator",
        protocol=__doc__.split("\n\n")[1].replace("\n", " "),
        threshold_bytes=ALLOCATOR_THRESHOLD,
        step="benchmarks/speed/translation_step.py " + " ".join(step_arguments),
        data="random pairs" if args.synthetic else "Multi30k En-De training pairs (../shared/data/multi30k/tok)",
        device="cpu",
        cores=os.cpu_count(),
        background_load=args.background or f"load average {os.getloadavg()[0]:.1f} at the end",
        torch=torch.__version__,
        python=platform.python_version(),
        libc=" ".join(platform.libc_ver()),
        code=code_version(),
        rounds=results,
        **summary(results),
    )
    print(json.dumps(record["speed_tuned_vs_default"], indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(portable(record), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(child(sys.argv[2:]) if sys.argv[1:2] == [CHILD_FLAG] else main())
