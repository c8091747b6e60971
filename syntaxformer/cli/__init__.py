"""The ``syntaxformer`` command line: one sub-command per module in this package.

Each sub-command module defines ``add_parser(subparsers)`` (which registers its parser and sets
``func`` to its ``run(args)``). :class:`syntaxformer.errors.InputError` from any command is printed
as one line and ends the process with status 1; nothing else is caught.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from syntaxformer.errors import InputError

#: Sub-command modules, in the order ``--help`` lists them.
COMMANDS = [
    "induce",
    "train",
    "parse",
    "evaluate",
    "baselines",
    "perplexity",
    "compare",
    "show",
    "heads",
    "prune",
    "probe",
    "logic",
    "nli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="syntaxformer", description="Transformers that induce syntax from raw text: train, parse, evaluate."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"syntaxformer.cli.{name}")
        except ModuleNotFoundError as e:  # a command not yet written
            if e.name != f"syntaxformer.cli.{name}":
                raise
            continue
        module.add_parser(sub)
    return parser


def prepare_process() -> None:
    """Process-wide CPU settings before any tensor work (:func:`syntaxformer.runtime.prepare_process`)."""
    from syntaxformer.runtime import prepare_process as prepare

    prepare()


def main(argv: list[str] | None = None) -> int:
    prepare_process()
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    # transformers 5 draws tqdm bars on stderr when it loads or saves weights; an error must stay one line
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        result = args.func(args)
    except InputError as e:
        print(f"syntaxformer {args.command}: error: {e}", file=sys.stderr)
        return 1
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
