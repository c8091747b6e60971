"""``syntaxformer induce``: the main job — train, parse, score against gold, compare with baselines.

On the embedded default it trains a Tree Transformer (or ``--architecture structformer`` / ``on-lstm``) on ptb-sample's
raw words (the Tree Transformer's default recipe: and the embedded WikiText-2 text) with a named recipe
(:mod:`syntaxformer.recipes`: ``default`` <= 20 minutes on 2 CPU cores, ``long`` <= 150), recording the learning curve on ``ptb-sample:dev`` (DESIGN.md §7); then it parses
ptb-sample and scores the test half, the dev half and all of it with the field's protocol, each
beside the same model untrained (step 0: same seed, same decoder) and left-/right-branching, random
and balanced trees. This is the transductive setting (the sentences parsed are in the training text,
as the Tree Transformer paper's "WSJ-all"). It writes into ``--out``: the model folder (``model/``),
``trees.txt`` (all sentences), (StructFormer: ``dependencies.conllu``), ``report.json`` and
``curve.{png,svg}``. ``--protocol NAME`` scores every part under another protocol of
:data:`syntaxformer.evaluation.protocols.PROTOCOLS` (the learning curve stays ``prpn``).

A recipe is a fixed number of steps (reproducible from the seed: the same model on any machine);
``--max-minutes`` stops training early only when given, and the header then says ``STOPPED EARLY: N of M
planned steps``. The recipes were chosen on the dev half (``benchmarks/studies/recipe_search/recipe_search.py``,
docs/results/induce/recipes.md); the report says so, and the test half is the headline. The work:
:func:`syntaxformer.workflows.induce.run_induce`; this module reads the arguments and prints the report.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from syntaxformer.cli.arguments import (
    STATED_DEFAULT,
    add_dataclass_arguments,
    add_decoder_arguments,
    dataclass_values,
    decoder_options,
)
from syntaxformer.errors import InputError
from syntaxformer.evaluation.protocols import DEFAULT_PROTOCOL, PROTOCOLS, PrpnProtocol
from syntaxformer.evaluation.report import BASELINE_NAMES, format_header, format_table, score_cell, to_json
from syntaxformer.models import default_architecture
from syntaxformer.recipes import describe_recipes
from syntaxformer.training.arguments import TrainArguments
from syntaxformer.workflows.induce import (
    RECIPES,
    REPLACEABLE,
    STEP_FIELDS,
    InduceJob,
    induce_training,
    rescore_induce,
    run_induce,
)

#: the further TrainArguments fields that are ``induce`` options (besides the recipe's fields a run may
#: replace, :data:`~syntaxformer.workflows.induce.REPLACEABLE`, and the step's,
#: :data:`~syntaxformer.workflows.induce.STEP_FIELDS`)
_RUN_FIELDS = ("model", "corpus", "seed", "prior", "overrides", "threads", "device", "resume", "quiet")
_STEP_DEFAULTS = {f.name: f.default for f in fields(TrainArguments) if f.name in STEP_FIELDS}
#: the options of ``induce`` that are neither TrainArguments nor InduceJob fields
COMMAND_ONLY = (
    "--rescore",
    "--list-recipes",
    "--json",
    "--threshold",
    "--min-layer",
    "--descend-rule",
    "--layer",
    "--dependency",
)
_RECIPE_DEFAULT = " (default: the recipe's, per architecture; see syntaxformer.recipes)"
_HELP = {
    "model": "the architecture to train (its recipes: syntaxformer.recipes)",
    "corpus": "training text: 'ptb-sample' (its words; default) or raw-text files",
    "prior": "the Tree Transformer's structural prior; induce accepts only one that induces trees, "
    "constituent (default: the model's, constituent). none (a plain Transformer) and the other priors "
    "induce no structure and are refused: train them with `syntaxformer train --prior NAME`, and "
    "compare a plain Transformer with `syntaxformer compare`",
    "overrides": "override a model config field (JSON value) after the recipe's, "
    "e.g. --set constituent_diagonal='\"one\"'; repeatable",
    "resume": "continue the training in OUT/model from its checkpoint (same command; a run cut "
    "by --max-minutes or a signal goes on), then parse and score",
    "bf16": "train under bfloat16 autocast (opt-in: faster on CPUs with AVX-512 BF16 or AMX, slower "
    "without; docs/results/induce.md has its seeded scores beside float32's); --no-bf16: float32 whatever "
    "the recipe says" + _RECIPE_DEFAULT,
}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "induce",
        help="the main job: train on raw words, parse, score vs gold and baselines",
        description="Train a model on raw text, parse a treebank with it, score the trees against the "
        "gold ones (sentence- and corpus-level unlabelled F1, WSJ-10, label recall) and "
        "compare with the untrained model and left-/right-branching, random and balanced "
        "trees. On ptb-sample: scores on the test half, the dev half and all of it.",
    )
    _job_arguments(p)
    _training_arguments(p)
    _run_arguments(p)
    add_decoder_arguments(p)
    p.set_defaults(func=run)


def _job_arguments(p: argparse.ArgumentParser) -> None:
    """The job's options: the fields of :class:`~syntaxformer.workflows.induce.InduceJob` (its
    ``decoder`` from the decoder flags, :func:`~syntaxformer.cli.arguments.add_decoder_arguments`)."""
    add_dataclass_arguments(p, InduceJob, skip=("decoder",), grouped=False)


def _training_arguments(p: argparse.ArgumentParser) -> None:
    """The TrainArguments fields that are options: those of the job (:data:`_RUN_FIELDS`: help of
    :data:`_HELP` where it differs from the field's) and the recipe's fields a run may replace
    (:data:`~syntaxformer.workflows.induce.REPLACEABLE`, default "the recipe's"), the step's."""
    defaults = {name: None for name in REPLACEABLE}
    defaults.update(model=default_architecture("language_model"), corpus=None)
    options = add_dataclass_arguments(
        p, TrainArguments, only=(*_RUN_FIELDS, *REPLACEABLE, *STEP_FIELDS), defaults=defaults, grouped=False
    )
    options["model"].choices = sorted(RECIPES)
    for name, action in options.items():
        if name in _HELP:
            action.help = _HELP[name].replace("%", "%%")
        elif name in REPLACEABLE:
            action.help = STATED_DEFAULT.sub("", action.help).rstrip() + _RECIPE_DEFAULT


def _run_arguments(p: argparse.ArgumentParser) -> None:
    """How the job runs besides the TrainArguments fields: rescore, output form."""
    p.add_argument(
        "--rescore",
        action="store_true",
        help="no training: score OUT's trained model again with the decoder flags given (e.g. --min-layer "
        "chosen on the dev half, whose score per minimum layer the learning curve records); the job, "
        "training record and curve are the run's (syntaxformer.workflows.induce.rescore_induce)",
    )
    p.add_argument("--json", action="store_true", help="print report.json instead of the table")
    p.add_argument("--list-recipes", action="store_true", help="print every model's recipes with their notes, and exit")


def _training(args, job: InduceJob):
    """The job's TrainArguments (:func:`~syntaxformer.workflows.induce.induce_training`) from the
    options: the run's fields, the recipe's fields given (None: the recipe's) and the step's."""
    values = dataclass_values(args, TrainArguments)
    given = {name: values[name] for name in (*_RUN_FIELDS, *REPLACEABLE, *STEP_FIELDS)}
    return induce_training(job, given)


def run(args: argparse.Namespace) -> int:
    if args.list_recipes:
        print(describe_recipes())
        return 0
    if args.rescore:
        given = [f for f in (*REPLACEABLE, "corpus", "prior", "variant", "overrides") if getattr(args, f)]
        given += [f for f in STEP_FIELDS if getattr(args, f) != _STEP_DEFAULTS[f]]
        if given or args.resume:
            flags = ", ".join("--" + ("set" if f == "overrides" else f).replace("_", "-") for f in given)
            raise InputError(f"--rescore trains nothing: drop {flags or '--resume'} (decoder flags only)")
        report = rescore_induce(
            args.out, decoder_options(args), args.protocol, dependencies=args.dependencies, device=args.device
        )
        print(to_json(report) if args.json else format_induce_report(report))
        return 0
    values = dataclass_values(args, InduceJob)
    job = InduceJob(**values, decoder=decoder_options(args))
    report = run_induce(job, _training(args, job))
    print(to_json(report) if args.json else format_induce_report(report))
    return 0


def _steps_text(training: dict) -> str:
    """``6,000 steps``, or ``STOPPED EARLY: 4,374 of 6,000 steps (max_minutes)`` for a cut run."""
    steps, planned = training.get("steps"), training.get("planned_steps")
    if steps is None:
        return "? steps"
    epochs = training.get("planned_epochs")
    if planned is None and epochs and not training.get("complete", True):
        done = training.get("epochs") or 0
        return f"STOPPED EARLY: {done:.2f} of {epochs:,} planned epochs, {steps:,} steps ({training.get('stopped') or 'stopped'})"
    if planned is None or steps == planned:
        return f"{steps:,} steps"
    return f"STOPPED EARLY: {steps:,} of {planned:,} planned steps ({training.get('stopped') or 'stopped'})"


def _columns(report: dict, names: dict) -> tuple[tuple[str, str], ...]:
    """``(key, title)`` of the score table: the report's protocol's columns (``prpn``: sentence and corpus
    F1, WSJ-10, mean depth), keeping those some row of some part has."""
    protocol = PROTOCOLS.get(report.get("protocol_name", DEFAULT_PROTOCOL), PrpnProtocol())
    rows = [scores[n] for scores in report["parts"].values() for n in names if n in scores]
    return tuple((key, title) for key, title in protocol.columns if any(key in row for row in rows))


def _cell(scores: dict, key: str, label: str | None = None):
    """:func:`score_cell`, or None (printed ``-``) when the protocol gave no such score."""
    if key not in scores or (label is not None and label not in scores[key]):
        return None
    return score_cell(scores, key, label)


def _single_layer_line(layers: dict) -> str:
    """The single-layer decoder's scores by layer: sentence F1, or corpus F1 where the protocol has no
    sentence F1 (``evalb``)."""
    key = "sentence_f1" if all("sentence_f1" in r for r in layers.values()) else "corpus_f1"
    return f"single-layer decoder (one layer's links or distances), {key.replace('_f1', '')} F1 by layer: " + ", ".join(
        f"{layer}: {r[key]:.2f}" for layer, r in layers.items()
    )


def _label_recall(report: dict, name: str, names: dict) -> str:
    """The label recall table of the primary part, or a line saying the protocol gives none."""
    if "label_recall" not in report[name]:
        return f"label recall: not given by protocol {report.get('protocol_name', DEFAULT_PROTOCOL)}"
    labels = list(report[name]["label_recall"])
    rows = [n for n in names if n in report]
    return f"label recall ({report['primary']})\n" + format_table(
        ["recall (%)"] + labels,
        [[names[n]] + [_cell(report[n], "label_recall", lab) for lab in labels] for n in rows],
    )


def format_induce_report(report: dict) -> str:
    """The tables of ``induce``: per scored part, the model beside the untrained model and every baseline,
    in the columns of the report's protocol (those it gives); the label recall where it gives one."""
    name = report["model"].replace("-", "_")
    names = {name: report["model"], "untrained": "same model, untrained (step 0)", **BASELINE_NAMES}
    protocol_name = report.get("protocol_name")
    header = format_header(
        "syntaxformer induce",
        {
            "model": f"{report['model']} (preset {report['preset']}, recipe {report['recipe']}, seed {report['seed']})",
            "training": f"{report['data']['train']}, {_steps_text(report['training'])}, "
            f"{report['minutes']['train']:.1f} min",
            "treebank": f"{report['data']['treebank']} ({report['data']['setting']})",
            "protocol": report["protocol"] if protocol_name is None else f"{protocol_name}: {report['protocol']}",
            "source": report.get("protocol_source"),
            "decoder": ", ".join(f"{k}={v}" for k, v in report["decoder"].items()),
            "chosen": report["selection"],
            "note": report.get("note"),
        },
    )
    columns = _columns(report, names)
    parts = [header]
    for part, scores in report["parts"].items():
        rows = [n for n in names if n in scores]
        source = report["data"]["parts"][part]
        parts.append(
            f"{part}: {source['source']}, {source['n_sentences']:,} sentences\n"
            + format_table(
                ["trees"] + [title for _, title in columns],
                [[names[n]] + [_cell(scores[n], key) for key, _ in columns] for n in rows],
            )
        )
        if scores.get("single_layer"):
            parts.append(_single_layer_line(scores["single_layer"]))
        if scores.get("dependency"):
            parts.append(
                format_table(
                    ["dependencies", "UAS", "UUAS"],
                    [[k.replace("_", " "), v["uas"], v["uuas"]] for k, v in scores["dependency"].items()],
                )
            )
    parts.append(_label_recall(report, name, names))
    return "\n\n".join(parts)
