"""Fingerprints of three short runs, to show a refactoring changed no behaviour (bit for bit).

    python -m benchmarks.tools.behaviour_hash OUT [--data ../shared/data] [--all]

Runs, on the CPU with one thread: ``induce`` of the Tree Transformer's default recipe cut to 300 steps (seed 0), a
``logic train`` of the tiny LSTM encoder (200 steps) and an ``nli train`` with the ``tiny`` recipe (200
steps; SICK from ``--data``); with ``--all`` also a tiny ON-LSTM on running text (``--bptt``, SGD, two
epochs validated at each end, the best kept), head-gate fine-tuning of the induced model (40 steps) and
the logic run with the plateau schedule. It prints one SHA-256 per run over the saved model's tensors
(names, shapes, dtypes and bytes) and, for ``induce``, over ``trees.txt``. Run it at two commits and
compare the lines: equal hashes = the same model and the same trees.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from syntaxformer.cli import main


def tensors_hash(folder: Path) -> str:
    """SHA-256 over every tensor of ``folder/model.safetensors``, in name order."""
    digest = hashlib.sha256()
    for name, tensor in sorted(load_file(str(folder / "model.safetensors")).items()):
        digest.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
        digest.update(tensor.contiguous().view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def runs(out: Path, data: Path, every: bool = False) -> dict[str, list[str]]:
    """The runs' command lines: three, or six with ``every``."""
    one = ["--threads", "1", "--device", "cpu", "--quiet"]
    more = {
        "running-text": ["train", "--out", str(out / "running-text"), "--corpus", "ptb-sample:dev", "--architecture", "on-lstm",
                         "--preset", "tiny", "--bptt", "20", "--optimizer", "sgd", "--lr", "2", "--epochs", "2",
                         "--keep-best", "--seed", "0", *one],
        "finetune": ["train", "--out", str(out / "finetune"), "--model", str(out / "induce" / "model"), "--corpus",
                     "ptb-sample:dev", "--head-gates", "--max-steps", "40", "--seed", "0", *one],
        "logic-plateau": ["logic", "train", "--out", str(out / "logic-plateau"), "--corpus",
                          str(data / "propositional-logic"), "--architecture", "lstm", "--preset", "tiny",
                          "--max-train-operators", "1", "--batch-size", "32", "--max-steps", "200", "--eval-every",
                          "25", "--schedule", "plateau", "--plateau-patience", "0", "--seed", "0", *one],
    } if every else {}  # fmt: skip
    return {
        "induce": ["induce", "--architecture", "tree-transformer", "--out", str(out / "induce"), "--max-steps", "300",
                   "--seed", "0", *one],
        "logic": ["logic", "train", "--out", str(out / "logic"), "--corpus", str(data / "propositional-logic"),
                  "--architecture", "lstm", "--preset", "tiny", "--max-train-operators", "1", "--batch-size", "32",
                  "--max-steps", "200", "--eval-every", "100", "--seed", "0", *one],
        "nli": ["nli", "train", "--out", str(out / "nli"), "--corpus", str(data / "sick" / "SICK.txt"),
                "--recipe", "tiny", "--max-steps", "200", "--seed", "0", *one],
    } | more  # fmt: skip


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--all", action="store_true", help="also running text, head gates and a plateau schedule")
    args = parser.parse_args(argv)
    for name, command in runs(args.out, args.data, args.all).items():
        if main(command) != 0:
            print(f"{name}: the run failed", file=sys.stderr)
            return 1
        folder = args.out / name / ("model" if name == "induce" else "")
        line = f"{name} model {tensors_hash(folder if (folder / 'model.safetensors').is_file() else folder / 'best')}"
        if name == "induce":
            line += " trees " + hashlib.sha256((args.out / name / "trees.txt").read_bytes()).hexdigest()
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run())
