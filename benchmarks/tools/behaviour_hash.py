"""Fingerprints of three short runs, to show a refactoring changed no behaviour (bit for bit).

    python -m benchmarks.tools.behaviour_hash OUT [--data ../shared/data]

Runs, on the CPU with one thread: ``induce`` of the Tree Transformer's default recipe cut to 300 steps (seed 0), a
``logic train`` of the tiny LSTM encoder (200 steps) and an ``nli train`` with the ``tiny`` recipe (200
steps; SICK from ``--data``), then prints one SHA-256 per run over the saved model's tensors (names,
shapes, dtypes and bytes) and, for ``induce``, over ``trees.txt``. Run it at two commits and compare
the lines: equal hashes = the same model and the same trees.
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


def runs(out: Path, data: Path) -> dict[str, list[str]]:
    """The three runs' command lines."""
    one = ["--threads", "1", "--device", "cpu", "--quiet"]
    return {
        "induce": ["induce", "--architecture", "tree-transformer", "--out", str(out / "induce"), "--max-steps", "300",
                   "--seed", "0", *one],
        "logic": ["logic", "train", "--out", str(out / "logic"), "--corpus", str(data / "propositional-logic"),
                  "--architecture", "lstm", "--preset", "tiny", "--max-train-operators", "1", "--batch-size", "32",
                  "--max-steps", "200", "--eval-every", "100", "--seed", "0", *one],
        "nli": ["nli", "train", "--out", str(out / "nli"), "--corpus", str(data / "sick" / "SICK.txt"),
                "--recipe", "tiny", "--max-steps", "200", "--seed", "0", *one],
    }  # fmt: skip


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    args = parser.parse_args(argv)
    for name, command in runs(args.out, args.data).items():
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
