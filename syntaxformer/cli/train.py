"""``syntaxformer train``: train a model of the registry with its own objective.

Masked-LM models (Tree Transformer, StructFormer, ON-LSTM + self-attention) with BERT masking; the
causal LM (ON-LSTM) with next-word prediction (:mod:`syntaxformer.training.objectives`).

``--model DIR`` (a trained model folder or a shipped parser's name) fine-tunes a trained model;
``--architecture NAME`` names the architecture of a new one. With ``--head-gates --gate-l0 LAMBDA`` every attention
head gets a hard-concrete gate and the saved model is pruned of the closed heads
(:mod:`syntaxformer.tasks.finetune`).

Writes into ``--out`` the model (``model.safetensors``, ``config.json``), the tokenizer,
``training.json`` (every option, the data, steps, minutes, losses), ``tensorboard/`` and
``checkpoint.pt``. The same command runs data-parallel under ``torchrun --nproc_per_node=R``.
See :mod:`syntaxformer.tasks.language_model` for what a run does, and for checkpoints and resume.
"""

from __future__ import annotations

import argparse
import json
import os

from syntaxformer.cli.arguments import add_dataclass_arguments, dataclass_values, parse_structure_sources
from syntaxformer.tasks.language_model import TRAINING_JSON, TrainArguments
from syntaxformer.tasks.run import train

#: the options of ``train`` that are not :class:`TrainArguments` fields
COMMAND_ONLY = ("--json",)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """``syntaxformer train``: one option per :class:`TrainArguments` field (its help, flag, choices
    from the field's metadata), by concern, and ``--json``."""
    p = subparsers.add_parser(
        "train",
        help="train a model (masked LM, or next-word for ON-LSTM)",
        description="Training with the model's objective: masked LM (BERT 80/10/10 masking) or, for "
        "ON-LSTM, next-word prediction; Adam, length-bucketed batches, checkpoints and "
        "--resume, TensorBoard. Runs data-parallel under torchrun.",
    )
    options = add_dataclass_arguments(p, TrainArguments, defaults={"batch_size": None})
    options["out"].container.add_argument("--json", action="store_true", help="print training.json at the end")
    p.set_defaults(func=run)
    return p


def arguments_from_namespace(ns: argparse.Namespace) -> TrainArguments:
    """The :class:`TrainArguments` of parsed ``syntaxformer train`` options (``--batch-size`` is the
    field's default unless ``--max-tokens`` or ``--min-batch-tokens`` is given)."""
    values = dataclass_values(ns, TrainArguments)
    if values["batch_size"] is None and values["max_tokens"] is None and values["min_batch_tokens"] is None:
        values["batch_size"] = TrainArguments(out="").batch_size
    return TrainArguments(**values)


def run(ns: argparse.Namespace) -> int:
    parse_structure_sources(ns)  # a bad --trees / --phrases before anything is read
    args = arguments_from_namespace(ns)
    out = train(args)
    if int(os.environ.get("RANK", "0")) != 0:  # under torchrun, rank 0 reports
        return 0
    record_path = out / TRAINING_JSON
    record = json.loads(record_path.read_text())
    if ns.json:
        print(json.dumps(record, indent=2))
        return 0
    valid = record["final_valid_loss"]
    print(
        f"syntaxformer train: {record['model']} ({record['objective']}) preset {record['preset']} prior {record['prior']} "
        f"seed {record['seed']} on {record['data']['corpus']}: {record['steps']} steps "
        f"({record['stopped']}), {record['minutes']:.1f} min"
        + (f", train loss {record['final_train_loss']:.3f}" if record["final_train_loss"] is not None else "")
        + (f", valid loss {valid:.3f} (perplexity {record['final_valid_perplexity']:.1f})" if valid is not None else "")
        + (f", {record['tokens_per_second']:.0f} tokens/s" if record["tokens_per_second"] else "")
        + f" -> {out}"
    )
    gates = record.get("head_gates")
    if gates:
        print(
            f"head gates (lambda {gates['gate_l0']:g}, beta {gates['temperature']:g}): {gates['n_kept']} of "
            f"{gates['n_heads']} heads kept, per layer {gates['kept_per_layer']}"
            + (f"; silenced {gates['silenced']}" if gates["silenced"] else "")
            + (
                f"; pruned model's valid loss {gates['pruned_valid_loss']:.3f}"
                if gates["pruned_valid_loss"] is not None
                else ""
            )
        )
    return 0


__all__ = ["add_parser", "run", "arguments_from_namespace"]
