"""``syntaxformer train``: train a model of the registry with its own objective.

Masked-LM models (Tree Transformer, StructFormer, ON-LSTM + self-attention) with BERT masking; the
causal LM (ON-LSTM) with next-word prediction (:mod:`syntaxformer.training.objectives`).

``--init-from DIR`` fine-tunes a trained model; with ``--head-gates --gate-l0 LAMBDA`` every attention
head gets a hard-concrete gate and the saved model is pruned of the closed heads
(:mod:`syntaxformer.training.finetune`).

Writes into ``--out`` the model (``model.safetensors``, ``config.json``), the tokenizer,
``training.json`` (every option, the data, steps, minutes, losses), ``tensorboard/`` and
``checkpoint.pt``. The same command runs data-parallel under ``torchrun --nproc_per_node=R``.
See :mod:`syntaxformer.training.trainer` for what a run does, and for checkpoints and resume.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import fields

from syntaxformer.cli.arguments import add_structure_input_arguments, config_override, parse_structure_sources
from syntaxformer.training.run import train
from syntaxformer.training.trainer import TRAINING_JSON, TrainArguments

_D = TrainArguments(out="")  # defaults, for the help texts


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "train",
        help="train a model (masked LM, or next-word for ON-LSTM)",
        description="Training with the model's objective: masked LM (BERT 80/10/10 masking) or, for "
        "ON-LSTM, next-word prediction; Adam, length-bucketed batches, checkpoints and "
        "--resume, TensorBoard. Runs data-parallel under torchrun.",
    )
    _model_and_data_arguments(p)
    _batch_arguments(p)
    _optimisation_arguments(p)
    _running_text_arguments(p)
    _fine_tuning_arguments(p)
    _run_arguments(p)
    p.set_defaults(func=run)
    return p


def _model_and_data_arguments(p: argparse.ArgumentParser) -> None:
    m = p.add_argument_group("model")
    m.add_argument("--model", default=_D.model, help="model name (syntaxformer.models.MODELS)")
    m.add_argument("--preset", default=_D.preset, help="size preset: paper, small, mini, tiny (per model)")
    m.add_argument(
        "--prior",
        default=None,
        help="structural prior, a name in syntaxformer.priors.PRIORS: constituent, gaussian, "
        "structural-position (needs --trees), multi-granularity ('tree' heads need --phrases), "
        "or none (plain Transformer); default: the model's",
    )
    m.add_argument(
        "--set",
        dest="overrides",
        action="append",
        type=config_override,
        default=[],
        metavar="KEY=VALUE",
        help="override a config field (JSON value), e.g. --set hidden_size=128; repeatable",
    )
    d = p.add_argument_group("data")
    d.add_argument(
        "--corpus",
        default=_D.corpus,
        help="ptb-sample (the embedded treebank's words) or text files, one sentence per line "
        "(comma-separated paths / globs)",
    )
    d.add_argument(
        "--valid",
        default=None,
        help="validation corpus (same forms as --corpus); default: --valid-fraction of --corpus held out",
    )
    add_structure_input_arguments(
        d,
        gold_trees="the sentences and trees of the dependency source --corpus names (ptb-sample, a "
        "CoNLL-U or .dp file; punctuation removed)",
        gold_phrases="the gold trees of the treebank --corpus names (ptb-sample, a .mrg / bracketed file)",
    )
    d.add_argument(
        "--induced-from",
        choices=["masked", "sentence"],
        default=_D.induced_from,
        help="for --trees / --phrases induced:MODEL_DIR: 'masked' (default) parses every training "
        "batch as the model reads it, masks included, so no tree carries information about a "
        "masked word (the source model runs at every step; needs --tokenizer word); 'sentence' "
        "parses each unmasked sentence once before training",
    )
    d.add_argument(
        "--valid-fraction",
        type=float,
        default=_D.valid_fraction,
        help="without --valid: fraction of the corpus held out (a fixed seed-0 choice)",
    )
    d.add_argument(
        "--tokenizer",
        default=_D.tokenizer,
        help="word (one token per word), wordpiece, or a folder with a saved tokenizer",
    )
    d.add_argument("--min-freq", type=int, default=_D.min_freq, help="minimum word (piece) frequency")
    d.add_argument(
        "--max-vocab", type=int, default=None, help="word vocabulary cap (specials included); default: no cap"
    )
    d.add_argument(
        "--wordpiece-vocab-size", type=int, default=_D.wordpiece_vocab_size, help="vocabulary of --tokenizer wordpiece"
    )
    d.add_argument("--add-cls", action="store_true", help="prepend [CLS] to every sentence (as the public code)")
    d.add_argument("--max-length", type=int, default=_D.max_length, help="tokens per sentence")
    d.add_argument(
        "--overflow",
        choices=["split", "skip", "cut"],
        default=_D.overflow,
        help="what to do with longer sentences: split into pieces, skip, or cut to --max-length tokens "
        "(counted in training.json)",
    )
    d.add_argument(
        "--max-sentence-length",
        type=int,
        default=None,
        help="drop sentences of more tokens before --overflow applies (the public Tree Transformer code: 70); "
        "default: none dropped",
    )


def _batch_arguments(p: argparse.ArgumentParser) -> None:
    b = p.add_argument_group("batches and masking")
    b.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help=f"sentences per batch and process (default: {_D.batch_size} unless --max-tokens or --min-batch-tokens)",
    )
    b.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="padded tokens per batch instead of --batch-size; default: --batch-size",
    )
    b.add_argument(
        "--min-batch-tokens",
        type=int,
        default=None,
        help="instead of --batch-size: batches of the length-sorted corpus filled to at least this many "
        "tokens, shuffled every epoch (the public StructFormer code: 4096); default: --batch-size",
    )
    b.add_argument(
        "--pad-to-multiple",
        type=int,
        default=None,
        help="pad each batch to its longest sentence rounded up to a multiple of this (few shapes for an "
        "accelerator's graphs; default: the longest)",
    )
    b.add_argument(
        "--bucket-batches",
        type=int,
        default=_D.bucket_batches,
        help="batches' worth of sentences sorted by length together",
    )
    b.add_argument(
        "--mask-rate",
        type=float,
        default=_D.mask_rate,
        help="BERT selection rate (the public code: 0.142857); masked-LM models only",
    )
    b.add_argument(
        "--mask-replace",
        choices=["bert", "mask"],
        default=_D.mask_replace,
        help="a selected token becomes 80%% [MASK] / 10%% random / 10%% kept (bert, default) "
        "or always [MASK] (mask: the public StructFormer code)",
    )
    b.add_argument(
        "--no-mask-unknown",
        dest="mask_unknown",
        action="store_false",
        help="never select [UNK] for masking (the public StructFormer code)",
    )
    b.add_argument(
        "--mask-cls",
        action="store_true",
        help="a leading [CLS] may be selected for masking like a word (the public Tree Transformer code)",
    )
    b.add_argument(
        "--no-shuffle",
        dest="shuffle",
        action="store_false",
        help="batches of consecutive sentences in corpus order, the same every epoch (the public "
        "Tree Transformer code); default: shuffled, length-bucketed",
    )


def _optimisation_arguments(p: argparse.ArgumentParser) -> None:
    o = p.add_argument_group("optimisation")
    o.add_argument(
        "--optimizer",
        choices=["adam", "adam-l2", "sgd"],
        default=_D.optimizer,
        help="adam (AdamW with --weight-decay), adam-l2 (the decay an L2 term, as the public StructFormer "
        "code), or sgd: SGD then averaged SGD by the non-monotone trigger (needs --bptt)",
    )
    o.add_argument("--lr", type=float, default=_D.lr, help="peak learning rate (after warm-up)")
    o.add_argument("--betas", type=float, nargs=2, default=list(_D.betas), help="Adam's beta1 and beta2")
    o.add_argument("--eps", type=float, default=_D.eps, help="Adam's epsilon")
    o.add_argument("--weight-decay", type=float, default=_D.weight_decay, help="> 0: AdamW")
    o.add_argument("--warmup-steps", type=int, default=_D.warmup_steps, help="steps of linear warm-up from 0 to --lr")
    o.add_argument(
        "--schedule",
        choices=["constant", "linear", "cosine", "plateau"],
        default=_D.schedule,
        help="after warm-up; linear/cosine decay to --final-lr-fraction at --schedule-steps; plateau: "
        "times --plateau-factor after --plateau-patience evaluations without a lower validation loss",
    )
    o.add_argument(
        "--plateau-factor", type=float, default=_D.plateau_factor, help="--schedule plateau: the learning rate's factor"
    )
    o.add_argument(
        "--plateau-patience",
        type=int,
        default=_D.plateau_patience,
        help="--schedule plateau: evaluations without a lower validation loss before the factor applies",
    )
    o.add_argument(
        "--final-lr-fraction",
        type=float,
        default=_D.final_lr_fraction,
        help="the learning rate where linear/cosine decay ends, as a fraction of --lr",
    )
    o.add_argument(
        "--schedule-steps", type=int, default=None, help="where linear/cosine decay ends (default: --max-steps)"
    )
    o.add_argument("--clip", type=float, default=_D.clip, help="gradient-norm clipping; 0 disables")


def _running_text_arguments(p: argparse.ArgumentParser) -> None:
    t = p.add_argument_group(
        "running text and NT-ASGD (the AWD-LSTM procedure of the public ON-LSTM code; causal-LM models)"
    )
    t.add_argument(
        "--bptt",
        type=int,
        default=None,
        help="train on running text (sentences joined with <eos>, --batch-size rows, the state carried) in "
        "windows of this mean length (public 70), validating at each epoch end (default: sentence batches)",
    )
    t.add_argument(
        "--nonmono", type=int, default=_D.nonmono, help="NT-ASGD's non-monotone interval in epochs (0: SGD only)"
    )
    t.add_argument(
        "--asgd-restart-epoch",
        type=int,
        default=None,
        help="restart the averaging after this epoch (the public --finetuning; default: never)",
    )
    t.add_argument("--ar-alpha", type=float, default=_D.ar_alpha, help="activation regularisation weight (public 2)")
    t.add_argument(
        "--tar-beta", type=float, default=_D.tar_beta, help="temporal activation regularisation weight (public 1)"
    )
    t.add_argument(
        "--eval-batch-size", type=int, default=_D.eval_batch_size, help="rows of the validation stream (public 10)"
    )


def _fine_tuning_arguments(p: argparse.ArgumentParser) -> None:
    f = p.add_argument_group("fine-tuning and head gates (Voita et al. 2019; DESIGN.md §3.5)")
    f.add_argument(
        "--init-from",
        default=None,
        metavar="DIR",
        help="start from this trained model folder (its weights, configuration and tokenizer; "
        "--model/--preset are then the folder's); default: a new model",
    )
    f.add_argument(
        "--head-gates",
        action="store_true",
        help="one hard-concrete gate per attention head (needs --init-from); at the end closed "
        "heads are pruned and OUT holds the pruned model and gates.json",
    )
    f.add_argument(
        "--gate-l0",
        type=float,
        default=_D.gate_l0,
        metavar="LAMBDA",
        help="lambda of the penalty lambda * sum_h (1 - P(g_h = 0)) added to the MLM loss",
    )
    f.add_argument(
        "--gate-temperature",
        type=float,
        default=_D.gate_temperature,
        help="hard-concrete temperature beta (0.33: the authors' code; Louizos et al.: 2/3)",
    )
    f.add_argument("--gate-lr", type=float, default=None, help="learning rate of the gates (default: --lr)")
    f.add_argument("--gate-init", type=float, default=_D.gate_init, help="initial log alpha of every gate")


def _run_arguments(p: argparse.ArgumentParser) -> None:
    r = p.add_argument_group("run")
    r.add_argument("--out", required=True, help="output folder")
    r.add_argument("--seed", type=int, default=_D.seed, help="random seed (initialisation, batches, masking)")
    r.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="stop after this many optimizer steps. A run needs at least one stop condition: --max-steps, "
        "--epochs or --max-minutes (default: none of them, so one must be given)",
    )
    r.add_argument(
        "--epochs", type=int, default=None, help="stop after this many passes over the training text; default: no limit"
    )
    r.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="stop cleanly (and save) after this many minutes of this process; default: no limit",
    )
    r.add_argument("--save-every", type=int, default=_D.save_every, help="checkpoint period (steps)")
    r.add_argument(
        "--eval-every", type=int, default=_D.eval_every, help="validation (and learning-curve) period in steps"
    )
    r.add_argument(
        "--eval-treebank",
        default=None,
        metavar="TREEBANK",
        help="learning curve: parse this gold treebank (e.g. ptb-sample:dev) at step 0, every "
        "--eval-every steps and at the end; F1 of every decoder into training.json and "
        "TensorBoard; default: no learning curve",
    )
    r.add_argument("--eval-each-epoch", action="store_true", help="also validate (and save) at the end of every epoch")
    r.add_argument(
        "--final-model",
        choices=["last", "best"],
        default=_D.final_model,
        help="the model left in OUT: the last step's, or the lowest validation loss's (needs --keep-best)",
    )
    r.add_argument(
        "--keep-best",
        action="store_true",
        help="also write the model of the lowest validation loss (every --eval-every steps) "
        "to OUT/best/ with best.json (step, loss)",
    )
    r.add_argument(
        "--early-stopping",
        type=int,
        default=_D.early_stopping,
        metavar="PATIENCE",
        help="stop when this many evaluations in a row have not lowered the validation loss (0: never)",
    )
    r.add_argument("--log-every", type=int, default=_D.log_every, help="logging period (steps)")
    r.add_argument(
        "--resume", action="store_true", help="continue from OUT/checkpoint.pt if present (else start afresh)"
    )
    r.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")
    r.add_argument("--bf16", action="store_true", help="bfloat16 autocast")
    r.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: PyTorch's)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--json", action="store_true", help="print training.json at the end")


def arguments_from_namespace(ns: argparse.Namespace) -> TrainArguments:
    """The :class:`TrainArguments` of parsed ``syntaxformer train`` options."""
    names = {f.name for f in fields(TrainArguments)}
    values = {k: v for k, v in vars(ns).items() if k in names}
    values["overrides"] = dict(ns.overrides or [])
    values["betas"] = tuple(ns.betas)
    if ns.batch_size is None and ns.max_tokens is None and ns.min_batch_tokens is None:
        values["batch_size"] = _D.batch_size
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
