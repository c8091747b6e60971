"""The ``syntaxformer`` command line: one sub-command per module in this package.

Each sub-command module defines ``add_parser(subparsers)`` (which registers its parser and sets
``func`` to its ``run(args)``). :class:`syntaxformer.errors.InputError` from any command is printed
as one line and ends the process with status 1, and so is an ``OSError`` about a named path (an
``--out`` that is a file, a folder not writable, a full disk: :func:`file_system_message`); nothing
else is caught.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import sys

from syntaxformer.cli.arguments import CommandParser
from syntaxformer.errors import InputError

#: Sub-command modules, in the order ``--help`` lists them.
COMMANDS = [
    "induce",
    "train",
    "parse",
    "distill",
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
    "translation",
    "translate",
]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; with ``command`` (a name of :data:`COMMANDS`) only that command's module is
    imported and registered, so one command does not pay for importing the others (e.g. ``induce``'s
    figures, matplotlib). Its ``--help`` and error messages are the same either way; without a known
    command (``syntaxformer --help``, a typo) every command is registered."""
    parser = CommandParser(
        prog="syntaxformer", description="Transformers that induce syntax from raw text: train, parse, evaluate."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    names = [command] if command in COMMANDS else COMMANDS
    registered = [name for name in names if _register(sub, name)]
    if not registered and names != COMMANDS:  # the named command is not written yet: list the others
        return build_parser()
    return parser


def _register(sub, name: str) -> bool:
    """Import the command module ``name`` and add its parser; False for a command not yet written."""
    try:
        module = importlib.import_module(f"syntaxformer.cli.{name}")
    except ModuleNotFoundError as e:  # a command not yet written
        if e.name != f"syntaxformer.cli.{name}":
            raise
        return False
    module.add_parser(sub)
    return True


def command_name(argv: list[str]) -> str | None:
    """The sub-command ``argv`` names: its first argument that is not an option (the top-level parser's
    only options, ``-v`` and ``-h``, take no value); None when there is none."""
    return next((a for a in argv if not a.startswith("-")), None)


def prepare_process() -> None:
    """Process-wide CPU settings before any tensor work (:func:`syntaxformer.runtime.prepare_process`)."""
    from syntaxformer.runtime import prepare_process as prepare

    prepare()


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` names (None: ``sys.argv[1:]``); returns the exit status.

    ``argv`` None means the process is the command (the ``syntaxformer`` entry point,
    ``python -m syntaxformer.cli``) and ends when this returns: the objects left are then frozen
    (``gc.freeze``), so the interpreter's exit skips the cycle collector's passes over what torch and
    transformers imported (about a second, several on a busy machine). Exit handlers still run and
    files are flushed; a caller passing ``argv`` (tests, scripts) keeps its collector as it was. Not
    once Triton is imported (torch imports it where it is installed, as with CUDA builds): its
    bindings report every object still alive at exit, dozens of "nanobind: leaked" lines after the
    command's own output.
    """
    code = run_command(sys.argv[1:] if argv is None else argv)
    if argv is None and "triton" not in sys.modules:
        gc.freeze()
    return code


def run_command(argv: list[str]) -> int:
    """Parse ``argv`` and run its command: its status, 1 after an :class:`InputError` (one line on
    stderr), 2 without a command (the help is printed)."""
    prepare_process()
    parser = build_parser(command_name(argv))
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
    except OSError as e:
        if e.filename is None:
            raise
        print(f"syntaxformer {args.command}: error: {file_system_message(e)}", file=sys.stderr)
        return 1
    return int(result or 0)


def file_system_message(error: OSError) -> str:
    """One line for an ``OSError`` about a named path: the path and the system's reason
    (``out: exists and is not a folder`` for a folder to be made where a file is)."""
    if isinstance(error, FileExistsError):
        return f"{error.filename}: exists and is not a folder"
    return f"{error.filename}: {error.strerror or error}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
