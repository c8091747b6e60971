"""``syntaxformer compare``: Tree Transformer vs plain Transformer masked-LM perplexity (paper Table 4).

Trains three masked LMs on the same data, for the same number of steps, from the same seed and with the
same optimisation options (the trainer, :func:`syntaxformer.training.trainer.train`):

1. ``tree-transformer``: the Tree Transformer (constituent prior) at ``--preset``;
2. ``transformer``: the same model with ``prior="none"`` (a plain Transformer, same layers);
3. ``transformer-L{n}``: the paper's control, a plain Transformer with more layers, the fewest ``n``
   whose parameter count is at least the Tree Transformer's (found from parameter counts, see
   :func:`control_layers`; the constituent prior's neighbouring-attention projections add parameters).

Then it scores each on ``--test`` with the paper's protocol (every word masked in turn, one
``[MASK]`` per input; :func:`syntaxformer.evaluation.perplexity.masked_lm_perplexity`) and prints one
table (parameters, layers, steps, minutes, perplexity); ``OUT/compare.json`` holds everything.

With ``--max-minutes`` the Tree Transformer trains for that wall time and the two Transformers then
train for exactly the steps it reached (same steps for all three, as the comparison requires). Each run
is saved in ``OUT/NAME``; re-running the same command reuses a run whose ``training.json`` shows it
finished with the same options, and resumes one that was interrupted (its checkpoint).
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import time
from dataclasses import replace
from pathlib import Path

import torch

from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)

MODEL = "tree-transformer"
COMPARE_JSON = "compare.json"
#: TrainArguments fields whose equality means a saved run can be reused.
_REUSE_KEYS = ("model", "preset", "prior", "overrides", "corpus", "valid", "valid_fraction",
               "tokenizer", "min_freq", "max_vocab", "add_cls", "max_length", "overflow",
               "batch_size", "max_tokens", "mask_rate", "lr", "warmup_steps", "schedule", "clip",
               "max_steps", "max_minutes", "seed")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compare", help="Tree Transformer vs Transformer (same data/steps/seed) masked-LM perplexity",
        description="Train a Tree Transformer, a plain Transformer (prior none) and a plain "
                    "Transformer with more layers (at least the Tree Transformer's parameters) on "
                    "the same data, steps and seed; report masked-LM perplexity on a test set "
                    "(one [MASK] per input, every word in turn) and parameter counts side by side.")
    p.add_argument("--corpus", required=True, metavar="TRAIN",
                   help="training corpus: raw text file(s) (comma-separated / globs) or ptb-sample")
    p.add_argument("--test", required=True, metavar="TEST", help="test corpus (same forms)")
    p.add_argument("--valid", default=None,
                   help="validation corpus for the trainer (default: it holds out 5%% of TRAIN)")
    p.add_argument("--preset", default="small", help="size preset (tiny, small, paper); default small")
    stop = p.add_mutually_exclusive_group(required=True)
    stop.add_argument("--max-steps", type=int, help="optimizer steps, for every model")
    stop.add_argument("--max-minutes", type=float,
                      help="wall time of the Tree Transformer run; the Transformers then train for "
                           "the steps it reached")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default: the trainer's)")
    p.add_argument("--warmup-steps", type=int, default=None, help="warm-up steps (default: the trainer's)")
    p.add_argument("--batch-size", type=int, default=None, help="sentences per batch (default: the trainer's)")
    p.add_argument("--eval-every", type=int, default=0,
                   help="trainer validation period in steps (default 0: only at start and end)")
    p.add_argument("--batch-tokens", type=int, default=4096, help="tokens per perplexity forward pass")
    p.add_argument("--skip-long", action="store_true",
                   help="test sentences longer than a model accepts are left out, counted "
                        "(default: error)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")
    p.add_argument("--seed", type=int, default=0, help="seed of every run (default 0)")
    p.add_argument("--out", required=True, help="output folder (one sub-folder per model)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="print compare.json instead of a table")
    p.set_defaults(func=run)


def count_parameters(preset: str, vocab_size: int, **overrides) -> int:
    """Parameters of ``make_config("tree-transformer", preset, vocab_size, **overrides)``'s model
    (built on the ``meta`` device: no memory, no initialisation cost)."""
    from syntaxformer.models import MODELS, make_config
    with torch.device("meta"):
        model = MODELS[MODEL](make_config(MODEL, preset, vocab_size, **overrides))
    return sum(p.numel() for p in model.parameters())


def control_layers(preset: str, vocab_size: int, target: int) -> int:
    """The fewest layers a plain Transformer (``prior="none"``) at ``preset`` needs to have at least
    ``target`` parameters: the paper's control for the Tree Transformer's extra parameters.

    Parameters grow linearly with the layer count, so ``n = ceil((target - P(0)) / per_layer)``
    with ``per_layer = P(2) - P(1)``; the result is checked by counting ``P(n)`` and ``P(n-1)``.
    """
    p1 = count_parameters(preset, vocab_size, prior="none", num_hidden_layers=1)
    per_layer = count_parameters(preset, vocab_size, prior="none", num_hidden_layers=2) - p1
    n = max(1, math.ceil((target - (p1 - per_layer)) / per_layer))
    assert count_parameters(preset, vocab_size, prior="none", num_hidden_layers=n) >= target
    assert n == 1 or count_parameters(preset, vocab_size, prior="none", num_hidden_layers=n - 1) < target
    return n


def _reusable(folder: Path, args) -> dict | None:
    """The ``training.json`` of a finished run in ``folder`` made with the same options, else None."""
    from dataclasses import asdict
    from syntaxformer.parsing import read_training_record
    record = read_training_record(folder)
    if not record:
        return None
    saved = record.get("arguments", {})
    wanted = json.loads(json.dumps(asdict(args)))  # tuples -> lists, as saved
    if any(saved.get(k) != wanted.get(k) for k in _REUSE_KEYS):
        return None
    if args.max_steps is not None and record.get("steps") != args.max_steps:
        return None
    return record


def _train(args) -> dict:
    """Train (or reuse / resume) one run; return its ``training.json`` record."""
    from syntaxformer.training.trainer import train
    out = Path(args.out)
    record = _reusable(out, args)
    if record is not None:
        logger.info("%s: reusing the finished run (%d steps)", out, record["steps"])
        return {**record, "reused": True}
    train(replace(args, resume=True))
    from syntaxformer.parsing import read_training_record
    return read_training_record(out)


def compare(corpus: str, test: str, out: str | Path, preset: str = "small",
            max_steps: int | None = None, max_minutes: float | None = None, seed: int = 0,
            valid: str | None = None, lr: float | None = None, warmup_steps: int | None = None,
            batch_size: int | None = None, eval_every: int = 0, batch_tokens: int = 4096,
            skip_long: bool = False, threads: int | None = None, device: str | None = None,
            quiet: bool = False) -> dict:
    """Train the three models and score them on ``test``; write and return ``OUT/compare.json``.

    Args:
        corpus, valid, test: ``load_corpus`` specs (training, validation, test).
        out: output folder; runs go to ``OUT/tree-transformer``, ``OUT/transformer``,
            ``OUT/transformer-L{n}``.
        preset: the models' size preset.
        max_steps: optimizer steps for every model; or
        max_minutes: wall time of the Tree Transformer run, whose step count the others then use.
        seed: the seed of every run (data order, masking, dropout, initialisation).
        lr, warmup_steps, batch_size: trainer options (None: the trainer's defaults), the same for all.
        eval_every: trainer validation period (0: at start and end only).
        batch_tokens, skip_long: perplexity options (see ``syntaxformer perplexity``).
        threads, device, quiet: run options.

    Returns:
        A dict: ``data`` (train/valid/test), ``protocol``, ``preset``, ``seed``, ``steps``,
        ``runs`` (one entry per model: name, prior, layers, parameters, steps, train minutes,
        perplexity, cross-entropy, words scored, ``[UNK]`` targets, eval minutes, folder),
        ``best`` (the name with the lowest perplexity) and ``minutes`` (the whole recipe).

    Raises:
        InputError: neither or both of ``max_steps`` / ``max_minutes``; bad trainer options.
    """
    from syntaxformer.cli.perplexity import evaluate_folder
    from syntaxformer.evaluation.perplexity import PROTOCOL
    from syntaxformer.training.trainer import TrainArguments
    if (max_steps is None) == (max_minutes is None):
        raise InputError("give exactly one of max_steps and max_minutes")
    start = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    options = {k: v for k, v in dict(lr=lr, warmup_steps=warmup_steps, batch_size=batch_size).items()
               if v is not None}
    base = TrainArguments(out="", model=MODEL, preset=preset, corpus=corpus, valid=valid, seed=seed,
                          eval_every=eval_every, threads=threads, device=device, quiet=quiet,
                          **options)

    tree_args = replace(base, out=str(out / "tree-transformer"), prior="constituent",
                        max_steps=max_steps, max_minutes=max_minutes)
    logger.info("training the Tree Transformer (%s)", tree_args.out)
    tree = _train(tree_args)
    steps = tree["steps"]
    vocab_size = tree["tokenizer"]["vocab_size"]
    layers = control_layers(preset, vocab_size, tree["parameters"])
    plain_args = replace(base, out=str(out / "transformer"), prior="none", max_steps=steps)
    deep_args = replace(base, out=str(out / f"transformer-L{layers}"), prior="none", max_steps=steps,
                        overrides={"num_hidden_layers": layers})
    logger.info("training the Transformer (%s) and the %d-layer control (%s) for %d steps",
                plain_args.out, layers, deep_args.out, steps)
    records = [("tree-transformer", tree_args, tree), ("transformer", plain_args, _train(plain_args)),
               (f"transformer-L{layers}", deep_args, _train(deep_args))]

    runs = []
    for name, args, record in records:
        logger.info("scoring %s on %s", name, test)
        result = evaluate_folder(args.out, test, batch_tokens=batch_tokens, skip_long=skip_long,
                                 device=device, seed=seed, progress=not quiet)
        from transformers import AutoConfig
        config = AutoConfig.from_pretrained(args.out)
        runs.append(dict(
            name=name, prior=record["prior"], layers=config.num_hidden_layers,
            hidden_size=config.hidden_size, parameters=record["parameters"], steps=record["steps"],
            train_minutes=record["minutes"], reused=record.get("reused", False),
            final_train_loss=record.get("final_train_loss"),
            final_valid_loss=record.get("final_valid_loss"),
            perplexity=result["perplexity"], cross_entropy=result["cross_entropy"],
            n_tokens=result["n_tokens"], n_unk=result["n_unk"], n_sentences=result["n_sentences"],
            n_skipped=result["n_skipped"], eval_minutes=result["minutes"], folder=args.out))
    assert len({r["steps"] for r in runs}) == 1, [r["steps"] for r in runs]

    report = dict(
        data=dict(train=corpus, valid=valid or "5% of train held out by the trainer", test=test),
        protocol=PROTOCOL, preset=preset, seed=seed, steps=steps,
        stop=(f"max_steps {max_steps}" if max_steps is not None
              else f"max_minutes {max_minutes} (Tree Transformer), then its {steps} steps for all"),
        training=dict(lr=tree_args.lr, warmup_steps=tree_args.warmup_steps,
                      batch_size=tree_args.batch_size, schedule=tree_args.schedule),
        runs=runs, best=min(runs, key=lambda r: r["perplexity"])["name"],
        minutes=(time.perf_counter() - start) / 60, torch=torch.__version__)
    (out / COMPARE_JSON).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def format_table(report: dict) -> str:
    """The comparison as a plain-text table with a header naming data, protocol, preset and seed
    (:mod:`syntaxformer.evaluation.report`'s header and table)."""
    from syntaxformer.evaluation.report import format_header
    from syntaxformer.evaluation.report import format_table as table
    head = format_header("syntaxformer compare", {
        "data": f"train {report['data']['train']}, valid {report['data']['valid']}, "
                f"test {report['data']['test']}",
        "protocol": report["protocol"],
        "preset": report["preset"],
        "seed": report["seed"],
        "steps": f"{report['steps']:,} each ({report['stop']})",
        "training": f"lr {report['training']['lr']}, warm-up {report['training']['warmup_steps']}, "
                    f"batch {report['training']['batch_size']}"})
    rows = [[r["name"], r["prior"], r["layers"], r["parameters"], r["steps"],
             f"{r['train_minutes']:.1f}" + (" (reused)" if r["reused"] else ""),
             f"{r['eval_minutes']:.1f}", f"{r['cross_entropy']:.3f}", f"{r['perplexity']:.1f}"]
            for r in report["runs"]]
    body = table(["model", "prior", "layers", "parameters", "steps", "train min", "eval min",
                  "test CE", "test ppl"], rows)
    r0 = report["runs"][0]
    tail = (f"lowest test perplexity: {report['best']}; words scored {r0['n_tokens']:,} "
            f"({r0['n_unk']:,} [UNK] targets) in {r0['n_sentences']:,} sentences; "
            f"total {report['minutes']:.1f} min")
    return "\n\n".join([head, body, tail])


def run(args: argparse.Namespace) -> int:
    report = compare(args.corpus, args.test, args.out, preset=args.preset, max_steps=args.max_steps,
                     max_minutes=args.max_minutes, seed=args.seed, valid=args.valid, lr=args.lr,
                     warmup_steps=args.warmup_steps, batch_size=args.batch_size,
                     eval_every=args.eval_every, batch_tokens=args.batch_tokens,
                     skip_long=args.skip_long, threads=args.threads, device=args.device,
                     quiet=args.quiet)
    print(json.dumps(report, indent=2) if args.json else format_table(report))
    return 0
