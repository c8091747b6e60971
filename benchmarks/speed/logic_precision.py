"""Training steps of the logic task in float32 against bfloat16 autocast (``logic train --bf16``), same run.

For each encoder (``base`` preset, the default recipe), two :class:`~syntaxformer.tasks.logic.LogicTrainer`
s are built from the same seed (the same initial weights and batches): one with ``precision="fp32"``,
one with ``"bf16"`` (``torch.autocast`` to bfloat16: matrix products in bfloat16; parameters, Adam and
the ON-LSTM's cell state in float32). After warm-up steps, they take ``--steps`` training steps each,
alternating in rounds of ``--round`` steps so that a change in the machine's load touches both alike;
the report is the seconds per step of each and their ratio (fp32 / bf16: the speed-up), plus the loss
of the first step in each (the same batch and weights: how far bf16 moves it). The steps are the
first batches of epoch 0 (real pairs, length-bucketed as in training).

    .venv/bin/python -m benchmarks.speed.logic_precision --threads 2 --json records/benchmarks/logic-precision-cpu.json

The times are only as exact as the machine is idle; the ratio is the number to read. The speed-up
depends on the CPU: it needs bfloat16 matrix instructions (AVX-512 BF16 or AMX) to be large.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks import ROOT

DATA = ROOT.parent / "shared" / "data" / "propositional-logic"

logger = logging.getLogger("logic_precision")


def build(encoder: str, precision: str, data: Path, out: str, threads: int, seed: int):
    """A built trainer for ``encoder`` at ``precision`` on the CPU."""
    from syntaxformer.tasks.logic import LogicArguments, LogicTrainer

    trainer = LogicTrainer(
        LogicArguments(
            out=out,
            data=str(data),
            encoder=encoder,
            precision=precision,
            device="cpu",
            threads=threads,
            seed=seed,
            quiet=True,
        )
    )
    trainer.build()
    return trainer


def measure(encoder: str, data: Path, threads: int, steps: int, round_steps: int, warmup: int, seed: int) -> dict:
    """Seconds per training step in fp32 and bf16 (alternating rounds), their ratio, first-step losses."""
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        trainers = {
            "fp32": build(encoder, "fp32", data, a, threads, seed),
            "bf16": build(encoder, "bf16", data, b, threads, seed),
        }
        batches = trainers["fp32"].sampler.batches(0)
        if len(batches) < warmup + steps:
            raise SystemExit(f"only {len(batches)} batches in an epoch; ask for fewer --steps")
        first_loss = {p: t.training_step(batches[0]).loss for p, t in trainers.items()}
        for t in trainers.values():
            for batch in batches[1:warmup]:
                t.training_step(batch)
        seconds = {p: [] for p in trainers}
        for start in range(warmup, warmup + steps, round_steps):
            for precision, trainer in trainers.items():
                chunk = batches[start : min(start + round_steps, warmup + steps)]
                t0 = time.perf_counter()
                for batch in chunk:
                    trainer.training_step(batch)
                seconds[precision].append((time.perf_counter() - t0) / len(chunk))
    per_step = {p: statistics.median(v) for p, v in seconds.items()}
    return dict(
        encoder=encoder,
        threads=threads,
        steps=steps,
        round_steps=round_steps,
        warmup=warmup,
        seconds_per_step=per_step,
        speedup=per_step["fp32"] / per_step["bf16"],
        first_step_loss=first_loss,
        rounds=seconds,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoders", nargs="+", default=["on-lstm"])
    parser.add_argument("--data", default=str(DATA), help="the propositional-logic folder")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=60, help="timed steps per precision")
    parser.add_argument("--round", dest="round_steps", type=int, default=10, help="steps per alternation")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    import torch

    results = []
    for encoder in args.encoders:
        r = measure(encoder, Path(args.data), args.threads, args.steps, args.round_steps, args.warmup, args.seed)
        results.append(r)
        logger.info(
            "%s, %d thread(s): fp32 %.3f s/step, bf16 %.3f s/step: x%.2f; first-step loss %.4f / %.4f",
            encoder,
            args.threads,
            r["seconds_per_step"]["fp32"],
            r["seconds_per_step"]["bf16"],
            r["speedup"],
            r["first_step_loss"]["fp32"],
            r["first_step_loss"]["bf16"],
        )
    if args.json:
        record = dict(
            what="logic training steps (batch 128 pairs, base preset), fp32 vs bf16 autocast, alternating "
            "rounds; median seconds per step",
            data="propositional-logic train0-train6 (epoch 0's first batches, seed %d)" % args.seed,
            torch=torch.__version__,
            load_average=os.getloadavg()[0],
            measured=time.strftime("%Y-%m-%d %H:%M"),
            results=results,
        )
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
