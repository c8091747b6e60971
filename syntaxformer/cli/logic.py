"""``syntaxformer logic train | evaluate``: propositional-logic inference (Bowman et al. 2015).

``train`` encodes each formula with ``--architecture`` (on-lstm, tree-transformer, transformer, lstm, ...:
:data:`syntaxformer.models.ENCODERS`), classifies the pair from ``[u; v; u*v; |u-v|]`` with an
MLP into the 7 relations, trains on the pairs with <= 6 operators (checkpoints, ``--resume``,
TensorBoard) and tests the best-validation model on test1-test12; ``evaluate`` tests a saved model.
Both write ``OUT/logic.json``, ``OUT/logic.md`` and ``OUT/accuracy.{png,svg}`` and print the table.
The work is :mod:`syntaxformer.workflows.logic`; the protocol :mod:`syntaxformer.tasks.logic`.
"""

from __future__ import annotations

import argparse
import json

#: the fields of :class:`~syntaxformer.tasks.logic.LogicArguments` that have no ``logic train`` option:
#: the protocol's validation split and the public code's batching and Adam constants
TRAIN_FIXED_FIELDS = ("valid_every", "bucket_batches", "betas", "eps")
#: the options of ``logic train`` that are not :class:`~syntaxformer.tasks.logic.LogicArguments` fields
TRAIN_COMMAND_ONLY = ("--max-test-pairs", "--json")
#: the options of ``logic evaluate`` that are not :class:`~syntaxformer.tasks.logic.LogicEvaluateArguments` fields
EVALUATE_COMMAND_ONLY = ("--json",)


class _PrecisionFlag(argparse.BooleanOptionalAction):
    """``--bf16`` / ``--no-bf16``, the option of the ``precision`` field: ``"bf16"`` / ``"fp32"``."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string in self.option_strings:
            setattr(namespace, self.dest, "fp32" if option_string.startswith("--no-") else "bf16")


def _recipe_help(name: str) -> str:
    """What each recipe sets ``name`` to, for the help text."""
    from syntaxformer.tasks.logic import RECIPES

    def shown(value):
        return "the encoder's" if value is None else value

    return "; ".join(f"{recipe}: {shown(fields[name])}" for recipe, fields in RECIPES.items())


def _add_train(sub) -> None:
    """``logic train``: one option per :class:`~syntaxformer.tasks.logic.LogicArguments` field (but
    :data:`TRAIN_FIXED_FIELDS`); those a recipe sets default to the recipe's, the others to the field's
    default."""
    from syntaxformer.cli.arguments import STATED_DEFAULT, add_dataclass_arguments, option_flag
    from syntaxformer.models import ENCODERS
    from syntaxformer.tasks.logic import RECIPE, LogicArguments, LogicEvaluateArguments

    p = sub.add_parser(
        "train",
        help="train a pair classifier on <= 6 operators, test on 1-12",
        description="Train an encoder + pair MLP on train0-train6 (every 10th pair held out for "
        "validation), keep the best-validation model, test it on test1-test12.",
    )
    from_recipe = set(RECIPE) - {"precision"}
    options = add_dataclass_arguments(
        p, LogicArguments, skip=(*TRAIN_FIXED_FIELDS, "precision"), defaults=dict.fromkeys(from_recipe)
    )
    options["data"].required = True
    options["encoder"].choices = sorted(ENCODERS)  # as registered now (an encoder may be added later)
    for name in from_recipe:
        action = options[name]
        action.help = f"{STATED_DEFAULT.sub('', action.help).rstrip()} (recipe: {_recipe_help(name)})"

    def group_of(action):
        return next(group for group in p._action_groups if action in group._group_actions)

    data = group_of(options["max_train_pairs"])
    add_dataclass_arguments(data, LogicEvaluateArguments, only=("max_test_pairs",), grouped=False)
    precision = LogicArguments.__dataclass_fields__["precision"]
    group_of(options["clip"]).add_argument(
        option_flag(precision), action=_PrecisionFlag, dest="precision", default=None, help=precision.metadata["help"]
    )
    p.add_argument("--json", action="store_true", help="print logic.json instead of the table")
    p.set_defaults(func=run_train)


def _add_evaluate(sub) -> None:
    """``logic evaluate``: one option per :class:`~syntaxformer.tasks.logic.LogicEvaluateArguments` field."""
    from syntaxformer.cli.arguments import add_dataclass_arguments
    from syntaxformer.tasks.logic import LogicEvaluateArguments

    p = sub.add_parser(
        "evaluate",
        help="test a trained model on test1-test12",
        description="Accuracy of a saved logic model (syntaxformer logic train's OUT/best or OUT) "
        "on every testN, N = 1..12.",
    )
    add_dataclass_arguments(p, LogicEvaluateArguments, grouped=False)
    p.add_argument("--json", action="store_true", help="print logic.json instead of the table")
    p.set_defaults(func=run_evaluate)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "logic",
        help="propositional-logic inference: train / evaluate a pair classifier",
        description="Propositional-logic inference (Bowman et al. 2015): train encodes each "
        "formula with --architecture, classifies the pair from [u; v; u*v; |u-v|] "
        "with an MLP into the 7 relations, trains on <= 6 operators and tests "
        "the best-validation model on 1-12 operators; evaluate tests a saved "
        "model.",
    )
    sub = p.add_subparsers(dest="logic_command", metavar="{train,evaluate}")
    _add_train(sub)
    _add_evaluate(sub)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def arguments_from_namespace(ns: argparse.Namespace):
    """The :class:`~syntaxformer.tasks.logic.LogicArguments` of parsed ``logic train`` options: the
    fields of ``ns.recipe`` (:data:`~syntaxformer.tasks.logic.RECIPES`), then the options given."""
    from syntaxformer.cli.arguments import dataclass_values
    from syntaxformer.tasks.logic import RECIPES, LogicArguments

    values = dataclass_values(ns, LogicArguments)
    recipe = RECIPES[values.get("recipe") or "default"]
    values.update({k: v for k, v in recipe.items() if values.get(k) is None})
    return LogicArguments(**values)


def _print(report: dict, as_json: bool) -> None:
    from syntaxformer.workflows.logic import accuracy_markdown, summary_line

    if as_json:
        print(json.dumps(report, indent=2))
        return
    print(summary_line(report))
    print(accuracy_markdown(report))
    print("wrote " + ", ".join(report["files"]))


def run_train(ns: argparse.Namespace) -> int:
    from syntaxformer.workflows.logic import run_logic_train

    report = run_logic_train(arguments_from_namespace(ns), max_test_pairs=ns.max_test_pairs)
    _print(report, ns.json)
    return 0


def run_evaluate(ns: argparse.Namespace) -> int:
    from syntaxformer.cli.arguments import dataclass_values
    from syntaxformer.tasks.logic import LogicEvaluateArguments
    from syntaxformer.workflows.logic import run_logic_evaluate

    args = LogicEvaluateArguments(**dataclass_values(ns, LogicEvaluateArguments))
    report = run_logic_evaluate(
        args.model,
        args.data,
        args.out,
        device=args.device,
        batch_size=args.batch_size,
        max_test_pairs=args.max_test_pairs,
    )
    _print(report, ns.json)
    return 0


__all__ = ["add_parser", "run_train", "run_evaluate", "arguments_from_namespace"]
