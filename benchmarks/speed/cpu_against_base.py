"""The CPU training step of today's code against an earlier commit's, in one run on one machine:

    python -m benchmarks.speed.cpu_against_base --base REV --out records/benchmarks/cpu-against-base.json

The default ``induce`` recipe's model and batches (the Tree Transformer ``mini`` preset, 64 sentences of
ptb-sample, seed 0) trained for ``--steps`` steps by ``syntaxformer train`` on one thread, once per round
with each tree (the base commit's files from ``git archive``, this checkout's), in alternating order; no
validation, no checkpoint but the last. The record: steps/s of each run (its ``training.json``'s
training minutes, the process start-up left out), the median ratio today/base, and whether the two
trees' trained weights are the same bits (``bit_identical``: the same seed must give the same model).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from syntaxformer.runtime import code_version

ROOT = Path(__file__).resolve().parents[2]


def base_tree(rev: str, into: Path) -> Path:
    """The files of commit ``rev`` of this checkout, unpacked into ``into`` (``git archive``)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def train_once(tree: Path, out: Path, steps: int) -> dict:
    """One ``syntaxformer train`` run of the package in ``tree``: steps/s and the weights' SHA-256."""
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1")
    argv = [sys.executable, "-m", "syntaxformer.cli", "train", "--preset", "mini", "--batch-size", "64"]
    argv += ["--max-steps", str(steps), "--eval-every", "0", "--save-every", "0", "--threads", "1", "--seed", "0"]
    subprocess.run([*argv, "--quiet", "--out", str(out)], env=env, check=True, capture_output=True, cwd=tree)
    record = json.loads((out / "training.json").read_text())
    minutes = record.get("train_minutes_total") or record["minutes"]
    weights = hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()
    return {"steps_per_second": round(record["steps"] / (60 * minutes), 3), "sha256": weights}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="the earlier commit (any git revision of this checkout)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=None, help="the JSON record (default: print only)")
    args = p.parse_args(argv)
    base_commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.base], check=True, capture_output=True, text=True
    ).stdout.strip()
    runs = {"base": [], "today": []}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"base": base_tree(args.base, Path(tmp, "base").resolve()), "today": ROOT}
        for r in range(args.rounds):
            for name in ("base", "today") if r % 2 == 0 else ("today", "base"):
                runs[name].append(train_once(trees[name], Path(tmp, f"{name}-{r}"), args.steps))
                print(name, r, runs[name][-1]["steps_per_second"], "steps/s", flush=True)
    speed = {name: [run["steps_per_second"] for run in runs[name]] for name in runs}
    ratios = [t / b for t, b in zip(speed["today"], speed["base"])]
    record = dict(
        what="syntaxformer train --preset mini --batch-size 64 on ptb-sample, seed 0, one thread, "
        f"{args.steps} steps a run, no validation; today's code against the base commit's, rounds alternating",
        device="cpu",
        code=code_version(),
        base={"commit": base_commit},
        steps=args.steps,
        steps_per_second=speed,
        ratio_today_to_base=round(statistics.median(ratios), 3),
        ratios=[round(x, 3) for x in ratios],
        bit_identical=len({run["sha256"] for name in runs for run in runs[name]}) == 1,
    )
    text = json.dumps(record, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
