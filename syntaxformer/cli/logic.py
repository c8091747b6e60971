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
from dataclasses import fields

_DATA_HELP = "the propositional-logic folder (train0..train12, test0..test12), e.g. ../shared/data/propositional-logic"


def _key_value(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` -> (key, JSON value, or the bare string)."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def _defaults():
    from syntaxformer.tasks.logic import LogicArguments

    return LogicArguments(out="")


def _recipe_help(name: str) -> str:
    """What each recipe sets ``name`` to, for the help text."""
    from syntaxformer.tasks.logic import RECIPES

    def shown(value):
        return "the encoder's" if value is None else value

    return "; ".join(f"{recipe}: {shown(fields[name])}" for recipe, fields in RECIPES.items())


def _add_train(sub) -> None:
    from syntaxformer.blocks.pooling import POOLINGS
    from syntaxformer.models import ENCODERS
    from syntaxformer.tasks.logic import RECIPES, SCHEDULES

    d = _defaults()
    p = sub.add_parser(
        "train",
        help="train a pair classifier on <= 6 operators, test on 1-12",
        description="Train an encoder + pair MLP on train0-train6 (every 10th pair held out for "
        "validation), keep the best-validation model, test it on test1-test12.",
    )
    p.add_argument("--corpus", dest="data", required=True, help=_DATA_HELP)
    p.add_argument("--out", required=True, help="output folder (model, best/, logic.json, logic.md, accuracy.png)")
    p.add_argument(
        "--architecture",
        dest="encoder",
        default=d.encoder,
        choices=sorted(ENCODERS),
        help="the sentence encoder's architecture",
    )
    p.add_argument("--preset", default=d.preset, help="encoder size: base (the study's) or tiny")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="override an encoder config field (JSON value), e.g. --set hidden_sizes=[256]; repeatable",
    )
    p.add_argument(
        "--pooling",
        default=None,
        choices=sorted(POOLINGS),
        help="sentence vector (default: last for recurrent encoders, mean for attention encoders)",
    )
    p.add_argument("--mlp-hidden", type=int, default=None, help="pair MLP width (default: the sentence-vector width)")
    p.add_argument("--dropout", type=float, default=d.dropout, help="pair MLP dropout")
    p.add_argument("--max-train-operators", type=int, default=d.max_train_operators, help="train on train0..trainK")
    p.add_argument(
        "--max-train-pairs",
        type=int,
        default=None,
        help="train on a fixed random subset of this many pairs (quick checks; default: all)",
    )
    p.add_argument(
        "--max-test-pairs",
        type=int,
        default=None,
        help="test on the first this-many pairs of each file (quick checks; default: all)",
    )
    o = p.add_argument_group("optimisation (options marked 'recipe' default to --recipe's value)")
    o.add_argument(
        "--recipe",
        choices=sorted(RECIPES),
        default="default",
        help="default: the study's fixed number of steps (the encoder's: ON-LSTM 8,000 in bf16, others "
        "4,000), linear decay (docs/logic.md); public: the public "
        "ON-LSTM code's 50 epochs, validation each epoch, lr halved after 3 epochs without a better "
        "validation accuracy",
    )
    o.add_argument(
        "--batch-size", type=int, default=None, help=f"pairs per step (recipe: {_recipe_help('batch_size')})"
    )
    o.add_argument("--lr", type=float, default=None, help=f"peak learning rate (recipe: {_recipe_help('lr')})")
    o.add_argument("--weight-decay", type=float, default=d.weight_decay, help="Adam's L2 decay")
    o.add_argument("--warmup-steps", type=int, default=None, help=f"recipe: {_recipe_help('warmup_steps')}")
    o.add_argument("--schedule", choices=SCHEDULES, default=None, help=f"recipe: {_recipe_help('schedule')}")
    o.add_argument(
        "--final-lr-fraction",
        type=float,
        default=None,
        help=f"where linear / cosine end (recipe: {_recipe_help('final_lr_fraction')})",
    )
    o.add_argument("--schedule-steps", type=int, default=None, help="where the decay ends (default: --max-steps)")
    o.add_argument(
        "--plateau-factor",
        type=float,
        default=d.plateau_factor,
        help="--schedule plateau: the learning rate's multiplier",
    )
    o.add_argument(
        "--plateau-patience",
        type=int,
        default=d.plateau_patience,
        help="--schedule plateau: validations without improvement tolerated",
    )
    o.add_argument("--clip", type=float, default=d.clip, help="gradient-norm clipping; 0 disables")
    o.add_argument(
        "--bf16",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="training and validation under torch.autocast to bfloat16 (products in bfloat16; "
        "parameters, optimizer and the ON-LSTM's state in float32; test in float32); --no-bf16: float32 "
        "throughout (default: the recipe's, else the encoder's: on-lstm bf16, the others float32)",
    )
    _add_run_arguments(p, d)
    p.set_defaults(func=run_train)


def _add_run_arguments(p: argparse.ArgumentParser, d) -> None:
    """``logic train``'s run options (``d``: the default arguments)."""
    r = p.add_argument_group("run")
    r.add_argument("--seed", type=int, default=d.seed)
    r.add_argument("--max-steps", type=int, default=None, help=f"recipe: {_recipe_help('max_steps')}")
    r.add_argument("--epochs", type=int, default=None, help=f"recipe: {_recipe_help('epochs')}")
    r.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="stop cleanly (and save) after this many minutes of this process; default: no limit",
    )
    r.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help=f"validation period in steps, 0 = none (recipe: {_recipe_help('eval_every')})",
    )
    r.add_argument(
        "--eval-each-epoch",
        action="store_true",
        default=None,
        help=f"also validate at the end of every epoch (recipe: {_recipe_help('eval_each_epoch')})",
    )
    r.add_argument(
        "--save-every",
        type=int,
        default=None,
        help=f"checkpoint period in steps (recipe: {_recipe_help('save_every')})",
    )
    r.add_argument("--log-every", type=int, default=d.log_every)
    r.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt if present")
    r.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")
    r.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: PyTorch's)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--json", action="store_true", help="print logic.json instead of the table")


def _add_evaluate(sub) -> None:
    p = sub.add_parser(
        "evaluate",
        help="test a trained model on test1-test12",
        description="Accuracy of a saved logic model (syntaxformer logic train's OUT/best or OUT) "
        "on every testN, N = 1..12.",
    )
    p.add_argument(
        "--model",
        required=True,
        help="model folder (config.json and model.safetensors; an older pair_classifier.json folder loads too)",
    )
    p.add_argument("--corpus", dest="data", required=True, help=_DATA_HELP)
    p.add_argument("--out", required=True, help="output folder (logic.json, logic.md, accuracy.png/svg)")
    p.add_argument("--seed", type=int, default=0, help="unused by the (deterministic) evaluation; for uniformity")
    p.add_argument("--batch-size", type=int, default=256, help="pairs per forward pass")
    p.add_argument("--max-test-pairs", type=int, default=None, help="first this-many pairs of each file (default: all)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")
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
    from syntaxformer.tasks.logic import RECIPES, LogicArguments

    names = {f.name for f in fields(LogicArguments)}
    recipe = RECIPES[getattr(ns, "recipe", None) or "default"]
    values = {k: v for k, v in vars(ns).items() if k in names}
    values["precision"] = {True: "bf16", False: "fp32"}.get(getattr(ns, "bf16", None))
    values.update({k: v for k, v in recipe.items() if values.get(k) is None})
    values["overrides"] = dict(ns.overrides or [])
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
    from syntaxformer.workflows.logic import run_logic_evaluate

    report = run_logic_evaluate(
        ns.model, ns.data, ns.out, device=ns.device, batch_size=ns.batch_size, max_test_pairs=ns.max_test_pairs
    )
    _print(report, ns.json)
    return 0


__all__ = ["add_parser", "run_train", "run_evaluate", "arguments_from_namespace"]
