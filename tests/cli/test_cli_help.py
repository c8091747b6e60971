"""Every command's ``--help`` states each option's default, or that the option is required, exactly once:
no ``(default: None)``, no default appended after a text that already states one, none missing (the
formatter of every command, ``syntaxformer.cli.arguments.HelpFormatter``)."""

from __future__ import annotations

import argparse
import re

import pytest

from syntaxformer.cli import COMMANDS, build_parser
from syntaxformer.training.arguments import TrainArguments

#: how a help text states a default ("default: X", "(default)", "bert, default)"), as the formatter reads it
STATES_DEFAULT = re.compile(r"\(default\b[^)]*\)|\bdefault\s*[:)]", re.IGNORECASE)


def _sub_commands() -> list[list[str]]:
    """Every command, and the sub-commands of those that have them (``logic train``, ``nli vectors``)."""
    found = []
    for name in COMMANDS:
        parser = build_parser(name)
        command = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        found += [[name, sub] for sub in nested[0].choices] if nested else [[name]]
    return found


def _help(argv: list[str], capsys) -> str:
    """What ``syntaxformer ARGV --help`` prints (exit status 0)."""
    with pytest.raises(SystemExit) as done:
        build_parser(argv[0]).parse_args([*argv, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def _options(help_text: str) -> dict[str, str]:
    """Each option's entry of a help text: its signature (``--lr LR``) -> its text, white space collapsed."""
    entries = re.findall(r"^  (-[^\n]*(?:\n {6,}[^\n]*)*)", help_text, re.M)
    options = {}
    for entry in entries:
        signature, _, text = re.split(r"(\s{2,}|\n)", entry, maxsplit=1)
        options[signature.strip()] = " ".join(text.split())
    return options


def _is_flag(signature: str) -> bool:
    """An option that takes no value: its signature is option names only (``--bf16``, ``-h, --help``)."""
    return all(" " not in name for name in signature.split(", "))


@pytest.mark.parametrize("argv", _sub_commands(), ids=" ".join)
def test_help_states_every_default_once(argv, capsys):
    options = _options(_help(argv, capsys))
    assert options, f"{argv}: no options read from the help"
    for signature, text in options.items():
        where = f"syntaxformer {' '.join(argv)} --help, {signature}: {text!r}"
        assert "(default: None)" not in text, where
        assert len(STATES_DEFAULT.findall(text)) <= 1, where  # never a default after a text stating one
        if not _is_flag(signature):  # a value option: its default, in words or appended, or required
            assert STATES_DEFAULT.search(text) or "required" in text or "absent" in text, where


def test_train_help_gives_the_optimiser_defaults_and_the_stop_conditions(capsys):
    options = _options(_help(["train"], capsys))
    defaults = TrainArguments(out="")
    assert options["--lr LR"] == f"peak learning rate (after warm-up) (default: {defaults.lr})"
    assert options["--betas BETAS BETAS"] == f"Adam's beta1 and beta2 (default: {list(defaults.betas)})"
    assert options["--device DEVICE"] == "cpu, cuda, cuda:N (default: cuda if available)"
    assert options["--out OUT"] == "output folder (required)"
    assert options["--max-steps MAX_STEPS"].endswith(
        "A run needs at least one stop condition: --max-steps, --epochs or --max-minutes (default: none of "
        "them, so one must be given)"
    )
    assert options["--set KEY=VALUE"].endswith("(default: none)")  # an empty list
    assert options["--bf16"] == "bfloat16 autocast"  # a flag: nothing appended


def test_a_required_choice_of_options_is_named(capsys):
    options = _options(_help(["parse"], capsys))
    assert options["--input INPUT"].endswith("(one of --input, --treebank is required)")
    assert options["--treebank TREEBANK"].endswith("(one of --input, --treebank is required)")
    assert options["--batch-size BATCH_SIZE"] == "(default: 64)"  # no text: the default alone


def test_induce_help_says_a_plain_transformer_is_refused(capsys):
    prior = _options(_help(["induce"], capsys))["--prior PRIOR"]
    assert "none (a plain Transformer) and the other priors induce no structure and are refused" in prior
    assert "`syntaxformer train --prior NAME`" in prior and "`syntaxformer compare`" in prior
