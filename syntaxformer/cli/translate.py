"""``syntaxformer translate``: raw sentences in (a file or standard input, one a line), one translation
a line out (standard output), like ``parse``. The work is
:class:`syntaxformer.tasks.translator.Translator`."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "translate",
        help="translate sentences with a trained translation model",
        description="Translate raw sentences (one a line; '-' = standard input) with a model `translation train` "
        "wrote or a shipped one (multi30k-en-de); one translation a line on standard output.",
    )
    p.add_argument(
        "--model",
        default="multi30k-en-de",
        help="a translation model folder or a shipped name (default: multi30k-en-de)",
    )
    p.add_argument("--input", required=True, help="text file, one raw sentence a line; '-' = standard input")
    p.add_argument("--beam", type=int, default=5, help="beam size (1: greedy)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for the model (default: PyTorch's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from syntaxformer.data.parallel import read_lines
    from syntaxformer.errors import InputError
    from syntaxformer.tasks.translator import load_translator

    if args.threads is not None:
        if args.threads < 1:
            raise InputError(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    translator = load_translator(args.model, device=args.device, beam=args.beam, batch_size=args.batch_size)
    lines = sys.stdin.read().splitlines() if args.input == "-" else read_lines(args.input, allow_empty=True)
    kept = [i for i, line in enumerate(lines) if line.strip()]
    translations = translator.translate([lines[i] for i in kept])
    out = [""] * len(lines)  # a blank line stays blank, so line k answers line k
    for i, text in zip(kept, translations):
        out[i] = text
    sys.stdout.write("".join(line + "\n" for line in out))
    return 0


__all__ = ["add_parser", "run"]
