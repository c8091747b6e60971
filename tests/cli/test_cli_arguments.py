"""The options of ``train``, ``induce``, ``nli train``, ``logic train`` and ``logic evaluate`` come from the fields of their arguments
dataclasses (``syntaxformer.cli.arguments.add_dataclass_arguments``): every field has an option and every
option is a field, but for each command's short list of its own options (``COMMAND_ONLY``); one spelling
per option across the commands."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from syntaxformer.cli import COMMANDS, build_parser
from syntaxformer.cli.arguments import option_flag
from syntaxformer.cli.induce import _RUN_FIELDS
from syntaxformer.cli.induce import COMMAND_ONLY as INDUCE_ONLY
from syntaxformer.cli.logic import EVALUATE_COMMAND_ONLY as LOGIC_EVALUATE_ONLY
from syntaxformer.cli.logic import TRAIN_COMMAND_ONLY as LOGIC_TRAIN_ONLY
from syntaxformer.cli.logic import TRAIN_FIXED_FIELDS as LOGIC_FIXED
from syntaxformer.cli.nli import TRAIN_COMMAND_ONLY as NLI_ONLY
from syntaxformer.cli.train import COMMAND_ONLY as TRAIN_ONLY
from syntaxformer.cli.train import arguments_from_namespace
from syntaxformer.errors import InputError
from syntaxformer.tasks.distill import DistillJob
from syntaxformer.tasks.logic import LogicArguments, LogicEvaluateArguments
from syntaxformer.tasks.nli import NliTrainArguments
from syntaxformer.training.arguments import TrainArguments, check_choices
from syntaxformer.workflows.induce import REPLACEABLE, STEP_FIELDS, InduceJob

INDUCE_TRAINING = (*_RUN_FIELDS, *REPLACEABLE, *STEP_FIELDS)
INDUCE_JOB = tuple(f.name for f in dataclasses.fields(InduceJob) if f.name != "decoder")


def _flags(cls, names) -> tuple[str, ...]:
    return tuple(option_flag(f) for f in dataclasses.fields(cls) if f.name in names)


#: (command, its arguments dataclass, the fields that are options (None: all), its own options); induce's
#: options are the fields of two dataclasses, the job's and the training's
CASES = [
    (["train"], TrainArguments, None, TRAIN_ONLY),
    (["induce"], TrainArguments, INDUCE_TRAINING, (*INDUCE_ONLY, *_flags(InduceJob, INDUCE_JOB))),
    (["induce"], InduceJob, INDUCE_JOB, (*INDUCE_ONLY, *_flags(TrainArguments, INDUCE_TRAINING))),
    (["nli", "train"], NliTrainArguments, None, NLI_ONLY),
    (
        ["logic", "train"],
        LogicArguments,
        tuple(f.name for f in dataclasses.fields(LogicArguments) if f.name not in LOGIC_FIXED),
        LOGIC_TRAIN_ONLY,
    ),
    (["logic", "evaluate"], LogicEvaluateArguments, None, LOGIC_EVALUATE_ONLY),
]


def _parser(argv: list[str]) -> argparse.ArgumentParser:
    """The parser of the (sub-)command ``argv``."""
    parser = build_parser(argv[0])
    for name in argv:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _options(argv: list[str]) -> dict[str, argparse.Action]:
    """Every option of the command ``argv`` (but ``--help``), by each of its names."""
    return {
        name: action
        for action in _parser(argv)._actions
        if action.option_strings and not isinstance(action, argparse._HelpAction)
        for name in action.option_strings
    }


@pytest.mark.parametrize(
    ("argv", "cls", "only", "own"), CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else ""
)
def test_every_field_has_an_option_and_every_option_is_a_field(argv, cls, only, own):
    options = _options(argv)
    fields = [f for f in dataclasses.fields(cls) if only is None or f.name in only]
    for f in fields:
        assert option_flag(f) in options, f"{' '.join(argv)}: field {f.name} has no option {option_flag(f)}"
        assert options[option_flag(f)].dest == f.name
    names = {f.name for f in fields}
    for name, action in options.items():
        if name.startswith("--no-"):  # the negative form of a flag
            continue
        assert action.dest in names or name in own, f"{' '.join(argv)}: {name} is neither a field nor listed"


@pytest.mark.parametrize("cls", [TrainArguments, NliTrainArguments, LogicArguments, LogicEvaluateArguments])
def test_every_field_has_its_help(cls):
    for f in dataclasses.fields(cls):
        assert f.metadata.get("help"), f"{cls.__name__}.{f.name}: no help metadata"


def test_parsed_defaults_are_the_dataclass_defaults():
    parse = build_parser("train").parse_args
    assert arguments_from_namespace(parse(["train", "--out", "o"])) == TrainArguments(out="o")
    given = arguments_from_namespace(
        parse(["train", "--out", "o", "--no-shuffle", "--betas", "0.8", "0.9", "--set", "hidden_size=8"])
    )
    assert (given.shuffle, given.betas, given.overrides) == (False, (0.8, 0.9), {"hidden_size": 8})
    tokens = arguments_from_namespace(parse(["train", "--out", "o", "--max-tokens", "512"]))
    assert (tokens.batch_size, tokens.max_tokens) == (None, 512)


def test_logic_train_defaults_are_the_dataclass_defaults_and_bf16_sets_the_precision():
    from syntaxformer.cli.logic import arguments_from_namespace as logic_arguments

    def parsed(*extra):
        parse = build_parser("logic").parse_args
        return logic_arguments(
            parse(["logic", "train", "--corpus", "d", "--out", "o", "--architecture", "lstm", *extra])
        )

    assert parsed() == LogicArguments(out="o", data="d", encoder="lstm")
    assert (parsed("--bf16").precision, parsed("--no-bf16").precision, parsed().precision) == ("bf16", "fp32", "fp32")
    assert parsed("--set", "hidden_size=8").overrides == {"hidden_size": 8}


def test_one_spelling_per_option_across_commands():
    for argv in (["train"], ["induce"], ["nli", "train"], ["logic", "train"]):
        options = _options(argv)
        assert "--bf16" in options and "--architecture" in options and "--precision" not in options, argv
        assert "--corpus" in options and "--data" not in options and "--encoder" not in options, argv
    assert _options(["train"])["--model"].dest == "init_from"  # a trained model to start from
    for name in COMMANDS:
        commands = [[name]]
        command = _parser([name])
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        commands = [[name, sub] for sub in nested[0].choices] if nested else commands
        for argv in commands:
            options = _options(argv)
            assert "--text" not in options and "--init-from" not in options, argv
            if "--device" in options:
                assert options["--device"].default is None, f"{' '.join(argv)}: --device is not auto by default"


@pytest.mark.parametrize("cls", [TrainArguments, NliTrainArguments, LogicArguments, DistillJob])
def test_every_option_with_choices_is_checked_by_the_one_generic_check(cls):
    """check_choices reads each field's declared choices: a value outside them is refused in one line
    naming the flag, None and every declared choice pass."""
    with_choices = [f for f in dataclasses.fields(cls) if f.metadata.get("choices")]
    assert with_choices, cls
    instance = cls.__new__(cls)
    for f in dataclasses.fields(cls):
        object.__setattr__(instance, f.name, None)
    check_choices(instance)  # None passes
    for f in with_choices:
        for choice in f.metadata["choices"]:
            object.__setattr__(instance, f.name, choice)
            check_choices(instance)
        object.__setattr__(instance, f.name, "no-such-choice")
        flag = f.metadata.get("flag", "--" + f.name.replace("_", "-"))
        with pytest.raises(InputError, match=f"^{flag} must be one of .*, got 'no-such-choice'$"):
            check_choices(instance)
        object.__setattr__(instance, f.name, None)


def test_train_arguments_check_refuses_a_schedule_out_of_its_choices():
    args = TrainArguments(out="o", max_steps=1, schedule="steps")
    with pytest.raises(
        InputError, match="--schedule must be one of constant, linear, cosine, plateau, inverse-sqrt, got 'steps'"
    ):
        args.check()
